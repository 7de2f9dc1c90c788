//! Step four: detach every attached process (in parallel). Needs only the [`Attachment`]s, so
//! it can run in another call than the attach.

use super::attach::{call_result, log_outcome, Attachment};
use super::events::{Event, Events, Stage};
use super::plan::{failed, Failure};
use super::{parallel, Injector};
use crate::claims::{Claims, State};
use crate::error::{Error, Result};
use crate::preflight::{stopped_state, LISTENER_COMM, REGISTER_LIBRARY};
use rocprof_engine::agent::{self, Job};
use rocprof_engine::elf::RemoteLibrary;
use rocprof_engine::procfs;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Default bound on waiting for a stopped target (state T) to continue before detaching it.
pub const DEFAULT_STOPPED_WAIT: Duration = Duration::from_secs(10);

/// How [`detach_with`] treats stopped targets, shared with whoever watches for signals: a target
/// stopped by SIGSTOP (or a debugger) cannot run the detach call, so the detach waits a bounded
/// time for it to continue, and a front end can make it give up at once ([`DetachControl::give_up`]).
#[derive(Debug)]
pub struct DetachControl {
    /// How long to wait for a stopped target to continue.
    pub stopped_wait: Duration,
    give_up: AtomicBool,
    stopped: Mutex<Vec<i32>>,
    handed: Mutex<Vec<i32>>,
}

impl Default for DetachControl {
    fn default() -> Self {
        DetachControl::new(DEFAULT_STOPPED_WAIT)
    }
}

impl DetachControl {
    /// Wait at most `stopped_wait` for each stopped target.
    pub fn new(stopped_wait: Duration) -> DetachControl {
        DetachControl {
            stopped_wait,
            give_up: AtomicBool::new(false),
            stopped: Mutex::new(Vec::new()),
            handed: Mutex::new(Vec::new()),
        }
    }

    /// Stop waiting for stopped targets now (their detach fails at once).
    pub fn give_up(&self) {
        self.give_up.store(true, Ordering::SeqCst);
    }

    /// The processes whose detach is waiting for them to continue right now.
    pub fn stopped(&self) -> Vec<i32> {
        self.stopped.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The processes whose detach call is in an agent's hands: it runs to its end (and the agent
    /// restores the thread) whatever becomes of the front end.
    pub fn handed(&self) -> Vec<i32> {
        self.handed.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn set_handed(&self, pid: i32) {
        if let Ok(mut s) = self.handed.lock() {
            s.push(pid);
        }
    }

    fn set_stopped(&self, pid: i32, on: bool) {
        if let Ok(mut s) = self.stopped.lock() {
            s.retain(|p| *p != pid);
            if on {
                s.push(pid);
            }
        }
    }
}

/// The bounded wait for one stopped process: one deadline however often it stops again.
struct StoppedWait {
    deadline: Instant,
    announced: bool,
}

impl StoppedWait {
    fn new(ctl: &DetachControl) -> StoppedWait {
        StoppedWait {
            deadline: Instant::now() + ctl.stopped_wait,
            announced: false,
        }
    }
}

/// Wait (bounded by `ctl` and `w`) until a stopped `pid` continues; Err when it does not.
/// `seen` is the state an injection found when `/proc` does not (yet) show the stop.
fn wait_running(
    pid: i32,
    ctl: &DetachControl,
    events: Events,
    w: &mut StoppedWait,
    seen: Option<char>,
) -> Result<()> {
    let Some(state) = stopped_state(pid).or(seen) else {
        return Ok(());
    };
    // Recorded before the event: a Ctrl-C that answers the event must find it.
    ctl.set_stopped(pid, true);
    if !w.announced {
        w.announced = true;
        events(Event::Stopped {
            pid,
            state,
            wait: ctl.stopped_wait,
        });
    }
    let outcome = loop {
        let given_up = ctl.give_up.load(Ordering::SeqCst);
        if given_up || Instant::now() >= w.deadline {
            break Err(Error::DetachFailed {
                pid,
                reason: format!(
                    "it is stopped (state {state}) and did not continue {}; continue it with `kill -CONT {pid}`",
                    if given_up {
                        "before rocprof-attach was interrupted".to_string()
                    } else {
                        format!("within {} ms", ctl.stopped_wait.as_millis())
                    }
                ),
            });
        }
        if stopped_state(pid).is_none() {
            events(Event::Continued { pid });
            break Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    ctl.set_stopped(pid, false);
    outcome
}

/// Detach a process that is (or just was) stopped: wait until it continues, inject, and again if
/// job control stopped the listener between the state check and the interrupt; all within one
/// bound ([`DetachControl::stopped_wait`]).
fn detach_stopped(
    a: &Attachment,
    injector: &dyn Injector,
    ctl: &DetachControl,
    events: Events,
) -> Result<Detached> {
    let mut w = StoppedWait::new(ctl);
    let mut seen = None;
    loop {
        wait_running(a.pid, ctl, events, &mut w, seen)?;
        let target = detach_target_of(a)?;
        ctl.set_handed(a.pid);
        match injector.inject(&target, &Job::Detach) {
            Err(e) if stopped_before_call(&e) => seen = Some('T'),
            r => return detached(a.pid, r),
        }
    }
}

/// The injection found the listener group-stopped before it could stop it (nothing changed).
fn stopped_before_call(e: &rocprof_engine::Error) -> bool {
    matches!(
        e,
        rocprof_engine::Error::GroupStopped {
            running_injected: false,
            ..
        }
    )
}

/// A process we detached from.
#[derive(Debug, Clone, Serialize)]
pub struct Detached {
    /// Process id.
    pub pid: i32,
    /// Microseconds for the whole detach sequence (with sync output, the tool writes its files
    /// during it).
    pub detach_us: u64,
    /// Microseconds the listener was stopped outside the detach call.
    pub stopped_us: u64,
}

/// What [`detach()`] did.
#[derive(Debug, Default)]
pub struct DetachOutcome {
    /// Processes detached, in the order given.
    pub detached: Vec<Detached>,
    /// Processes that could not be detached (an exited one is [`Error::TargetExited`]).
    pub failures: Vec<Failure>,
}

/// Detach every process of `attached` (at most `parallelism` at a time), reporting failures,
/// then successes; a stopped target is waited for [`DEFAULT_STOPPED_WAIT`] at most.
pub fn detach(
    attached: &[Attachment],
    parallelism: usize,
    sync_output: bool,
    injector: &dyn Injector,
    events: Events,
) -> DetachOutcome {
    let ctl = DetachControl::default();
    detach_with(attached, parallelism, sync_output, injector, events, &ctl)
}

/// [`detach()`] with control over stopped targets. A detach that fails for any reason other than
/// the target's exit is an [`Error::DetachFailed`]: the profiler may still be active.
pub fn detach_with(
    attached: &[Attachment],
    parallelism: usize,
    sync_output: bool,
    injector: &dyn Injector,
    events: Events,
    ctl: &DetachControl,
) -> DetachOutcome {
    if attached.is_empty() {
        return DetachOutcome::default();
    }
    events(Event::Detaching { sync_output });
    let mut results = first_try(attached, parallelism, injector, events, ctl);
    let stopped: Vec<&Attachment> = attached
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_none())
        .map(|(a, _)| a)
        .collect();
    let mut waited = parallel(&stopped, parallelism, |a| {
        detach_stopped(a, injector, ctl, events)
    })
    .into_iter();
    let results: Vec<Result<Detached>> = attached
        .iter()
        .zip(results.iter_mut())
        .map(|(a, r)| {
            r.take()
                .unwrap_or_else(|| waited.next().expect("one result per stopped process"))
                .map_err(|e| as_detach_failure(a.pid, e))
        })
        .collect();
    outcome(attached, results, events)
}

/// The first detach of every process: None for one that is stopped, to wait for. Where to
/// inject, for each process: as found before the attach when its listener is still there
/// (rarely, everything is looked up again). A stopped process cannot run the detach call and is
/// waited for (bounded), on its own thread; every other detach goes out at once, at most
/// `parallelism` at a time.
fn first_try(
    attached: &[Attachment],
    parallelism: usize,
    injector: &dyn Injector,
    events: Events,
    ctl: &DetachControl,
) -> Vec<Option<Result<Detached>>> {
    let prepared: Vec<Prepared> = attached
        .iter()
        .map(|a| match a.cuda {
            Some(_) => Prepared::Cuda,
            None => prepare(a),
        })
        .collect();
    let cuda: Vec<&Attachment> = attached.iter().filter(|a| a.cuda.is_some()).collect();
    let mut unlinked = parallel(&cuda, parallelism, |a| cuda_detached(a, ctl, events)).into_iter();
    let jobs: Vec<(agent::Target, Job)> = prepared
        .iter()
        .filter_map(|p| match p {
            Prepared::Ready(t) => Some((t.clone(), Job::Detach)),
            _ => None,
        })
        .collect();
    let handed = |i: usize| ctl.set_handed(jobs[i].0.pid);
    let mut outcomes = injector.inject_all(&jobs, parallelism, &handed).into_iter();
    // Stopped before the detach, or found stopped by it (job control can stop the listener
    // between our state check and the interrupt): these wait, bounded, and try again.
    prepared
        .into_iter()
        .map(|p| match p {
            Prepared::Ready(t) => match outcomes.next().expect("one outcome per job") {
                Err(e) if stopped_before_call(&e) => None,
                r => Some(detached(t.pid, r)),
            },
            Prepared::Stopped => None,
            Prepared::Failed(e) => Some(Err(e)),
            Prepared::Cuda => Some(unlinked.next().expect("one result per CUDA process")),
        })
        .collect()
}

/// Report the detach of each process of `attached`: failures, then successes.
fn outcome(
    attached: &[Attachment],
    results: Vec<Result<Detached>>,
    events: Events,
) -> DetachOutcome {
    let mut out = DetachOutcome::default();
    let mut ok = Vec::new();
    for (a, r) in attached.iter().zip(results) {
        match r {
            Ok(d) => ok.push(d),
            Err(e) => {
                events(failed(a.pid, Stage::Detach, &e));
                if matches!(e, Error::NoOutput(_)) {
                    // The conclusion says only detach failures; a tool that could not write
                    // (ENOSPC) detached, and its reason is said here.
                    events(Event::Warning {
                        pid: Some(a.pid),
                        message: e.to_string(),
                    });
                }
                out.failures.push(Failure {
                    pid: a.pid,
                    stage: Stage::Detach,
                    error: e,
                });
            }
        }
    }
    for d in ok {
        events(Event::Detached {
            pid: d.pid,
            detach_ms: d.detach_us as f64 / 1000.0,
        });
        out.detached.push(d);
    }
    out
}

/// The engine's "the process is gone" errors, as "the target exited".
fn gone(pid: i32) -> impl Fn(rocprof_engine::Error) -> Error + Copy {
    move |e| match e {
        rocprof_engine::Error::ProcessGone { .. } | rocprof_engine::Error::TargetDied { .. } => {
            Error::TargetExited { pid }
        }
        e => e.into(),
    }
}

/// A process ready for its detach injection, one to wait for first, or one that failed already.
enum Prepared {
    Ready(agent::Target),
    /// A CUDA process: its tool is told over the socket, nothing is injected.
    Cuda,
    Stopped,
    Failed(Error),
}

/// One read of the listener's stat tells whether it is still our listener and whether it is
/// stopped (job control stops every thread of the process, the listener too; a debugger that
/// stops only other threads does not keep the listener from running the detach call).
fn prepare(a: &Attachment) -> Prepared {
    let listener = procfs::task_comm_state(a.pid, a.listener_tid);
    if listener.as_ref().is_ok_and(|(_, s)| matches!(s, 'T' | 't')) {
        return Prepared::Stopped;
    }
    let same = a.detach_function != 0
        && listener
            .as_ref()
            .is_ok_and(|(comm, _)| comm == LISTENER_COMM);
    let target = if same {
        Ok(known_target(a))
    } else {
        find_detach_target(a.pid)
    };
    match target {
        Ok(t) => Prepared::Ready(t),
        Err(e) => Prepared::Failed(e),
    }
}

/// A detach that failed for any reason other than the target's exit leaves the profiler maybe
/// active: [`Error::DetachFailed`]. A CUDA tool that stopped tracing but could not write its
/// database (a full disk) is no output ([`Error::NoOutput`], exit 9), not a profiler left on.
fn as_detach_failure(pid: i32, e: Error) -> Error {
    match e {
        e @ (Error::TargetExited { .. } | Error::DetachFailed { .. } | Error::NoOutput(_)) => e,
        Error::Rejected { status, name, .. } => Error::DetachFailed {
            pid,
            reason: format!(
                "the target rejected the detach: rocprofiler_register_detach returned {status}, {name} ({})",
                super::register_detach_status(status)
            ),
        },
        e => Error::DetachFailed {
            pid,
            reason: e.to_string(),
        },
    }
}

/// Detach a CUDA process: wait (bounded) while it is stopped, since its tool's thread cannot
/// answer then, and have the tool stop tracing and write its database.
fn cuda_detached(a: &Attachment, ctl: &DetachControl, events: Events) -> Result<Detached> {
    let link = a.cuda.as_ref().expect("a CUDA attachment");
    let started = Instant::now();
    wait_running(a.pid, ctl, events, &mut StoppedWait::new(ctl), None)?;
    ctl.set_handed(a.pid);
    let finished = crate::cuda::detach(a.pid, link).map_err(|e| match e {
        Error::DetachFailed { .. } if !procfs::proc_dir(a.pid).exists() => {
            Error::TargetExited { pid: a.pid }
        }
        e => e,
    })?;
    if finished.dropped > 0 {
        events(Event::Warning {
            pid: Some(a.pid),
            message: format!(
                "CUPTI dropped {} records in process {} because no buffer was free; the database lacks them. \
                 Fix: attach with ROCPROF_ATTACH_BUFFER_BYTES set larger (default 8 MiB per buffer)",
                finished.dropped, a.pid
            ),
        });
    }
    if let Some(c) = &finished.counters {
        let mut lines = vec![c.summary(a.pid)];
        if let Some(m) = &c.multiplexed {
            lines.push(m.summary(a.pid, c.passes));
        }
        lines.extend(
            c.notes
                .iter()
                .map(|n| format!("process {}: counters: {n}", a.pid)),
        );
        for message in lines {
            events(Event::Warning {
                pid: Some(a.pid),
                message,
            });
        }
    }
    tracing::debug!(
        "process {}: the CUDA tool wrote {} ({} kernels, {} copies, {} API calls, {} allocations, {} dropped, {} late; \
         flush {} µs, write {} µs)",
        a.pid,
        finished.db,
        finished.kernels,
        finished.copies,
        finished.api,
        finished.allocations,
        finished.dropped,
        finished.late,
        finished.flush_us,
        finished.write_us
    );
    if let (Some(n), Some(cost)) = (finished.spm_samples, &finished.spm_tick_us) {
        tracing::debug!(
            "process {}: --spm wrote {n} samples; its share of the tool's ticks (µs): {cost}",
            a.pid
        );
    }
    Ok(Detached {
        pid: a.pid,
        detach_us: started.elapsed().as_micros() as u64,
        stopped_us: 0,
    })
}

/// The detach target as the attach found it.
fn known_target(a: &Attachment) -> agent::Target {
    tracing::debug!(
        "process {}: detach call {:#x} from site {:#x} on thread {} (as found before the attach)",
        a.pid,
        a.detach_function,
        a.site,
        a.listener_tid
    );
    agent::Target {
        pid: a.pid,
        tid: a.listener_tid,
        site: a.site,
        function: a.detach_function,
    }
}

/// Where to inject the detach of a process we attached to: the listener, the detach function and
/// the site the attach found, when one read of the listener's name shows they still hold (a
/// thread of the process named `rocp-bg-attach` with the same TID means the process neither
/// exited nor ran `exec`, which ends every thread but one). Otherwise, or when the listener
/// changed, everything is found again as [`detach_one`] does.
fn detach_target_of(a: &Attachment) -> Result<agent::Target> {
    let same_listener = a.detach_function != 0
        && procfs::comm(a.pid, a.listener_tid).is_ok_and(|c| c == LISTENER_COMM);
    if !same_listener {
        return find_detach_target(a.pid);
    }
    Ok(known_target(a))
}

/// Detach one process through `injector`: finds its listener, `rocprofiler_register_detach` and
/// the injection site again (nothing is kept from the attach).
pub fn detach_one(injector: &dyn Injector, pid: i32) -> Result<Detached> {
    let target = find_detach_target(pid)?;
    detached(pid, injector.inject(&target, &Job::Detach))
}

/// What a detach of `pid` needs, looked up now: for a session another front end attached and
/// left active ([`crate::claims`]).
pub fn lookup(pid: i32) -> Result<Attachment> {
    let t = find_detach_target(pid)?;
    Ok(Attachment {
        pid,
        root: pid,
        listener_tid: t.tid,
        site: t.site,
        detach_function: t.function,
        tool: String::new(),
        attach_us: 0,
        stopped_us: 0,
        call_us: 0,
        backend: crate::cuda::Backend::Rocm,
        cuda: None,
    })
}

/// Record in `claims` how each detach of `outcome` ended: a failed detach leaves the record of
/// an active session ([`State::Stranded`], with why); every other claim is released (nothing is
/// active: detached, exited, or never attached).
pub fn settle(claims: &Claims, pids: &[i32], outcome: &DetachOutcome) {
    for &pid in pids {
        match outcome.failures.iter().find(|f| f.pid == pid) {
            Some(Failure {
                error: Error::DetachFailed { reason, .. },
                ..
            }) => claims.strand(pid, reason),
            _ => claims.set(pid, State::Claimed),
        }
    }
}

/// The listener, `rocprofiler_register_detach` and the injection site of `pid`, looked up.
fn find_detach_target(pid: i32) -> Result<agent::Target> {
    let gone = gone(pid);
    let tid = *procfs::threads_named(pid, LISTENER_COMM)
        .map_err(gone)?
        .first()
        .ok_or(Error::NotAttachable {
            pid,
            reason: "its 'rocp-bg-attach' thread is gone, so it cannot be detached".into(),
        })?;
    let lib = RemoteLibrary::locate(pid, REGISTER_LIBRARY).map_err(gone)?;
    let function = lib.symbol("rocprofiler_register_detach")?;
    let site = procfs::at_entry(pid).map_err(gone)?;
    tracing::debug!(
        "process {pid}: detach call {function:#x} in {} from site {site:#x} on thread {tid}",
        lib.path
    );
    Ok(agent::Target {
        pid,
        tid,
        site,
        function,
    })
}

/// What the detach injection of `pid` gave, as a [`Detached`] or the session's error.
fn detached(pid: i32, outcome: rocprof_engine::Result<agent::Outcome>) -> Result<Detached> {
    let outcome = outcome.map_err(gone(pid))?;
    log_outcome(pid, "detach", &outcome);
    let outcome = call_result(pid, "detach", outcome)?;
    Ok(Detached {
        pid,
        detach_us: outcome.total_us,
        stopped_us: outcome.stopped_us,
    })
}
