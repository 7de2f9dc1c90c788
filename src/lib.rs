//! rocprof-attach: attach AMD's GPU profiler to a process that is already running.
//!
//! The crate is layered the way py-spy splits "reading a remote process" from "presenting
//! results"; each layer lives in its own folder and only imports the layers below it:
//!
//! * [`engine`] (lowest): reading and changing a remote process — [`engine::procfs`],
//!   [`engine::elf`], [`engine::ptrace`], [`engine::memory`], [`engine::arch`],
//!   [`engine::inject`], [`engine::agent`];
//! * [`rocpd`]: reading, writing, converting and summarising rocpd databases (may use the
//!   engine's small system wrappers, never the attach layer or a front end);
//! * [`attach`]: what a session is — [`attach::targets`], [`attach::preflight`], the rocprofv3
//!   options and the environment buffer, and [`attach::session`] (plan, attach, wait, detach,
//!   collect), which returns typed results and emits events and never prints;
//! * front ends (highest): [`cli`] (the `rocprof-attach` command) and [`capi`] (the rocattach
//!   C ABI, built as the crate's cdylib `librocprofiler-sdk-rocattach.so.1`; the Python package
//!   in `python/` loads it). Only front ends print.
//!
//! Each layer has its own error type ([`engine::Error`], [`rocpd::Error`], [`attach::Error`],
//! [`cli::Error`]) with `From` conversions upward; every error maps to a documented
//! [`ExitCode`] (`docs/exit-codes.md`). [`mod@format`] and [`exit`] are shared vocabulary.

#![deny(missing_docs)]

pub mod attach;
pub mod capi;
pub mod cli;
pub mod engine;
pub mod exit;
pub mod format;
pub mod rocpd;

pub use exit::ExitCode;
