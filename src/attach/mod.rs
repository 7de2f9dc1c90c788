//! The attach layer: what a session is, independent of any front end.
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
//! It builds on [`crate::engine`] and [`crate::rocpd`] and never imports a front end.

pub mod claims;
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
