//! Prerequisites of tests that need a program, root or a kernel feature. CI (tests/scripts/test.sh
//! via .ci/run) runs as root after tests/scripts/ci-deps.sh installed every program, so nothing
//! may be skipped there: a missing prerequisite fails the test with what to install or do. On a
//! machine that cannot provide it, `ROCPROF_ATTACH_TEST_ALLOW_SKIP=1` turns the failure into a
//! skip (one `SKIPPED:` line on stderr); CI never sets it.

use std::process::Command;

/// The variable that allows skipping outside CI.
pub const ALLOW_SKIP: &str = "ROCPROF_ATTACH_TEST_ALLOW_SKIP";

/// The test cannot run here: fail with `fix`, or skip when [`ALLOW_SKIP`] is 1.
/// Returns only when skipping (the caller then returns).
#[track_caller]
pub fn missing(what: &str, fix: &str) {
    if std::env::var(ALLOW_SKIP).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED ({ALLOW_SKIP}=1): {what}. Fix: {fix}");
        return;
    }
    panic!(
        "{what}. Fix: {fix}. CI runs every test; to skip this one on a machine that cannot run it, \
         set {ALLOW_SKIP}=1"
    );
}

/// Is `program` on PATH?
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True when every program is on PATH; else [`missing`] names the Debian `package` to install.
#[track_caller]
pub fn programs(programs: &[&str], package: &str) -> bool {
    let absent: Vec<&str> = programs.iter().copied().filter(|p| !have(p)).collect();
    if absent.is_empty() {
        return true;
    }
    missing(
        &format!("{} not found on PATH", absent.join(" and ")),
        &format!(
            "install the Debian package {package} (tests/scripts/ci-deps.sh does: \
             `sudo tests/scripts/ci-deps.sh`)"
        ),
    );
    false
}

/// True when the tests run as root; else [`missing`] says why root is needed.
#[track_caller]
pub fn root(why: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    missing(
        &format!("this test needs root ({why})"),
        "run the tests as root, as CI does (.ci/run runs tests/scripts/test.sh as root)",
    );
    false
}

/// True when tmux is on PATH (the terminal `top`'s full-screen view runs in, tests/top.rs); else
/// [`missing`] names the package.
#[track_caller]
pub fn tmux() -> bool {
    programs(&["tmux"], "tmux")
}
