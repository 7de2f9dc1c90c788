//! Process-level system calls around tracing: signals to one thread, CPU placement, forking
//! and ending an agent, descriptors received from another process, pidfds, resource usage.

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::unistd::Pid;

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

/// The calling thread runs on a tracee's CPU until this is dropped (see [`pin_near`]).
#[derive(Debug)]
pub struct CpuPin {
    cpu: usize,
    previous: nix::sched::CpuSet,
}

/// How many threads of this process are pinned to each CPU by [`pin_near`].
static PINNED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// Like [`follow_cpu_of`], for one job of a thread that runs many, and never two threads on
/// one CPU: when another thread of ours is already pinned to that CPU (several listeners last
/// ran there), this one stays where it is rather than queue behind it. The previous affinity
/// comes back when the returned guard is dropped. None when nothing was changed.
pub fn pin_near(pid: i32, tid: i32) -> Option<CpuPin> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    let cpu = crate::procfs::task_cpu(pid, tid).ok()?;
    let me = Pid::from_raw(0);
    let previous = sched_getaffinity(me).ok()?;
    if !previous.is_set(cpu).unwrap_or(false) {
        return None;
    }
    {
        let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
        if pinned.len() <= cpu {
            pinned.resize(cpu + 1, 0);
        }
        if pinned[cpu] > 0 {
            return None;
        }
        pinned[cpu] += 1;
    }
    let mut set = CpuSet::new();
    if set.set(cpu).is_err() || sched_setaffinity(me, &set).is_err() {
        release(cpu);
        return None;
    }
    Some(CpuPin { cpu, previous })
}

fn release(cpu: usize) {
    let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = pinned.get_mut(cpu) {
        *n = n.saturating_sub(1);
    }
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), &self.previous);
        release(self.cpu);
    }
}

/// Fork the injection agent (see [`crate::agent`]).
///
/// The child must only run the injection sequence and then call [`exit_now`].
pub(crate) fn fork_agent() -> Result<nix::unistd::ForkResult> {
    // SAFETY: the child only runs the injection sequence (plain syscalls and heap allocation,
    // which glibc makes fork-safe) and then `_exit`s; it never returns into the caller's code,
    // takes no lock another thread could hold (no logging, no stdio) and never unwinds.
    let forked = unsafe { nix::unistd::fork() }
        .map_err(|e| Error::io("forking the injection agent", std::io::Error::from(e)))?;
    if forked.is_child() {
        detach_stdio();
    }
    Ok(forked)
}

/// Point a forked agent's standard streams at /dev/null. It never prints, and an agent that
/// outlives the front end (it stays until a stopped target continues and our call returns) must
/// not keep the front end's pipes open: `rocprof-attach ... | tee log` would never see the end.
fn detach_stdio() {
    // SAFETY: open and dup2 are async-signal-safe (we may be the child of a threaded process);
    // the path is a NUL-terminated literal, and the descriptors are ours.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// Point standard input at /dev/null (the agent server started as a program, once it holds its
/// own copy of the socket it was given as standard input).
pub(crate) fn detach_stdin() {
    // SAFETY: open and dup2 on a NUL-terminated literal and descriptors we own.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            if null > 0 {
                libc::close(null);
            }
        }
    }
}

/// Close every descriptor above 2 but `keep` (the agent server started as a program: what its
/// caller left open without close-on-exec must not stay open, perhaps for hours, in it).
pub(crate) fn close_other_fds(keep: &[std::os::fd::RawFd]) {
    let open: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => return,
    };
    for fd in open.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
        // SAFETY: closing a descriptor number; nothing in this fresh process uses the others (the
        // directory's own descriptor is closed already, and closing it again is EBADF).
        unsafe { libc::close(fd) };
    }
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

/// User + system CPU time of this process (all its threads) so far, in microseconds.
pub fn process_cpu_us() -> u64 {
    cpu_us(nix::sys::resource::UsageWho::RUSAGE_SELF)
}

/// User + system CPU time of the children this process has waited for, in microseconds.
pub fn children_cpu_us() -> u64 {
    cpu_us(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}

fn cpu_us(who: nix::sys::resource::UsageWho) -> u64 {
    nix::sys::resource::getrusage(who)
        .map(|r| {
            let us = |t: nix::sys::time::TimeVal| {
                t.tv_sec().max(0) as u64 * 1_000_000 + t.tv_usec().max(0) as u64
            };
            us(r.user_time()) + us(r.system_time())
        })
        .unwrap_or(0)
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
    /// Page faults (minor + major) of the child and the children it reaped.
    pub faults: u64,
}

/// Reap child `pid` if it has exited (`wait4` with `WNOHANG`); None while it runs. For tests and
/// benchmarks that measure our own peak memory and CPU per run.
pub fn reap_with_rusage(pid: i32) -> Result<Option<ChildUsage>> {
    wait4_rusage(pid, libc::WNOHANG)
}

/// Wait for child `pid` to exit (blocking `wait4`) and return its resource usage. For benchmarks.
pub fn wait_with_rusage(pid: i32) -> Result<ChildUsage> {
    loop {
        match wait4_rusage(pid, 0) {
            Ok(Some(u)) => return Ok(u),
            Ok(None) => continue,
            Err(Error::Sys {
                errno: Errno::EINTR,
                ..
            }) => continue,
            Err(e) => return Err(e),
        }
    }
}

fn wait4_rusage(pid: i32, flags: i32) -> Result<Option<ChildUsage>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid, exclusively borrowed locals for the duration of the call.
    let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(ChildUsage {
            status,
            maxrss_kb: usage.ru_maxrss.max(0) as u64,
            cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
            faults: (usage.ru_minflt.max(0) + usage.ru_majflt.max(0)) as u64,
        })),
        _ => Err(Error::Sys {
            op: "wait4",
            tid: pid,
            errno: Errno::last(),
        }),
    }
}
