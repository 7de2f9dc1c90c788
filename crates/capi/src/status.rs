//! `rocattach_status_t` (docs/protocol.md section 5.2) and which of our errors maps to which value.

use rocprof_attach_core as attach;
use rocprof_engine as engine;

/// A rocattach status code, as returned through the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    /// `ROCATTACH_STATUS_SUCCESS`.
    Success = 0,
    /// `ROCATTACH_STATUS_ERROR`: no listener, rejected by the target, a timeout, anything else.
    Error = 1,
    /// `ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT`: bad PID or tool path, session already exists,
    /// detach without a session.
    InvalidArgument = 2,
    /// `ROCATTACH_STATUS_ERROR_NOT_SUPPORTED`: not an x86-64 build.
    NotSupported = 3,
    /// `ROCATTACH_STATUS_ERROR_PTRACE_ERROR`: ptrace failed with another errno.
    PtraceError = 4,
    /// `ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED`: EPERM (or `/proc` access denied).
    PermissionDenied = 5,
    /// `ROCATTACH_STATUS_ERROR_PTRACE_PROCESS_NOT_FOUND`: the process is gone or exited meanwhile.
    ProcessNotFound = 6,
}

/// `ROCATTACH_STATUS_LAST`: one past the last valid value.
pub const LAST: i32 = 7;

/// (name, message) of each value, indexed by the value.
const TABLE: [(&std::ffi::CStr, &std::ffi::CStr); LAST as usize] = [
    (c"ROCATTACH_STATUS_SUCCESS", c"Success"),
    (c"ROCATTACH_STATUS_ERROR", c"General error"),
    (
        c"ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT",
        c"Invalid function argument",
    ),
    (
        c"ROCATTACH_STATUS_ERROR_NOT_SUPPORTED",
        c"Attachment not supported on this platform",
    ),
    (
        c"ROCATTACH_STATUS_ERROR_PTRACE_ERROR",
        c"General ptrace error",
    ),
    (
        c"ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED",
        c"ptrace returned EPERM, operation not permitted",
    ),
    (
        c"ROCATTACH_STATUS_ERROR_PTRACE_PROCESS_NOT_FOUND",
        c"ptrace returned ESRCH, no such process",
    ),
];

/// The enum name of `status` (`None` when out of range).
pub fn name(status: i32) -> Option<&'static std::ffi::CStr> {
    usize::try_from(status)
        .ok()
        .and_then(|i| TABLE.get(i))
        .map(|t| t.0)
}

/// The message of `status` (`None` when out of range).
pub fn message(status: i32) -> Option<&'static std::ffi::CStr> {
    usize::try_from(status)
        .ok()
        .and_then(|i| TABLE.get(i))
        .map(|t| t.1)
}

/// The status for an attach-layer error. Timeouts are 1 and a target that exited is 6 (the sane
/// codes of docs/protocol.md section 5.2, not rocattach's "success, then a failing ptrace call").
pub fn of_error(e: &attach::Error) -> Status {
    match e {
        attach::Error::Usage(_) => Status::InvalidArgument,
        // As rocattach answers an attach of a PID that already has a session.
        attach::Error::ActiveSession { .. } => Status::InvalidArgument,
        attach::Error::ClaimsClosed { .. } => Status::PermissionDenied,
        attach::Error::ProcessGone { .. } | attach::Error::TargetExited { .. } => {
            Status::ProcessNotFound
        }
        attach::Error::Engine(e) => of_engine(e),
        _ => Status::Error,
    }
}

/// The status for an engine error.
pub fn of_engine(e: &engine::Error) -> Status {
    use nix::errno::Errno;
    match e {
        engine::Error::PtracePermission { .. } => Status::PermissionDenied,
        engine::Error::ProcRead { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Status::PermissionDenied
        }
        engine::Error::ProcessGone { .. } | engine::Error::TargetDied { .. } => {
            Status::ProcessNotFound
        }
        engine::Error::Sys { errno, .. } => match *errno {
            Errno::EPERM | Errno::EACCES => Status::PermissionDenied,
            Errno::ESRCH => Status::ProcessNotFound,
            _ => Status::PtraceError,
        },
        engine::Error::UnexpectedStop { .. } => Status::PtraceError,
        engine::Error::UnsupportedArch { .. } => Status::NotSupported,
        _ => Status::Error,
    }
}
