//! The agent as a separate executable, for callers that must not fork themselves.
//!
//! A library loaded into someone else's process (the rocattach C ABI in rocprof-attach) cannot
//! `fork()` without `exec()`: the host may be a multi-threaded Python whose locks a forked copy
//! would inherit held. So it spawns a program (the `rocprof-attach` binary, hidden `__agent`
//! argument) with `posix_spawn`/`exec`, writes one JSON request on its stdin and reads the usual
//! result line from its stdout. The spawned agent runs the same body (`agent_main`) as the forked
//! one: terminal signals blocked, bounded waits, and if the caller dies (even SIGKILL) it still
//! finishes its sequence and restores the thread; it only fails to deliver the result.

use super::{agent_main, outcome_of, read_result, CallTimeouts, Job, Outcome, Target};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The argument that makes the `rocprof-attach` binary run [`agent_stdio_main`].
pub const AGENT_ARG: &str = "__agent";

/// Largest request accepted on stdin.
const MAX_REQUEST: u64 = 8 << 20;

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    /// Crate version of the caller: the agent refuses a request from another version.
    version: String,
    target: Target,
    job: Job,
    timeouts: CallTimeouts,
}

/// Run `job` on `target` in a new process started from `program` (with [`AGENT_ARG`]).
///
/// Returns the outcome and, when the injected call outlived its timeout and the agent stays
/// behind until it returns, the agent's [`Child`] for the caller to reap later.
pub fn run_exec(
    program: &Path,
    target: &Target,
    job: &Job,
    timeouts: CallTimeouts,
) -> (Result<Outcome>, Option<Child>) {
    match spawn(program, target, job, timeouts) {
        Ok(child) => finish(child, target),
        Err(e) => (Err(e), None),
    }
}

fn spawn(program: &Path, target: &Target, job: &Job, timeouts: CallTimeouts) -> Result<Child> {
    let request = Request {
        version: env!("CARGO_PKG_VERSION").to_string(),
        target: target.clone(),
        job: job.clone(),
        timeouts,
    };
    let mut line = serde_json::to_vec(&request).map_err(|e| Error::Agent {
        pid: target.pid,
        message: e.to_string(),
    })?;
    line.push(b'\n');
    let mut child = Command::new(program)
        .arg(AGENT_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            Error::io(
                format!(
                    "starting the injection agent {} (set ROCATTACH_AGENT to the path of the \
                     rocprof-attach binary)",
                    program.display()
                ),
                e,
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A failed write shows up as the agent's error line or its missing result.
        let _ = stdin.write_all(&line);
    }
    Ok(child)
}

fn finish(mut child: Child, target: &Target) -> (Result<Outcome>, Option<Child>) {
    let stdout = child.stdout.take();
    let wire = match stdout {
        Some(out) => read_result(OwnedFd::from(out)),
        None => Err("the injection agent has no stdout".to_string()),
    };
    let pending = matches!(&wire, Ok(w) if w.outcome.pending_agent.is_some());
    let leftover = if pending {
        Some(child)
    } else {
        // The host may reap children itself (SIGCHLD ignored or a waitpid(-1) loop): ignore ECHILD.
        let _ = child.wait();
        None
    };
    (outcome_of(target, wire), leftover)
}

/// Body of the `rocprof-attach __agent` process: read one request from stdin, run it, write the
/// result line on stdout, exit. Never returns.
pub fn agent_stdio_main() -> ! {
    let mut text = String::new();
    let read = std::io::stdin().take(MAX_REQUEST).read_to_string(&mut text);
    let out = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .unwrap_or_else(|_| crate::ptrace::exit_now(3));
    let request = match read {
        Ok(_) => serde_json::from_str::<Request>(text.trim_end())
            .map_err(|e| format!("malformed request: {e}")),
        Err(e) => Err(format!("reading the request: {e}")),
    };
    match request {
        Ok(r) if r.version == env!("CARGO_PKG_VERSION") => {
            agent_main(&r.target, &r.job, r.timeouts, out)
        }
        Ok(r) => refuse(
            out,
            &format!(
                "the rocprof-attach agent is version {} but the library calling it is {}: install \
                 both from the same build (or point ROCATTACH_AGENT at the matching binary)",
                env!("CARGO_PKG_VERSION"),
                r.version
            ),
        ),
        Err(msg) => refuse(out, &msg),
    }
}

/// Answer with an error and exit (nothing was touched).
fn refuse(out: OwnedFd, message: &str) -> ! {
    let mut file = std::fs::File::from(out);
    let wire = super::Wire {
        outcome: Outcome::default(),
        error: Some(super::WireError {
            kind: "other".into(),
            message: message.to_string(),
            after_ms: 0,
        }),
    };
    if let Ok(mut line) = serde_json::to_vec(&wire) {
        line.push(b'\n');
        let _ = file.write_all(&line);
    }
    crate::ptrace::exit_now(2)
}
