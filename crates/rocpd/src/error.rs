//! The error type of the rocpd layer: reading, writing and converting rocpd databases.

use std::path::PathBuf;

/// Result alias of the rocpd layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The three kinds of [`Error`] a front end tells apart (rocprof-attach maps them to its exit
/// codes 2, 8 and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request cannot work as given; the message says how to fix it.
    Usage,
    /// An input database is unusable.
    BadInput,
    /// Anything else (I/O, SQLite).
    Failure,
}

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
    /// What kind of failure this is, for a front end's exit code (this crate knows none).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Usage(_) => ErrorClass::Usage,
            Error::BadInput { .. } => ErrorClass::BadInput,
            _ => ErrorClass::Failure,
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
