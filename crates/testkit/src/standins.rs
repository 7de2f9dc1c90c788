//! The C stand-ins of tests/fixtures (a multi-threaded target, the rocprofiler-register
//! library, tools), compiled with gcc once per source change.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Directory of the C sources.
pub fn fixture_src() -> PathBuf {
    crate::checkout().join("tests/fixtures")
}

/// FNV-1a over `files` and `extra` (the flags): a changed source gets a fresh build directory.
pub(crate) fn hash_files(files: &[&Path], extra: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
        for b in bytes.iter().chain(extra.as_bytes()) {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016x}")
}

/// `gcc -I include -o dir/out sources flags -ldl`, once: returns `dir/out` as is when it exists.
/// Parallel test processes and threads race safely: each compiles to its own temporary name and
/// hard-links it into place, keeping the first one (a running target may have it mapped:
/// replacing it would show up as "(deleted)" in that target's maps).
pub(crate) fn gcc_once(
    dir: &Path,
    out: &str,
    include: &Path,
    sources: &[PathBuf],
    flags: &[String],
) -> PathBuf {
    let dest = dir.join(out);
    if dest.exists() {
        return dest;
    }
    std::fs::create_dir_all(dir).expect("fixture dir");
    // Unique per process *and* call: test threads of one binary build the same fixture at once.
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{out}.{}.{seq}", std::process::id()));
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-Wall", "-I"])
        .arg(include)
        .arg("-o")
        .arg(&tmp)
        .args(sources)
        .args(flags)
        .arg("-ldl")
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {out}");
    match std::fs::hard_link(&tmp, &dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("link fixture {}: {e}", dest.display()),
    }
    let _ = std::fs::remove_file(&tmp);
    dest
}

/// Compile with gcc into `<target>/tmp/fixtures/<hash>/<out>` once ([`gcc_once`]).
///
/// `ROCPROF_FIXTURES_DIR` names a folder of fixtures built beforehand (benchmarks run on a
/// machine without a compiler): `build` then returns `<dir>/<out>` as is.
pub fn build(out: &str, sources: &[&str], flags: &[&str]) -> PathBuf {
    if let Some(dir) = std::env::var_os("ROCPROF_FIXTURES_DIR") {
        let prebuilt = PathBuf::from(dir).join(out);
        assert!(prebuilt.exists(), "{} is missing", prebuilt.display());
        return prebuilt;
    }
    let src = fixture_src();
    let paths: Vec<PathBuf> = sources.iter().map(|s| src.join(s)).collect();
    let mut all: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let header = src.join("standin.h");
    all.push(&header);
    let dir = crate::target_tmp()
        .join("fixtures")
        .join(hash_files(&all, &flags.join(" ")));
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    gcc_once(&dir, out, &src, &paths, &flags)
}

/// The stand-in `librocprofiler-register.so.0` (with a GNU Build ID), with an inert
/// `librocprofiler-sdk-tool.so.1` beside it ([`DEFAULT_TOOL_NAME`]): a session that names no
/// tool finds the default one where the target's loader looks, as on a real installation.
pub fn register_lib() -> PathBuf {
    let lib = build(
        "librocprofiler-register.so.0",
        &["register_standin.c"],
        &[
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-Wl,-soname,librocprofiler-register.so.0",
        ],
    );
    let beside = lib.with_file_name(DEFAULT_TOOL_NAME);
    if !beside.exists() {
        let inert = build("libinert-tool.so", &["inert_tool.c"], &["-fPIC", "-shared"]);
        match std::fs::hard_link(&inert, &beside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("link {}: {e}", beside.display()),
        }
    }
    lib
}

/// The default tool's name (`toolpath::DEFAULT_TOOL`).
pub const DEFAULT_TOOL_NAME: &str = "librocprofiler-sdk-tool.so.1";

/// The stand-in multi-threaded target.
pub fn target_bin() -> PathBuf {
    build("target", &["target.c"], &[])
}

/// The minimal stand-in tool library (writes one CSV per session on detach).
pub fn tool_lib() -> PathBuf {
    build("libstandin-tool.so", &["tool.c"], &["-fPIC", "-shared"])
}
