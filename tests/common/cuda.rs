//! The GPU-free CUDA stand-ins (tests/fixtures/cuda): a fake `libcuda.so.1`, a fake
//! `libcupti.so.13` compiled against NVIDIA's real CUPTI headers, and a CUDA-like target.
//! Include with `#[path = "common/cuda.rs"] mod cuda;` (from another crate of the workspace, with
//! a path to this file); it needs nothing from `common` and finds the checkout by itself.
//!
//! The headers come from PyPI (tests/prereq/cupti_headers.sh) into `target/cupti-headers` of the
//! checkout, once per machine. The stand-ins are compiled with gcc once per source change into
//! `<CARGO_TARGET_TMPDIR>/cuda-fixtures/<hash>/`, like `common::build` does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the stand-ins are.
#[derive(Debug, Clone)]
pub struct Standins {
    /// The full path of `libcupti.so.13`.
    pub libcupti: PathBuf,
    /// The target executable (cuda_target.c); it finds `libcuda.so.1` through its rpath.
    pub target: PathBuf,
}

/// The checkout: the first directory above the including crate that has the stand-ins' sources.
fn repo_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest
            .ancestors()
            .find(|d| d.join("tests/fixtures/cuda/fakecuda.h").exists())
            .unwrap_or_else(|| panic!("no tests/fixtures/cuda above {}", manifest.display()))
            .to_path_buf()
    })
}

/// The stand-ins' sources, and the include directory of `fakecuda.h`.
pub fn fixtures_dir() -> PathBuf {
    repo_root().join("tests/fixtures/cuda")
}

/// The include directory with `cupti.h` (and the `cuda.h` it includes). Runs the fetch script
/// once per process; the script does nothing when the headers are there, and parallel test
/// processes are safe because it renames a finished folder into place.
pub fn cupti_include() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = repo_root().join("target/cupti-headers");
        let script = repo_root().join("tests/prereq/cupti_headers.sh");
        let out = Command::new("sh")
            .arg(&script)
            .arg(&dest)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        assert!(
            out.status.success() && dest.join("cupti.h").exists(),
            "the CUDA stand-ins need NVIDIA's CUPTI headers, and {} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        dest
    })
    .clone()
}

fn hash(files: &[PathBuf], extra: &str) -> String {
    // FNV-1a over the sources and flags: a changed source gets a fresh build directory.
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

/// Compile `sources` with `flags` into `<tmp>/cuda-fixtures/<hash>/<out>` once. `inputs` are
/// extra files the hash covers (headers). Parallel test processes and threads race safely: each
/// compiles to its own temporary name and hard-links it into place, keeping the first one (a
/// running target may have it mapped).
fn build(out: &str, sources: &[PathBuf], inputs: &[PathBuf], flags: &[String]) -> PathBuf {
    let src = fixtures_dir();
    let mut hashed = sources.to_vec();
    hashed.push(src.join("fakecuda.h"));
    hashed.extend_from_slice(inputs);
    let tmp = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/tmp"));
    let dir = tmp
        .join("cuda-fixtures")
        .join(hash(&hashed, &format!("{out} {}", flags.join(" "))));
    let dest = dir.join(out);
    if dest.exists() {
        return dest;
    }
    std::fs::create_dir_all(&dir).expect("fixture dir");
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let part = dir.join(format!(".{out}.{}.{seq}", std::process::id()));
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-Wall", "-I"])
        .arg(&src)
        .arg("-o")
        .arg(&part)
        .args(sources)
        .args(flags)
        .arg("-ldl")
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {out}");
    match std::fs::hard_link(&part, &dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("link fixture {}: {e}", dest.display()),
    }
    let _ = std::fs::remove_file(&part);
    dest
}

/// `-I <headers>`, and the header files whose change must rebuild what includes them.
fn cupti_flags() -> (Vec<String>, Vec<PathBuf>) {
    let inc = cupti_include();
    let flags = vec!["-I".to_string(), inc.display().to_string()];
    let inputs = ["cupti_version.h", "cupti_activity.h", "cupti_result.h"]
        .iter()
        .map(|h| inc.join(h))
        .collect();
    (flags, inputs)
}

fn build_libcuda() -> PathBuf {
    build(
        "libcuda.so.1",
        &[fixtures_dir().join("fake_cuda.c")],
        &[],
        &["-fPIC", "-shared", "-Wl,-soname,libcuda.so.1"].map(String::from),
    )
}

/// Build (once) a program `out` from `sources` (any paths) that uses the fake driver: compiled
/// with `fakecuda.h` and the CUPTI headers on the include path, linked against the fake
/// `libcuda.so.1` with an rpath to it (it runs without LD_LIBRARY_PATH), plus `flags`.
pub fn build_program(out: &str, sources: &[PathBuf], flags: &[&str]) -> PathBuf {
    let libcuda = build_libcuda();
    let (mut all, inputs) = cupti_flags();
    all.push(libcuda.display().to_string());
    all.push(format!(
        "-Wl,-rpath,{}",
        libcuda.parent().expect("libcuda dir").display()
    ));
    all.extend(flags.iter().map(|f| f.to_string()));
    build(out, sources, &inputs, &all)
}

/// Build (once) the fake `libcuda.so.1`, the fake `libcupti.so.13` and the target (which
/// finds the fake driver through its rpath).
pub fn build_standins() -> Standins {
    let (mut flags, inputs) = cupti_flags();
    flags.extend(["-fPIC", "-shared", "-Wl,-soname,libcupti.so.13"].map(String::from));
    let libcupti = build(
        "libcupti.so.13",
        &[fixtures_dir().join("fake_cupti.c")],
        &inputs,
        &flags,
    );
    let target = build_program("cuda_target", &[fixtures_dir().join("cuda_target.c")], &[]);
    Standins { libcupti, target }
}

/// Build (once) the stand-ins' self-test (selftest.c): `selftest LIBCUPTI STATE_FILE [held]`.
pub fn build_selftest() -> PathBuf {
    build_program("selftest", &[fixtures_dir().join("selftest.c")], &[])
}
