//! One traced thread: seize, interrupt, blocking waits with deadlines, continue, detach.
//!
//! Only the thread we are given is ever traced; the other threads of the target keep running.
//! Waiting is a blocking `waitpid(tid, __WALL)`: no polling, no yield loops. A deadline is enforced
//! by a per-thread POSIX timer that interrupts the wait with a signal (installed without
//! `SA_RESTART`), so every wait is bounded without burning CPU.
//!
//! Stops are classified strictly (protocol section 11, items 16 and 17):
//! * an interrupt-stop is `PTRACE_EVENT_STOP` with `SIGTRAP`;
//! * a group-stop (job control) is `PTRACE_EVENT_STOP` with a stop signal; it is honoured with
//!   `PTRACE_LISTEN`, so `kill -STOP` keeps working on the traced thread;
//! * our breakpoint is a `SIGTRAP` signal-delivery-stop at exactly the expected address;
//! * every other signal is re-delivered with `PTRACE_CONT(sig)`, so nothing is lost.
//!
//! `PTRACE_O_EXITKILL` is never used: if we die, the kernel detaches and the target lives on.

pub mod sys;

use crate::arch::{self, Regs};
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::sys::ptrace as nptrace;
use nix::unistd::Pid;
use std::marker::PhantomData;
use std::sync::Once;
use std::time::{Duration, Instant};

/// Saved floating-point / vector state (XSAVE layout, or FXSAVE when XSAVE is unavailable).
#[derive(Clone)]
pub struct FpState {
    note: libc::c_int,
    data: Vec<u8>,
}

impl std::fmt::Debug for FpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FpState {{ note: {:#x}, {} bytes }}",
            self.note,
            self.data.len()
        )
    }
}

impl FpState {
    /// The raw bytes of the saved state.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

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

    /// Stop the thread: `PTRACE_INTERRUPT`, then wait (bounded) for the interrupt-stop.
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

    /// The blocked-signal mask of the stopped thread (PTRACE_GETSIGMASK).
    pub fn get_sigmask(&self) -> Result<u64> {
        let mut mask: u64 = 0;
        // SAFETY: addr is the size of the kernel sigset (8 bytes); data points to a u64 we own.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_GETSIGMASK,
                self.tid,
                std::mem::size_of::<u64>(),
                &mut mask as *mut u64,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_GETSIGMASK",
                Errno::last(),
            ));
        }
        Ok(mask)
    }

    /// Set the blocked-signal mask of the stopped thread (PTRACE_SETSIGMASK).
    pub fn set_sigmask(&self, mask: u64) -> Result<()> {
        let mut m = mask;
        // SAFETY: addr is the size of the kernel sigset (8 bytes); data points to a u64 we own.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETSIGMASK,
                self.tid,
                std::mem::size_of::<u64>(),
                &mut m as *mut u64,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_SETSIGMASK",
                Errno::last(),
            ));
        }
        Ok(())
    }

    /// General-purpose registers of the stopped thread.
    pub fn getregs(&self) -> Result<Regs> {
        nptrace::getregs(Pid::from_raw(self.tid))
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_GETREGS", e))
    }

    /// Set the general-purpose registers of the stopped thread.
    pub fn setregs(&self, regs: &Regs) -> Result<()> {
        nptrace::setregs(Pid::from_raw(self.tid), *regs)
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_SETREGS", e))
    }

    /// Save the FP/SSE/AVX state (PTRACE_GETREGSET NT_X86_XSTATE, falling back to NT_PRFPREG).
    pub fn get_fpstate(&self) -> Result<FpState> {
        let mut last = Errno::EINVAL;
        for (note, size) in [
            (arch::NT_X86_XSTATE, arch::XSTATE_MAX),
            (arch::NT_PRFPREG, 512),
        ] {
            let mut data = vec![0u8; size];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            // SAFETY: iov points to `data`, which is valid for iov_len bytes for the whole call;
            // the kernel writes at most iov_len bytes and updates iov_len.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_GETREGSET,
                    self.tid,
                    note as usize,
                    &mut iov as *mut libc::iovec,
                )
            };
            if r == 0 {
                data.truncate(iov.iov_len);
                return Ok(FpState { note, data });
            }
            last = Errno::last();
            if last == Errno::ESRCH {
                break;
            }
        }
        Err(ptrace_error(
            self.pid,
            self.tid,
            "PTRACE_GETREGSET (FP state)",
            last,
        ))
    }

    /// Restore a state saved by [`Tracee::get_fpstate`].
    pub fn set_fpstate(&self, fp: &FpState) -> Result<()> {
        let mut data = fp.data.clone();
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: iov points to `data`, valid for iov_len bytes; the kernel only reads from it.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETREGSET,
                self.tid,
                fp.note as usize,
                &mut iov as *mut libc::iovec,
            )
        };
        if r == -1 {
            return Err(ptrace_error(
                self.pid,
                self.tid,
                "PTRACE_SETREGSET (FP state)",
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
        self.interrupt(timeout)?;
        self.attached = false;
        nptrace::detach(Pid::from_raw(self.tid), None)
            .map_err(|e| ptrace_error(self.pid, self.tid, "PTRACE_DETACH", e))
    }

    /// The classifying wait loop. Returns registers for `Want::Trap`.
    fn wait(&mut self, want: Want, deadline: Option<Instant>, what: &str) -> Result<Option<Regs>> {
        loop {
            let status = self.wait_raw(deadline, what)?;
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
                    self.cont(0)?;
                } else {
                    // Group-stop: honour job control, resume tracking when SIGCONT arrives.
                    self.counts.group_stops += 1;
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

/// Send signal `sig` to thread `tid` of process `pid` (tgkill(2)).
pub fn tgkill(pid: i32, tid: i32, sig: i32) -> Result<()> {
    // SAFETY: tgkill takes three integers and no pointers.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, sig) };
    if r == -1 {
        return Err(Error::Sys {
            op: "tgkill",
            tid,
            errno: Errno::last(),
        });
    }
    Ok(())
}

/// Run the calling thread on the CPU where thread `tid` of `pid` last ran, when that is allowed.
///
/// Every stop and resume of the tracee wakes the other side; on the same CPU that is a local
/// context switch, across CPUs an inter-processor wakeup, which on an idle virtual machine costs
/// tens of microseconds per transition. Best effort: any failure leaves the affinity unchanged.
pub fn follow_cpu_of(pid: i32, tid: i32) {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    let Ok(cpu) = crate::procfs::task_cpu(pid, tid) else {
        return;
    };
    let me = Pid::from_raw(0);
    let allowed = sched_getaffinity(me)
        .map(|set| set.is_set(cpu).unwrap_or(false))
        .unwrap_or(false);
    if !allowed {
        return;
    }
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(me, &set);
    }
}

/// Fork the injection agent (see [`crate::agent`]).
///
/// The child must only run the injection sequence and then call [`exit_now`].
pub(crate) fn fork_agent() -> Result<nix::unistd::ForkResult> {
    // SAFETY: the child only runs the injection sequence (plain syscalls and heap allocation,
    // which glibc makes fork-safe) and then `_exit`s; it never returns into the caller's code,
    // takes no lock another thread could hold (no logging, no stdio) and never unwinds.
    unsafe { nix::unistd::fork() }
        .map_err(|e| Error::io("forking the injection agent", std::io::Error::from(e)))
}

/// End a forked child at once, without running the parent's atexit handlers or destructors.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns; skipping destructors is exactly what a forked child needs.
    unsafe { libc::_exit(code) }
}

/// Take ownership of a descriptor received from another process (SCM_RIGHTS).
pub(crate) fn own_fd(fd: std::os::fd::RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: the kernel just installed `fd` in our table for this message; nothing else in this
    // process refers to it, so this OwnedFd is its only owner.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

/// Block the signals a terminal, a job launcher or a dying parent would send, in this thread.
pub(crate) fn block_terminal_signals() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGPIPE,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
    ] {
        set.add(s);
    }
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

/// Open a pidfd for process `pid` (pidfd_open(2)); it becomes readable when the process exits.
pub fn pidfd_open(pid: i32) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes two integers; on success it returns a new fd that we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return match Errno::last() {
            Errno::ESRCH => Err(Error::ProcessGone { pid }),
            e => Err(Error::Sys {
                op: "pidfd_open",
                tid: pid,
                errno: e,
            }),
        };
    }
    // SAFETY: `fd` is a valid descriptor just returned by the kernel and owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// What [`reap_with_rusage`] reports about a child that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildUsage {
    /// Raw wait status.
    pub status: i32,
    /// Peak RSS of the child in kB.
    pub maxrss_kb: u64,
    /// User + system CPU of the child and the children it reaped, in microseconds.
    pub cpu_us: u64,
}

/// Reap child `pid` if it has exited (`wait4` with `WNOHANG`); None while it runs. For tests and
/// benchmarks that measure our own peak memory and CPU per run.
pub fn reap_with_rusage(pid: i32) -> Result<Option<ChildUsage>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid, exclusively borrowed locals for the duration of the call.
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(ChildUsage {
            status,
            maxrss_kb: usage.ru_maxrss.max(0) as u64,
            cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
        })),
        _ => Err(Error::Sys {
            op: "wait4",
            tid: pid,
            errno: Errno::last(),
        }),
    }
}

/// The signal our wait timer uses to interrupt `waitpid`.
fn wake_signal() -> i32 {
    libc::SIGRTMAX() - 2
}

extern "C" fn wake_handler(_: libc::c_int) {}

/// A POSIX timer that sends [`wake_signal`] to one thread, to bound blocking waits.
#[derive(Debug)]
struct WaitTimer {
    id: libc::timer_t,
}

impl WaitTimer {
    fn new(tid_for_errors: i32) -> Result<Self> {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            // SAFETY: a zeroed sigaction is a valid starting value; the handler is an
            // async-signal-safe no-op; no SA_RESTART so blocking syscalls return EINTR.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = wake_handler as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = 0;
                libc::sigaction(wake_signal(), &sa, std::ptr::null_mut());
            }
        });
        // SAFETY: zeroed sigevent is valid; fields set below; `id` is a valid out-pointer.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, wake_signal());
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = wake_signal();
            sev.sigev_notify_thread_id = libc::gettid();
            let mut id: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) != 0 {
                return Err(Error::Sys {
                    op: "timer_create",
                    tid: tid_for_errors,
                    errno: Errno::last(),
                });
            }
            Ok(WaitTimer { id })
        }
    }

    fn set(&self, d: Duration, repeat: Duration) -> Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: repeat.subsec_nanos() as _,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as _,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old-value pointer may be null.
        if unsafe { libc::timer_settime(self.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(Error::Sys {
                op: "timer_settime",
                tid: 0,
                errno: Errno::last(),
            });
        }
        Ok(())
    }

    fn arm(&self, d: Duration) -> Result<()> {
        // A zero it_value would disarm: wait at least a microsecond. The timer keeps firing every
        // 10 ms after the deadline, so a signal that lands just before waitpid blocks cannot be
        // lost: the next one interrupts the wait.
        self.set(d.max(Duration::from_micros(1)), Duration::from_millis(10))
    }

    fn disarm(&self) {
        let _ = self.set(Duration::ZERO, Duration::ZERO);
    }
}

impl Drop for WaitTimer {
    fn drop(&mut self) {
        // SAFETY: `id` was returned by timer_create and is deleted once.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}
