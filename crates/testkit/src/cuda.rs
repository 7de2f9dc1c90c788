//! The GPU-free CUDA stand-ins (tests/fixtures/cuda): a fake `libcuda.so.1`, a fake
//! `libcupti.so.13` compiled against NVIDIA's real CUPTI headers, and a CUDA-like target.
//!
//! The headers come from PyPI (tests/prereq/cupti_headers.sh) into `target/cupti-headers` of the
//! checkout, once per machine. The stand-ins are compiled with gcc once per source change into
//! `<target>/tmp/cuda-fixtures/<hash>/`, as [`crate::standins::build`] does.

use crate::standins::{gcc_once, hash_files};
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

/// The stand-ins' sources, and the include directory of `fakecuda.h`.
pub fn fixtures_dir() -> PathBuf {
    crate::checkout().join("tests/fixtures/cuda")
}

/// The include directory with `cupti.h` (and the `cuda.h` it includes). Runs the fetch script
/// once per process; the script does nothing when the headers are there, and parallel test
/// processes are safe because it renames a finished folder into place.
pub fn cupti_include() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = crate::checkout().join("target/cupti-headers");
        let script = crate::checkout().join("tests/prereq/cupti_headers.sh");
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

/// Compile `sources` with `flags` into `<target>/tmp/cuda-fixtures/<hash>/<out>` once
/// ([`crate::standins::gcc_once`]). `inputs` are extra files the hash covers (headers).
fn build(out: &str, sources: &[PathBuf], inputs: &[PathBuf], flags: &[String]) -> PathBuf {
    let src = fixtures_dir();
    let mut hashed: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    let header = src.join("fakecuda.h");
    hashed.push(&header);
    hashed.extend(inputs.iter().map(PathBuf::as_path));
    let dir = crate::target_tmp()
        .join("cuda-fixtures")
        .join(hash_files(&hashed, &format!("{out} {}", flags.join(" "))));
    gcc_once(&dir, out, &src, sources, flags)
}

/// `-I <headers>`, and the header files whose change must rebuild what includes them.
fn cupti_flags() -> (Vec<String>, Vec<PathBuf>) {
    let inc = cupti_include();
    let flags = vec!["-I".to_string(), inc.display().to_string()];
    let inputs = [
        "cupti_version.h",
        "cupti_activity.h",
        "cupti_result.h",
        "cupti_range_profiler.h",
        "cupti_pmsampling.h",
        "cupti_profiler_host.h",
        "cupti_profiler_target.h",
    ]
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
        &[
            fixtures_dir().join("fake_cupti.c"),
            fixtures_dir().join("fake_cupti_profiler.c"),
        ],
        &inputs
            .into_iter()
            .chain([fixtures_dir().join("fake_cupti_internal.h")])
            .collect::<Vec<_>>(),
        &flags,
    );
    let target = build_program("cuda_target", &[fixtures_dir().join("cuda_target.c")], &[]);
    Standins { libcupti, target }
}

/// Build (once) the stand-ins' self-test (selftest.c): `selftest LIBCUPTI STATE_FILE [held]`.
pub fn build_selftest() -> PathBuf {
    build_program("selftest", &[fixtures_dir().join("selftest.c")], &[])
}

/// Starts the CUDA stand-in target of `s` with its CUPTI mapped, launching `kernels` kernels
/// every `step_us` µs, and returns it once it printed `ready`; its later lines are drained by
/// a thread of their own (benchmarks watch it from outside).
pub fn start_target(s: &Standins, kernels: &str, step_us: &str) -> std::process::Child {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut target = Command::new(&s.target)
        .arg("--with-cupti")
        .arg(&s.libcupti)
        .args(["--kernels-per-step", kernels, "--step-us", step_us])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start cuda_target");
    let mut lines = std::io::BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        assert!(lines.read_line(&mut line).unwrap() > 0, "cuda_target ended");
    }
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    target
}
