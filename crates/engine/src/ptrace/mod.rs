//! One traced thread: seize, interrupt, blocking waits with deadlines, continue, detach.
//!
//! Only the thread we are given is ever traced; the other threads of the target keep running.
//! Waiting is a blocking `waitpid(tid, __WALL)`: no polling, no yield loops. A deadline is enforced
//! by a per-thread POSIX timer (`timer`) that interrupts the wait with a signal (installed
//! without `SA_RESTART`), so every wait is bounded without burning CPU.
//!
//! Stops are classified strictly (docs/protocol.md section 11, items 16 and 17):
//! * an interrupt-stop is `PTRACE_EVENT_STOP` with `SIGTRAP`;
//! * a group-stop (job control) is `PTRACE_EVENT_STOP` with a stop signal. Waiting for an
//!   interrupt-stop, it ends the wait at once with [`Error::GroupStopped`] (the thread is in a
//!   ptrace-stop and nothing was changed: release it with [`Tracee::detach_stopped`]). While the
//!   thread runs injected code it is honoured with `PTRACE_LISTEN`, so `kill -STOP` keeps working
//!   on the traced thread, for at most the stop limit ([`Tracee::set_stop_limit`]);
//! * our breakpoint is a `SIGTRAP` signal-delivery-stop at exactly the expected address;
//! * every other signal is re-delivered with `PTRACE_CONT(sig)`, so nothing is lost.
//!
//! `PTRACE_O_EXITKILL` is never used: if we die, the kernel detaches and the target lives on.
//!
//! * this module: [`Tracee`], its stops and waits;
//! * [`regs`]: saving and restoring registers, FP/vector state and the signal mask;
//! * [`process`]: the process-level calls around it (fork, pidfd, signals, CPU placement,
//!   resource usage);
//! * `timer`: the wait deadline;
//! * [`sys`]: the few other system interfaces that need `unsafe`.

pub mod process;
pub mod regs;
pub mod sys;
mod timer;

pub use process::*;
pub use regs::FpState;

use crate::arch::{self, Regs};
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::sys::ptrace as nptrace;
use nix::unistd::Pid;
use std::marker::PhantomData;
use std::time::{Duration, Instant};
use timer::WaitTimer;

/// What a wait is looking for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// The interrupt-stop that follows `PTRACE_INTERRUPT`.
    Interrupt,
    /// A `SIGTRAP` with the program counter at this address.
    Trap(u64),
    /// A syscall-stop (entry or exit) of a syscall executed at this program counter.
    Syscall(u64),
}

/// Counters of the ptrace stops we observed on this thread (for benchmarks and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopCounts {
    /// Interrupt-stops (one per injection sequence).
    pub interrupts: u64,
    /// Breakpoint stops of our own stub (one per remote syscall or call).
    pub traps: u64,
    /// Signals that arrived while traced and were re-delivered.
    pub forwarded_signals: u64,
    /// Group-stops honoured with `PTRACE_LISTEN`.
    pub group_stops: u64,
}

/// A single thread seized with `PTRACE_SEIZE`. Must be used from the thread that created it
/// (ptrace ties a tracee to the tracing thread), hence not `Send`.
#[derive(Debug)]
pub struct Tracee {
    pid: i32,
    tid: i32,
    timer: WaitTimer,
    counts: StopCounts,
    attached: bool,
    /// How long a group-stop may last while we wait for a trap or syscall-stop (None: no bound).
    stop_limit: Option<Duration>,
    _not_send: PhantomData<*const ()>,
}

impl Tracee {
    /// `PTRACE_SEIZE` thread `tid` of process `pid` without stopping it. The only option is
    /// `PTRACE_O_TRACESYSGOOD` (never `EXITKILL`).
    pub fn seize(pid: i32, tid: i32) -> Result<Self> {
        arch::ensure_supported()?;
        let timer = WaitTimer::new(tid)?;
        // TRACESYSGOOD marks syscall-stops (SIGTRAP|0x80) so they cannot be confused with traps.
        nptrace::seize(Pid::from_raw(tid), nptrace::Options::PTRACE_O_TRACESYSGOOD)
            .map_err(|e| ptrace_error(pid, tid, "PTRACE_SEIZE", e))?;
        Ok(Tracee {
            pid,
            tid,
            timer,
            counts: StopCounts::default(),
            attached: true,
            stop_limit: None,
            _not_send: PhantomData,
        })
    }

    /// Process id of the traced thread.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Thread id of the traced thread.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Stops observed so far.
    pub fn counts(&self) -> StopCounts {
        self.counts
    }

    /// Bound how long a group-stop (SIGSTOP, Ctrl-Z, a debugger) may hold a wait for a trap or a
    /// syscall-stop: past it the wait ends with [`Error::GroupStopped`] (`running_injected`), the
    /// thread still group-stopped and still running our code. None: wait through group-stops.
    pub fn set_stop_limit(&mut self, limit: Option<Duration>) {
        self.stop_limit = limit;
    }

    /// Stop the thread: `PTRACE_INTERRUPT`, then wait (bounded) for the interrupt-stop. A thread
    /// that is (or goes) group-stopped instead gives [`Error::GroupStopped`] at once.
    pub fn interrupt(&mut self, timeout: Duration) -> Result<()> {
        nptrace::interrupt(Pid::from_raw(self.tid))
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_INTERRUPT", e))?;
        self.wait(
            Want::Interrupt,
            Some(Instant::now() + timeout),
            "stop (interrupt-stop)",
        )?;
        self.counts.interrupts += 1;
        Ok(())
    }

    /// Resume the stopped thread and wait until it traps with the program counter at `pc`.
    /// Returns the registers at the trap. `deadline` None waits as long as the thread lives.
    pub fn run_until_trap(
        &mut self,
        pc: u64,
        deadline: Option<Instant>,
        what: &str,
    ) -> Result<Regs> {
        self.cont(0)?;
        let regs = self
            .wait(Want::Trap(pc), deadline, what)?
            .expect("trap wait returns registers");
        self.counts.traps += 1;
        Ok(regs)
    }

    /// Run the `syscall` instruction the thread is stopped in front of (registers already set)
    /// and return the registers at its syscall-exit-stop. No breakpoint and no signal is
    /// involved, so the thread's signal state is untouched.
    pub fn run_syscall(&mut self, at: u64, deadline: Option<Instant>) -> Result<Regs> {
        self.resume(libc::PTRACE_SYSCALL, 0)?;
        self.finish_syscall(at, deadline)
    }

    /// Wait for the syscall-exit-stop of the injected syscall at `at` (resuming through its
    /// syscall-entry-stop). Also used to finish a syscall whose first wait timed out.
    pub fn finish_syscall(&mut self, at: u64, deadline: Option<Instant>) -> Result<Regs> {
        let after = at + arch::SYSCALL_LEN;
        loop {
            let regs = self
                .wait(
                    Want::Syscall(after),
                    deadline,
                    "finish an injected system call",
                )?
                .expect("syscall wait returns registers");
            if arch::is_syscall_entry(&regs) {
                self.resume(libc::PTRACE_SYSCALL, 0)?;
                continue;
            }
            self.counts.traps += 1;
            return Ok(regs);
        }
    }

    /// Wait again for the trap after [`Tracee::run_until_trap`] timed out (the thread is still
    /// running the injected code).
    pub fn wait_trap(&mut self, pc: u64, deadline: Option<Instant>, what: &str) -> Result<Regs> {
        let regs = self
            .wait(Want::Trap(pc), deadline, what)?
            .expect("trap wait returns registers");
        self.counts.traps += 1;
        Ok(regs)
    }

    /// `PTRACE_CONT` with signal `sig` (0 for none). Raw numbers so real-time signals work too.
    pub fn cont(&mut self, sig: i32) -> Result<()> {
        self.resume(libc::PTRACE_CONT, sig)
    }

    fn resume(&mut self, request: libc::c_uint, sig: i32) -> Result<()> {
        // SAFETY: PTRACE_CONT/PTRACE_SYSCALL take no pointers; data is a signal number.
        let r = unsafe { libc::ptrace(request, self.tid, 0usize, sig as usize) };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_CONT",
                Errno::last(),
            ));
        }
        Ok(())
    }

    /// Stop tracing the thread. If it is running it is interrupted first (PTRACE_DETACH needs a
    /// stopped tracee); it resumes exactly where it was, with no signal.
    pub fn detach(mut self, timeout: Duration) -> Result<()> {
        self.detach_inner(timeout)
    }

    /// Detach a thread that is currently stopped (after an interrupt-stop or a trap).
    pub fn detach_stopped(mut self) -> Result<()> {
        self.attached = false;
        nptrace::detach(Pid::from_raw(self.tid), None)
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_DETACH", e))
    }

    fn detach_inner(&mut self, timeout: Duration) -> Result<()> {
        if !self.attached {
            return Ok(());
        }
        match self.interrupt(timeout) {
            // Both leave the thread in a ptrace-stop, from which it can be detached.
            Ok(()) | Err(Error::GroupStopped { .. }) => {}
            Err(e) => return Err(e),
        }
        self.attached = false;
        nptrace::detach(Pid::from_raw(self.tid), None)
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_DETACH", e))
    }

    /// The classifying wait loop. Returns registers for `Want::Trap`.
    fn wait(&mut self, want: Want, deadline: Option<Instant>, what: &str) -> Result<Option<Regs>> {
        // Since when the thread is group-stopped (job control) in this wait, if it is.
        let mut stopped_since: Option<Instant> = None;
        loop {
            let stop_deadline = stopped_since.zip(self.stop_limit).map(|(s, l)| s + l);
            let bound = match (deadline, stop_deadline) {
                (Some(d), Some(s)) => Some(d.min(s)),
                (d, s) => d.or(s),
            };
            let status = match self.wait_raw(bound, what) {
                Err(Error::Timeout { .. })
                    if stop_deadline.is_some_and(|s| Instant::now() >= s) =>
                {
                    let limit = self.stop_limit.unwrap_or_default();
                    return Err(self.group_stopped(true, limit));
                }
                r => r?,
            };
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                self.attached = false;
                return Err(Error::TargetDied {
                    pid: self.pid,
                    tid: self.tid,
                    during: format!("waiting to {what}"),
                });
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xff;
            if event == libc::PTRACE_EVENT_STOP {
                if sig == libc::SIGTRAP {
                    if want == Want::Interrupt {
                        return Ok(None);
                    }
                    // A leftover event-stop (e.g. after SIGCONT ended a group-stop): just resume.
                    stopped_since = None;
                    self.cont(0)?;
                } else if want == Want::Interrupt {
                    // Job control stopped the thread before our interrupt-stop: it cannot run
                    // anything of ours until it is continued, and nothing was changed yet.
                    self.counts.group_stops += 1;
                    return Err(self.group_stopped(false, Duration::ZERO));
                } else {
                    // Group-stop: honour job control, resume tracking when SIGCONT arrives.
                    self.counts.group_stops += 1;
                    stopped_since.get_or_insert_with(Instant::now);
                    self.listen()?;
                }
                continue;
            }
            if sig == libc::SIGTRAP | 0x80 {
                // A syscall-stop: only ever caused by PTRACE_SYSCALL, which we use solely for
                // our own injected syscall.
                if let Want::Syscall(pc) = want {
                    let regs = self.getregs()?;
                    if arch::pc(&regs) == pc {
                        return Ok(Some(regs));
                    }
                }
                return Err(Error::UnexpectedStop {
                    pid: self.pid,
                    tid: self.tid,
                    what: "a syscall-stop outside an injected system call".into(),
                });
            }
            if sig == libc::SIGTRAP {
                if let Want::Trap(pc) = want {
                    let regs = self.getregs()?;
                    if arch::pc(&regs) == pc {
                        return Ok(Some(regs));
                    }
                }
            }
            // Not ours: deliver it as if we were not here.
            self.counts.forwarded_signals += 1;
            self.cont(sig)?;
        }
    }

    fn listen(&mut self) -> Result<()> {
        // SAFETY: PTRACE_LISTEN takes no pointers.
        let r = unsafe { libc::ptrace(libc::PTRACE_LISTEN, self.tid, 0usize, 0usize) };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_LISTEN",
                Errno::last(),
            ));
        }
        Ok(())
    }

    /// Blocking `waitpid(tid, __WALL)`, interrupted by the timer at the deadline.
    fn wait_raw(&mut self, deadline: Option<Instant>, what: &str) -> Result<i32> {
        let started = Instant::now();
        loop {
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Err(self.timeout(what, started));
                }
                self.timer.arm(d - now)?;
            }
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer for the duration of the call.
            let r = unsafe { libc::waitpid(self.tid, &mut status, libc::__WALL) };
            let err = Errno::last();
            if deadline.is_some() {
                self.timer.disarm();
            }
            if r == self.tid {
                return Ok(status);
            }
            match err {
                Errno::EINTR => continue,
                Errno::ECHILD => {
                    self.attached = false;
                    return Err(Error::TargetDied {
                        pid: self.pid,
                        tid: self.tid,
                        during: format!("waiting to {what}"),
                    });
                }
                e => {
                    return Err(Error::Sys {
                        op: "waitpid",
                        tid: self.tid,
                        errno: e,
                    })
                }
            }
        }
    }

    fn group_stopped(&self, running_injected: bool, waited: Duration) -> Error {
        Error::GroupStopped {
            pid: self.pid,
            tid: self.tid,
            running_injected,
            after_ms: waited.as_millis() as u64,
        }
    }

    fn timeout(&self, what: &str, started: Instant) -> Error {
        Error::Timeout {
            pid: self.pid,
            tid: self.tid,
            what: what.to_string(),
            after_ms: started.elapsed().as_millis() as u64,
        }
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        // Best effort: never leave a thread traced by us. Running threads are interrupted first.
        if self.attached {
            let _ = self.detach_inner(Duration::from_secs(1));
        }
    }
}

/// Map a failed ptrace request to an error that says what to do.
pub fn ptrace_error(pid: i32, tid: i32, op: &'static str, e: Errno) -> Error {
    match e {
        Errno::EPERM => Error::PtracePermission {
            pid,
            what: format!("thread {tid} ({op})"),
        },
        Errno::ESRCH if thread_dead(pid, tid) => Error::TargetDied {
            pid,
            tid,
            during: op.to_string(),
        },
        e => Error::Sys { op, tid, errno: e },
    }
}

/// After ESRCH from a request on a thread we had stopped: is the thread gone or dying?
///
/// A traced thread killed by SIGKILL stays a zombie (state Z) until its tracer reaps it, so its
/// /proc directory still exists; it becomes a zombie within microseconds of the kill. Checked for
/// at most ~100 ms, so a genuine ESRCH on a live thread is still reported as such.
fn thread_dead(pid: i32, tid: i32) -> bool {
    for _ in 0..50 {
        match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) {
            Err(_) => return true,
            Ok(s) => {
                let state = s
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next());
                if matches!(state, Some("Z") | Some("X") | Some("x")) {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}
