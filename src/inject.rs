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
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// How long to wait for the thread to stop after PTRACE_INTERRUPT.
    pub stop: Duration,
    /// How long a remote syscall may take (mmap/munmap are immediate).
    pub syscall: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { stop: Duration::from_secs(5), syscall: Duration::from_secs(5) }
    }
}

/// State of the thread relative to our injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Stopped by us, registers may be modified; restore is possible.
    Stopped,
    /// Running injected code that did not return in time; restore must wait for the trap.
    InCall(u64),
    /// Restored and resumed (or the thread died): nothing left to do.
    Done,
}

/// One stop of one thread during which we run syscalls and calls. See the module docs.
pub struct Injection<'t> {
    tracee: &'t mut Tracee,
    site: u64,
    saved: Regs,
    saved_fp: FpState,
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
        let code = CodeWriter::new(pid, tid);
        let original = code.read(site, arch::STUB.len())?;
        let mut inj =
            Injection { tracee, site, saved, saved_fp, original, code, mappings: Vec::new(), timeouts, state: State::Stopped };
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
        let regs = self
            .tracee
            .run_until_trap(self.site + arch::SYSCALL_TRAP, deadline, "finish an injected system call")
            .map_err(|e| self.note_running(e, self.site + arch::SYSCALL_TRAP))?;
        Ok(arch::return_value(&regs))
    }

    /// Map `len` bytes of anonymous read-write memory in the target. The mapping is remembered
    /// and unmapped when the injection ends unless [`Injection::munmap`] is called first.
    pub fn mmap(&mut self, len: u64) -> Result<u64> {
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let raw = self.syscall_raw(arch::SYS_MMAP, [0, len, prot, flags, u64::MAX, 0])?;
        let mut regs = self.saved;
        regs.rax = raw;
        let addr = arch::syscall_result(&regs).map_err(|errno| Error::RemoteSyscall {
            pid: self.pid(),
            syscall: "mmap",
            errno: Errno::from_raw(errno),
        })?;
        self.mappings.push((addr, len));
        faults::point(Step::Map);
        Ok(addr)
    }

    /// Unmap a mapping made by [`Injection::mmap`].
    pub fn munmap(&mut self, addr: u64) -> Result<()> {
        let Some(i) = self.mappings.iter().position(|&(a, _)| a == addr) else {
            return Err(Error::usage(format!("internal: {addr:#x} was not mapped by this injection")));
        };
        let (_, len) = self.mappings.remove(i);
        self.unmap_raw(addr, len)?;
        faults::point(Step::Unmap);
        Ok(())
    }

    fn unmap_raw(&mut self, addr: u64, len: u64) -> Result<()> {
        let raw = self.syscall_raw(arch::SYS_MUNMAP, [addr, len, 0, 0, 0, 0])?;
        let mut regs = self.saved;
        regs.rax = raw;
        arch::syscall_result(&regs).map(|_| ()).map_err(|errno| Error::RemoteSyscall {
            pid: self.pid(),
            syscall: "munmap",
            errno: Errno::from_raw(errno),
        })
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
    pub fn call_regs(&mut self, func: u64, args: [u64; 6], timeout: Option<Duration>) -> Result<Regs> {
        self.ensure_stopped()?;
        let frame = arch::call_frame(&self.saved, self.site, func, args);
        self.tracee.setregs(&frame).map_err(|e| self.note(e))?;
        faults::point(Step::Call);
        let trap = self.site + arch::CALL_TRAP;
        let deadline = timeout.map(|t| Instant::now() + t);
        self.tracee
            .run_until_trap(trap, deadline, "return from the injected call")
            .map_err(|e| self.note_running(e, trap))
    }

    /// Call a function returning C `int` and return its value (low 32 bits of the return register).
    pub fn call_int(&mut self, func: u64, args: [u64; 6], timeout: Option<Duration>) -> Result<i32> {
        self.call_regs(func, args, timeout).map(|r| arch::int_result(&r))
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
        if let State::InCall(trap) = self.state {
            self.tracee.wait_trap(trap, None, "return from the injected call").map_err(|e| self.note(e))?;
            self.state = State::Stopped;
        }
        Ok(())
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
            State::InCall(_) => Err(Error::usage("internal: injected call still running")),
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
    fn note_running(&mut self, e: Error, trap: u64) -> Error {
        if matches!(e, Error::Timeout { .. }) {
            self.state = State::InCall(trap);
            return e;
        }
        self.note(e)
    }

    fn restore(&mut self) -> Result<()> {
        self.restore_inner(true)
    }

    fn restore_inner(&mut self, resume: bool) -> Result<()> {
        if matches!(self.state, State::InCall(_)) {
            // Cannot restore under a running call; the caller decides whether to wait.
            return Err(Error::usage("internal: restore while an injected call is running"));
        }
        if self.state == State::Done {
            return Ok(());
        }
        let mut first_err = None;
        for (addr, len) in std::mem::take(&mut self.mappings) {
            if let Err(e) = self.unmap_raw(addr, len) {
                let dead = matches!(e, Error::TargetDied { .. });
                first_err.get_or_insert(e);
                if dead {
                    self.state = State::Done;
                    return Err(first_err.expect("set above"));
                }
            }
        }
        let steps = [
            self.code.write(self.site, &self.original),
            self.tracee.setregs(&self.saved),
            self.tracee.set_fpstate(&self.saved_fp),
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

impl Drop for Injection<'_> {
    fn drop(&mut self) {
        // The target's safety comes first: a thread still running injected code would hit the
        // stub's int3 with nobody to catch it, so wait for it before restoring.
        if matches!(self.state, State::InCall(_)) && self.wait_for_pending_call().is_err() {
            return;
        }
        if self.state == State::Stopped {
            let _ = self.restore();
        }
    }
}
