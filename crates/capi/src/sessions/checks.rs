//! The checks an attach makes before anything touches the target, in rocattach's order.

use super::log_error;
use crate::log::Log;
use crate::status::{self, Status};
use rocprof_attach_core::preflight::{self, LISTENER_COMM};
use rocprof_attach_core::toolpath::{self, DEFAULT_TOOL};
use rocprof_attach_core::Error;
use rocprof_engine::procfs;

/// The variable the tool library string is read from (docs/protocol.md section 5.4).
pub const TOOL_VARIABLE: &str = "ROCPROF_ATTACH_TOOL_LIBRARY";

/// The tool library string as rocattach chooses it: `ROCPROF_ATTACH_TOOL_LIBRARY` verbatim, else
/// the default soname; the override is ignored in a secure-execution host.
pub(super) fn tool_string(log: &Log) -> Result<String, Status> {
    let Some(v) = std::env::var_os(TOOL_VARIABLE) else {
        return Ok(DEFAULT_TOOL.to_string());
    };
    if toolpath::at_secure() {
        log.warn(&format!(
            "ignoring {TOOL_VARIABLE} because this process runs in a secure-execution context (setuid, setgid \
             or file capabilities); using {DEFAULT_TOOL}"
        ));
        return Ok(DEFAULT_TOOL.to_string());
    }
    let Ok(v) = v.into_string() else {
        log.error(&format!(
            "{TOOL_VARIABLE} is not valid UTF-8: set it to the path of librocprofiler-sdk-tool.so"
        ));
        return Err(Status::InvalidArgument);
    };
    if v.split(':').all(|e| e.trim().is_empty()) {
        log.error(&format!(
            "{TOOL_VARIABLE} is set but empty: set it to the tool library path (e.g. \
             /opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so) or unset it to use {DEFAULT_TOOL}"
        ));
        return Err(Status::InvalidArgument);
    }
    Ok(v)
}

/// Checks that need no ptrace, in rocattach's order: the tool string inside the target's root
/// (absolute entries must exist and be regular ELF files: [`toolpath::validate`]), then the
/// listener. A path that could not be checked is not reported here: the plan's preflight
/// reports it again, after the access checks (as the CLI does), so a refused `/proc` read shows
/// as what it is rather than as a warning about the tool.
pub(super) fn precheck(pid: i32, tool: &str, log: &Log) -> Result<(), Status> {
    let fail = |e: Error| {
        log_error(log, &e);
        match e {
            Error::NotAttachable { .. } => Status::InvalidArgument,
            e => status::of_error(&e),
        }
    };
    if !procfs::proc_dir(pid).exists() {
        return Err(fail(Error::ProcessGone { pid }));
    }
    toolpath::validate(pid, tool).map_err(fail)?;
    match procfs::threads_named(pid, LISTENER_COMM) {
        Ok(t) if t.is_empty() => no_listener(pid, tool, log),
        Ok(_) => Ok(()),
        Err(e) => Err(fail(e.into())),
    }
}

/// No listener thread was seen: the attach layer's preflight (the CLI's) says why. A process
/// whose `/proc` files we may not read is a permission problem (status 5, with the CLI's message
/// and fix), one that vanished is 6; a process that really has no listener is rocattach's 1,
/// with the CLI's diagnosis (not started with `ROCP_TOOL_ATTACH=1`, a fork without exec, a
/// `rocprofiler_configure` export, ...). A listener that started meanwhile goes on to the plan.
fn no_listener(pid: i32, tool: &str, log: &Log) -> Result<(), Status> {
    match preflight::check(pid, Some(tool)) {
        Ok(_) => Ok(()),
        Err(e @ Error::NotAttachable { .. }) => {
            log.error(&e.to_string());
            Err(Status::Error)
        }
        Err(e) => {
            log_error(log, &e);
            Err(status::of_error(&e))
        }
    }
}
