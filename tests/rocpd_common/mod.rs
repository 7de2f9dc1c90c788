//! Helpers of the rocpd tests that run the real binary; the databases they convert are
//! written with `rocprof_testkit::rocpd` (re-exported here).

use std::path::Path;
use std::process::{Command, Output};

pub use rocprof_testkit::rocpd::*;

/// Runs the real binary.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
        .args(args)
        .output()
        .expect("run rocprof-attach")
}

/// Runs `convert` on `inputs` into `dir` with name `out`; panics unless it succeeds.
pub fn convert(inputs: &[&Path], dir: &Path, formats: &[&str], extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec!["convert".into(), "-i".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.push("-f".into());
    args.extend(formats.iter().map(|s| s.to_string()));
    args.extend([
        "-d".into(),
        dir.display().to_string(),
        "-o".into(),
        "out".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&refs);
    assert!(
        out.status.success(),
        "convert failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}
