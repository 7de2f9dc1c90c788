//! `rocprof-attach --detach -p PID`: finish a session left active in a process (its detach
//! failed, exit code 11, or its front end was killed during the profiling window). The claim
//! recorded for the process ([`crate::attach::claims`]) says that a session is active and where
//! its output goes; this takes it over, detaches, and removes it.

use crate::attach::claims::{Claim, Holder, Purpose, State, FRONT_END_CLI};
use crate::attach::session::{self, DetachControl, Event, Waiter};
use crate::attach::Error;
use crate::cli::render::Ui;
use crate::engine::agent::{Agents, CallTimeouts};
use crate::exit::ExitCode;
use std::time::Duration;

/// Finish the sessions of `pids`, one after the other; the exit code of the last that failed.
pub fn run(pids: &[i32], stopped_wait: Duration, ui: &Ui) -> ExitCode {
    let mut timeouts = CallTimeouts::default();
    timeouts.engine.stopped = stopped_wait;
    let agents = Agents::start(timeouts);
    let waiter = match Waiter::install() {
        Ok(w) => w,
        Err(e) => {
            ui.error(e.to_string());
            return e.exit_code();
        }
    };
    let mut code = ExitCode::Success;
    for &pid in pids {
        let c = finish(pid, stopped_wait, &agents, &waiter, ui);
        if c != ExitCode::Success {
            code = c;
        }
    }
    code
}

fn finish(pid: i32, stopped_wait: Duration, agents: &Agents, waiter: &Waiter, ui: &Ui) -> ExitCode {
    let holder = Holder {
        front_end: FRONT_END_CLI.into(),
        output: None,
        sync_output: None,
    };
    let mut claim = match Claim::acquire(pid, &holder, Purpose::Finish) {
        Ok(c) => c,
        Err(e) => {
            ui.error(e.to_string());
            return e.exit_code();
        }
    };
    if let Some(prev) = claim.previous() {
        ui.info(format!(
            "process {pid}: finishing the session left by {} {}: {}; {}",
            prev.front_end,
            prev.since(),
            prev.why_left(),
            prev.output_clause()
        ));
    }
    let output = claim.record().output.clone();
    let sync_output = claim.record().sync_output.unwrap_or(true);
    let attachment = match session::lookup(pid) {
        Ok(a) => a,
        Err(e) => return failed(&mut claim, e, ui),
    };
    let events = |ev: Event| ui.event(ev);
    let ctl = DetachControl::new(stopped_wait);
    let mut out = waiter.shielded(
        || session::detach_with(&[attachment], 1, sync_output, agents, &events, &ctl),
        &ctl,
        &events,
        // Finishing a session is the one way to its output: a second Ctrl-C keeps waiting.
        &|_| {},
    );
    if let Some(f) = out.failures.pop() {
        // Detach failures are not shown as events (a session's conclusion says them once).
        if matches!(f.error, Error::DetachFailed { .. }) {
            ui.error(f.error.to_string());
        }
        return failed(&mut claim, f.error, ui);
    }
    claim.set(State::Claimed);
    if let Some(o) = output {
        ui.info(format!(
            "process {pid}: its session is finished; the tool wrote its output under {o}{}",
            if sync_output {
                ""
            } else {
                " (in the background: it may still be writing)"
            }
        ));
    }
    ExitCode::Success
}

/// The detach did not happen: a target that exited has no session any more; any other failure
/// leaves the record of an active session, with why.
fn failed(claim: &mut Claim, e: Error, ui: &Ui) -> ExitCode {
    let pid = claim.pid();
    match &e {
        Error::ProcessGone { .. } | Error::TargetExited { .. } => {
            claim.set(State::Claimed);
            ui.error(format!(
                "process {pid} exited: its session ended with it (the tool writes its output when the process exits)"
            ));
        }
        // The call ran and rocprofiler-register answered: nothing more a detach can do (the
        // session was already over, e.g. a detach call that finished after its front end gave
        // up). The record goes, so the process can be attached again.
        Error::DetachFailed { reason, .. } if reason.starts_with("the target rejected") => {
            claim.set(State::Claimed);
            ui.warn(format!(
                "process {pid}: its session is no longer recorded as active, since the detach call ran \
                 but was refused (the session had probably ended already)"
            ));
            return ExitCode::Rejected;
        }
        Error::DetachFailed { reason, .. } => {
            claim.strand(reason);
            ui.hint(format!(
                "rocprof-attach: the session of process {pid} is still recorded as active; run `rocprof-attach \
                 --detach -p {pid}` again once it can run the detach call"
            ));
        }
        other => {
            claim.strand(&other.to_string());
            ui.error(other.to_string());
        }
    }
    e.exit_code()
}
