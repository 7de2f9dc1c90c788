//! rocprof-attach-core, the attach layer: what a session is, independent of any front end.
//!
//! * **Is:** targets, preflight, options, claims and the session, for the CLI, the C ABI and any
//!   other front end ([`session`] has the steps; `examples/library.rs` composes them).
//! * **May use:** `rocprof-engine`, `rocprof-rocpd`, `rocprof-exit`; clap for the rocprofv3
//!   options a front end flattens into its command line.
//! * **Must never:** import a front end, print (progress is [`session::Event`]s, results are
//!   values, diagnostics go through `tracing`), or exit.
//!
//! * [`targets`]: which processes (explicit PIDs, `--match`, `--job`, `--all`, `--list` rows);
//! * [`preflight`]: everything checked before any ptrace, with the cause and fix of each refusal;
//! * [`options`], [`envbuf`], [`toolpath`]: rocprofv3 options to `ROCPROF_*` variables, the wire
//!   buffer sent to the target, and the tool library it loads; [`reattach`]: the tool an earlier
//!   attach loaded, which a reattach must name again;
//! * [`claims`]: one session per target, across users and front ends;
//! * [`session`]: plan, attach, wait, detach, collect — results and events, never printing;
//! * [`outputs`]: which files the tool wrote; [`signals`]: SIGINT/SIGTERM/SIGHUP as events.
//!
//! It builds on `rocprof_engine` and `rocprof_rocpd` and never imports a front end.

#![deny(missing_docs)]

pub mod claims;
pub mod cuda;
pub mod envbuf;
pub mod error;
pub mod options;
pub mod outputs;
pub mod preflight;
pub mod reattach;
pub mod session;
pub mod signals;
pub mod targets;
pub mod templates;
pub mod toolpath;
pub mod toolsearch;

pub use error::{Error, Result};

use rocprof_exit::ExitCode;

/// The exit code of a [`rocprof_rocpd::Error`] (the rocpd crate knows no exit codes).
pub fn rocpd_exit_code(e: &rocprof_rocpd::Error) -> ExitCode {
    match e.class() {
        rocprof_rocpd::ErrorClass::Usage => ExitCode::Usage,
        rocprof_rocpd::ErrorClass::BadInput => ExitCode::BadInput,
        rocprof_rocpd::ErrorClass::Failure => ExitCode::Failure,
    }
}
