//! Remote syscalls and remote calls on one stopped thread, one interrupt-stop per sequence.
//!
//! An [`Injection`] stops the thread once, saves its general-purpose and FP/vector registers,
//! patches the stub of [`crate::arch::STUB`] over the entry point (AT_ENTRY, never run again),
//! and then runs any number of syscalls and calls, each ending in the stub's `int3`. Finishing
//! (or dropping) the injection unmaps whatever it mapped, restores the original code bytes and
//! every register, and resumes the thread exactly where it was.
//!
//! Fixes over ROCm's engine (protocol section 11): `orig_rax = -1` in injected frames, FP state
//! saved and restored, mmap results checked for -errno, `int` results read as 32 bits, mappings
//! unmapped on every failure path, one interrupt-stop for the whole sequence.

use crate::arch::{self, Regs};
use crate::error::{Error, Result};
use crate::faults::{self, Step};
use crate::memory::{self, CodeWriter};
use crate::ptrace::{FpState, Tracee};
use nix::errno::Errno;
use std::time::{Duration, Instant};

/// Bounds for the waits of an injection.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Timeouts {
    /// How long to wait for the thread to stop after PTRACE_INTERRUPT.
    pub stop: Duration,
    /// How long a remote syscall may take (mmap/munmap are immediate).
    pub syscall: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            stop: Duration::from_secs(5),
            syscall: Duration::from_secs(5),
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
    timeouts: Timeouts,
    state: State,
}

impl<'t> Injection<'t> {
    /// Stop the thread (one interrupt-stop), save its registers and patch the stub at `site`.
    pub fn begin(tracee: &'t mut Tracee, site: u64, timeouts: Timeouts) -> Result<Self> {
        tracee.interrupt(timeouts.stop)?;
        faults::point(Step::Interrupt);
        let (pid, tid) = (tracee.pid(), tracee.tid());
        let saved = tracee.getregs()?;
        let saved_fp = tracee.get_fpstate()?;
        let saved_sigmask = tracee.get_sigmask()?;
        let trap_handled = sigtrap_handled(pid)?;
        let code = CodeWriter::new(pid, tid);
        let original = code.read(site, arch::STUB.len())?;
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
            timeouts,
            state: State::Stopped,
        };
        if let Err(e) = inj.code.write(site, &arch::STUB) {
            // Nothing changed yet except possibly part of the stub: put everything back.
            let _ = inj.restore();
            return Err(e);
        }
        Ok(inj)
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
        let frame = arch::syscall_frame(&self.saved, self.site, nr, args);
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
        let addr =
            self.checked_syscall("mmap", arch::SYS_MMAP, [0, len, prot, flags, u64::MAX, 0])?;
        self.mappings.push((addr, len));
        faults::point(Step::Map);
        Ok(addr)
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
        self.checked_syscall("munmap", arch::SYS_MUNMAP, [addr, len, 0, 0, 0, 0])
            .map(drop)
    }

    /// Write `data` at `addr` in the target (normally into a mapping made by [`Injection::mmap`]).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        memory::write(self.tracee.pid(), self.tracee.tid(), addr, data)?;
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
        let frame = arch::call_frame(&self.saved, self.site, func, args);
        self.tracee.setregs(&frame).map_err(|e| self.note(e))?;
        let trap = self.site + arch::CALL_TRAP;
        let deadline = timeout.map(|t| Instant::now() + t);
        self.tracee
            .run_until_trap(trap, deadline, "return from the injected call")
            .map_err(|e| self.note_running(e, Pending::Call(trap)))
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

    /// Place `data` in a fresh mapping and return its address (helper for buffers of a call).
    pub fn push_buffer(&mut self, data: &[u8]) -> Result<u64> {
        let addr = self.mmap(data.len().max(1) as u64)?;
        self.write(addr, data)?;
        Ok(addr)
    }

    /// If a call timed out, keep waiting (without deadline) until it returns, so the thread can
    /// be restored. Used by the agent after it has reported the timeout.
    pub fn wait_for_pending_call(&mut self) -> Result<()> {
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
        let scratch = arch::stack_scratch(&self.saved, arch::KERNEL_SIGACTION_SIZE as u64);
        let sig = libc::SIGTRAP as u64;
        self.checked_syscall(
            "rt_sigaction",
            arch::SYS_RT_SIGACTION,
            [sig, 0, scratch, 8, 0, 0],
        )?;
        let bytes = self.read(scratch, arch::KERNEL_SIGACTION_SIZE)?;
        self.saved_trap_action = Some(bytes);
        Ok(())
    }

    /// Put back the SIGTRAP disposition saved by `save_trap_action` (the syscall completes at a
    /// syscall-stop, so no breakpoint fires afterwards to undo it).
    fn restore_trap_action(&mut self) -> Result<()> {
        let Some(bytes) = self.saved_trap_action.take() else {
            return Ok(());
        };
        let scratch = arch::stack_scratch(&self.saved, arch::KERNEL_SIGACTION_SIZE as u64);
        memory::write(self.tracee.pid(), self.tracee.tid(), scratch, &bytes)?;
        let sig = libc::SIGTRAP as u64;
        self.checked_syscall(
            "rt_sigaction",
            arch::SYS_RT_SIGACTION,
            [sig, scratch, 0, 8, 0, 0],
        )
        .map(drop)
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

    /// Like [`Injection::finish`] but leaves the thread stopped (for a PTRACE_DETACH that follows).
    pub fn finish_stopped(mut self) -> Result<()> {
        self.restore_inner(false)
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

    /// Like `note`, for errors while the thread runs injected code: a timeout leaves it running.
    fn note_running(&mut self, e: Error, pending: Pending) -> Error {
        if matches!(e, Error::Timeout { .. }) {
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
        if let Err(e) = self.restore_trap_action() {
            first_err.get_or_insert(e);
        }
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
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|_| Error::ProcessGone { pid })?;
    let mut handled = false;
    for line in text.lines() {
        if let Some(v) = line
            .strip_prefix("SigCgt:")
            .or_else(|| line.strip_prefix("SigIgn:"))
        {
            let mask = u64::from_str_radix(v.trim(), 16).unwrap_or(0);
            handled |= mask & SIGTRAP_BIT != 0;
        }
    }
    Ok(handled)
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
