//! The error type of the rocpd layer: reading, writing and converting rocpd databases.

use crate::exit::ExitCode;
use std::path::PathBuf;

/// Result alias of the rocpd layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with rocpd databases and the files converted from them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request cannot work as given (no input, an output that would overwrite an input, ...);
    /// the message says how to fix it.
    #[error("{0}")]
    Usage(String),
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
