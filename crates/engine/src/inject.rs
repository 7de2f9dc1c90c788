//! Remote syscalls and remote calls on one stopped thread, one interrupt-stop per sequence.
//!
//! An [`Injection`] stops the thread once, saves its general-purpose and FP/vector registers,
//! patches the stub of [`crate::arch::STUB`] over the entry point (AT_ENTRY, never run again),
//! and then runs any number of syscalls and calls, each ending in the stub's `int3`. Finishing
//! (or dropping) the injection unmaps whatever it mapped, restores the original code bytes,
//! stack bytes and every register, and resumes the thread exactly where it was.
//!
//! The stop is kept short: what does not need the thread stopped (reading its signal
//! dispositions, opening `/proc/PID/mem`, reading the code at the site, allocating the register
//! buffers) happens before the interrupt, and small buffers for a call go on the thread's own
//! stack below the red zone ([`Injection::place`]) instead of a remote `mmap`/`munmap`, which would
//! cost four more stops (docs/protocol.md section 11, item 11). Each step is timed ([`StepTime`]).
//!
//! Fixes over ROCm's engine (docs/protocol.md section 11): `orig_rax = -1` in injected frames,
//! FP state saved and restored, mmap results checked for -errno, `int` results read as 32 bits,
//! mappings unmapped on every failure path, one interrupt-stop for the whole sequence.

use crate::arch::{self, Regs};
use crate::error::{Error, Result};
use crate::faults::{self, Step};
use crate::memory::{self, CodeWriter};
use crate::ptrace::{FpState, Tracee};
use nix::errno::Errno;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Largest buffer [`Injection::place`] puts on the thread's stack; larger ones get a mapping.
pub const STACK_DATA_MAX: usize = 4096;
/// Stack that must be mapped below placed data, so the call still has room to run.
pub const STACK_MARGIN: u64 = 64 << 10;

/// A step of an injection sequence, as timed for `-vv` and the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// `PTRACE_SEIZE` of the thread (it keeps running).
    Seize,
    /// Reading what the stop needs while the thread still runs (signal dispositions, code bytes).
    Prepare,
    /// `PTRACE_INTERRUPT` until the interrupt-stop.
    Interrupt,
    /// Saving the general-purpose, FP/vector registers and the signal mask.
    SaveRegs,
    /// Writing the stub over the injection site.
    Patch,
    /// A remote `mmap`.
    Mmap,
    /// Reserving room on the thread's stack for small buffers (no remote `mmap` needed).
    Stack,
    /// Writing buffers into the target (stack or mapping).
    Write,
    /// Saving or restoring the SIGTRAP disposition (only for targets that handle SIGTRAP).
    Sigaction,
    /// The injected call, from resuming the thread to its trap (the target's own time).
    Call,
    /// A remote `munmap`.
    Munmap,
    /// Restoring the code, stack bytes, registers and signal mask.
    Restore,
    /// `PTRACE_DETACH`: the thread runs again, untraced.
    Detach,
}

impl Phase {
    /// Short name used in log events.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Seize => "seize",
            Phase::Prepare => "prepare",
            Phase::Interrupt => "interrupt-stop",
            Phase::SaveRegs => "save registers",
            Phase::Patch => "patch site",
            Phase::Mmap => "remote mmap",
            Phase::Stack => "reserve stack",
            Phase::Write => "write buffers",
            Phase::Sigaction => "sigaction",
            Phase::Call => "call",
            Phase::Munmap => "remote munmap",
            Phase::Restore => "restore",
            Phase::Detach => "detach",
        }
    }
}

/// How long one [`Phase`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTime {
    /// The step.
    pub phase: Phase,
    /// Its duration in nanoseconds.
    pub ns: u64,
}

/// Append `phase`, started at `start`, to `log`.
pub fn record(log: &mut Vec<StepTime>, phase: Phase, start: Instant) {
    log.push(StepTime {
        phase,
        ns: start.elapsed().as_nanos() as u64,
    });
}

/// Bounds for the waits of an injection.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Timeouts {
    /// How long to wait for the thread to stop after PTRACE_INTERRUPT.
    pub stop: Duration,
    /// How long a remote syscall may take (mmap/munmap are immediate).
    pub syscall: Duration,
    /// How long job control (SIGSTOP, Ctrl-Z) may hold the thread while it runs our code before
    /// the wait reports [`Error::GroupStopped`] (the thread is then waited for without bound).
    #[serde(default = "default_stopped")]
    pub stopped: Duration,
}

fn default_stopped() -> Duration {
    Duration::from_secs(10)
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            stop: Duration::from_secs(5),
            syscall: Duration::from_secs(5),
            stopped: default_stopped(),
        }
    }
}

/// State of the thread relative to our injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Stopped by us, registers may be modified; restore is possible.
    Stopped,
    /// Running injected code that did not finish in time; restore must wait for it.
    Pending(Pending),
    /// Restored and resumed (or the thread died): nothing left to do.
    Done,
}

/// What a thread that outlived its timeout is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// An injected call; it ends with a trap at this address.
    Call(u64),
    /// An injected syscall issued at this address; it ends at its syscall-exit-stop.
    Syscall(u64),
}

/// SIGTRAP's bit in a signal mask.
const SIGTRAP_BIT: u64 = 1 << (libc::SIGTRAP - 1);

/// One stop of one thread during which we run syscalls and calls. See the module docs.
pub struct Injection<'t> {
    tracee: &'t mut Tracee,
    site: u64,
    saved: Regs,
    saved_fp: FpState,
    saved_sigmask: u64,
    /// The target catches or ignores SIGTRAP: its disposition must survive our breakpoint.
    trap_handled: bool,
    /// The SIGTRAP disposition saved before the first call (kernel `struct sigaction` bytes).
    saved_trap_action: Option<Vec<u8>>,
    original: Vec<u8>,
    code: CodeWriter,
    mappings: Vec<(u64, u64)>,
    /// Stack pointer for injected frames: [`arch::stack_top`] minus the data placed on the stack.
    sp: u64,
    /// Data placed on the stack: its address and the bytes it replaced (put back at the end).
    stack_saved: Option<(u64, Vec<u8>)>,
    timeouts: Timeouts,
    state: State,
    timings: Vec<StepTime>,
}

impl<'t> Injection<'t> {
    /// Stop the thread (one interrupt-stop), save its registers and patch the stub at `site`.
    pub fn begin(tracee: &'t mut Tracee, site: u64, timeouts: Timeouts) -> Result<Self> {
        let (pid, tid) = (tracee.pid(), tracee.tid());
        let mut timings = Vec::with_capacity(12);
        // Everything that does not need the thread stopped comes first. SIGTRAP's disposition can
        // change at any time (other threads run during the stop too), so reading it now is as
        // good as reading it during the stop.
        let t = Instant::now();
        let trap_handled = sigtrap_handled(pid)?;
        let code = CodeWriter::new(pid, tid);
        // Nobody else can patch the site: the thread is ours since the seize.
        let early_original = code.read_direct(site, arch::STUB.len());
        let fp_buffer = FpState::buffer();
        record(&mut timings, Phase::Prepare, t);

        let t = Instant::now();
        tracee.interrupt(timeouts.stop)?;
        tracee.set_stop_limit(Some(timeouts.stopped));
        record(&mut timings, Phase::Interrupt, t);
        faults::point(Step::Interrupt);
        let t = Instant::now();
        let saved = tracee.getregs()?;
        let saved_fp = tracee.get_fpstate_into(fp_buffer)?;
        let saved_sigmask = tracee.get_sigmask()?;
        record(&mut timings, Phase::SaveRegs, t);
        let t = Instant::now();
        let original = match early_original {
            Some(bytes) => bytes,
            None => code.read(site, arch::STUB.len())?,
        };
        let mut inj = Injection {
            tracee,
            site,
            saved,
            saved_fp,
            saved_sigmask,
            trap_handled,
            saved_trap_action: None,
            original,
            code,
            mappings: Vec::new(),
            sp: arch::stack_top(&saved),
            stack_saved: None,
            timeouts,
            state: State::Stopped,
            timings,
        };
        if let Err(e) = inj.code.write(site, &arch::STUB) {
            // Nothing changed yet except possibly part of the stub: put everything back.
            let _ = inj.restore();
            return Err(e);
        }
        record(&mut inj.timings, Phase::Patch, t);
        Ok(inj)
    }

    /// The steps timed so far, in order (the sequence's [`Phase`]s and their durations).
    pub fn timings(&self) -> &[StepTime] {
        &self.timings
    }

    /// Move the step timings out (they stay available after [`Injection::finish`] this way).
    pub fn take_timings(&mut self) -> Vec<StepTime> {
        std::mem::take(&mut self.timings)
    }

    /// Process id of the target.
    pub fn pid(&self) -> i32 {
        self.tracee.pid()
    }

    /// The registers the thread had when it was stopped (restored at the end).
    pub fn saved_regs(&self) -> &Regs {
        &self.saved
    }

    /// Run syscall `nr` with `args` in the target. Returns the raw result (may be -errno).
    pub fn syscall_raw(&mut self, nr: u64, args: [u64; 6]) -> Result<u64> {
        self.ensure_stopped()?;
        let frame = arch::syscall_frame(&self.saved, self.sp, self.site, nr, args);
        self.tracee.setregs(&frame).map_err(|e| self.note(e))?;
        let deadline = Some(Instant::now() + self.timeouts.syscall);
        let at = self.site + arch::SYSCALL_ENTRY;
        let regs = self
            .tracee
            .run_syscall(at, deadline)
            .map_err(|e| self.note_running(e, Pending::Syscall(at)))?;
        Ok(arch::return_value(&regs))
    }

    /// Map `len` bytes of anonymous read-write memory in the target. The mapping is remembered
    /// and unmapped when the injection ends unless [`Injection::munmap`] is called first.
    pub fn mmap(&mut self, len: u64) -> Result<u64> {
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let t = Instant::now();
        let addr =
            self.checked_syscall("mmap", arch::SYS_MMAP, [0, len, prot, flags, u64::MAX, 0])?;
        record(&mut self.timings, Phase::Mmap, t);
        self.mappings.push((addr, len));
        faults::point(Step::Map);
        Ok(addr)
    }

    /// Keep a mapping made by [`Injection::mmap`] after the injection ends (it is no longer
    /// unmapped then): the code and data of a thread started by the injection.
    pub fn keep(&mut self, addr: u64) {
        self.mappings.retain(|&(a, _)| a != addr);
    }

    /// Change the protection of `len` bytes at `addr` (a mapping of this injection).
    pub fn mprotect(&mut self, addr: u64, len: u64, prot: i32) -> Result<()> {
        self.checked_syscall(
            "mprotect",
            arch::SYS_MPROTECT,
            [addr, len, prot as u64, 0, 0, 0],
        )
        .map(drop)
    }

    /// Unmap a mapping made by [`Injection::mmap`].
    pub fn munmap(&mut self, addr: u64) -> Result<()> {
        let Some(i) = self.mappings.iter().position(|&(a, _)| a == addr) else {
            return Err(Error::usage(format!(
                "internal: {addr:#x} was not mapped by this injection"
            )));
        };
        let (_, len) = self.mappings.remove(i);
        self.unmap_raw(addr, len)?;
        faults::point(Step::Unmap);
        Ok(())
    }

    fn unmap_raw(&mut self, addr: u64, len: u64) -> Result<()> {
        let t = Instant::now();
        let r = self
            .checked_syscall("munmap", arch::SYS_MUNMAP, [addr, len, 0, 0, 0, 0])
            .map(drop);
        record(&mut self.timings, Phase::Munmap, t);
        r
    }

    /// Write `data` at `addr` in the target (normally into a mapping made by [`Injection::mmap`]).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let t = Instant::now();
        memory::write(self.tracee.pid(), self.tracee.tid(), addr, data)?;
        record(&mut self.timings, Phase::Write, t);
        faults::point(Step::Write);
        Ok(())
    }

    /// Read `len` bytes at `addr` in the target.
    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>> {
        memory::read(self.tracee.pid(), self.tracee.tid(), addr, len)
    }

    /// Call `func(args...)` in the target and return the full register set at its return.
    /// `timeout` None waits as long as the thread lives.
    pub fn call_regs(
        &mut self,
        func: u64,
        args: [u64; 6],
        timeout: Option<Duration>,
    ) -> Result<Regs> {
        self.ensure_stopped()?;
        self.save_trap_action()?;
        let frame = arch::call_frame(&self.saved, self.sp, self.site, func, args);
        self.tracee.setregs(&frame).map_err(|e| self.note(e))?;
        let trap = self.site + arch::CALL_TRAP;
        let t = Instant::now();
        let deadline = timeout.map(|d| t + d);
        let r = self
            .tracee
            .run_until_trap(trap, deadline, "return from the injected call")
            .map_err(|e| self.note_running(e, Pending::Call(trap)));
        if r.is_ok() {
            record(&mut self.timings, Phase::Call, t);
        }
        r
    }

    /// Call a function returning C `int` and return its value (low 32 bits of the return register).
    pub fn call_int(
        &mut self,
        func: u64,
        args: [u64; 6],
        timeout: Option<Duration>,
    ) -> Result<i32> {
        self.call_regs(func, args, timeout)
            .map(|r| arch::int_result(&r))
    }

    /// Place `data` where a following call can read it and return its address.
    ///
    /// Small buffers (at most [`STACK_DATA_MAX`] bytes) go on the thread's own stack, below the
    /// red zone, when at least [`STACK_MARGIN`] more bytes of stack are mapped below them; the
    /// bytes they cover are saved and put back at the end, and later frames start below them.
    /// This saves the four stops of a remote `mmap` and `munmap`. Anything else gets a fresh
    /// mapping ([`Injection::push_buffer`]).
    pub fn place(&mut self, data: &[u8]) -> Result<u64> {
        self.ensure_stopped()?;
        if data.len() > STACK_DATA_MAX || self.stack_saved.is_some() {
            return self.push_buffer(data);
        }
        let addr = self.sp.wrapping_sub(data.len().max(1) as u64) & !15;
        let t = Instant::now();
        let Some(old) = memory::read_stack(self.pid(), addr, data.len(), STACK_MARGIN) else {
            return self.push_buffer(data);
        };
        self.sp = addr;
        self.stack_saved = Some((addr, old));
        record(&mut self.timings, Phase::Stack, t);
        // The same pause point as a mapping (tests pause every step of an attach).
        faults::point(Step::Map);
        self.write(addr, data)?;
        Ok(addr)
    }

    /// Place `data` in a fresh mapping and return its address (helper for buffers of a call).
    pub fn push_buffer(&mut self, data: &[u8]) -> Result<u64> {
        let addr = self.mmap(data.len().max(1) as u64)?;
        self.write(addr, data)?;
        Ok(addr)
    }

    /// If a call timed out, keep waiting (without deadline) until it returns, so the thread can
    /// be restored. Used by the agent after it has reported the timeout.
    pub fn wait_for_pending_call(&mut self) -> Result<()> {
        // However long job control holds it: the thread must come back to be restored.
        self.tracee.set_stop_limit(None);
        let r = match self.state {
            State::Pending(Pending::Call(trap)) => self
                .tracee
                .wait_trap(trap, None, "return from the injected call")
                .map(drop),
            State::Pending(Pending::Syscall(at)) => self.tracee.finish_syscall(at, None).map(drop),
            _ => return Ok(()),
        };
        r.map_err(|e| self.note(e))?;
        self.state = State::Stopped;
        Ok(())
    }

    /// Before the first call: if the target catches or ignores SIGTRAP, save that disposition.
    /// The kernel resets the disposition of a blocked SIGTRAP when our breakpoint fires; it is
    /// put back when the injection ends. (The listener blocks every signal, so this matters.)
    fn save_trap_action(&mut self) -> Result<()> {
        if !self.trap_handled || self.saved_trap_action.is_some() {
            return Ok(());
        }
        let scratch = arch::stack_scratch(self.sp, arch::KERNEL_SIGACTION_SIZE as u64);
        let sig = libc::SIGTRAP as u64;
        let t = Instant::now();
        self.checked_syscall(
            "rt_sigaction",
            arch::SYS_RT_SIGACTION,
            [sig, 0, scratch, 8, 0, 0],
        )?;
        let bytes = self.read(scratch, arch::KERNEL_SIGACTION_SIZE)?;
        self.saved_trap_action = Some(bytes);
        record(&mut self.timings, Phase::Sigaction, t);
        Ok(())
    }

    /// Put back the SIGTRAP disposition saved by `save_trap_action` (the syscall completes at a
    /// syscall-stop, so no breakpoint fires afterwards to undo it).
    fn restore_trap_action(&mut self) -> Result<()> {
        let Some(bytes) = self.saved_trap_action.take() else {
            return Ok(());
        };
        let scratch = arch::stack_scratch(self.sp, arch::KERNEL_SIGACTION_SIZE as u64);
        let t = Instant::now();
        memory::write(self.tracee.pid(), self.tracee.tid(), scratch, &bytes)?;
        let sig = libc::SIGTRAP as u64;
        let r = self
            .checked_syscall(
                "rt_sigaction",
                arch::SYS_RT_SIGACTION,
                [sig, scratch, 0, 8, 0, 0],
            )
            .map(drop);
        record(&mut self.timings, Phase::Sigaction, t);
        r
    }

    fn checked_syscall(&mut self, name: &'static str, nr: u64, args: [u64; 6]) -> Result<u64> {
        let raw = self.syscall_raw(nr, args)?;
        arch::syscall_result(raw).map_err(|errno| Error::RemoteSyscall {
            pid: self.pid(),
            syscall: name,
            errno: Errno::from_raw(errno),
        })
    }

    /// End the sequence: unmap leftovers, restore code and registers, resume the thread.
    pub fn finish(mut self) -> Result<()> {
        self.restore()
    }

    /// Like [`Injection::finish`] but leaves the thread stopped (for a PTRACE_DETACH that
    /// follows). Returns the timings of the whole sequence.
    pub fn finish_stopped(mut self) -> Result<Vec<StepTime>> {
        self.restore_inner(false)?;
        Ok(self.take_timings())
    }

    /// True while the thread runs injected code that outlived a wait (see
    /// [`Injection::wait_for_pending_call`]).
    pub fn is_pending(&self) -> bool {
        matches!(self.state, State::Pending(_))
    }

    fn ensure_stopped(&self) -> Result<()> {
        match self.state {
            State::Stopped => Ok(()),
            State::Pending(_) => Err(Error::usage("internal: injected code still running")),
            State::Done => Err(Error::TargetDied {
                pid: self.tracee.pid(),
                tid: self.tracee.tid(),
                during: "an injection sequence".into(),
            }),
        }
    }

    /// Record the effect of an error on our state.
    fn note(&mut self, e: Error) -> Error {
        if matches!(e, Error::TargetDied { .. }) {
            self.state = State::Done;
        }
        e
    }

    /// Like `note`, for errors while the thread runs injected code: a timeout or a group-stop
    /// that outlasted the stop limit leaves it running our code.
    fn note_running(&mut self, e: Error, pending: Pending) -> Error {
        if matches!(e, Error::Timeout { .. } | Error::GroupStopped { .. }) {
            self.state = State::Pending(pending);
            return e;
        }
        self.note(e)
    }

    fn restore(&mut self) -> Result<()> {
        self.restore_inner(true)
    }

    fn restore_inner(&mut self, resume: bool) -> Result<()> {
        if matches!(self.state, State::Pending(_)) {
            // Cannot restore under running code; the caller decides whether to wait.
            return Err(Error::usage(
                "internal: restore while injected code is running",
            ));
        }
        if self.state == State::Done {
            return Ok(());
        }
        let mut first_err = None;
        for (addr, len) in std::mem::take(&mut self.mappings) {
            let unmapped = self.unmap_raw(addr, len);
            if unmapped.is_ok() {
                // The agent's buffers are unmapped here, not by `munmap`: same pause point.
                faults::point(Step::Unmap);
            }
            if let Err(e) = unmapped {
                let dead = matches!(e, Error::TargetDied { .. });
                first_err.get_or_insert(e);
                if dead {
                    self.state = State::Done;
                    return Err(first_err.expect("set above"));
                }
            }
        }
        if let Some((addr, old)) = self.stack_saved.take() {
            // The stack data's pause point, where a mapping would have been unmapped.
            faults::point(Step::Unmap);
            if let Err(e) = memory::write(self.tracee.pid(), self.tracee.tid(), addr, &old) {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = self.restore_trap_action() {
            first_err.get_or_insert(e);
        }
        let t = Instant::now();
        let steps = [
            self.code.write(self.site, &self.original),
            self.tracee.setregs(&arch::resume_frame(&self.saved)),
            self.tracee.set_fpstate(&self.saved_fp),
            self.tracee.set_sigmask(self.saved_sigmask),
        ];
        for r in steps {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        record(&mut self.timings, Phase::Restore, t);
        self.state = State::Done;
        if resume {
            if let Err(e) = self.tracee.cont(0) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// True if process `pid` catches or ignores SIGTRAP (SigCgt/SigIgn of /proc/PID/status).
fn sigtrap_handled(pid: i32) -> Result<bool> {
    let handled = crate::procfs::handled_signals(pid).map_err(|e| match e {
        Error::ProcRead { .. } | Error::ProcParse { .. } => Error::ProcessGone { pid },
        e => e,
    })?;
    Ok(handled & SIGTRAP_BIT != 0)
}

impl Drop for Injection<'_> {
    fn drop(&mut self) {
        // The target's safety comes first: a thread still running injected code would hit the
        // stub's int3 with nobody to catch it, so wait for it before restoring.
        if matches!(self.state, State::Pending(_)) && self.wait_for_pending_call().is_err() {
            return;
        }
        if self.state == State::Stopped {
            let _ = self.restore();
        }
    }
}
