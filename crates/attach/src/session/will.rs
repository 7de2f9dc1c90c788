//! What a session leaves its agent server, so that a front end killed at any moment leaves no
//! work for a person: the server's [`Will`] (module docs of [`rocprof_engine::agent::will`]),
//! filled in here with the session's meaning.
//!
//! Once the targets are attached, the front end hands the server, per attached process, its
//! detach call (none for a CUDA process, whose tool detaches by itself when its connection
//! closes) and its claim file, with three records to write into it: "finishing" when the front
//! end is found dead (the record then names the agent, and an attach that finds it waits for
//! the agent, bounded, instead of being refused), "claimed" (nothing active: a stale claim the
//! next session takes over) once the detach ran, and "stranded" if it failed (then
//! `rocprof-attach --detach -p PID` finishes it). The server holds a copy of each claim file's
//! descriptor, and so the lock, until it is done. When the front end detached and settled the
//! claims itself, it takes the will back ([`take_back`]).
//!
//! A detach the front end had already handed over when it died runs to its end and is not sent
//! again. The tool writes its output in the detach call (synchronous output, the default), so a
//! session finished by its agent leaves the same files a finished session does.

use super::Attachment;
use crate::claims::{Claims, State};
use rocprof_engine::agent::will::{Will, WillFile, WillItem};
use rocprof_engine::agent::{Agents, Job};
use std::os::fd::AsFd;

/// Hand `agents`' server the will for `attached` (their claims in `claims`). False when there
/// is no server to finish anything (a front end killed now would leave the sessions active, for
/// `rocprof-attach --detach`).
pub fn leave(agents: &Agents, claims: &Claims, attached: &[Attachment]) -> bool {
    let Some(server) = agents.server_pid() else {
        return false;
    };
    let mut will = Will {
        items: Vec::with_capacity(attached.len()),
        timeouts: agents.timeouts(),
    };
    let mut files = Vec::new();
    for a in attached {
        let file = claims.with(a.pid, |c| {
            let f = c.file().try_clone().ok()?;
            let mut dying = c.record().clone();
            dying.finishing_by = Some(server);
            let records = WillFile {
                on_death: crate::claims::encode_record(&dying),
                on_success: c.encoded_as(State::Claimed, None),
                on_failure: c.encoded_as(
                    State::Stranded,
                    Some(
                        "its front end died and the detach its agent made for it did not complete",
                    ),
                ),
            };
            Some((f, records))
        });
        let (fd, record) = match file.flatten() {
            Some((f, r)) => (Some(f), Some(r)),
            None => (None, None),
        };
        files.extend(fd);
        will.items.push(WillItem {
            target: super::detach::known_target(a),
            job: a.cuda.is_none().then_some(Job::Detach),
            file: record,
        });
    }
    let fds: Vec<_> = files.iter().map(|f| f.as_fd()).collect();
    let left = agents.set_will(&will, &fds);
    tracing::debug!(
        "session: {} the agent server (pid {server}) the detach of {} process(es) should the front end die",
        if left { "handed" } else { "could not hand" },
        attached.len()
    );
    left
}

/// The front end finished the sessions itself (detached and settled their claims): the server
/// has nothing left to do should the front end die now.
pub fn take_back(agents: &Agents) {
    agents.clear_will();
}
