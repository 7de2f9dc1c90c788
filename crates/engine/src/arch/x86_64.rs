//! x86-64 register frames and stubs (docs/protocol.md sections 5.7 and 11).

use crate::error::Result;

/// The general-purpose register set as PTRACE_GETREGS returns it.
pub type Regs = libc::user_regs_struct;

/// Stub written at the injection site (AT_ENTRY): `syscall; int3; call rax; int3`.
///
/// A remote syscall starts at offset [`SYSCALL_ENTRY`] and is observed at its syscall-exit-stop
/// (the `int3` after it is never reached); a remote call starts at [`CALL_ENTRY`] and traps at
/// [`CALL_TRAP`]. One patch serves a whole sequence.
pub const STUB: [u8; 6] = [0x0f, 0x05, 0xcc, 0xff, 0xd0, 0xcc];
/// Offset of `syscall` in [`STUB`].
pub const SYSCALL_ENTRY: u64 = 0;
/// Length of the `syscall` instruction (the program counter at a syscall-stop is past it).
pub const SYSCALL_LEN: u64 = 2;
/// Offset of `call rax` in [`STUB`].
pub const CALL_ENTRY: u64 = 3;
/// Program counter after the `int3` that follows `call rax`.
pub const CALL_TRAP: u64 = 6;

/// `mmap` syscall number.
pub const SYS_MMAP: u64 = libc::SYS_mmap as u64;
/// `munmap` syscall number.
pub const SYS_MUNMAP: u64 = libc::SYS_munmap as u64;
/// `mprotect` syscall number.
pub const SYS_MPROTECT: u64 = libc::SYS_mprotect as u64;
/// `rt_sigaction` syscall number.
pub const SYS_RT_SIGACTION: u64 = libc::SYS_rt_sigaction as u64;
/// Size of the kernel's `struct sigaction` on this architecture (handler, flags, restorer, mask).
pub const KERNEL_SIGACTION_SIZE: usize = 32;

/// ELF note type of the XSAVE area for PTRACE_GETREGSET (x87/SSE/AVX/AVX-512 state).
pub const NT_X86_XSTATE: libc::c_int = 0x202;
/// ELF note type of the legacy FXSAVE area, the fallback when XSTATE is unavailable.
pub const NT_PRFPREG: libc::c_int = 2;
/// Size of the buffer used for the extended state (the kernel reports the real size).
pub const XSTATE_MAX: usize = 16 * 1024;

/// Size of the System V red zone below the stack pointer that leaf functions may use.
const RED_ZONE: u64 = 128;
const EFLAGS_TF: u64 = 1 << 8;
const EFLAGS_DF: u64 = 1 << 10;

/// x86-64 is supported.
pub fn ensure_supported() -> Result<()> {
    Ok(())
}

/// The highest usable stack address of an injected frame: below the red zone, 16-byte aligned.
///
/// Data an injection places on the thread's stack goes below this address, and the frames of
/// its syscalls and calls start below that data (see [`crate::inject::Injection::place`]).
pub fn stack_top(saved: &Regs) -> u64 {
    saved.rsp.wrapping_sub(RED_ZONE) & !15
}

/// The common part of an injected frame: stack at `sp` (16-byte aligned), no syscall restart.
fn base_frame(saved: &Regs, sp: u64, pc: u64) -> Regs {
    let mut r = *saved;
    r.rip = pc;
    r.rsp = sp & !15;
    // orig_rax = -1: the kernel must not apply syscall-restart fix-ups to the injected frame.
    r.orig_rax = u64::MAX;
    // The ABI requires DF clear at a call; never single-step.
    r.eflags &= !(EFLAGS_DF | EFLAGS_TF);
    r
}

/// Frame for a remote syscall `nr(args...)` executed at `site + SYSCALL_ENTRY`, with the stack at
/// `sp` (at most [`stack_top`]).
pub fn syscall_frame(saved: &Regs, sp: u64, site: u64, nr: u64, args: [u64; 6]) -> Regs {
    let mut r = base_frame(saved, sp, site + SYSCALL_ENTRY);
    r.rax = nr;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    r
}

/// Frame for a remote call `func(args...)` executed at `site + CALL_ENTRY` (`call rax`), with
/// the stack at `sp` (at most [`stack_top`]).
///
/// `call` pushes the return address, so the callee starts with `rsp = 16n - 8` as the ABI wants.
pub fn call_frame(saved: &Regs, sp: u64, site: u64, func: u64, args: [u64; 6]) -> Regs {
    let mut r = base_frame(saved, sp, site + CALL_ENTRY);
    r.rax = func;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.rcx = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    r
}

/// Address of a scratch area of `len` bytes on the thread's stack, below a frame whose stack is
/// at `sp`: usable while the thread is stopped by us.
pub fn stack_scratch(sp: u64, len: u64) -> u64 {
    (sp & !15).wrapping_sub(256 + len) & !15
}

/// At a syscall-stop: true for the entry stop (the kernel preloads `rax` with -ENOSYS).
pub fn is_syscall_entry(regs: &Regs) -> bool {
    regs.rax as i64 == -(libc::ENOSYS as i64)
}

/// The registers to resume a restored thread with.
///
/// A thread stopped inside an interruptible syscall (the listener's futex wait) has
/// `orig_rax >= 0` and `rax = -ERESTART*`. The kernel turns that into a restart only on the
/// signal path, which a resume from a syscall-exit-stop does not take. So the restart is applied
/// here (back up over `syscall`, reload the number) and `orig_rax` is set to -1 so the kernel
/// never applies it a second time. The thread re-enters its syscall exactly as it would have.
pub fn resume_frame(saved: &Regs) -> Regs {
    const ERESTARTSYS: i64 = 512;
    const ERESTARTNOINTR: i64 = 513;
    const ERESTARTNOHAND: i64 = 514;
    const ERESTART_RESTARTBLOCK: i64 = 516;
    let mut r = *saved;
    if (saved.orig_rax as i64) < 0 {
        return r;
    }
    match -(saved.rax as i64) {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => r.rax = saved.orig_rax,
        ERESTART_RESTARTBLOCK => r.rax = libc::SYS_restart_syscall as u64,
        _ => return r,
    }
    r.rip = saved.rip - SYSCALL_LEN;
    r.orig_rax = u64::MAX;
    r
}

/// Program counter of a register set.
pub fn pc(regs: &Regs) -> u64 {
    regs.rip
}

/// Raw return register (full width).
pub fn return_value(regs: &Regs) -> u64 {
    regs.rax
}

/// Return value of a function returning C `int`: the low 32 bits, sign-extended.
pub fn int_result(regs: &Regs) -> i32 {
    regs.rax as u32 as i32
}

/// Start routine of a thread made by an injected `pthread_create` (the CUDA backend, see
/// [`crate::agent::spawn`]). Its one argument is the spawn block ([`crate::agent::spawn::Block`]):
///
/// ```text
/// push rbx; mov rbx, rdi                  ; the block (the push aligns the stack for the calls)
/// rax = block.dlopen(block.tool, RTLD_NOW); if 0: block.state = 1, goto error
/// rax = block.dlsym(rax, block.symbol)    ; if 0: block.state = 2, goto error
/// block.state = 3; block.result = rax(block.payload); block.state = 4; return 0
/// error: block.error = block.dlerror(); return 0
/// ```
///
/// Position-independent; only the block is written (it lies in its own read-write page).
pub const SPAWN_TRAMPOLINE: [u8; 94] = [
    0x53, 0x48, 0x89, 0xfb, 0x48, 0x8b, 0x7b, 0x18, 0xbe, 0x02, 0x00, 0x00, 0x00, 0xff, 0x13, 0x48,
    0x85, 0xc0, 0x74, 0x2d, 0x48, 0x89, 0xc7, 0x48, 0x8b, 0x73, 0x20, 0xff, 0x53, 0x08, 0x48, 0x85,
    0xc0, 0x74, 0x28, 0x48, 0xc7, 0x43, 0x30, 0x03, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x7b, 0x28, 0xff,
    0xd0, 0x48, 0x89, 0x43, 0x48, 0x48, 0xc7, 0x43, 0x30, 0x04, 0x00, 0x00, 0x00, 0x31, 0xc0, 0x5b,
    0xc3, 0x48, 0xc7, 0x43, 0x30, 0x01, 0x00, 0x00, 0x00, 0xeb, 0x08, 0x48, 0xc7, 0x43, 0x30, 0x02,
    0x00, 0x00, 0x00, 0xff, 0x53, 0x10, 0x48, 0x89, 0x43, 0x38, 0x31, 0xc0, 0x5b, 0xc3,
];

/// The syscall a thread was in when it was stopped (`orig_rax`), if it was blocked in one that
/// the kernel will restart or report as interrupted; None when it was running user code.
pub fn interrupted_syscall(saved: &Regs) -> Option<u64> {
    let rax = saved.rax as i64;
    let restarting = matches!(-rax, 4 | 512 | 513 | 514 | 516);
    ((saved.orig_rax as i64) >= 0 && restarting).then_some(saved.orig_rax)
}
