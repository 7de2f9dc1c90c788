//! The fully static build the README documents for clusters with an older glibc:
//! `RUSTFLAGS='-C target-feature=+crt-static' cargo build --target x86_64-unknown-linux-gnu`.
//! Built once (debug profile, only the binary, its own target directory under target/ so later
//! runs are incremental), then checked with `ldd` and run. OTF2 is in it where the library's static
//! archive is (Debian's libopen-trace-format2-dev has one): `convert -f otf2` then works, read back
//! with `otf2-print`; without the archive the build leaves OTF2 out and says so.

use crate::rocpd_common;

#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
#[test]
fn the_static_build_has_no_dynamic_dependencies() {
    use std::path::Path;
    use std::process::Command;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = root.join("target/static");
    let build = Command::new(env!("CARGO"))
        .args([
            "build",
            "--bin",
            "rocprof-attach",
            "--target",
            "x86_64-unknown-linux-gnu",
        ])
        .current_dir(root)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // No debug info: the check is about linking, and this keeps the extra build short in CI.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_TARGET_DIR", &target_dir)
        .output()
        .expect("run cargo");
    assert!(
        build.status.success(),
        "static build failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let bin = target_dir.join("x86_64-unknown-linux-gnu/debug/rocprof-attach");
    let ldd = Command::new("ldd").arg(&bin).output().expect("run ldd");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    assert!(
        text.contains("not a dynamic executable") || text.contains("statically linked"),
        "ldd {}: {text}",
        bin.display()
    );
    let run = Command::new(&bin)
        .arg("--version")
        .output()
        .expect("run it");
    assert!(run.status.success());
    assert!(String::from_utf8_lossy(&run.stdout).starts_with("rocprof-attach "));

    // OTF2, linked statically (or left out, with the reason, where there is no static archive).
    let dir = rocpd_common::tempdir();
    let db = rocpd_common::full_db(&dir.path().join("a.db"), 4242, 1);
    let out = dir.path().join("o");
    let convert = Command::new(&bin)
        .args([
            "convert",
            "-i",
            db.to_str().unwrap(),
            "-f",
            "otf2",
            "-o",
            "out",
            "-d",
        ])
        .arg(&out)
        .output()
        .expect("run convert");
    let err = String::from_utf8_lossy(&convert.stderr);
    let archive = Path::new("/usr/lib/x86_64-linux-gnu/libopen-trace-format2.a");
    let pkg_config = Command::new("pkg-config")
        .args(["--exists", "otf2"])
        .status()
        .is_ok_and(|s| s.success());
    if convert.status.success() {
        let print = Command::new("otf2-print")
            .arg(out.join("out_results.otf2"))
            .output()
            .expect("otf2-print (Debian otf2-tools)");
        assert!(
            print.status.success(),
            "otf2-print of the static build's archive"
        );
        let text = String::from_utf8_lossy(&print.stdout);
        assert!(text.lines().any(|l| l.starts_with("ENTER")), "{text}");
    } else {
        assert!(
            !(archive.exists() && pkg_config),
            "{} is there, so the static build should have OTF2: {err}",
            archive.display()
        );
        assert!(err.contains("built without OTF2 support"), "{err}");
    }
}
