//! The engine: reading a remote process and changing it safely. Knows nothing about sessions,
//! options or front ends (no crate of this workspace but `rocprof-exit` is below it) and never prints;
//! it reports through its [`Error`] type and `tracing` events.
//!
//! * [`procfs`]: reading `/proc` (maps, status, auxv, threads, children, environment);
//! * [`elf`]: finding symbols of a library mapped in the target;
//! * [`ptrace`]: one traced thread; [`memory`]: remote reads and writes; [`arch`]: register
//!   frames and stubs per CPU;
//! * [`live_env`]: the environment a process has now (what `setenv` changed);
//! * [`inject`]: remote syscalls and calls with one stop per sequence;
//! * [`agent`]: runs an injection sequence in a short-lived child so our death never harms the
//!   target;
//! * [`faults`]: test-only pause points at named steps (feature `fault-injection`).

//!
//! * **Is:** the mechanism of attaching: everything that touches another process.
//! * **May use:** `rocprof-exit` (its errors' exit codes), nix, libc, object, serde, tracing.
//! * **Must never:** know about sessions, options, rocpd or front ends; print; leave a target
//!   stopped, patched or with changed registers; run code on a thread that may hold a lock the
//!   code needs. Its `unsafe` code lives in [`ptrace`] (with `ptrace::sys` for the few other
//!   system calls) and [`memory`].

#![deny(missing_docs)]

pub mod agent;
pub mod arch;
pub mod elf;
pub mod error;
pub mod faults;
pub mod inject;
pub mod live_env;
pub mod memory;
pub mod procfs;
pub mod ptrace;

pub use error::{Error, Result};
