//! What finishes a session when the host dies: one agent server per attached process.
//!
//! The CLI's agent server holds a will (`rocprof_attach_core::session::will`): should the front
//! end die, it detaches, and the claim is released. The library cannot fork its host, so for each
//! process it attaches it starts the server as a program (`rocprof-attach __agent-server`,
//! [`Agents::exec`]), hands it that process's will before the attach call, and runs the
//! process's attach and detach through it. The server waits idle, blocked on its socket, through
//! the window; the detach ends it ([`end`]). If the host is killed at any moment (during its
//! attach call, the window, or its detach call), the server sees the socket close and finishes
//! the session as the CLI's does: the detach the host had not sent, the output the tool writes
//! in it, and the claim record. A `rocattach_detach` of a session another front end left active
//! runs its detach through a server of its own with that session's will ([`start_for_detach`]).
//!
//! A host that exits normally (`exit`, a return from `main`, Python's interpreter exit) without
//! calling `rocattach_detach` keeps rocattach's behaviour: its sessions stay active (the tool
//! writes its output when the target exits) and their claims say so, for `rocattach_detach(pid)`
//! or `rocprof-attach --detach -p PID`. The library's destructor (`on_exit`, run by `exit` and
//! by `dlclose`, never by a kill) takes the wills back first.

use super::log::Log;
use rocprof_attach_core::claims::Claim;
use rocprof_attach_core::session::{self, Attachment, Injector, Plan};
use rocprof_engine::agent::{self, Agents, CallTimeouts};
use std::collections::HashMap;
use std::path::Path;

/// Start an agent server for each process of `plan` from `program` and hand it that process's
/// will. A server that cannot be started is logged: that process runs without a will (a host
/// killed during its session then leaves it for `rocprof-attach --detach`).
pub fn start(program: &Path, plan: &Plan, log: &Log) -> HashMap<i32, Agents> {
    let mut by_pid = HashMap::new();
    for (pid, started) in spawn_all(program, &plan.pids()) {
        match started {
            Ok(agents) => {
                session::will::leave_for(&agents, plan, &[pid]);
                by_pid.insert(pid, agents);
            }
            Err(e) => log.warn(&format!(
                "process {pid}: {e}; attaching without it, so if this process dies before \
                 rocattach_detach({pid}), run `rocprof-attach --detach -p {pid}`"
            )),
        }
    }
    by_pid
}

/// Start one server per process of `pids`, several at once for a tree (each start is an `exec`
/// and a reply): at most [`session::DEFAULT_PARALLEL`] threads, for this call only.
fn spawn_all(program: &Path, pids: &[i32]) -> Vec<(i32, rocprof_engine::Result<Agents>)> {
    let one = |pid: i32| (pid, Agents::exec(program, CallTimeouts::default()));
    if pids.len() < 2 {
        return pids.iter().map(|&p| one(p)).collect();
    }
    let mut out = Vec::with_capacity(pids.len());
    for chunk in pids.chunks(session::DEFAULT_PARALLEL) {
        std::thread::scope(|s| {
            let started: Vec<_> = chunk.iter().map(|&p| s.spawn(move || one(p))).collect();
            // A start that panicked (a bug) leaves its process without a server.
            out.extend(started.into_iter().filter_map(|h| h.join().ok()));
        });
    }
    out
}

/// An agent server holding the will of a session about to be detached (one another front end
/// left active): None, logged, when it cannot be started (the detach then runs in an agent
/// program of its own).
pub fn start_for_detach(
    program: &Path,
    a: &Attachment,
    claim: &Claim,
    log: &Log,
) -> Option<Agents> {
    match Agents::exec(program, CallTimeouts::default()) {
        Ok(agents) => {
            session::will::leave_detach(&agents, a, Some(claim));
            Some(agents)
        }
        Err(e) => {
            log.warn(&format!("process {}: {e}", a.pid));
            None
        }
    }
}

/// Runs each process's jobs through its agent server ([`start`]); a process without one through
/// `spare` (one agent program per job).
pub struct Servers<'a> {
    /// The server of each process that has one.
    pub by_pid: &'a HashMap<i32, Agents>,
    /// For the others.
    pub spare: &'a dyn Injector,
}

impl Injector for Servers<'_> {
    fn inject(
        &self,
        target: &agent::Target,
        job: &agent::Job,
    ) -> rocprof_engine::Result<agent::Outcome> {
        match self.by_pid.get(&target.pid) {
            Some(agents) => agents.run(target, job),
            None => self.spare.inject(target, job),
        }
    }
}

/// The session of `agents` is finished (detached, or never attached) and its claim settled: take
/// the will back, then end the server and wait for it, so that its copy of the claim's lock is
/// closed when this returns.
pub fn end(agents: Agents) {
    session::will::take_back(&agents);
    drop(agents);
}

/// The process that started the sessions' servers (0: none yet, or a fork of it that has not
/// attached anything itself): [`on_exit`] acts in this process only.
static OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Remember the process that starts servers (a fork of it inherits neither the sessions nor the
/// right to tell their servers anything at its exit: [`forget_owner`]).
pub fn note_owner() {
    use std::sync::atomic::Ordering::Relaxed;
    let _ = OWNER.compare_exchange(0, std::process::id(), Relaxed, Relaxed);
}

/// In a fork of the host (`pthread_atfork` child handler, [`super::forks`]): the sessions are
/// the parent's, not this process's.
pub fn forget_owner() {
    OWNER.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// The library's destructor: a normal exit (or `dlclose`) of the host leaves its sessions active,
/// as rocattach does, so the servers are told to forget their wills before the sockets close.
extern "C" fn on_exit() {
    if OWNER.load(std::sync::atomic::Ordering::Relaxed) != std::process::id() {
        return;
    }
    // Never panic or block here: a call in flight holds its slot, not the lock, for long.
    let _ = std::panic::catch_unwind(super::sessions::forget_wills);
}

/// Runs [`on_exit`] at `exit` and at `dlclose`, not at a kill.
#[used]
#[link_section = ".fini_array"]
static ON_EXIT: extern "C" fn() = on_exit;
