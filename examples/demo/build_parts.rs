//! Builds the demo's C parts with gcc. Shared by `examples/demo.rs` and `tests/demo_tool.rs`
//! (both include this file with `#[path]`).
//!
//! Every output is rebuilt only when its sources or flags change: a hash of both is kept next to
//! the output in `<output>.hash`. Outputs are written under a temporary name and renamed into
//! place, so concurrent builds into the same directory are safe.

#![allow(dead_code)] // each includer uses a different subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// Paths of the built parts.
#[derive(Debug, Clone)]
pub struct Parts {
    /// Directory holding everything (put it on `LD_LIBRARY_PATH`).
    pub dir: PathBuf,
    /// The stand-in `librocprofiler-register.so.0`, built from `tests/fixtures/register_standin.c`.
    pub register: PathBuf,
    /// `libdemo-runtime.so`.
    pub runtime: PathBuf,
    /// `libdemo-tool.so`.
    pub tool: PathBuf,
    /// `demo-app`.
    pub app: PathBuf,
    /// `demo-harness` (tests only).
    pub harness: Option<PathBuf>,
}

/// Warning flags every part is built with.
pub const WARN_FLAGS: &[&str] = &["-Wall", "-Wextra"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `examples/demo`.
pub fn demo_src() -> PathBuf {
    manifest_dir().join("examples/demo")
}

/// `tests/fixtures` (the stand-in register library and `standin.h`).
pub fn fixtures_src() -> PathBuf {
    manifest_dir().join("tests/fixtures")
}

fn fnv1a(parts: &[&[u8]]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.iter().chain(b"\0") {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// Compiles `sources` (plus the headers they use) into `dir/out` unless up to date.
fn gcc(
    dir: &Path,
    out: &str,
    sources: &[PathBuf],
    flags: &[&str],
    libs: &[&str],
) -> Result<PathBuf, String> {
    let headers = [
        demo_src().join("demo_runtime.h"),
        fixtures_src().join("standin.h"),
    ];
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for f in sources.iter().chain(headers.iter()) {
        inputs.push(std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?);
    }
    let flag_text = format!("{} | {}", flags.join(" "), libs.join(" "));
    let mut hashed: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
    hashed.push(flag_text.as_bytes());
    let hash = fnv1a(&hashed);
    let dest = dir.join(out);
    let stamp = dir.join(format!("{out}.hash"));
    if dest.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(hash.as_str()) {
        return Ok(dest);
    }
    let tmp = dir.join(format!(".{out}.{}", std::process::id()));
    let output = Command::new("gcc")
        .args(["-O2", "-g", "-pthread"])
        .args(WARN_FLAGS)
        .arg("-I")
        .arg(demo_src())
        .arg("-I")
        .arg(fixtures_src())
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .args(sources)
        .args(libs)
        .args(["-ldl", "-lm"])
        .output()
        .map_err(|e| format!("cannot run gcc (is it installed?): {e}"))?;
    let diagnostics = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("gcc failed building {out}:\n{diagnostics}"));
    }
    if !diagnostics.trim().is_empty() {
        eprintln!("{diagnostics}");
    }
    std::fs::rename(&tmp, &dest).map_err(|e| format!("cannot place {}: {e}", dest.display()))?;
    std::fs::write(&stamp, &hash).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(dest)
}

/// Builds the register stand-in, runtime, tool and app (and the test harness when asked) into
/// `dir`.
pub fn build_all(dir: &Path, with_harness: bool) -> Result<Parts, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let demo = demo_src();
    let register = gcc(
        dir,
        "librocprofiler-register.so.0",
        &[fixtures_src().join("register_standin.c")],
        &[
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-Wl,-soname,librocprofiler-register.so.0",
        ],
        &[],
    )?;
    // $ORIGIN: the runtime finds the register library next to itself even without LD_LIBRARY_PATH.
    let runtime = gcc(
        dir,
        "libdemo-runtime.so",
        &[demo.join("runtime.c")],
        &[
            "-fPIC",
            "-shared",
            "-Wl,-soname,libdemo-runtime.so",
            "-Wl,-rpath,$ORIGIN",
        ],
        &[],
    )?;
    let tool = gcc(
        dir,
        "libdemo-tool.so",
        &[demo.join("tool.c")],
        &["-fPIC", "-shared", "-fvisibility=hidden"],
        &[],
    )?;
    let dir_arg = format!("-L{}", dir.display());
    let exe_libs = [dir_arg.as_str(), "-ldemo-runtime"];
    // The runtime must exist before linking against it; its hash covers its own sources only, so
    // a changed runtime with the same API does not force a relink (the app loads it at run time).
    let app = gcc(
        dir,
        "demo-app",
        &[demo.join("app.c")],
        &["-Wl,-rpath,$ORIGIN"],
        &exe_libs,
    )?;
    let harness = if with_harness {
        Some(gcc(
            dir,
            "demo-harness",
            &[demo.join("harness.c")],
            &["-Wl,-rpath,$ORIGIN"],
            &exe_libs,
        )?)
    } else {
        None
    };
    Ok(Parts {
        dir: dir.to_path_buf(),
        register,
        runtime,
        tool,
        app,
        harness,
    })
}
