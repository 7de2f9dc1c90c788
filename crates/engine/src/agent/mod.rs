//! Runs one attach or detach injection sequence outside the front end's process.
//!
//! The tracer (the "agent") is a thread of the agent server ([`server`]), a process forked before
//! the front end starts any thread, or, when the server is gone, a child forked for the one job.
//! Either way it blocks SIGINT, SIGTERM, SIGHUP and SIGPIPE, so Ctrl-C, a closed terminal or a
//! dead front end never interrupt a sequence half-way: if rocprof-attach itself is killed (even
//! with SIGKILL) while the target's listener is stopped or patched, the agent still restores the
//! thread and releases it. The front end only reads one result line from a pipe. Our waits are
//! bounded, so the agent always finishes; if an injected call outlives its timeout, the agent
//! reports that, then stays behind until the call returns and restores the thread, because
//! abandoning it would kill the target at the stub's `int3`.
//!
//! Every step of a sequence is timed in the agent and sent back in the [`Outcome`]; the front
//! end's side emits them as `tracing` debug events (`-vv`), so nothing is logged from the agent.
//!
//! Between attach and detach nothing of ours is attached to the target
//! (docs/protocol.md section 11, item 9).

use crate::error::{Error, Result};
use crate::faults::{self, Step};
use crate::inject::{record, Injection, Phase, StepTime, Timeouts};
use crate::ptrace::{StopCounts, Tracee};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

pub mod exec;
pub mod server;
pub mod spawn;
pub mod will;

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
    /// `rocprofiler_register_attach(env, tool)` with both buffers placed in the target (on the
    /// listener's stack or in a mapping), written and removed again.
    Attach {
        /// Encoded environment buffer (docs/protocol.md section 5.10).
        #[serde(with = "hex_bytes")]
        env: Vec<u8>,
        /// Tool library string, without the terminating NUL (added here).
        #[serde(with = "hex_bytes")]
        tool: Vec<u8>,
    },
    /// `rocprofiler_register_detach()`.
    Detach,
    /// `pthread_create` of a thread that loads a tool library (the CUDA backend: [`spawn`]);
    /// [`Target::function`] is `pthread_create` and [`Target::tid`] a thread parked in a
    /// blocking system call.
    Spawn(spawn::Spawn),
}

/// Bytes as one hex string in the JSON sent to an agent: a third of the size of serde's array
/// of numbers, and quicker to write and read.
pub(crate) mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Each byte's two digits.
    const PAIRS: [[u8; 2]; 256] = {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut t = [[0u8; 2]; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = [DIGITS[i >> 4], DIGITS[i & 15]];
            i += 1;
        }
        t
    };

    /// Each digit's value, 0x10 for a byte that is no lower-case hex digit.
    const VALUES: [u8; 256] = {
        let mut t = [0x10u8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        // One table look-up per byte into a buffer of the final size (the will's records, a few
        // KiB, went through here at 7 instructions a digit).
        let mut text = vec![0u8; bytes.len() * 2];
        for (out, b) in text.chunks_exact_mut(2).zip(bytes) {
            out.copy_from_slice(&PAIRS[usize::from(*b)]);
        }
        s.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bad = || serde::de::Error::custom("bad hex string");
        let text = text.as_bytes();
        if text.len() % 2 != 0 {
            return Err(bad());
        }
        // Any byte that is no digit sets bit 4 of `seen`, checked once at the end.
        let mut out = vec![0u8; text.len() / 2];
        let mut seen = 0u8;
        for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
            let (hi, lo) = (VALUES[usize::from(pair[0])], VALUES[usize::from(pair[1])]);
            seen |= hi | lo;
            *o = hi << 4 | lo;
        }
        if seen & 0x10 != 0 {
            return Err(bad());
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct B(#[serde(with = "super")] Vec<u8>);

        #[test]
        fn hex_round_trip_and_bad_digits() {
            let all: Vec<u8> = (0..=255).collect();
            let text = serde_json::to_string(&B(all.clone())).unwrap();
            assert!(
                text.starts_with("\"000102") && text.ends_with("feff\""),
                "{text}"
            );
            assert_eq!(serde_json::from_str::<B>(&text).unwrap(), B(all));
            assert_eq!(serde_json::from_str::<B>("\"\"").unwrap(), B(vec![]));
            for bad in ["\"0\"", "\"0g\"", "\"AB\"", "\"a \"", "\"1:\""] {
                assert!(serde_json::from_str::<B>(bad).is_err(), "{bad}");
            }
        }
    }
}

impl Job {
    /// "attach" or "detach".
    pub fn name(&self) -> &'static str {
        match self {
            Job::Attach { .. } => "attach",
            Job::Detach => "detach",
            Job::Spawn(_) => "spawn",
        }
    }
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
    /// Microseconds from the interrupt request to the release of the listener, minus the time
    /// the injected call itself ran (the "listener stopped" time we cause).
    pub stopped_us: u64,
    /// Microseconds the injected register call ran.
    pub call_us: u64,
    /// Microseconds for the whole sequence, seize to release.
    pub total_us: u64,
    /// The call outlived its timeout; the agent (this pid) stays until it returns.
    pub pending_agent: Option<i32>,
    /// Every step of the sequence with its duration, in order (for `-vv` and benchmarks).
    #[serde(default)]
    pub steps: Vec<StepTime>,
    /// A [`Job::Spawn`] that started its thread: the address of its block in the target
    /// ([`spawn::read_block`]).
    #[serde(default)]
    pub spawn_block: Option<u64>,
}

impl Outcome {
    /// Nanoseconds the listener spent stopped because of us: every step from the interrupt to
    /// the release, except the injected call itself.
    pub fn stopped_ns(&self) -> u64 {
        self.steps
            .iter()
            .filter(|s| !matches!(s.phase, Phase::Seize | Phase::Prepare | Phase::Call))
            .map(|s| s.ns)
            .sum()
    }

    /// Emit each step as a `tracing` debug event (shown with `-vv`).
    pub fn log_steps(&self, target: &Target, what: &str) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        for s in &self.steps {
            tracing::debug!(
                pid = target.pid,
                tid = target.tid,
                "{what}: {} took {:.1} µs",
                s.phase.name(),
                s.ns as f64 / 1e3
            );
        }
        tracing::debug!(
            pid = target.pid,
            tid = target.tid,
            "{what}: listener stopped {:.1} µs outside the call, {} stop(s) + {} completion(s)",
            self.stopped_ns() as f64 / 1e3,
            self.interrupts,
            self.traps
        );
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    outcome: Outcome,
    error: Option<WireError>,
}

/// What an agent sent back, or why nothing usable came.
type WireResult = std::result::Result<Wire, String>;

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
/// a small process), else a fork of this process ([`run`]); for a caller that must not fork
/// ([`Agents::exec`]), a server started as a program, else one agent program per job
/// ([`exec::run_exec`]).
#[derive(Debug)]
pub struct Agents {
    server: Option<server::AgentServer>,
    timeouts: CallTimeouts,
    /// How a job runs without the server.
    spare: Spare,
}

/// How [`Agents`] runs a job when it has no server (it could not be started, or was killed).
#[derive(Debug)]
enum Spare {
    /// A fork of this process ([`run`]).
    Fork,
    /// The agent program ([`exec::run_exec`]); agents that stay behind with a call that
    /// outlived its timeout are kept to be reaped later.
    Exec(
        std::path::PathBuf,
        std::sync::Mutex<Vec<std::process::Child>>,
    ),
}

/// An agent server forked by [`prestart`], waiting for the session that [`Agents::start`] makes.
static PRESTARTED: std::sync::Mutex<Option<server::AgentServer>> = std::sync::Mutex::new(None);

/// Fork the agent server now, at the very start of the process, for the session that will
/// follow ([`Agents::start`] takes it). A server forked before the command line is parsed is a
/// copy of a process that has allocated almost nothing yet: the fork copies fewer page tables, and
/// neither side takes copy-on-write faults on the parser's memory afterwards. A server nobody takes
/// exits when this process does (its socket closes). Call it before any thread starts.
pub fn prestart() {
    if let Ok(server) = server::AgentServer::start() {
        *PRESTARTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(server);
    }
}

/// End the server [`prestart`] forked when no session will take it (the command turned out to be
/// something else): it exits and is reaped now rather than when this process exits.
pub fn discard_prestarted() {
    drop(PRESTARTED.lock().unwrap_or_else(|e| e.into_inner()).take());
}

impl Agents {
    /// Start the agent server (or take the one [`prestart`] forked). Call it before the process
    /// starts threads.
    pub fn start(timeouts: CallTimeouts) -> Agents {
        let early = PRESTARTED.lock().unwrap_or_else(|e| e.into_inner()).take();
        Agents {
            server: early.or_else(|| server::AgentServer::start().ok()),
            timeouts,
            spare: Spare::Fork,
        }
    }

    /// Start an agent server as a new process from `program` (the `rocprof-attach` binary), for
    /// a caller that must never fork itself (a library loaded into someone else's process). Jobs
    /// the server cannot take (it was killed) run in one agent program each, never in a fork.
    pub fn exec(program: &std::path::Path, timeouts: CallTimeouts) -> Result<Agents> {
        Ok(Agents {
            server: Some(server::AgentServer::spawn(program)?),
            timeouts,
            spare: Spare::Exec(program.to_path_buf(), Default::default()),
        })
    }

    /// Run `job` without the server: see [`Spare`].
    fn run_spare(&self, target: &Target, job: &Job) -> Result<Outcome> {
        match &self.spare {
            Spare::Fork => run(target, job, self.timeouts),
            Spare::Exec(program, pending) => {
                let lock = || pending.lock().unwrap_or_else(|e| e.into_inner());
                lock().retain_mut(|c| matches!(c.try_wait(), Ok(None)));
                let (result, leftover) = exec::run_exec(program, target, job, self.timeouts);
                lock().extend(leftover);
                result
            }
        }
    }

    /// Hand the agent server a [`will::Will`]: what it finishes by itself if this process dies
    /// before [`Agents::clear_will`]. False when there is no server (agents forked per job end
    /// with their job): nobody would finish anything.
    pub fn set_will(&self, w: &will::Will, files: &[std::os::fd::BorrowedFd]) -> bool {
        self.server.as_ref().is_some_and(|s| s.set_will(w, files))
    }

    /// Take the will back: the front end did its work itself.
    pub fn clear_will(&self) {
        if let Some(s) = &self.server {
            s.clear_will();
        }
    }

    /// The agent server's process id (None without a server).
    pub fn server_pid(&self) -> Option<i32> {
        self.server.as_ref().map(server::AgentServer::pid)
    }

    /// The call timeouts.
    pub fn timeouts(&self) -> CallTimeouts {
        self.timeouts
    }

    /// Run `job` on `target` in an agent and return its outcome (its steps are logged at debug
    /// level).
    pub fn run(&self, target: &Target, job: &Job) -> Result<Outcome> {
        let outcome = match &self.server {
            Some(server) => match server.run(target, job, self.timeouts)? {
                Some(outcome) => outcome,
                None => self.run_spare(target, job)?,
            },
            None => self.run_spare(target, job)?,
        };
        outcome.log_steps(target, job.name());
        Ok(outcome)
    }

    /// Run every job, at most `limit` at the same time, from the calling thread; results in the
    /// order of `jobs`. With the server, requests are pipelined (no thread per job here);
    /// without it, each job forks its own agent, one after the other.
    pub fn run_all(
        &self,
        jobs: &[(Target, Job)],
        limit: usize,
        handed: &dyn Fn(usize),
    ) -> Vec<Result<Outcome>> {
        let results = match &self.server {
            Some(server) => server.run_all(jobs, limit, self.timeouts, handed),
            None => (0..jobs.len()).map(|_| None).collect(),
        };
        results
            .into_iter()
            .zip(jobs)
            .enumerate()
            .map(|(i, (r, (target, job)))| {
                let outcome = match r {
                    Some(r) => r?,
                    None => {
                        handed(i);
                        self.run_spare(target, job)?
                    }
                };
                outcome.log_steps(target, job.name());
                Ok(outcome)
            })
            .collect()
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
    record(&mut outcome.steps, Phase::Seize, started);
    let attach = !matches!(job, Job::Detach);
    faults::point(if attach { Step::Seize } else { Step::Reseize });
    let mut pending_error = None;
    let result = sequence(&mut tracee, target, job, timeouts, &mut outcome, |o, e| {
        on_pending(o, e);
        pending_error = Some(e.to_string());
    });
    fill_counts(&mut outcome, tracee.counts());
    // A completed sequence leaves the thread stopped and restored: PTRACE_DETACH resumes it
    // directly. After an error the thread was resumed by the restore, so it is stopped again first.
    let t = Instant::now();
    let released = match &result {
        Err(Error::TargetDied { .. }) => Ok(()),
        // Group-stopped instead of interrupt-stopped: still a ptrace-stop, nothing changed.
        Ok(())
        | Err(Error::GroupStopped {
            running_injected: false,
            ..
        }) => tracee.detach_stopped(),
        Err(_) => tracee.detach(timeouts.engine.stop),
    };
    record(&mut outcome.steps, Phase::Detach, t);
    outcome.stopped_us = outcome.stopped_ns() / 1000;
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

/// One injection: stop, place the buffers (on the listener's stack when small), call, restore.
/// On success the thread is left stopped (restored) for the PTRACE_DETACH that follows.
fn sequence(
    tracee: &mut Tracee,
    t: &Target,
    job: &Job,
    to: CallTimeouts,
    out: &mut Outcome,
    mut on_pending: impl FnMut(&Outcome, &Error),
) -> Result<()> {
    if let Job::Spawn(spawn) = job {
        let mut inj = Injection::begin(tracee, t.site, to.engine)?;
        let status = spawn::run(&mut inj, t, spawn, to.attach, out);
        return match status {
            Ok(s) => {
                out.status = Some(s);
                out.steps.extend(inj.finish_stopped()?);
                Ok(())
            }
            Err(e) if inj.is_pending() => {
                out.pending_agent = Some(std::process::id() as i32);
                on_pending(out, &e);
                inj.wait_for_pending_call()?;
                out.steps.extend(inj.finish_stopped()?);
                Ok(())
            }
            Err(e) => Err(e),
        };
    }
    // The buffers are built before the thread is stopped.
    let (data, tool_offset) = match job {
        Job::Attach { env, tool } => {
            // One block holds both buffers: the environment, then the NUL-terminated path.
            let mut data = Vec::with_capacity(env.len() + tool.len() + 1);
            data.extend_from_slice(env);
            data.extend_from_slice(tool);
            data.push(0);
            (Some(data), env.len() as u64)
        }
        Job::Detach | Job::Spawn(_) => (None, 0),
    };
    let mut inj = Injection::begin(tracee, t.site, to.engine)?;
    let called = place_and_call(&mut inj, t, data.as_deref(), tool_offset, to, out);
    match called {
        Ok(s) => out.status = Some(s),
        // Our code outlived its wait (a timeout, or job control stopped the thread in it): say
        // so now, then stay until it returns, so the thread can be restored. The target's
        // safety comes first.
        Err(e) if inj.is_pending() => {
            out.pending_agent = Some(std::process::id() as i32);
            on_pending(out, &e);
            inj.wait_for_pending_call()?;
        }
        Err(e) => return Err(e),
    }
    let steps = inj.finish_stopped()?;
    out.steps.extend(steps);
    Ok(())
}

/// Place the job's buffers and make its call; the call's duration goes to `out.call_us`.
fn place_and_call(
    inj: &mut Injection,
    t: &Target,
    data: Option<&[u8]>,
    tool_offset: u64,
    to: CallTimeouts,
    out: &mut Outcome,
) -> Result<i32> {
    let (args, step, timeout) = match data {
        Some(data) => {
            let env_addr = inj.place(data)?;
            let tool_addr = env_addr + tool_offset;
            ([env_addr, tool_addr, 0, 0, 0, 0], Step::Call, to.attach)
        }
        None => ([0; 6], Step::DetachCall, to.detach),
    };
    faults::point(step);
    let call_start = Instant::now();
    let status = inj.call_int(t.function, args, Some(timeout));
    out.call_us = call_start.elapsed().as_micros() as u64;
    status
}

/// The body of a forked agent: run the job, send the result, exit.
fn agent_main(target: &Target, job: &Job, timeouts: CallTimeouts, pipe: OwnedFd) -> ! {
    crate::ptrace::block_terminal_signals();
    let _ = agent_job(
        target,
        job,
        timeouts,
        Reply::Pipe(std::fs::File::from(pipe)),
    );
    crate::ptrace::exit_now(0)
}

/// Where an agent sends its result.
pub(crate) enum Reply {
    /// A pipe of its own, one line (forked agents, and single jobs through the server).
    Pipe(std::fs::File),
    /// The server's socket, one message tagged with the job's number (batches through the
    /// server: no pipe per job).
    Socket {
        /// The server's end of the socket.
        sock: std::sync::Arc<OwnedFd>,
        /// The number the front end gave the job.
        id: u64,
    },
    /// Nobody (a job of a [`will::Will`]: its front end is gone).
    Nowhere,
}

impl Reply {
    fn send(&mut self, line: &[u8]) {
        match self {
            Reply::Nowhere => {}
            Reply::Pipe(file) => {
                let _ = file.write_all(line);
            }
            Reply::Socket { sock, id } => {
                use std::os::fd::AsRawFd;
                let mut msg = Vec::with_capacity(8 + line.len());
                msg.extend_from_slice(&id.to_le_bytes());
                msg.extend_from_slice(line);
                let _ = nix::sys::socket::send(
                    sock.as_raw_fd(),
                    &msg,
                    nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                );
            }
        }
    }
}

/// Run one job on the calling thread and send its result through `reply` (the body of an agent,
/// whether a server thread or a forked child). The caller has blocked terminal signals.
/// Returns how it ended ([`JobEnd`]).
fn agent_job(target: &Target, job: &Job, timeouts: CallTimeouts, mut reply: Reply) -> JobEnd {
    // Stops and resumes are cheapest when tracer and tracee share a CPU: this thread moves to
    // the listener's CPU for this job (unless another job's thread already runs there).
    let _pin = crate::ptrace::pin_near(target.pid, target.tid);
    let mut reported = false;
    let (outcome, result) = execute(target, job, timeouts, |o, e| {
        send(&mut reply, o.clone(), Some(e));
        reported = true;
    });
    let end = JobEnd {
        done: completed(&outcome, &result),
        status: outcome.status,
    };
    if !reported {
        send(&mut reply, outcome, result.as_ref().err());
    }
    end
}

/// How a job ended, as a will needs it ([`will`]): whether it needs nothing more, and what the
/// injected function returned (None when the call did not complete).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JobEnd {
    /// The call ran to its end, or the target is gone ([`completed`]).
    pub done: bool,
    /// What the injected function returned.
    pub status: Option<i32>,
}

/// Whether a job needs nothing more: its call ran to its end (whatever the function returned),
/// or its target is gone.
fn completed(outcome: &Outcome, result: &Result<()>) -> bool {
    match result {
        Ok(()) => outcome.status.is_some(),
        Err(Error::TargetDied { .. } | Error::ProcessGone { .. }) => true,
        Err(_) => false,
    }
}

fn send(reply: &mut Reply, outcome: Outcome, err: Option<&Error>) {
    let error = err.map(|e| WireError {
        kind: match e {
            // The process vanished between two of our steps (e.g. /proc read after a SIGKILL).
            Error::TargetDied { .. } | Error::ProcessGone { .. } => "died",
            Error::Timeout { .. } => "timeout",
            Error::GroupStopped {
                running_injected: false,
                ..
            } => "stopped",
            Error::GroupStopped { .. } => "stopped-running",
            Error::PtracePermission { .. } => "permission",
            Error::NotParked { .. } => "not-parked",
            _ => "other",
        }
        .to_string(),
        message: match e {
            Error::TargetDied { during, .. } => during.clone(),
            Error::ProcessGone { .. } => "an injection sequence".into(),
            Error::Timeout { what, .. } => what.clone(),
            Error::PtracePermission { what, .. } => what.clone(),
            Error::NotParked { found, .. } => found.clone(),
            other => other.to_string(),
        },
        after_ms: match e {
            Error::Timeout { after_ms, .. } | Error::GroupStopped { after_ms, .. } => *after_ms,
            _ => 0,
        },
    });
    if let Ok(mut line) = serde_json::to_vec(&Wire { outcome, error }) {
        line.push(b'\n');
        reply.send(&line);
    }
}

/// A result that arrived as a message (batches through the server): (job number, result).
fn parse_tagged(msg: &[u8]) -> Option<(u64, std::result::Result<Wire, String>)> {
    let id = u64::from_le_bytes(msg.get(..8)?.try_into().ok()?);
    let wire = serde_json::from_slice(&msg[8..])
        .map_err(|e| format!("malformed result from the injection agent: {e}"));
    Some((id, wire))
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
        "stopped" | "stopped-running" => Error::GroupStopped {
            pid: t.pid,
            tid: t.tid,
            running_injected: e.kind == "stopped-running",
            after_ms: e.after_ms,
        },
        "permission" => Error::PtracePermission {
            pid: t.pid,
            what: e.message,
        },
        "not-parked" => Error::NotParked {
            pid: t.pid,
            tid: t.tid,
            found: e.message,
        },
        _ => Error::Agent {
            pid: t.pid,
            message: e.message,
        },
    }
}
