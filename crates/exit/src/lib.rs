//! rocprof-exit: the exit codes rocprof-attach documents (docs/exit-codes.md), shared by every
//! layer whose errors map to one.
//!
//! * **Is:** one enum and its numbers; the lowest crate of the workspace.
//! * **May use:** serde (the codes appear in `--json` reports).
//! * **Must never:** depend on another crate of ours, or grow behaviour beyond naming codes.

#![deny(missing_docs)]

// Each layer's error type maps its variants to one of these, and the front ends return them.

use serde::Serialize;

/// Documented process exit codes (see `docs/exit-codes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// A detach call failed, timed out, was rejected or could not run (the target is stopped):
    /// the profiler may still be active in the target.
    DetachFailed = 11,
    /// The session wrote output, but not in every format that was asked for (the tool wrote
    /// none of it and it could not be converted).
    FormatMissing = 12,
}

impl ExitCode {
    /// The numeric process exit status.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The short name used in docs/exit-codes.md and in `--json` reports.
    pub fn name(self) -> &'static str {
        match self {
            ExitCode::Success => "success",
            ExitCode::Failure => "failure",
            ExitCode::Usage => "usage_error",
            ExitCode::NoSuchProcess => "no_such_process",
            ExitCode::NotAttachable => "not_attachable",
            ExitCode::PermissionDenied => "permission_denied",
            ExitCode::Rejected => "rejected",
            ExitCode::TargetExited => "target_exited",
            ExitCode::Partial => "partial",
            ExitCode::NoOutput => "no_output",
            ExitCode::BadInput => "bad_input",
            ExitCode::DetachFailed => "detach_failed",
            ExitCode::FormatMissing => "format_missing",
        }
    }
}

impl Serialize for ExitCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.code())
    }
}
