//! Step two: attach every planned process, roots first, each phase in parallel.

use super::events::{Event, Events, Stage};
use super::plan::{Failure, Plan, Planned};
use super::{register_status, Injector};
use crate::claims::State;
use crate::envbuf::{self, EnvList};
use crate::error::{Error, Result};
use rocprof_engine::agent::{self, Job, Outcome};
use serde::Serialize;
use std::collections::HashMap;

/// A process we attached to: all a later [`super::detach()`] needs, so it can be kept by a
/// library front end between calls.
#[derive(Debug, Clone, Serialize)]
pub struct Attachment {
    /// Process id.
    pub pid: i32,
    /// The selected process whose tree it belongs to (itself for a root).
    pub root: i32,
    /// The listener thread that ran the attach call.
    pub listener_tid: i32,
    /// The injection site used (AT_ENTRY).
    pub site: u64,
    /// Address of `rocprofiler_register_detach` in the target, found by the preflight.
    pub detach_function: u64,
    /// The tool library string sent.
    pub tool: String,
    /// Microseconds for the whole attach sequence (seize to release).
    pub attach_us: u64,
    /// Microseconds the listener was stopped outside the attach call.
    pub stopped_us: u64,
    /// Microseconds the attach call ran in the target.
    pub call_us: u64,
    /// The profiler attached.
    pub backend: crate::cuda::Backend,
    /// The connection to the CUDA tool (CUDA targets only): held until the detach.
    #[serde(skip)]
    pub cuda: Option<crate::cuda::Link>,
}

/// What [`attach()`] did.
#[derive(Debug, Default)]
pub struct AttachOutcome {
    /// Processes attached, in plan order.
    pub attached: Vec<Attachment>,
    /// Processes that could not be attached.
    pub failures: Vec<Failure>,
    /// A signal arrived while attaching: the caller should detach at once.
    pub interrupted: bool,
}

impl AttachOutcome {
    /// The attached process ids, in order.
    pub fn pids(&self) -> Vec<i32> {
        self.attached.iter().map(|a| a.pid).collect()
    }
}

/// Attach roots first, then descendants of the roots that succeeded, each phase in parallel
/// (at most `parallelism` at a time). `interrupted` is asked between phases; when it says yes,
/// the remaining phases are skipped. `env` is the environment sent (filtered to `ROCP*`).
pub fn attach(
    plan: &Plan,
    env: &EnvList,
    parallelism: usize,
    injector: &dyn Injector,
    events: Events,
    interrupted: &dyn Fn() -> bool,
) -> AttachOutcome {
    let mut out = AttachOutcome::default();
    let (roots, rest): (Vec<&Planned>, Vec<&Planned>) =
        plan.targets.iter().partition(|p| p.report.pid == p.root);
    for phase in [roots, rest] {
        let phase: Vec<&Planned> = phase
            .into_iter()
            .filter(|p| p.report.pid == p.root || out.attached.iter().any(|a| a.pid == p.root))
            .collect();
        let mut results = attach_phase(&phase, plan, env, parallelism, injector);
        for p in &phase {
            let r = results
                .remove(&p.report.pid)
                .expect("one result per process");
            record(&mut out, plan, p.report.pid, r, events);
        }
        if interrupted() {
            out.interrupted = true;
            break;
        }
    }
    if !out.attached.is_empty() {
        events(Event::AttachedAll { pids: out.pids() });
    }
    out
}

/// Attach the processes of one phase, CUDA ones through their tool, the others through
/// `injector`: the result of each, by process id.
fn attach_phase(
    phase: &[&Planned],
    plan: &Plan,
    env: &EnvList,
    parallelism: usize,
    injector: &dyn Injector,
) -> HashMap<i32, Result<Attachment>> {
    let (cuda, rocm): (Vec<&Planned>, Vec<&Planned>) =
        phase.iter().partition(|p| p.report.cuda.is_some());
    // Iteration multiplexing is our CUDA tool's: a ROCm process is refused, nothing sent.
    let (refused, rocm): (Vec<&Planned>, Vec<&Planned>) = rocm
        .into_iter()
        .partition(|_| env.contains(crate::options::hardware::ITERATION_REPLAY));
    let jobs: Vec<(agent::Target, Job)> = rocm.iter().map(|p| attach_job(env, p)).collect();
    for p in phase {
        plan.claims.set(p.report.pid, State::Attaching);
    }
    let outcomes = injector.inject_all(&jobs, parallelism, &|_| {});
    let mut results: HashMap<i32, Result<Attachment>> = rocm
        .iter()
        .zip(outcomes)
        .map(|(p, o)| (p.report.pid, attachment(p, o.map_err(Error::from))))
        .collect();
    let linked = super::parallel(&cuda, parallelism, |p| cuda_attachment(p, env, injector));
    results.extend(cuda.iter().map(|p| p.report.pid).zip(linked));
    results.extend(
        refused
            .iter()
            .map(|p| (p.report.pid, Err(iteration_refused(p.report.pid)))),
    );
    results
}

/// `--replay-mode iteration` asked of ROCm process `pid`.
fn iteration_refused(pid: i32) -> Error {
    Error::usage(format!(
        "--replay-mode iteration is for CUDA processes, and process {pid} is a ROCm process: rocprofiler-sdk has no iteration multiplexing; nothing was touched. Fix: pass one --pmc group that fits one pass, or --replay-mode kernel --kernel-replay-beta-enabled"
    ))
}

/// Record the attach of process `pid`: its claim, its events, and the attachment or failure.
fn record(out: &mut AttachOutcome, plan: &Plan, pid: i32, r: Result<Attachment>, events: Events) {
    match r {
        Ok(a) => {
            plan.claims.set(a.pid, State::Attached);
            events(Event::Attached {
                pid: a.pid,
                listener_tid: a.listener_tid,
                attach_ms: a.attach_us as f64 / 1000.0,
                stopped_us: a.stopped_us,
                cuda_loaded_now: a.cuda.as_ref().map(|l| l.loaded_now),
            });
            // What the CUDA tool cannot promise (settings it does not implement, NVTX
            // without injection at launch).
            for note in a.cuda.iter().flat_map(|l| &l.started.notes) {
                events(Event::Warning {
                    pid: Some(a.pid),
                    message: format!("process {}: {note}", a.pid),
                });
            }
            out.attached.push(a);
        }
        Err(e) => {
            // The register restores everything when its attach fails: nothing is active.
            plan.claims.set(pid, State::Claimed);
            events(Event::Failed {
                pid,
                stage: Stage::Attach,
                message: e.to_string(),
                hint: None,
                exited: false,
            });
            out.failures.push(Failure {
                pid,
                stage: Stage::Attach,
                error: e,
            });
        }
    }
}

/// Attach one planned process through `injector`.
pub fn attach_one(env: &EnvList, injector: &dyn Injector, p: &Planned) -> Result<Attachment> {
    if p.report.cuda.is_some() {
        return cuda_attachment(p, env, injector);
    }
    if env.contains(crate::options::hardware::ITERATION_REPLAY) {
        return Err(iteration_refused(p.report.pid));
    }
    let (target, job) = attach_job(env, p);
    attachment(p, injector.inject(&target, &job).map_err(Error::from))
}

/// The injection that attaches planned process `p`: the environment buffer and tool sent to the
/// attach function the preflight found.
fn attach_job(env: &EnvList, p: &Planned) -> (agent::Target, Job) {
    let pid = p.report.pid;
    // Located by the preflight just before (same maps snapshot, no second ELF lookup).
    let (function, site) = (p.report.register_attach_addr, p.report.entry);
    let tool = p.report.tool.string.clone();
    let mut env = env.clone();
    // As the launcher does: the chosen tool travels in the buffer too.
    env.set("ROCPROF_ATTACH_TOOL_LIBRARY", &tool);
    // A reattach: what the earlier attach left in the process with the value this session asks
    // for is not sent again (the register's `setenv` of each pair is most of the target's time
    // in the call); the process still ends up with exactly what this session asked for.
    if let Some(held) = crate::reattach::held_settings(pid) {
        env = env.without_held(&held);
    }
    let buffer = envbuf::encode(&env);
    if tracing::enabled!(tracing::Level::INFO) {
        for (name, value) in envbuf::decode(&buffer).unwrap_or_default() {
            tracing::info!("process {pid}: sending {name}={value}");
        }
    }
    tracing::debug!(
        "process {pid}: attach call {function:#x} from site {site:#x} on thread {} ({} byte environment buffer, tool {tool})",
        p.report.listener_tid,
        buffer.len()
    );
    let job = Job::Attach {
        env: buffer,
        tool: tool.clone().into_bytes(),
    };
    let target = agent::Target {
        pid,
        tid: p.report.listener_tid,
        site,
        function,
    };
    (target, job)
}

/// What the attach injection of `p` gave, as an [`Attachment`] or the session's error.
fn attachment(p: &Planned, outcome: Result<Outcome>) -> Result<Attachment> {
    let pid = p.report.pid;
    let site = p.report.entry;
    let tool = p.report.tool.string.clone();
    let outcome = outcome?;
    log_outcome(pid, "attach", &outcome);
    let outcome = call_result(pid, "attach", outcome)?;
    Ok(Attachment {
        pid,
        root: p.root,
        listener_tid: p.report.listener_tid,
        site,
        detach_function: p.report.register_detach_addr,
        tool,
        attach_us: outcome.total_us,
        stopped_us: outcome.stopped_us,
        call_us: outcome.call_us,
        backend: crate::cuda::Backend::Rocm,
        cuda: None,
    })
}

/// Attach CUDA process `p`: load the tool (or reuse it) and start tracing.
fn cuda_attachment(p: &Planned, env: &EnvList, injector: &dyn Injector) -> Result<Attachment> {
    let started = std::time::Instant::now();
    let (link, spawn) = crate::cuda::attach(p, env, injector)?;
    if let Some(o) = &spawn {
        log_outcome(p.report.pid, "spawn", o);
    }
    if !link.started.left_out.is_empty() {
        tracing::info!(
            "process {}: not traced, CUDA has no counterpart: {}",
            p.report.pid,
            link.started.left_out.join(", ")
        );
    }
    tracing::debug!(
        "process {}: CUDA tracing of {} started with {} (CUPTI version {}, enabling took {} µs)",
        p.report.pid,
        link.started.kinds.join(", "),
        link.started.cupti,
        link.started.cupti_version,
        link.started.enable_us
    );
    Ok(Attachment {
        pid: p.report.pid,
        root: p.root,
        listener_tid: p.report.listener_tid,
        site: p.report.entry,
        detach_function: 0,
        tool: p.report.tool.string.clone(),
        attach_us: started.elapsed().as_micros() as u64,
        stopped_us: spawn.as_ref().map_or(0, |o| o.stopped_us),
        call_us: spawn.as_ref().map_or(0, |o| o.call_us),
        backend: crate::cuda::Backend::Cuda,
        cuda: Some(link),
    })
}

/// The injection's counters and timings, at debug level.
pub(super) fn log_outcome(pid: i32, call: &str, o: &Outcome) {
    tracing::debug!(
        "process {pid}: {call} {} in {} µs (call {} µs, listener stopped {} µs; {} interrupt-stops, {} traps, {} forwarded signals)",
        match o.status {
            Some(status) => format!("returned {status}"),
            None => "did not return".to_string(),
        },
        o.total_us,
        o.call_us,
        o.stopped_us,
        o.interrupts,
        o.traps,
        o.forwarded_signals
    );
}

/// Turn the register function's return value into the session's result.
pub(super) fn call_result(pid: i32, call: &'static str, outcome: Outcome) -> Result<Outcome> {
    match outcome.status {
        Some(0) => Ok(outcome),
        Some(status) => {
            let (name, meaning) = register_status(status);
            Err(Error::Rejected {
                pid,
                call,
                status,
                name,
                meaning,
            })
        }
        None => Err(rocprof_engine::Error::Agent {
            pid,
            message: format!("the {call} call did not complete"),
        }
        .into()),
    }
}
