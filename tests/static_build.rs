//! The fully static build the README documents for clusters with an older glibc:
//! `RUSTFLAGS='-C target-feature=+crt-static' cargo build --target x86_64-unknown-linux-gnu`.
//! Built once (debug profile, only the binary, its own target directory under target/ so later
//! runs are incremental), then checked with `ldd` and run.

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
}
