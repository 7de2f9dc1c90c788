//! What a session leaves its agent server, so that a front end killed at any moment leaves no
//! work for a person: the server's [`Will`] (module docs of [`rocprof_engine::agent::will`]),
//! filled in here with the session's meaning.
//!
//! Once the targets are planned and claimed, before anything is sent to them, the front end
//! hands the server, per planned process, its detach call, to be made only if that process's
//! attach call ran and returned 0 (none for a CUDA process, whose tool detaches itself when its connection
//! closes), and its claim file, with three records to write into it: "finishing" when the front
//! end is found dead (the record names the agent and says a session may be active; an attach
//! that finds it waits for the agent, bounded, instead of being refused), "claimed" (nothing
//! active: a stale claim the next session takes over) once the detach ran or was not needed, and
//! "stranded" if it failed (then `rocprof-attach --detach -p PID` finishes it). The server holds a
//! copy of each claim file's descriptor, and so the lock, until it is done. When the front end
//! detached and settled the claims itself, it takes the will back ([`take_back`]).
//!
//! An attach or detach the front end had already handed over when it died runs to its end; a
//! detach is not sent again. The tool writes its output in the detach call (synchronous output,
//! the default), so a session finished by its agent leaves the same files a finished session
//! does.

use super::Plan;
use crate::claims::{Claim, State};
use rocprof_engine::agent::will::{Will, WillFile, WillItem};
use rocprof_engine::agent::{self, Agents, Job};
use std::os::fd::AsFd;

/// Hand `agents`' server the will for the processes of `plan` (call it before the attach).
/// False when there is no server to finish anything (a front end killed during the session
/// would then leave it active, for `rocprof-attach --detach`).
pub fn leave(agents: &Agents, plan: &Plan) -> bool {
    leave_for(agents, plan, &plan.pids())
}

/// [`leave`] for the processes `pids` of `plan` only (a front end with one server per process,
/// the rocattach C library, hands each server the will of its own process).
pub fn leave_for(agents: &Agents, plan: &Plan, pids: &[i32]) -> bool {
    let Some(server) = agents.server_pid() else {
        return false;
    };
    let mut will = Will {
        items: Vec::with_capacity(pids.len()),
        timeouts: agents.timeouts(),
    };
    let mut files = Vec::new();
    for p in plan.targets.iter().filter(|p| pids.contains(&p.report.pid)) {
        let pid = p.report.pid;
        let claimed = plan.claims.with(pid, |c| claim_file(c, server)).flatten();
        let (fd, record) = match claimed {
            Some((f, r)) => (Some(f), Some(r)),
            None => (None, None),
        };
        files.extend(fd);
        will.items.push(WillItem {
            // The listener and functions the preflight found, as the attach uses them.
            target: agent::Target {
                pid,
                tid: p.report.listener_tid,
                site: p.report.entry,
                function: p.report.register_detach_addr,
            },
            job: p.report.cuda.is_none().then_some(Job::Detach),
            file: record,
            only_after: Some("attach".to_string()),
        });
    }
    let fds: Vec<_> = files.iter().map(|f| f.as_fd()).collect();
    let left = agents.set_will(&will, &fds);
    tracing::debug!(
        "session: {} the agent server (pid {server}) the detach of {} process(es) should the front end die",
        if left { "handed" } else { "could not hand" },
        will.items.len()
    );
    left
}

/// Hand `agents`' server the will for one session found active and about to be detached (a
/// session another front end left, finished by `rocprof-attach --detach` or `rocattach_detach`):
/// its detach call, made unless the detach sent through this server ran to its end, and its
/// claim's records. False when there is no server.
pub fn leave_detach(agents: &Agents, a: &super::Attachment, claim: Option<&Claim>) -> bool {
    let Some(server) = agents.server_pid() else {
        return false;
    };
    let (file, record) = match claim.and_then(|c| claim_file(c, server)) {
        Some((f, r)) => (Some(f), Some(r)),
        None => (None, None),
    };
    let will = Will {
        items: vec![WillItem {
            target: agent::Target {
                pid: a.pid,
                tid: a.listener_tid,
                site: a.site,
                function: a.detach_function,
            },
            job: a.cuda.is_none().then_some(Job::Detach),
            file: record,
            only_after: None,
        }],
        timeouts: agents.timeouts(),
    };
    let fds: Vec<_> = file.iter().map(|f| f.as_fd()).collect();
    agents.set_will(&will, &fds)
}

/// A copy of `c`'s file descriptor and the records the agent writes into it.
fn claim_file(c: &Claim, agent: i32) -> Option<(std::fs::File, WillFile)> {
    let f = c.file().try_clone().ok()?;
    let mut dying = c.record().clone();
    dying.finishing_by = Some(agent);
    // May be active: if the agent is killed too, the next attach is refused with the fix.
    dying.state = State::Attached;
    dying.changed = crate::claims::now();
    let records = WillFile {
        on_death: crate::claims::record_json(&dying),
        on_success: c.encoded_as(State::Claimed, None),
        on_failure: c.encoded_as(
            State::Stranded,
            Some("its front end died and the detach its agent made for it did not complete"),
        ),
        // The agent pads them as the claim's own writes are padded.
        pad_to: crate::claims::RECORD_SIZE,
    };
    Some((f, records))
}

/// The front end finished the sessions itself (detached and settled their claims): the server
/// has nothing left to do should the front end die now.
pub fn take_back(agents: &Agents) {
    agents.clear_will();
}
