//! rocprof-attach: attach AMD's GPU profiler to a process that is already running.
//!
//! The workspace is layered the way py-spy splits "reading a remote process" from "presenting
//! results"; each layer is a crate (or, above the engine, a module of this one) and only uses the
//! layers below it (docs/architecture.md):
//!
//! * [`exit`] (crate `rocprof-exit`): the documented exit codes every layer's errors map to;
//! * [`engine`] (crate `rocprof-engine`): reading and changing a remote process —
//!   [`engine::procfs`], [`engine::elf`], [`engine::ptrace`], [`engine::memory`],
//!   [`engine::arch`], [`engine::inject`], [`engine::agent`];
//! * [`rocpd`] (crate `rocprof-rocpd`, depends on no crate of ours): reading, writing,
//!   converting and summarising rocpd databases; [`mod@format`] is its list of output formats;
//! * [`attach`] (crate `rocprof-attach-core`): what a session is — [`attach::targets`], [`attach::preflight`], the rocprofv3
//!   options and the environment buffer, and [`attach::session`] (plan, attach, wait, detach,
//!   collect), which returns typed results and emits events and never prints;
//! * front ends (highest): [`cli`] (the `rocprof-attach` command) and the rocattach C ABI (crate
//!   `rocprof-rocattach` in crates/capi, a cdylib `librocprofiler-sdk-rocattach.so.1`; the Python
//!   package in `python/` loads it). Only front ends print.
//!
//! Each layer has its own error type ([`engine::Error`], [`rocpd::Error`], [`attach::Error`],
//! [`cli::Error`]) with `From` conversions upward; every error maps to a documented
//! [`ExitCode`] (`docs/exit-codes.md`).

#![deny(missing_docs)]

pub mod cli;
#[cfg(test)]
mod long_functions;

pub use rocprof_attach_core as attach;
pub use rocprof_attach_core::rocpd_exit_code;
pub use rocprof_engine as engine;
pub use rocprof_exit as exit;
pub use rocprof_rocpd as rocpd;
pub use rocprof_rocpd::format;

pub use exit::ExitCode;
