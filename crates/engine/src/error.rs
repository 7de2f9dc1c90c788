//! The engine's error type: reading `/proc`, ELF lookups, ptrace and injection.
//!
//! Every message says what happened and, where there is one, the fix. Higher layers wrap these
//! errors (`From` conversions in rocprof-attach's attach layer) and keep their exit codes.

use rocprof_exit::ExitCode;
use std::path::PathBuf;

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading or changing a remote process.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // ------------------------------------------------------------------ /proc
    /// The process (or thread) does not exist any more.
    #[error("process {pid} does not exist (it may have exited); check the PID with `ps -p {pid}`")]
    ProcessGone {
        /// Process id that was looked up.
        pid: i32,
    },
    /// A /proc file exists but could not be read.
    #[error("cannot read {path}: {source}. {hint}")]
    ProcRead {
        /// The /proc path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// A /proc file had unexpected content.
    #[error("unexpected content in {path}: {what}")]
    ProcParse {
        /// The /proc path.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },

    // ------------------------------------------------------------------ ELF / symbols
    /// A library or symbol could not be located in the target.
    #[error("{0}")]
    Symbol(String),

    // ------------------------------------------------------------------ ptrace / injection
    /// ptrace was refused with EPERM.
    #[error(
        "permission denied: cannot ptrace {what} of process {pid}. Run as the target's owner with \
         /proc/sys/kernel/yama/ptrace_scope = 0 (`sudo sysctl kernel.yama.ptrace_scope=0`), or as root / with \
         CAP_SYS_PTRACE; inside a container start it with `docker run --cap-add SYS_PTRACE`"
    )]
    PtracePermission {
        /// Process id.
        pid: i32,
        /// What we tried to trace (e.g. "thread 1234").
        what: String,
    },
    /// The traced thread or its process exited while we were working on it.
    #[error("process {pid} (thread {tid}) exited while rocprof-attach was {during}; nothing is left to restore")]
    TargetDied {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// What we were doing.
        during: String,
    },
    /// A bounded wait expired.
    #[error("timed out after {after_ms} ms waiting for thread {tid} of process {pid} to {what}")]
    Timeout {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// What we waited for.
        what: String,
        /// How long we waited.
        after_ms: u64,
    },
    /// Job control (SIGSTOP, Ctrl-Z, a debugger) stopped the thread: before our interrupt-stop
    /// (nothing was changed; it can be tried again once the process continues), or while it ran
    /// injected code (the agent stays until the process continues and the code returns, then
    /// restores the thread).
    #[error(
        "process {pid} is stopped (SIGSTOP, Ctrl-Z or a debugger){}; continue it with `kill -CONT {pid}`",
        if *running_injected {
            format!(
                " while thread {tid} ran an injected call and did not continue within {after_ms} ms; \
                 the call finishes and the thread is restored when it continues"
            )
        } else {
            format!(", so thread {tid} cannot run an injected call")
        }
    )]
    GroupStopped {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// True when the thread was running our injected code (a call or a syscall).
        running_injected: bool,
        /// How long the group-stop lasted before we gave up waiting (0 before the interrupt).
        after_ms: u64,
    },
    /// A system call of ours (ptrace, process_vm_*, ...) failed.
    #[error("{op} failed for thread {tid}: {errno}")]
    Sys {
        /// Which operation.
        op: &'static str,
        /// Thread id.
        tid: i32,
        /// errno.
        errno: nix::errno::Errno,
    },
    /// A system call injected into the target returned -errno.
    #[error("{syscall} injected into process {pid} failed: {errno}")]
    RemoteSyscall {
        /// Process id.
        pid: i32,
        /// Name of the syscall.
        syscall: &'static str,
        /// The errno it returned.
        errno: nix::errno::Errno,
    },
    /// The thread stopped in a way we cannot continue from (e.g. a fault inside the injected code).
    #[error("thread {tid} of process {pid} stopped unexpectedly: {what}")]
    UnexpectedStop {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Description of the stop.
        what: String,
    },
    /// The injection agent failed in a way not covered above (its message says how).
    #[error("injection into process {pid} failed: {message}")]
    Agent {
        /// Process id.
        pid: i32,
        /// What went wrong.
        message: String,
    },
    /// The thread chosen for a spawn was no longer parked in a blocking system call when it
    /// stopped (it woke up between the choice and the stop): nothing was run on it.
    #[error(
        "thread {tid} of process {pid} was not waiting in a blocking system call when it stopped \
         ({found}), so nothing was run on it"
    )]
    NotParked {
        /// Process id.
        pid: i32,
        /// The thread.
        tid: i32,
        /// What it was doing instead.
        found: String,
    },
    /// This CPU architecture has no injection backend.
    #[error("attaching is not supported on {arch}: rocprof-attach currently supports x86-64 only")]
    UnsupportedArch {
        /// The architecture name.
        arch: &'static str,
    },
    /// The engine was used in a way its API does not allow (a bug in the caller).
    #[error("{0}")]
    Internal(String),
    /// Local I/O failure (pipes, sockets, forks of our own).
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// Underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::ProcessGone { .. } => ExitCode::NoSuchProcess,
            Error::PtracePermission { .. } => ExitCode::PermissionDenied,
            Error::ProcRead { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                ExitCode::PermissionDenied
            }
            Error::Symbol(_) | Error::UnsupportedArch { .. } | Error::NotParked { .. } => {
                ExitCode::NotAttachable
            }
            Error::TargetDied { .. } => ExitCode::TargetExited,
            // Like the preflight's refusal of a stopped process: nothing was touched.
            Error::GroupStopped {
                running_injected: false,
                ..
            } => ExitCode::NotAttachable,
            _ => ExitCode::Failure,
        }
    }

    /// Shorthand for an [`Error::Io`] with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for an [`Error::Internal`]: the engine's API was misused by its caller.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Internal(msg.into())
    }
}
