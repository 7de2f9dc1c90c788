//! The front end's error type: command-line mistakes, plus whatever the layers below report
//! (converted with [`From`], keeping their messages and exit codes).

use crate::attach;
use crate::exit::ExitCode;
use crate::rocpd;

/// Result alias of the front end.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the command line can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or an environment fallback is invalid; the message says how to fix it.
    #[error("{0}")]
    Usage(String),
    /// The attach layer refused or failed.
    #[error(transparent)]
    Attach(attach::Error),
    /// A rocpd database could not be read or converted.
    #[error(transparent)]
    Rocpd(rocpd::Error),
}

impl From<attach::Error> for Error {
    /// An invalid request is a command-line mistake (exit code 2); the rest is wrapped.
    fn from(e: attach::Error) -> Self {
        match e {
            attach::Error::Usage(msg) => Error::Usage(msg),
            e => Error::Attach(e),
        }
    }
}

impl From<rocpd::Error> for Error {
    fn from(e: rocpd::Error) -> Self {
        match e {
            rocpd::Error::Usage(msg) => Error::Usage(msg),
            e => Error::Rocpd(e),
        }
    }
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Usage(_) => ExitCode::Usage,
            Error::Attach(e) => e.exit_code(),
            Error::Rocpd(e) => crate::rocpd_exit_code(e),
        }
    }

    /// Shorthand for an [`Error::Usage`].
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }
}
