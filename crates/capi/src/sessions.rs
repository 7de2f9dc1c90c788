//! The library's sessions: which processes this host attached, and the tree lists.
//!
//! A process-global map keyed by PID, under a mutex that is never held across ptrace work: a
//! call first reserves its PIDs (a second call for the same PID gets status 2 at once), releases
//! the lock, attaches or detaches, then records the result. Calls from several host threads on
//! different PIDs therefore run at the same time. Between calls nothing of ours runs: no thread,
//! no tracer; each attached process has its idle agent server ([`super::will`]), which runs its
//! attach and detach and finishes the session should the host die.

use super::agent::{self, ExecInjector};
use super::log::Log;
use super::status::{self, Status};
use rocprof_attach_core::claims::{Claim, Holder, Purpose, State, FRONT_END_LIBRARY};
use rocprof_attach_core::envbuf::EnvList;
use rocprof_attach_core::preflight;
use rocprof_attach_core::session::{self, AttachRequest, Attachment, DetachOutcome, Event, Plan};
use rocprof_attach_core::targets::{self, TargetSelection};
use rocprof_attach_core::toolpath;
use rocprof_attach_core::Error;
use rocprof_engine::agent::Agents;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

mod checks;
pub use checks::TOOL_VARIABLE;
use checks::{precheck, tool_string};

#[derive(Debug)]
enum Slot {
    /// An attach or detach of this PID is running in some thread.
    Busy,
    /// Attached.
    Attached(Box<Session>),
}

/// One attached process.
#[derive(Debug)]
struct Session {
    /// What a detach needs.
    attachment: Attachment,
    /// The claim on the process (one session per target).
    claim: Option<Claim>,
    /// Its agent server, holding the will (None when it could not be started).
    agents: Option<Agents>,
}

/// The sessions of this process (a fork of it forgets its copy: [`super::forks`]).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    slots: HashMap<i32, Slot>,
    /// Tree root -> the PIDs its `rocattach_attach_tree` attached, root first.
    trees: HashMap<i32, Vec<i32>>,
    /// The injector, created on first use (finding the agent reads /proc/self/maps).
    injector: Option<std::sync::Arc<ExecInjector>>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// The registry, locked.
pub(crate) fn registry() -> MutexGuard<'static, Option<Registry>> {
    // A panic in another call cannot leave the map inconsistent (every update is one statement).
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = registry();
    f(guard.get_or_insert_with(Registry::default))
}

/// The injector (finding the agent executable the first time).
fn injector(log: &Log) -> Result<std::sync::Arc<ExecInjector>, Status> {
    if let Some(i) = with_registry(|r| r.injector.clone()) {
        return Ok(i);
    }
    match agent::find(toolpath::at_secure(), log) {
        Ok(program) => {
            log.info(&format!("injection agent: {}", program.display()));
            let i = std::sync::Arc::new(ExecInjector::new(program));
            Ok(with_registry(|r| r.injector.get_or_insert(i).clone()))
        }
        Err(msg) => {
            log.error(&msg);
            Err(Status::Error)
        }
    }
}

/// Reserve `pid`; `false` (and an error line) when it already has a session or a call in flight.
fn reserve(pid: i32, log: &Log) -> bool {
    let taken = with_registry(|r| match r.slots.get(&pid) {
        Some(s) => Some(matches!(s, Slot::Busy)),
        None => {
            r.slots.insert(pid, Slot::Busy);
            None
        }
    });
    match taken {
        None => true,
        Some(busy) => {
            log.error(&if busy {
                format!("process {pid}: another thread is attaching or detaching it right now; wait for that call to return")
            } else {
                format!("process {pid} is already attached by this process; call rocattach_detach({pid}) first")
            });
            false
        }
    }
}

fn release(pids: &[i32]) {
    with_registry(|r| {
        for p in pids {
            if matches!(r.slots.get(p), Some(Slot::Busy)) {
                r.slots.remove(p);
            }
        }
    });
}

/// An error line, and the CLI's permission hints (Yama, capabilities, containers) when the
/// kernel refused us.
fn log_error(log: &Log, e: &Error) {
    log.error(&e.to_string());
    if let Some(pid) = e.permission_denied_pid() {
        for line in preflight::permission_hint(pid).lines() {
            log.error(line.strip_prefix("rocprof-attach: ").unwrap_or(line));
        }
    }
}

/// Events of the session as log lines.
fn events(log: &Log) -> impl Fn(Event) + Sync + '_ {
    move |e| match e {
        Event::Warning { message, .. } => log.warn(&message),
        Event::Attached { pid, attach_ms, .. } => {
            log.info(&format!("attached to process {pid} in {attach_ms:.1} ms"))
        }
        Event::Detached { pid, detach_ms } => {
            log.info(&format!("detached from process {pid} in {detach_ms:.1} ms"))
        }
        _ => {}
    }
}

/// `rocattach_attach` (`tree == false`) and `rocattach_attach_tree`.
pub fn attach(pid: i32, tree: bool, log: &Log) -> Status {
    if !cfg!(target_arch = "x86_64") {
        log.error("attaching is supported on x86-64 only");
        return Status::NotSupported;
    }
    if pid <= 0 {
        log.error(&format!(
            "invalid PID {pid}: pass the positive process id of a running ROCm application"
        ));
        return Status::InvalidArgument;
    }
    let pid = process_of(pid, log);
    let tool = match tool_string(log) {
        Ok(t) => t,
        Err(s) => return s,
    };
    if !reserve(pid, log) {
        return Status::InvalidArgument;
    }
    let mut reserved = vec![pid];
    let status = log.scope(|| attach_reserved(pid, tree, &tool, log, &mut reserved));
    release(&reserved);
    status
}

/// The process `id` names: a thread id is mapped to its process (one process, one session and
/// one lock, whatever id is passed: [`targets::process_of`]), and the log says so.
fn process_of(id: i32, log: &Log) -> i32 {
    let pid = targets::process_of(id);
    if pid != id {
        log.info(&format!(
            "thread {id} belongs to process {pid}: using the process"
        ));
    }
    pid
}

/// Who claims a process here: this library, with the output the host's environment names.
fn holder(pid: i32) -> Holder {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let req = AttachRequest::new(
        TargetSelection::Pids(vec![pid]),
        EnvList::from_process(),
        &cwd,
    );
    Holder {
        front_end: FRONT_END_LIBRARY.into(),
        output: Some(format!(
            "{}/{}",
            req.output_dir.display().to_string().trim_end_matches('/'),
            req.output_file
        )),
        sync_output: Some(req.sync_output),
        output_parts: Some((
            req.output_dir.display().to_string(),
            req.output_file.clone(),
        )),
    }
}

fn attach_reserved(pid: i32, tree: bool, tool: &str, log: &Log, reserved: &mut Vec<i32>) -> Status {
    // One session per process, whichever front end holds it: refused before any ptrace.
    let holder = holder(pid);
    let claim = match Claim::acquire(pid, &holder, Purpose::Attach) {
        Ok(c) => Some(c),
        // The precheck says so, in its own words (gone, or another user's we may not trace).
        Err(Error::ProcessGone { .. }) => None,
        Err(e) if rocprof_attach_core::claims::closed_and_untraceable(&e) => None,
        Err(e) => {
            log_error(log, &e);
            return status::of_error(&e);
        }
    };
    if let Err(s) = precheck(pid, tool, log) {
        return s;
    }
    let injector = match injector(log) {
        Ok(i) => i,
        Err(s) => return s,
    };
    let on_event = events(log);
    // One preflight at a time: no threads of ours in the host process for that.
    let mut plan = match session::plan_roots(&[pid], tree, Some(tool), 1, &on_event) {
        Ok(p) => p,
        Err(e) => {
            log_error(log, &e);
            return status::of_error(&e);
        }
    };
    if let Some(c) = claim {
        plan.claims.insert(c);
    }
    // Descendants another session holds (or with a session left active) fail with 2.
    session::claim_descendants(&mut plan, &holder, &|_| {});
    let mut last = Status::Success;
    for f in &plan.failures {
        log_error(log, &f.error);
        last = status::of_error(&f.error);
    }
    // Descendants that already have a session (or a call in flight) fail with 2.
    plan.targets.retain(|p| {
        let d = p.report.pid;
        if d == pid {
            return true;
        }
        if reserve(d, log) {
            reserved.push(d);
            true
        } else {
            last = Status::InvalidArgument;
            false
        }
    });
    let out = attach_planned(&plan, &injector, log);
    record(pid, tree, &plan, out.attached, out.servers);
    for f in &out.failures {
        log_error(log, &f.error);
        if f.pid == pid {
            // The root is mandatory: its failure is the call's status, nothing else was tried.
            return status::of_error(&f.error);
        }
        last = status::of_error(&f.error);
    }
    last
}

/// What [`attach_planned`] did: the attach's outcome, and the agent server of each process.
struct Attached {
    attached: Vec<Attachment>,
    failures: Vec<session::Failure>,
    servers: HashMap<i32, Agents>,
}

/// Attach the processes of `plan`, each through its own agent server holding its will (which
/// later runs its detach too), with the host's environment.
fn attach_planned(plan: &Plan, injector: &ExecInjector, log: &Log) -> Attached {
    let mut env = EnvList::from_process();
    // Every session stands alone: the register keeps what an earlier session set in the target,
    // so what the host does not set is sent with its "not asked for" value (the tool's default
    // output directory, %cwd%, included).
    rocprof_attach_core::options::defaults::fill_unset(&mut env);
    if !env.contains("ROCPROF_OUTPUT_PATH") {
        env.set("ROCPROF_OUTPUT_PATH", "%cwd%");
    }
    super::will::note_owner();
    let servers = super::will::start(injector.program(), plan, log);
    let routed = super::will::Servers {
        by_pid: &servers,
        spare: injector,
    };
    let out = session::attach(
        plan,
        &env,
        session::DEFAULT_PARALLEL,
        &routed,
        &events(log),
        &|| false,
    );
    Attached {
        attached: out.attached,
        failures: out.failures,
        servers,
    }
}

/// Store the sessions (and the tree list) of what was attached, each with its agent server; the
/// servers of the processes that were not attached end (nothing to finish there).
fn record(
    root: i32,
    tree: bool,
    plan: &Plan,
    attached: Vec<Attachment>,
    mut servers: HashMap<i32, Agents>,
) {
    // Plan order: root first, descendants breadth-first.
    let order: Vec<i32> = plan
        .pids()
        .into_iter()
        .filter(|p| attached.iter().any(|a| a.pid == *p))
        .collect();
    let sessions: Vec<Session> = attached
        .into_iter()
        .map(|a| Session {
            claim: plan.claims.take(a.pid),
            agents: servers.remove(&a.pid),
            attachment: a,
        })
        .collect();
    // Their claims were settled by the attach (nothing active).
    servers.into_values().for_each(super::will::end);
    with_registry(|r| {
        for s in sessions {
            r.slots
                .insert(s.attachment.pid, Slot::Attached(Box::new(s)));
        }
        if tree && order.first() == Some(&root) {
            r.trees.insert(root, order);
        }
    });
}

/// The host is exiting normally: every attached session stays active, as rocattach leaves it
/// ([`super::will`]); its server is told not to finish it. Never waits for the lock.
pub(crate) fn forget_wills() {
    let guard = match REGISTRY.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for slot in guard.iter().flat_map(|r| r.slots.values()) {
        if let Slot::Attached(s) = slot {
            if let Some(agents) = &s.agents {
                session::will::take_back(agents);
            }
        }
    }
}

/// `rocattach_detach`: one PID, or every session with `pid == 0` (always success).
pub fn detach(pid: i32, log: &Log) -> Status {
    if pid < 0 {
        log.error(&format!(
            "invalid PID {pid}: pass the PID given to rocattach_attach, or 0 to detach every session"
        ));
        return Status::InvalidArgument;
    }
    let pid = if pid == 0 { 0 } else { process_of(pid, log) };
    if pid == 0 {
        let all = with_registry(|r| {
            r.trees.clear();
            take_attached(r, None)
        });
        log.scope(|| detach_taken(all, log));
        return Status::Success;
    }
    match with_registry(|r| match r.slots.get(&pid) {
        Some(Slot::Attached(_)) => Ok(take_attached(r, Some(&[pid]))),
        Some(Slot::Busy) => Err(true),
        None => Err(false),
    }) {
        Ok(taken) => log.scope(|| detach_taken(taken, log)),
        // Attached by another front end and left active: finish that session.
        Err(false) if reserve(pid, log) => {
            let status = log.scope(|| finish(pid, log));
            release(&[pid]);
            status
        }
        Err(busy) => {
            log.error(&if busy {
                format!("process {pid}: another thread is attaching or detaching it right now; wait for that call to return")
            } else {
                format!("no session for process {pid}: rocattach_detach only undoes a successful rocattach_attach({pid}) of this process")
            });
            Status::InvalidArgument
        }
    }
}

/// `rocattach_detach_tree`: exactly the PIDs the matching tree attach recorded.
pub fn detach_tree(pid: i32, log: &Log) -> Status {
    let pid = if pid > 0 { process_of(pid, log) } else { pid };
    let Some(list) = with_registry(|r| r.trees.remove(&pid)).filter(|l| !l.is_empty()) else {
        log.error(&format!(
            "no tree session for process {pid}: rocattach_detach_tree undoes a successful rocattach_attach_tree({pid})"
        ));
        return Status::InvalidArgument;
    };
    let taken = with_registry(|r| take_attached(r, Some(&list)));
    if taken.len() < list.len() {
        log.info(&format!(
            "process {pid}: {} of the {} processes of this tree were already detached",
            list.len() - taken.len(),
            list.len()
        ));
    }
    log.scope(|| detach_taken(taken, log))
}

/// Mark the attached sessions among `pids` (all when None) busy and return them in order.
fn take_attached(r: &mut Registry, pids: Option<&[i32]>) -> Vec<Session> {
    let wanted: Vec<i32> = match pids {
        Some(p) => p.to_vec(),
        None => {
            let mut all: Vec<i32> = r.slots.keys().copied().collect();
            all.sort_unstable();
            all
        }
    };
    let mut out = Vec::new();
    for p in wanted {
        if let Some(slot) = r.slots.get_mut(&p) {
            if let Slot::Attached(a) = std::mem::replace(slot, Slot::Busy) {
                out.push(*a);
            } else {
                // Busy: another thread owns it; leave it alone.
            }
        }
    }
    out
}

/// Detach `taken` (their slots are busy) through their agent servers, remove the sessions, end
/// the servers, return the last error or 0. A failed detach leaves the record of an active
/// session in its claim.
fn detach_taken(taken: Vec<Session>, log: &Log) -> Status {
    if taken.is_empty() {
        return Status::Success;
    }
    let mut attachments = Vec::with_capacity(taken.len());
    let mut claims = Vec::with_capacity(taken.len());
    let mut servers = HashMap::new();
    for s in taken {
        servers.extend(s.agents.map(|a| (s.attachment.pid, a)));
        claims.push(s.claim);
        attachments.push(s.attachment);
    }
    let pids: Vec<i32> = attachments.iter().map(|a| a.pid).collect();
    for c in claims.iter_mut().flatten() {
        c.set(State::Detaching);
    }
    let out = match injector(log) {
        Err(s) => Err(s),
        Ok(injector) => Ok(session::detach(
            &attachments,
            session::DEFAULT_PARALLEL,
            true,
            &super::will::Servers {
                by_pid: &servers,
                spare: &*injector,
            },
            &events(log),
        )),
    };
    let status = match &out {
        Err(s) => *s,
        Ok(out) => detach_status(out, log),
    };
    for (pid, claim) in pids.iter().zip(claims.iter_mut()) {
        let Some(c) = claim else { continue };
        match out
            .as_ref()
            .map(|o| o.failures.iter().find(|f| f.pid == *pid))
        {
            Ok(Some(f)) if matches!(f.error, Error::DetachFailed { .. }) => {
                c.strand(&f.error.to_string())
            }
            // No agent: nothing was sent, the session is still active.
            Err(_) => c.strand("the injection agent could not be started"),
            _ => c.set(State::Claimed),
        }
    }
    // The claims are settled: the servers have nothing left to finish (and close their copies
    // of the claims' locks before ours close).
    servers.into_values().for_each(super::will::end);
    drop(claims);
    // The sessions end whatever happened (as rocattach does); one whose detach failed stays
    // recorded as active, so a later attach is refused until rocattach_detach finishes it.
    with_registry(|r| {
        for p in &pids {
            r.slots.remove(p);
        }
    });
    status
}

/// The call's status from what the detach did: the last error, or 0.
fn detach_status(out: &DetachOutcome, log: &Log) -> Status {
    let mut last = Status::Success;
    for f in &out.failures {
        match &f.error {
            // rocattach logs a refused detach call and still succeeds (docs/protocol.md section 5.12).
            Error::Rejected { .. } => log.warn(&f.error.to_string()),
            e => {
                log.error(&e.to_string());
                last = status::of_error(e);
            }
        }
    }
    last
}

/// `rocattach_detach(pid)` for a process this library did not attach: finish the session
/// another front end left active in it (its detach failed, or it died during its window), as
/// `rocprof-attach --detach -p PID` does. Nothing recorded, or a live holder, is status 2.
fn finish(pid: i32, log: &Log) -> Status {
    let claim = match Claim::acquire(pid, &holder(pid), Purpose::Finish) {
        Ok(c) => c,
        Err(e @ Error::ActiveSession { .. }) => {
            log.error(&format!(
                "no session for process {pid} in this process: rocattach_detach undoes a successful \
                 rocattach_attach({pid}) of this process, or finishes a session another front end left active; {e}"
            ));
            return Status::InvalidArgument;
        }
        Err(e) => {
            log_error(log, &e);
            return status::of_error(&e);
        }
    };
    if let Some(prev) = claim.previous() {
        log.info(&format!(
            "process {pid}: finishing the session left by {} {}: {}; {}",
            prev.front_end,
            prev.since(),
            prev.why_left(),
            prev.output_clause()
        ));
    }
    match session::lookup(pid) {
        Ok(attachment) => {
            // An agent server holding the will runs the detach, so that a host killed during
            // this call leaves the session finished too.
            let agents = injector(log)
                .ok()
                .and_then(|i| super::will::start_for_detach(i.program(), &attachment, &claim, log));
            detach_taken(
                vec![Session {
                    attachment,
                    claim: Some(claim),
                    agents,
                }],
                log,
            )
        }
        Err(e) => {
            let mut claim = claim;
            if matches!(e, Error::ProcessGone { .. }) {
                claim.set(State::Claimed);
            } else {
                claim.strand(&e.to_string());
            }
            log_error(log, &e);
            status::of_error(&e)
        }
    }
}
