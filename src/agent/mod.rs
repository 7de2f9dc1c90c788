//! Runs one attach or detach injection sequence in a short-lived child process.
//!
//! The child (the "agent") is the ptrace tracer. It blocks SIGINT, SIGTERM, SIGHUP and SIGPIPE,
//! so Ctrl-C, a closed terminal or a dead front end never interrupt a sequence half-way: if
//! rocprof-attach itself is killed (even with SIGKILL) while the target's listener is stopped or
//! patched, the agent still restores the thread and releases it. The front end only reads one
//! result line from a pipe. Our waits are bounded, so the agent always finishes; if an injected
//! call outlives its timeout, the agent reports that, then stays behind until the call returns
//! and restores the thread, because abandoning it would kill the target at the stub's `int3`.
//!
//! Between attach and detach nothing of ours is attached to the target (protocol section 11.9).

use crate::error::{Error, Result};
use crate::faults::{self, Step};
use crate::inject::{Injection, Timeouts};
use crate::ptrace::{StopCounts, Tracee};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

pub mod server;

/// Addresses and parameters of one injection, resolved by the front end from `/proc` and ELF.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    /// Process id.
    pub pid: i32,
    /// Thread id of the `rocp-bg-attach` listener.
    pub tid: i32,
    /// Injection site (AT_ENTRY).
    pub site: u64,
    /// Address of the function to call in the target.
    pub function: u64,
}

/// What to inject.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job {
    /// `rocprofiler_register_attach(env, tool)` with both buffers mapped, written and unmapped.
    Attach {
        /// Encoded environment buffer (protocol section 5.10).
        env: Vec<u8>,
        /// Tool library string, without the terminating NUL (added here).
        tool: Vec<u8>,
    },
    /// `rocprofiler_register_detach()`.
    Detach,
}

/// The result of a sequence.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Outcome {
    /// Value returned by the register function (None when the call did not complete).
    pub status: Option<i32>,
    /// ptrace stops observed on the listener.
    pub interrupts: u64,
    /// Breakpoint stops (one per remote syscall or call).
    pub traps: u64,
    /// Signals re-delivered while traced.
    pub forwarded_signals: u64,
    /// Microseconds from the interrupt-stop to the release of the listener, minus the time the
    /// injected call itself ran (the "listener stopped" time we cause).
    pub stopped_us: u64,
    /// Microseconds the injected register call ran.
    pub call_us: u64,
    /// Microseconds for the whole sequence, seize to release.
    pub total_us: u64,
    /// The call outlived its timeout; the agent (this pid) stays until it returns.
    pub pending_agent: Option<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    outcome: Outcome,
    error: Option<WireError>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireError {
    kind: String,
    message: String,
    after_ms: u64,
}

/// Timeouts for the register calls.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CallTimeouts {
    /// Bounds for stops and syscalls.
    pub engine: Timeouts,
    /// The attach call (tool loading and configuration).
    pub attach: Duration,
    /// The detach call (with sync output it writes every output file).
    pub detach: Duration,
}

impl Default for CallTimeouts {
    fn default() -> Self {
        CallTimeouts {
            engine: Timeouts::default(),
            attach: Duration::from_secs(120),
            detach: Duration::from_secs(1800),
        }
    }
}

/// Where agents come from: the [`server::AgentServer`] when it could be started (cheap forks of
/// a small process), else a fork of this process ([`run`]).
#[derive(Debug)]
pub struct Agents {
    server: Option<server::AgentServer>,
    timeouts: CallTimeouts,
}

impl Agents {
    /// Start the agent server. Call it before the process starts threads.
    pub fn start(timeouts: CallTimeouts) -> Agents {
        Agents {
            server: server::AgentServer::start().ok(),
            timeouts,
        }
    }

    /// Run `job` on `target` in a fresh agent and return its outcome.
    pub fn run(&self, target: &Target, job: &Job) -> Result<Outcome> {
        if let Some(server) = &self.server {
            if let Some(outcome) = server.run(target, job, self.timeouts)? {
                return Ok(outcome);
            }
        }
        run(target, job, self.timeouts)
    }
}

/// Run `job` on `target` in a forked agent and return its outcome.
pub fn run(target: &Target, job: &Job, timeouts: CallTimeouts) -> Result<Outcome> {
    let (read_end, write_end) = nix::unistd::pipe()
        .map_err(|e| Error::io("creating the agent pipe", std::io::Error::from(e)))?;
    match crate::ptrace::fork_agent()? {
        nix::unistd::ForkResult::Child => {
            drop(read_end);
            agent_main(target, job, timeouts, write_end)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(write_end);
            let wire = read_result(read_end);
            let pending = matches!(&wire, Ok(w) if w.outcome.pending_agent.is_some());
            if !pending {
                let _ = nix::sys::wait::waitpid(child, None);
            }
            outcome_of(target, wire)
        }
    }
}

/// The caller's view of what an agent sent back.
fn outcome_of(target: &Target, wire: std::result::Result<Wire, String>) -> Result<Outcome> {
    let wire = wire.map_err(|msg| Error::Agent {
        pid: target.pid,
        message: msg,
    })?;
    match wire.error {
        None => Ok(wire.outcome),
        Some(e) => Err(rebuild_error(target, e)),
    }
}

/// Run `job` in this process (the agent's body; also used by benchmarks and tests). Must be
/// called from the thread that will trace. A call that outlives its timeout is waited for (the
/// target's safety first) and then reported as a timeout.
pub fn run_here(target: &Target, job: &Job, timeouts: CallTimeouts) -> Result<Outcome> {
    let (outcome, result) = execute(target, job, timeouts, |_, _| {});
    result.map(|()| outcome)
}

/// The sequence shared by the agent and [`run_here`]: seize, one injection, release.
/// `on_pending` is told about a call that outlived its timeout before it is waited for.
fn execute(
    target: &Target,
    job: &Job,
    timeouts: CallTimeouts,
    mut on_pending: impl FnMut(&Outcome, &Error),
) -> (Outcome, Result<()>) {
    let mut outcome = Outcome::default();
    let started = Instant::now();
    let mut tracee = match Tracee::seize(target.pid, target.tid) {
        Ok(t) => t,
        Err(e) => return (outcome, Err(e)),
    };
    let attach = matches!(job, Job::Attach { .. });
    faults::point(if attach { Step::Seize } else { Step::Reseize });
    let mut pending_error = None;
    let result = sequence(&mut tracee, target, job, timeouts, &mut outcome, |o, e| {
        on_pending(o, e);
        pending_error = Some(e.to_string());
    });
    fill_counts(&mut outcome, tracee.counts());
    // A completed sequence leaves the thread stopped and restored: PTRACE_DETACH resumes it
    // directly. After an error the thread was resumed by the restore, so it is stopped again first.
    let released = match &result {
        Err(Error::TargetDied { .. }) => Ok(()),
        Ok(()) => tracee.detach_stopped(),
        Err(_) => tracee.detach(timeouts.engine.stop),
    };
    if attach && result.is_ok() && released.is_ok() {
        faults::point(Step::Release);
    }
    outcome.total_us = started.elapsed().as_micros() as u64;
    let result = match (result, released, pending_error) {
        (Err(e), _, _) | (Ok(()), Err(e), _) => Err(e),
        (Ok(()), Ok(()), Some(msg)) => Err(Error::Agent {
            pid: target.pid,
            message: msg,
        }),
        (Ok(()), Ok(()), None) => Ok(()),
    };
    (outcome, result)
}

fn fill_counts(o: &mut Outcome, c: StopCounts) {
    o.interrupts = c.interrupts;
    o.traps = c.traps;
    o.forwarded_signals = c.forwarded_signals;
}

/// One injection: stop, map and write the buffers, call, unmap, restore. On success the thread
/// is left stopped (restored) for the PTRACE_DETACH that follows.
fn sequence(
    tracee: &mut Tracee,
    t: &Target,
    job: &Job,
    to: CallTimeouts,
    out: &mut Outcome,
    mut on_pending: impl FnMut(&Outcome, &Error),
) -> Result<()> {
    let stop_start = Instant::now();
    let mut inj = Injection::begin(tracee, t.site, to.engine)?;
    let (args, step, timeout) = match job {
        Job::Attach { env, tool } => {
            // One mapping holds both buffers: the environment, then the NUL-terminated path.
            let mut data = env.clone();
            data.extend_from_slice(tool);
            data.push(0);
            let env_addr = inj.push_buffer(&data)?;
            let tool_addr = env_addr + env.len() as u64;
            ([env_addr, tool_addr, 0, 0, 0, 0], Step::Call, to.attach)
        }
        Job::Detach => ([0; 6], Step::DetachCall, to.detach),
    };
    faults::point(step);
    let call_start = Instant::now();
    match inj.call_int(t.function, args, Some(timeout)) {
        Ok(s) => out.status = Some(s),
        Err(e @ Error::Timeout { .. }) => {
            out.pending_agent = Some(std::process::id() as i32);
            on_pending(out, &e);
            inj.wait_for_pending_call()?;
        }
        Err(e) => return Err(e),
    }
    out.call_us = call_start.elapsed().as_micros() as u64;
    inj.finish_stopped()?;
    out.stopped_us = (stop_start.elapsed().as_micros() as u64).saturating_sub(out.call_us);
    Ok(())
}

fn agent_main(target: &Target, job: &Job, timeouts: CallTimeouts, pipe: OwnedFd) -> ! {
    crate::ptrace::block_terminal_signals();
    // Stops and resumes are cheapest when tracer and tracee share a CPU; this process is the
    // short-lived agent, so pinning it affects nothing else.
    crate::ptrace::follow_cpu_of(target.pid, target.tid);
    let mut file = std::fs::File::from(pipe);
    let mut reported = false;
    let (outcome, result) = execute(target, job, timeouts, |o, e| {
        send(&mut file, o.clone(), Some(e));
        reported = true;
    });
    if !reported {
        send(&mut file, outcome, result.as_ref().err());
    }
    crate::ptrace::exit_now(0)
}

fn send(file: &mut std::fs::File, outcome: Outcome, err: Option<&Error>) {
    let error = err.map(|e| WireError {
        kind: match e {
            // The process vanished between two of our steps (e.g. /proc read after a SIGKILL).
            Error::TargetDied { .. } | Error::ProcessGone { .. } => "died",
            Error::Timeout { .. } => "timeout",
            Error::PtracePermission { .. } => "permission",
            _ => "other",
        }
        .to_string(),
        message: match e {
            Error::TargetDied { during, .. } => during.clone(),
            Error::ProcessGone { .. } => "an injection sequence".into(),
            Error::Timeout { what, .. } => what.clone(),
            Error::PtracePermission { what, .. } => what.clone(),
            other => other.to_string(),
        },
        after_ms: match e {
            Error::Timeout { after_ms, .. } => *after_ms,
            _ => 0,
        },
    });
    if let Ok(mut line) = serde_json::to_vec(&Wire { outcome, error }) {
        line.push(b'\n');
        let _ = file.write_all(&line);
    }
}

fn read_result(fd: OwnedFd) -> std::result::Result<Wire, String> {
    let mut line = String::new();
    let mut reader = BufReader::new(std::fs::File::from(fd));
    loop {
        match reader.read_line(&mut line) {
            Ok(0) => {
                return Err(
                    "the injection agent ended without a result (it crashed or was killed)".into(),
                )
            }
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading the injection agent's result: {e}")),
        }
    }
    serde_json::from_str(&line)
        .map_err(|e| format!("malformed result from the injection agent: {e}"))
}

fn rebuild_error(t: &Target, e: WireError) -> Error {
    match e.kind.as_str() {
        "died" => Error::TargetDied {
            pid: t.pid,
            tid: t.tid,
            during: e.message,
        },
        "timeout" => Error::Timeout {
            pid: t.pid,
            tid: t.tid,
            what: e.message,
            after_ms: e.after_ms,
        },
        "permission" => Error::PtracePermission {
            pid: t.pid,
            what: e.message,
        },
        _ => Error::Agent {
            pid: t.pid,
            message: e.message,
        },
    }
}
