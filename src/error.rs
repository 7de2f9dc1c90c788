//! The one error type of rocprof-attach, and the exit codes it maps to.
//!
//! Every variant's message says what happened, why, and how to fix it. The exit-code table is
//! documented in `docs/exit-codes.md`; keep the two in sync.

use std::path::PathBuf;

/// Documented process exit codes (see `docs/exit-codes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ExitCode {
    /// Everything asked for was done and output was written.
    Success = 0,
    /// An error not covered by a more specific code (I/O on our side, internal error).
    Failure = 1,
    /// The command line was wrong (clap also uses 2).
    Usage = 2,
    /// The target process does not exist (or vanished before we touched it).
    NoSuchProcess = 3,
    /// The process exists but cannot be attached (no listener, no register library, zombie, ...).
    NotAttachable = 4,
    /// The kernel refused ptrace or /proc access (Yama, capabilities, containers).
    PermissionDenied = 5,
    /// The target's rocprofiler-register returned a non-zero status; the target keeps running.
    Rejected = 6,
    /// The target exited while attached; whatever output it wrote is reported.
    TargetExited = 7,
    /// Several processes were selected and only some of them were attached and detached.
    Partial = 8,
    /// The session ran but the tool wrote no output files.
    NoOutput = 9,
    /// An input file for `convert`/`summary` is not a usable rocpd database.
    BadInput = 10,
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, with a message that tells the user how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // ------------------------------------------------------------------ usage
    /// The command line or an environment fallback is invalid.
    #[error("{0}")]
    Usage(String),

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
    /// This CPU architecture has no injection backend.
    #[error("attaching is not supported on {arch}: rocprof-attach currently supports x86-64 only")]
    UnsupportedArch {
        /// The architecture name.
        arch: &'static str,
    },

    // ------------------------------------------------------------------ attach session
    /// The process exists but cannot be attached.
    #[error("cannot attach to process {pid}: {reason}")]
    NotAttachable {
        /// Process id.
        pid: i32,
        /// Reason and fix.
        reason: String,
    },
    /// rocprofiler-register in the target returned a non-zero status.
    #[error("process {pid} rejected the {call}: rocprofiler-register returned {status} ({name}: {meaning}); the target keeps running")]
    Rejected {
        /// Process id.
        pid: i32,
        /// `attach` or `detach`.
        call: &'static str,
        /// Raw status.
        status: i32,
        /// Symbolic name of the status.
        name: &'static str,
        /// Meaning of the status.
        meaning: &'static str,
    },
    /// The target exited during the session.
    #[error("process {pid} exited during the profiling session")]
    TargetExited {
        /// Process id.
        pid: i32,
    },
    /// Some, not all, processes were attached.
    #[error("{0}")]
    Partial(String),
    /// No output was written by the tool.
    #[error("{0}")]
    NoOutput(String),

    // ------------------------------------------------------------------ output (rocpd/convert/summary)
    /// An input database is unusable (not SQLite, not rocpd, unknown schema, truncated).
    #[error("{path}: {reason}")]
    BadInput {
        /// The input file.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// Writing output failed.
    #[error("cannot write {path}: {reason}")]
    OutputWrite {
        /// The output file or directory.
        path: PathBuf,
        /// What went wrong and the fix.
        reason: String,
    },
    /// SQLite error not attributable to a specific input.
    #[error("SQLite error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    // ------------------------------------------------------------------ end output

    // ------------------------------------------------------------------ misc
    /// Local I/O failure.
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
            Error::Usage(_) => ExitCode::Usage,
            Error::ProcessGone { .. } => ExitCode::NoSuchProcess,
            Error::PtracePermission { .. } => ExitCode::PermissionDenied,
            Error::ProcRead { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                ExitCode::PermissionDenied
            }
            Error::NotAttachable { .. } | Error::Symbol(_) | Error::UnsupportedArch { .. } => {
                ExitCode::NotAttachable
            }
            Error::Rejected { .. } => ExitCode::Rejected,
            Error::TargetDied { .. } | Error::TargetExited { .. } => ExitCode::TargetExited,
            Error::Partial(_) => ExitCode::Partial,
            Error::NoOutput(_) => ExitCode::NoOutput,
            Error::BadInput { .. } => ExitCode::BadInput,
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

    /// Shorthand for an [`Error::Usage`].
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }
}
