//! What a panic (a bug of ours) looks like from the command line: one line,
//! `rocprof-attach: internal error: <message> at <file:line:column>; please report it`, the
//! backtrace only when `RUST_BACKTRACE` asks for one (and is not `0`), then exit code 1
//! ([`ExitCode::Failure`]) once the panic has unwound (so that the guards that restore a target
//! process still run).
//!
//! Only the `rocprof-attach` binary installs the hook ([`install`], from `main.rs`): a panic hook
//! is process-wide, and the C library (`crate::capi`) runs inside other programs.

use crate::exit::ExitCode;
use std::io::Write;
use std::panic::{self, PanicHookInfo};

/// Replace the default panic hook (its "thread 'main' panicked at" and backtrace note) with ours.
pub fn install() {
    panic::set_hook(Box::new(report));
}

/// The hook: the one line, and the backtrace if asked for.
fn report(info: &PanicHookInfo<'_>) {
    let line = describe(info);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    if backtrace_requested(std::env::var_os("RUST_BACKTRACE").as_deref()) {
        let _ = writeln!(err, "{}", std::backtrace::Backtrace::force_capture());
    }
}

/// The line printed for a panic.
fn describe(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panic without a message");
    let at = info
        .location()
        .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    format!(
        "rocprof-attach: internal error: {}{at}; please report it",
        message.replace('\n', " ")
    )
}

/// Whether `RUST_BACKTRACE` asks for a backtrace (set, and not `0`).
fn backtrace_requested(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| v != "0")
}

/// Run `f` (the whole command); a panic, already reported by the hook, becomes exit code 1.
pub fn guard(f: impl FnOnce() -> ExitCode) -> ExitCode {
    panic::catch_unwind(panic::AssertUnwindSafe(|| {
        injected_panic();
        f()
    }))
    .unwrap_or(ExitCode::Failure)
}

/// Test-only (feature `fault-injection`): `ROCPROF_ATTACH_FAULT_PANIC=<message>` panics with that
/// message before the command runs.
#[cfg(feature = "fault-injection")]
fn injected_panic() {
    if let Some(m) = std::env::var_os("ROCPROF_ATTACH_FAULT_PANIC") {
        panic!("{}", m.to_string_lossy());
    }
}

/// Test-only panics are compiled out without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
fn injected_panic() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn backtraces_only_when_asked() {
        assert!(!backtrace_requested(None));
        assert!(!backtrace_requested(Some(OsStr::new("0"))));
        assert!(backtrace_requested(Some(OsStr::new("1"))));
        assert!(backtrace_requested(Some(OsStr::new("full"))));
    }
}
