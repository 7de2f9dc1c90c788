//! The attach session, in steps a front end composes: [`plan()`] (select targets and preflight
//! them), [`attach()`], [`Waiter::wait`] (the profiling window), [`detach()`] and
//! [`Collector::collect`] (files written, per-process results, exit code).
//!
//! Nothing of ours stays attached to a target during the profiling window: each attach and each
//! detach is one short injection run by an [`Injector`] (the CLI's is the forked agent of
//! [`rocprof_engine::agent`]), and the listener is released in between
//! (docs/protocol.md section 11, item 9).
//! So a library front end can attach now and detach later from another call: [`attach()`]
//! returns [`Attachment`]s, and [`detach()`] (or [`detach_one`]) needs nothing else.
//!
//! Nothing here prints. Progress is reported as [`Event`]s through a callback, results are
//! returned as serialisable values ([`SessionReport`]), and diagnostics go through `tracing`.

mod attach;
mod collect;
mod detach;
mod events;
mod output_wait;
mod plan;
mod report;
mod space;
mod verify;
mod wait;
pub mod will;

pub use attach::{attach, attach_one, AttachOutcome, Attachment};
pub use collect::Collector;
pub use detach::{
    detach, detach_one, detach_with, lookup, settle, DetachControl, DetachOutcome, Detached,
    DEFAULT_STOPPED_WAIT,
};
pub use events::{EndReason, Event, Events, Stage};
pub use output_wait::{describe as describe_duration, OutputWait, DEFAULT_OUTPUT_WAIT};
pub use plan::{claim_descendants, plan, plan_roots, select, Failure, Plan, Planned};
pub use report::{
    nothing_attached, FileReport, Message, ProcessReport, ProcessStatus, SessionReport, Severity,
};
pub use verify::{file_report, group, problem};
pub use wait::{WaitEnd, WaitOptions, Waiter};

use crate::envbuf::EnvList;
use crate::options::{self, DEFAULT_OUTPUT_FILE};
use crate::targets::TargetSelection;
use rocprof_engine::agent::{self, Agents};
use rocprof_rocpd::format::OutputFormat;
use std::path::PathBuf;
use std::time::Duration;

/// Default number of processes attached or detached at the same time.
pub const DEFAULT_PARALLEL: usize = 16;

/// Everything a session needs to know; built by a front end (the CLI's option parsing, or
/// [`AttachRequest::new`] from an environment).
#[derive(Debug, Clone)]
pub struct AttachRequest {
    /// Target selection.
    pub targets: TargetSelection,
    /// Attach descendants too (tree attach, default true).
    pub children: bool,
    /// Detach automatically after this long (`--attach-duration-msec`).
    pub duration: Option<Duration>,
    /// Ask the tool to write output before the detach call returns (default true).
    pub sync_output: bool,
    /// Tool library string given with `-t` / `ROCPROF_ATTACH_TOOL_LIBRARY` (None: choose one).
    pub tool_library: Option<String>,
    /// The environment to send: our process environment with the option variables applied.
    /// Filtering to `ROCP*` happens when it is encoded.
    pub env: EnvList,
    /// Absolute output directory (`ROCPROF_OUTPUT_PATH`).
    pub output_dir: PathBuf,
    /// Output file name template (`ROCPROF_OUTPUT_FILE_NAME`).
    pub output_file: String,
    /// Formats the user asked for.
    pub formats: Vec<OutputFormat>,
    /// Print a summary after detach (`-S/--summary`).
    pub summary: bool,
    /// Maximum number of processes attached or detached at the same time.
    pub parallelism: usize,
    /// How long a detach waits for a stopped target (state T) to continue.
    pub stopped_wait: Duration,
    /// With asynchronous output, how long the collector waits for the tool's files after the
    /// detach (`--output-timeout`; zero: not at all).
    pub output_wait: Duration,
    /// The switches as given on the command line, before their implications (none for a request
    /// built from an environment): warnings name what the user typed.
    pub switches: options::Switches,
}

impl AttachRequest {
    /// A request as rocattach builds one: the `ROCP*` variables of `env` as they are (no option
    /// parsing), the tool from `ROCPROF_ATTACH_TOOL_LIBRARY`, output under `ROCPROF_OUTPUT_PATH`
    /// (else `cwd`), tree attach unless `ROCPROF_ATTACH_CHILDREN` is false, synchronous output.
    ///
    /// Every `ROCPROF_*` variable the options cover that `env` leaves unset is sent with its "not
    /// asked for" value, and the output directory is always sent, so nothing an earlier session
    /// set in the target applies to this one ([`options::defaults`]).
    pub fn new(targets: TargetSelection, mut env: EnvList, cwd: &std::path::Path) -> AttachRequest {
        options::defaults::fill_unset(&mut env);
        let nonempty = |v: &str| {
            env.get(v)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        let off = |v: &str| nonempty(v).is_some_and(|s| options::parse_bool(&s) == Ok(false));
        let output_dir = nonempty("ROCPROF_OUTPUT_PATH")
            .map(|d| options::absolute_output_dir(&d, cwd))
            .unwrap_or_else(|| cwd.display().to_string());
        let output_file =
            nonempty("ROCPROF_OUTPUT_FILE_NAME").unwrap_or_else(|| DEFAULT_OUTPUT_FILE.to_string());
        let children = !off("ROCPROF_ATTACH_CHILDREN");
        let sync_output = !off("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC");
        let tool_library = nonempty("ROCPROF_ATTACH_TOOL_LIBRARY");
        env.set("ROCPROF_OUTPUT_PATH", &output_dir);
        AttachRequest {
            targets,
            children,
            duration: None,
            sync_output,
            tool_library,
            output_dir: PathBuf::from(output_dir),
            output_file,
            formats: options::formats_of(env.get("ROCPROF_OUTPUT_FORMAT").unwrap_or(""))
                .unwrap_or_default(),
            summary: false,
            parallelism: DEFAULT_PARALLEL,
            stopped_wait: DEFAULT_STOPPED_WAIT,
            output_wait: DEFAULT_OUTPUT_WAIT,
            switches: options::Switches::default(),
            env,
        }
    }
}

/// Runs one injection sequence on a target: how the session reaches the engine. The CLI uses
/// [`Agents`] (a forked agent per sequence, so our death never harms the target); a library
/// front end living in someone else's process can bring its own.
pub trait Injector: Sync {
    /// Run `job` on `target` and return what the register call returned.
    fn inject(
        &self,
        target: &agent::Target,
        job: &agent::Job,
    ) -> rocprof_engine::Result<agent::Outcome>;

    /// Run every job, at most `limit` at the same time; results in the order of `jobs`.
    /// `handed(i)` is called once job `i` is in its agent's hands (from then on it runs to its
    /// end whatever becomes of the caller). The default runs [`Injector::inject`] on up to
    /// `limit` threads.
    fn inject_all(
        &self,
        jobs: &[(agent::Target, agent::Job)],
        limit: usize,
        handed: &(dyn Fn(usize) + Sync),
    ) -> Vec<rocprof_engine::Result<agent::Outcome>> {
        let indexed: Vec<usize> = (0..jobs.len()).collect();
        parallel(&indexed, limit, |&i| {
            handed(i);
            self.inject(&jobs[i].0, &jobs[i].1)
        })
    }
}

impl Injector for Agents {
    fn inject(
        &self,
        target: &agent::Target,
        job: &agent::Job,
    ) -> rocprof_engine::Result<agent::Outcome> {
        self.run(target, job)
    }

    /// Pipelined through the agent server from the calling thread: no thread per job here.
    fn inject_all(
        &self,
        jobs: &[(agent::Target, agent::Job)],
        limit: usize,
        handed: &(dyn Fn(usize) + Sync),
    ) -> Vec<rocprof_engine::Result<agent::Outcome>> {
        self.run_all(jobs, limit, handed)
    }
}

/// Name and meaning of a rocprofiler-register status code (docs/protocol.md section 3.4).
pub fn register_status(code: i32) -> (&'static str, &'static str) {
    match code {
        0 => ("ROCP_REG_SUCCESS", "success"),
        1 => ("ROCP_REG_NO_TOOLS", "the target's rocprofiler-sdk could not be loaded or is too old for attachment"),
        2 => ("ROCP_REG_DEADLOCK", "an attach or detach was already running in the target"),
        3 => ("ROCP_REG_BAD_API_TABLE_LENGTH", "a library passed an invalid number of API tables"),
        4 => ("ROCP_REG_UNSUPPORTED_API", "the library's API is not supported"),
        5 => ("ROCP_REG_INVALID_API_ADDRESS", "invalid API address (secure mode enabled)"),
        6 => (
            "ROCP_REG_ROCPROFILER_ERROR",
            "the profiler refused: the tool failed to load or configure, or a reattach asked for different services \
             (reattach must use the same tracing and counter options)",
        ),
        7 => ("ROCP_REG_EXCESS_API_INSTANCES", "too many instances of the same library API were registered"),
        8 => (
            "ROCP_REG_INVALID_ARGUMENT",
            "invalid argument: a reattach must use exactly the same tool library string as the first attach",
        ),
        9 => (
            "ROCP_REG_ATTACHMENT_NOT_AVAILABLE",
            "the attachment library was never loaded: start the target with ROCP_TOOL_ATTACH=1",
        ),
        _ => ("unknown status", "rocprofiler-register returned a code this version does not know"),
    }
}

/// What a status of `rocprofiler_register_detach` means (the same codes as the attach's,
/// [`register_status`], for what a detach does).
pub fn register_detach_status(code: i32) -> &'static str {
    match code {
        1 => "nothing was attached in the target: no tool was loaded",
        2 => "another attach or detach was running in the target",
        6 => "rocprofiler-sdk's detach failed",
        9 => "the attachment library was never loaded in the target",
        c => register_status(c).1,
    }
}

/// Run `f` over `items` with at most `limit` at a time; results in input order.
fn parallel<T: Sync, R: Send>(items: &[T], limit: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let limit = limit.max(1).min(items.len().max(1));
    if limit == 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..limit {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                done.lock()
                    .expect("no panics while holding the lock")
                    .push((i, r));
            });
        }
    });
    for (i, r) in done.into_inner().expect("no panics while holding the lock") {
        slots[i] = Some(r);
    }
    slots
        .into_iter()
        .map(|r| r.expect("every item processed"))
        .collect()
}

/// Comma-separated PIDs.
pub fn join(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
