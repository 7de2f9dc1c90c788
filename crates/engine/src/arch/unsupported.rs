//! Architectures without an injection backend yet (aarch64 is the next candidate: `svc #0; brk #0`
//! and `blr x8; brk #0`, no red zone, NT_PRSTATUS register set).
//!
//! The items mirror the x86-64 module so the crate builds; [`ensure_supported`] fails first, when
//! a thread is seized, with a clear "not supported" error, so nothing here ever runs.

use crate::error::{Error, Result};

/// The general-purpose register set of this architecture.
pub type Regs = libc::user_regs_struct;
/// No stub: nothing is ever written.
pub const STUB: [u8; 0] = [];
/// Unused on this architecture.
pub const SYSCALL_ENTRY: u64 = 0;
/// Unused on this architecture.
pub const SYSCALL_LEN: u64 = 0;
/// Unused on this architecture.
pub const CALL_ENTRY: u64 = 0;
/// Unused on this architecture.
pub const CALL_TRAP: u64 = 0;
/// `mmap` syscall number.
pub const SYS_MMAP: u64 = libc::SYS_mmap as u64;
/// `munmap` syscall number.
pub const SYS_MUNMAP: u64 = libc::SYS_munmap as u64;
/// `mprotect` syscall number.
pub const SYS_MPROTECT: u64 = libc::SYS_mprotect as u64;
/// `rt_sigaction` syscall number.
pub const SYS_RT_SIGACTION: u64 = libc::SYS_rt_sigaction as u64;
/// Size of the kernel's `struct sigaction`.
pub const KERNEL_SIGACTION_SIZE: usize = 32;
/// Unused on this architecture.
pub const NT_X86_XSTATE: libc::c_int = 0x202;
/// FP register set note type.
pub const NT_PRFPREG: libc::c_int = 2;
/// Buffer size for FP state.
pub const XSTATE_MAX: usize = 4096;

/// Fails with a clear "not supported" error on this architecture.
pub fn ensure_supported() -> Result<()> {
    Err(Error::UnsupportedArch {
        arch: std::env::consts::ARCH,
    })
}

/// Never called (see [`ensure_supported`]).
pub fn stack_top(_saved: &Regs) -> u64 {
    0
}

/// Never called (see [`ensure_supported`]).
pub fn syscall_frame(saved: &Regs, _sp: u64, _site: u64, _nr: u64, _args: [u64; 6]) -> Regs {
    *saved
}

/// Never called (see [`ensure_supported`]).
pub fn call_frame(saved: &Regs, _sp: u64, _site: u64, _func: u64, _args: [u64; 6]) -> Regs {
    *saved
}

/// Never called (see [`ensure_supported`]).
pub fn stack_scratch(_sp: u64, _len: u64) -> u64 {
    0
}

/// Never called (see [`ensure_supported`]).
pub fn is_syscall_entry(_regs: &Regs) -> bool {
    false
}

/// Never called (see [`ensure_supported`]).
pub fn resume_frame(saved: &Regs) -> Regs {
    *saved
}

/// Never called (see [`ensure_supported`]).
pub fn pc(_regs: &Regs) -> u64 {
    0
}

/// Never called (see [`ensure_supported`]).
pub fn return_value(_regs: &Regs) -> u64 {
    0
}

/// Never called (see [`ensure_supported`]).
pub fn int_result(_regs: &Regs) -> i32 {
    0
}

/// No spawn trampoline on this architecture.
pub const SPAWN_TRAMPOLINE: [u8; 0] = [];

/// Never known here.
pub fn interrupted_syscall(_saved: &Regs) -> Option<u64> {
    None
}
