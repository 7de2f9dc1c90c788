//! The engine: reading a remote process and changing it safely. Knows nothing about sessions,
//! options or front ends (it never imports [`crate::attach`] or [`crate::cli`]) and never prints;
//! it reports through its [`Error`] type and `tracing` events.
//!
//! * [`procfs`]: reading `/proc` (maps, status, auxv, threads, children, environment);
//! * [`elf`]: finding symbols of a library mapped in the target;
//! * [`ptrace`]: one traced thread; [`memory`]: remote reads and writes; [`arch`]: register
//!   frames and stubs per CPU;
//! * [`inject`]: remote syscalls and calls with one stop per sequence;
//! * [`agent`]: runs an injection sequence in a short-lived child so our death never harms the
//!   target;
//! * [`faults`]: test-only pause points at named steps (feature `fault-injection`).

pub mod agent;
pub mod arch;
pub mod elf;
pub mod error;
pub mod faults;
pub mod inject;
pub mod memory;
pub mod procfs;
pub mod ptrace;

pub use error::{Error, Result};
