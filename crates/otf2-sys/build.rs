//! Finds the OTF2 library and links it (Debian/Ubuntu: libopen-trace-format2-dev): `pkg-config
//! otf2`, else `otf2-config --ldflags --libs`, else the Debian paths. Found: `cfg(have_otf2)` and
//! the link flags. Not found: the crate builds without it (`AVAILABLE` is false and `BUILD_NOTE`
//! says why), with a cargo:warning. `ROCPROF_ATTACH_OTF2=on|off|auto` and the `required`
//! feature choose (see probe.rs, where the decision is, with its tests). The decision reaches
//! rocprof-attach's build script as `DEP_OPEN_TRACE_FORMAT2_ENABLED` (0 or 1).

#[path = "probe.rs"]
mod probe;

use probe::{Decision, Found, Link, Mode, MODE_VAR};
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=probe.rs");
    for var in [
        MODE_VAR,
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
        "PKG_CONFIG_ALLOW_CROSS",
        "OTF2_CONFIG",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(have_otf2)");

    let mode = probe::mode(
        env::var(MODE_VAR).ok().as_deref(),
        env::var_os("CARGO_FEATURE_REQUIRED").is_some(),
    )
    .unwrap_or_else(|e| fail(&e));
    let crt_static = env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static");
    let dirs = default_dirs();
    let mut watch = Vec::new();
    let found = if mode == Mode::Off {
        Err(String::new())
    } else {
        find(crt_static, &dirs, &mut watch)
    };
    let archive = |dir: &Path, name: &str| dir.join(format!("lib{name}.a")).is_file();
    let decision = probe::decide(
        mode,
        crt_static,
        found.as_ref().map_err(String::as_str),
        &dirs,
        &archive,
    );
    for path in &watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    match decision {
        Decision::With { search, libs, note } => {
            for dir in search {
                println!("cargo:rustc-link-search=native={}", dir.display());
            }
            for lib in libs {
                match lib {
                    Link::Default(name) => println!("cargo:rustc-link-lib={name}"),
                    Link::Static(name, _) => println!("cargo:rustc-link-lib=static={name}"),
                }
            }
            println!("cargo:rustc-cfg=have_otf2");
            println!("cargo::metadata=enabled=1");
            println!("cargo:rustc-env=ROCPROF_OTF2_BUILD_NOTE={note}");
        }
        Decision::Without { note, warn } => {
            if warn {
                println!(
                    "cargo:warning=building without OTF2 (`convert -f otf2`): {note}; to build \
                     with it, {} and rebuild with {MODE_VAR}=on",
                    probe::INSTALL_HINT
                );
            }
            println!("cargo::metadata=enabled=0");
            println!("cargo:rustc-env=ROCPROF_OTF2_BUILD_NOTE={note}");
        }
        Decision::Fail(e) => fail(&e),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}

/// Where the target's libraries usually are (searched after the probe's own `-L` directories,
/// for the Debian-path probe and for static archives).
fn default_dirs() -> Vec<PathBuf> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let multiarch = format!("{arch}-{os}-{abi}");
    [
        format!("/usr/lib/{multiarch}"),
        format!("/usr/local/lib/{multiarch}"),
        "/usr/lib64".into(),
        "/usr/local/lib64".into(),
        "/usr/lib".into(),
        "/usr/local/lib".into(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Runs a probe command; its stdout when it succeeds.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The three probes in order. `watch` gets the files whose change should rerun this script: the
/// one that found the library, or the pkg-config directories where its `.pc` file would appear.
fn find(crt_static: bool, dirs: &[PathBuf], watch: &mut Vec<PathBuf>) -> Result<Found, String> {
    let mut tried = Vec::new();
    let cross = env::var("TARGET").ok() != env::var("HOST").ok();
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    if cross && env::var_os("PKG_CONFIG_ALLOW_CROSS").is_none() {
        tried.push("pkg-config and otf2-config skipped when cross-compiling".to_owned());
    } else {
        // pkg-config otf2
        let mut args = vec!["--libs"];
        if crt_static {
            args.push("--static");
        }
        args.push("otf2");
        if let Some(mut flags) = output(&pkg_config, &args) {
            let version = output(&pkg_config, &["--modversion", "otf2"]).unwrap_or_default();
            if crt_static {
                // Where the static archive is (pkg-config leaves out the system's -L).
                if let Some(libdir) = output(&pkg_config, &["--variable=libdir", "otf2"]) {
                    flags.push_str(&format!(" -L{libdir}"));
                }
            }
            if let Some(dir) = output(&pkg_config, &["--variable=pcfiledir", "otf2"]) {
                watch.push(Path::new(&dir).join("otf2.pc"));
            }
            match Found::from_flags(format!("pkg-config otf2 {version}").trim().into(), &flags) {
                Some(found) => return Ok(found),
                None => tried.push(format!(
                    "`pkg-config --libs otf2` names no OTF2 library: {flags}"
                )),
            }
        } else {
            tried.push("`pkg-config otf2` found nothing".to_owned());
            // Rerun when an otf2.pc appears where pkg-config looks.
            let pc_path = output(&pkg_config, &["--variable", "pc_path", "pkg-config"]);
            let extra = env::var("PKG_CONFIG_PATH").unwrap_or_default();
            for dir in pc_path.iter().chain([&extra]).flat_map(|p| p.split(':')) {
                if !dir.is_empty() && Path::new(dir).is_dir() {
                    watch.push(dir.into());
                }
            }
        }

        // otf2-config (upstream OTF2 installs it in its bin directory)
        let otf2_config = env::var("OTF2_CONFIG").unwrap_or_else(|_| "otf2-config".into());
        match (
            output(&otf2_config, &["--ldflags"]),
            output(&otf2_config, &["--libs"]),
        ) {
            (Some(ldflags), Some(libs)) => {
                let version = output(&otf2_config, &["--version"]).unwrap_or_default();
                let how = format!("{otf2_config} ({version})");
                match Found::from_flags(how, &format!("{ldflags} {libs}")) {
                    Some(found) => return Ok(found),
                    None => tried.push(format!(
                        "`{otf2_config} --libs` names no OTF2 library: {libs}"
                    )),
                }
            }
            _ => tried.push(format!("no {otf2_config}")),
        }
    }

    // The Debian paths (and their usual neighbours): the header and the library.
    let header = ["/usr/include/otf2/otf2.h", "/usr/local/include/otf2/otf2.h"]
        .into_iter()
        .map(Path::new)
        .find(|h| h.is_file());
    if let Some(header) = header {
        for dir in dirs {
            let exts: &[&str] = if crt_static { &["a"] } else { &["so", "a"] };
            for (name, ext) in probe::OTF2_NAMES
                .iter()
                .flat_map(|n| exts.iter().map(move |e| (n, e)))
            {
                let lib = dir.join(format!("lib{name}.{ext}"));
                if lib.is_file() {
                    watch.push(lib.clone());
                    return Ok(Found {
                        how: format!("{} and {}", header.display(), lib.display()),
                        search: vec![dir.clone()],
                        libs: vec![(*name).to_owned()],
                    });
                }
            }
        }
        tried.push(format!(
            "{} but no libopen-trace-format2 or libotf2 in {}",
            header.display(),
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else {
        tried.push("no /usr/include/otf2/otf2.h".to_owned());
    }
    Err(tried.join("; "))
}
