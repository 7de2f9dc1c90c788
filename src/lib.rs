//! rocprof-attach: attach AMD's GPU profiler to a process that is already running.
//!
//! The crate is split the way py-spy splits "reading a remote process" from "presenting results":
//!
//! * remote-process layer: [`procfs`] (reading `/proc`), [`elf`] (finding symbols in the target),
//!   [`ptrace`] (one traced thread), [`memory`] (remote reads/writes), [`arch`] (register frames and
//!   stubs per CPU), [`inject`] (remote syscalls and calls with one stop per sequence), [`agent`]
//!   (runs an injection sequence in a short-lived child so our death never harms the target);
//! * attach layer: [`options`] and [`envbuf`] (rocprofv3 options to `ROCPROF_*` variables and the wire
//!   buffer), [`toolpath`], [`preflight`], [`session`] (attach, wait, detach, report);
//! * output layer: [`mod@format`], [`rocpd`] (read/write/convert/summarise rocpd databases);
//! * front end: [`cli`].

#![deny(missing_docs)]

pub mod agent;
pub mod arch;
pub mod cli;
pub mod elf;
pub mod envbuf;
pub mod error;
pub mod faults;
pub mod format;
pub mod inject;
pub mod memory;
pub mod options;
pub mod outputs;
pub mod preflight;
pub mod procfs;
pub mod ptrace;
pub mod rocpd;
pub mod session;
pub mod signals;
pub mod toolpath;

pub use error::{Error, ExitCode, Result};
