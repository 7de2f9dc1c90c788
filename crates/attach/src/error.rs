//! The attach layer's error type: requests that cannot work, processes that cannot be attached,
//! and what the target's rocprofiler-register answered. Engine and rocpd errors convert into it
//! ([`From`]) and keep their messages and exit codes.

use rocprof_engine as engine;
use rocprof_exit::ExitCode;
use rocprof_rocpd as rocpd;

/// Result alias of the attach layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while selecting, checking, attaching and detaching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is invalid (an option value, a PID, a pattern); the message says how to fix it.
    #[error("{0}")]
    Usage(String),
    /// The process does not exist any more.
    #[error("process {pid} does not exist (it may have exited); check the PID with `ps -p {pid}`")]
    ProcessGone {
        /// Process id that was looked up.
        pid: i32,
    },
    /// The process exists but cannot be attached.
    #[error("cannot attach to process {pid}: {reason}")]
    NotAttachable {
        /// Process id.
        pid: i32,
        /// Reason and fix.
        reason: String,
    },
    /// Another session holds the target, or one was left active in it (or, for `--detach`, none
    /// is recorded): one session per process (see [`crate::claims`]).
    #[error("{message}")]
    ActiveSession {
        /// Process id.
        pid: i32,
        /// Who holds the target and since when, or why a session is still active, and the fix.
        message: String,
    },
    /// The claims directory of the target's owner is closed to us (we are neither that user nor
    /// root), so the one-session lock cannot be held: see [`crate::claims`].
    #[error("{message}")]
    ClaimsClosed {
        /// Process id.
        pid: i32,
        /// Whose directory, and the fix.
        message: String,
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
    /// The session ran but no output file appeared; the message lists the likely causes.
    #[error("{0}")]
    NoOutput(String),
    /// A selection (`--match`, `--job`, `--all`) chose no process.
    #[error("no process matched {selection}{unreadable_note}; `rocprof-attach --list` shows the attachable processes on this machine")]
    NoMatch {
        /// The selection as written on the command line.
        selection: String,
        /// Empty, or why some processes could not be examined (with the fix).
        unreadable_note: String,
    },
    /// Every process a selection chose was skipped: none has a listener.
    #[error("none of the {count} process{plural} selected by {selection} can be attached: none has a 'rocp-bg-attach' listener thread (skipped: {pids}). Fix: start the application with ROCP_TOOL_ATTACH=1 in its environment")]
    NothingAttachable {
        /// The selection as written on the command line.
        selection: String,
        /// How many were skipped.
        count: usize,
        /// `es` or empty.
        plural: &'static str,
        /// The skipped processes, comma-separated.
        pids: String,
    },
    /// The detach call failed, timed out, was rejected or could not run: the profiler may still be
    /// active in the target.
    #[error(
        "could not detach from process {pid}: {reason}; the profiler may still be active in it"
    )]
    DetachFailed {
        /// Process id.
        pid: i32,
        /// What went wrong.
        reason: String,
    },
    /// Reading or changing the remote process failed.
    #[error(transparent)]
    Engine(engine::Error),
    /// Converting the tool's output failed.
    #[error(transparent)]
    Rocpd(#[from] rocpd::Error),
    /// Local I/O failure.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// Underlying error.
        source: std::io::Error,
    },
}

impl From<engine::Error> for Error {
    /// A vanished process is the attach layer's own outcome; everything else is wrapped.
    fn from(e: engine::Error) -> Self {
        match e {
            engine::Error::ProcessGone { pid } => Error::ProcessGone { pid },
            e => Error::Engine(e),
        }
    }
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Usage(_) => ExitCode::Usage,
            Error::ProcessGone { .. } => ExitCode::NoSuchProcess,
            Error::NotAttachable { .. } => ExitCode::NotAttachable,
            Error::ActiveSession { .. } => ExitCode::NotAttachable,
            Error::ClaimsClosed { .. } => ExitCode::PermissionDenied,
            Error::Rejected { .. } => ExitCode::Rejected,
            Error::TargetExited { .. } => ExitCode::TargetExited,
            Error::NoOutput(_) => ExitCode::NoOutput,
            Error::NoMatch { .. } => ExitCode::NoSuchProcess,
            Error::NothingAttachable { .. } => ExitCode::NotAttachable,
            Error::DetachFailed { .. } => ExitCode::DetachFailed,
            Error::Engine(e) => e.exit_code(),
            Error::Rocpd(e) => crate::rocpd_exit_code(e),
            Error::Io { .. } => ExitCode::Failure,
        }
    }

    /// The pid of a ptrace permission refusal, for the permission hint.
    pub fn permission_denied_pid(&self) -> Option<i32> {
        match self {
            Error::Engine(engine::Error::PtracePermission { pid, .. }) => Some(*pid),
            _ => None,
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
