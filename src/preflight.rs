//! Preflight checks before any ptrace, `--check` and `--list` (work in progress).

use crate::session::TargetSelection;

/// `rocprof-attach --check --pid PID`: run the preflight only, print a report, return the exit code.
pub fn run_check(pid: i32, tool_library: Option<&str>) -> crate::ExitCode {
    let _ = (pid, tool_library);
    crate::ExitCode::Failure
}

/// `rocprof-attach --list`: print attachable processes matching the selection.
pub fn run_list(selection: &TargetSelection) -> crate::ExitCode {
    let _ = selection;
    crate::ExitCode::Failure
}
