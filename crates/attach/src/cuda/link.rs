//! One CUDA session with one process: [`attach`] loads the tool (or finds it loaded) and has it
//! start tracing; [`detach`] has it stop and write the rocpd database.
//!
//! The connection is held for the whole window. If the front end dies, the tool sees the
//! connection close and detaches by itself (flushes, disables every activity kind, writes the
//! database): nothing stays enabled and nothing is lost.

use super::channel::{self, Listener};
use super::preflight::PARKED_IN;
use super::{Facts, START_SYMBOL};
use crate::envbuf::EnvList;
use crate::error::{Error, Result};
use crate::session::{Injector, Planned};
use rocprof_engine::agent::{self, spawn, Job};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the tool may take to load and connect after the spawn.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the tool may take to load CUPTI and enable the activity kinds.
pub const ENABLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the tool may take to flush and write its database.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// rocprofv3 features CUDA has no equivalent for: the variable and the option named in the
/// error. (Trace switches CUDA has no equivalent for, such as scratch memory or RCCL, are implied
/// by `--runtime-trace` and `--sys-trace`: they are left out quietly, see [`TRACED`].) `--pmc`
/// is collected through CUPTI's range profiler (docs/cuda.md, "Counters").
const UNSUPPORTED: [(&str, &str); 2] = [
    ("ROCPROF_ADVANCED_THREAD_TRACE", "--advanced-thread-trace"),
    ("ROCPROF_PC_SAMPLING_BETA_ENABLED", "--pc-sampling"),
];

/// The switches the CUDA tool maps to CUPTI activity kinds or counters (docs/cuda.md).
const TRACED: [&str; 8] = [
    "ROCPROF_COUNTER_COLLECTION",
    "ROCPROF_SPM_COUNTER_COLLECTION",
    "ROCPROF_KERNEL_TRACE",
    "ROCPROF_MEMORY_COPY_TRACE",
    "ROCPROF_MEMORY_ALLOCATION_TRACE",
    "ROCPROF_HIP_RUNTIME_API_TRACE",
    "ROCPROF_HIP_COMPILER_API_TRACE",
    "ROCPROF_MARKER_API_TRACE",
];

fn on(env: &EnvList, var: &str) -> bool {
    env.get(var)
        .is_some_and(|v| !v.trim().is_empty() && !matches!(v.trim(), "0" | "false" | "no" | "off"))
}

/// An attached CUDA process: the open connection to its tool.
#[derive(Clone)]
pub struct Link {
    conn: Arc<OwnedFd>,
    /// The database the tool writes at detach.
    pub db: PathBuf,
    /// What the tool said when it started tracing.
    pub started: Started,
    /// True when this session loaded the tool (false: reused).
    pub loaded_now: bool,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("db", &self.db)
            .field("started", &self.started)
            .finish()
    }
}

/// The tool's reply to `attach`.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Started {
    /// The libcupti it uses.
    pub cupti: String,
    /// CUPTI's API version.
    pub cupti_version: i64,
    /// The driver's CUDA version (13000 for 13.0).
    pub driver_version: i64,
    /// The activity kinds enabled.
    pub kinds: Vec<String>,
    /// Microseconds enabling took.
    pub enable_us: u64,
    /// Things the user should know (e.g. NVTX needs injection at launch): warnings.
    pub notes: Vec<String>,
    /// Trace switches that were on but have no CUDA counterpart (`--sys-trace` implies
    /// several).
    pub left_out: Vec<String>,
}

/// The tool's reply to `detach`.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Finished {
    /// The database written.
    pub db: String,
    /// Kernel records.
    pub kernels: u64,
    /// Copy and memset records.
    pub copies: u64,
    /// API records.
    pub api: u64,
    /// Allocation records.
    pub allocations: u64,
    /// Records CUPTI dropped (no buffer was free).
    pub dropped: u64,
    /// Records CUPTI delivered so late that they were written after later ones.
    pub late: u64,
    /// Microseconds the final flush took.
    pub flush_us: u64,
    /// Microseconds writing the database took.
    pub write_us: u64,
    /// What `--pmc` counted and what it cost (absent without counters).
    pub counters: Option<CounterReport>,
    /// `--spm` samples written (absent without `--spm`).
    pub spm_samples: Option<u64>,
    /// What `--spm` cost the tool's ticks (µs: `ticks`, `decode_mean`, `decode_max`,
    /// `write_mean`, `write_max`; absent without `--spm`).
    pub spm_tick_us: Option<serde_json::Value>,
}

/// The tool's account of a counting window (`--pmc`).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct CounterReport {
    /// `[name, NVIDIA metric]` per counter.
    pub metrics: Vec<(String, String)>,
    /// "user" (one pass), "kernel" (CUPTI kernel replay) or "iteration" (one pass per window).
    pub replay: String,
    /// Passes of the metric set.
    pub passes: u64,
    /// CUDA devices counted.
    pub devices: Vec<i64>,
    /// Launches counted (serialised), and those whose values were written.
    pub launches: u64,
    /// See `launches`.
    pub kept: u64,
    /// Ranges decoded, and dropped by CUPTI.
    pub ranges: u64,
    /// See `ranges`.
    pub dropped: u64,
    /// Why counting stopped: "budget", "nothing-left" or "detach".
    pub stopped_by: String,
    /// Milliseconds kernels were serialised.
    pub counting_ms: u64,
    /// Microseconds: one-time setup, Start, Stop, decoding.
    pub setup_us: u64,
    /// See `setup_us`.
    pub start_us: u64,
    /// See `setup_us`.
    pub stop_us: u64,
    /// See `setup_us`.
    pub decode_us: u64,
    /// Caveats (mismatches, re-enabling).
    pub notes: Vec<String>,
    /// Iteration multiplexing: passes counted, their groups, launches per kernel and pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplexed: Option<Multiplexed>,
}

/// What iteration multiplexing counted (the tool's `pmc::multiplex::Multiplexed`).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Multiplexed {
    /// Passes counted.
    pub passes_counted: u64,
    /// The metrics each counted pass gave.
    pub groups: Vec<Vec<String>>,
    /// Per kernel name, the launches given values by each pass.
    pub kernels: Vec<KernelPasses>,
}

/// One kernel's launches with values, per pass.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct KernelPasses {
    /// The kernel's name.
    pub name: String,
    /// Launches given values by pass 1, 2, ...
    pub launches: Vec<u64>,
}

impl Multiplexed {
    /// One line: the passes, their groups, and how many kernels got every group.
    pub fn summary(&self, pid: i32, passes: u64) -> String {
        let full = |k: &&KernelPasses| {
            k.launches.len() as u64 >= passes && k.launches.iter().all(|n| *n > 0)
        };
        let complete = self.kernels.iter().filter(full).count();
        let groups: Vec<String> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| format!("pass {}: {}", i + 1, g.join(", ")))
            .collect();
        let partial: Vec<String> = self
            .kernels
            .iter()
            .filter(|k| !full(k))
            .take(3)
            .map(|k| format!("{} ({:?})", k.name, k.launches))
            .collect();
        format!(
            "process {pid}: iteration multiplexing counted {} of {passes} passes ({}); {complete} of {} kernel names got every group, each value from one launch{}",
            self.passes_counted,
            groups.join("; "),
            self.kernels.len(),
            if partial.is_empty() {
                String::new()
            } else {
                format!("; launches per pass of some that did not: {}", partial.join(", "))
            }
        )
    }
}

impl CounterReport {
    /// One line: what was counted and what it cost.
    pub fn summary(&self, pid: i32) -> String {
        let names: Vec<String> = self
            .metrics
            .iter()
            .map(|(n, m)| {
                if n == m {
                    n.clone()
                } else {
                    format!("{n} ({m})")
                }
            })
            .collect();
        let why = match self.stopped_by.as_str() {
            "budget" => "the per-window budget of counted launches was reached",
            "nothing-left" => "every kernel seen had its launches (--kernel-iteration-range)",
            _ => "the window ended",
        };
        format!(
            "process {pid}: counters {}: {} launches counted, values written for {}; counting stopped because {why}; \
             kernels were serialised for {} ms (setup {} ms, start {:.1} ms, stop {:.1} ms, decode {:.1} ms; {} replay, {} pass(es))",
            names.join(", "),
            self.launches,
            self.kept,
            self.counting_ms,
            self.setup_us / 1000,
            self.start_us as f64 / 1000.0,
            self.stop_us as f64 / 1000.0,
            self.decode_us as f64 / 1000.0,
            self.replay,
            self.passes
        )
    }
}

/// Refuse what CUDA cannot do, naming the option.
fn refuse_unsupported(pid: i32, env: &EnvList) -> Result<()> {
    for (var, option) in UNSUPPORTED {
        let on = env.get(var).is_some_and(|v| {
            !v.trim().is_empty() && !matches!(v.trim(), "0" | "false" | "no" | "off")
        });
        if on {
            return Err(Error::NotAttachable {
                pid,
                reason: format!(
                    "{option} is not available for CUDA processes (it is a ROCm feature; CUDA targets support \
                     --kernel-trace, --memory-copy-trace, --memory-allocation-trace, --runtime-trace, --hip-trace, \
                     --marker-trace, --sys-trace, --pmc and --spm). Fix: drop {option}"
                ),
            });
        }
    }
    if !TRACED.iter().any(|v| on(env, v)) {
        return Err(Error::NotAttachable {
            pid,
            reason:
                "none of the options asks for something CUDA can trace. Fix: add --kernel-trace, \
                     --memory-copy-trace, --memory-allocation-trace, --runtime-trace, --hip-trace, \
                     --marker-trace, --sys-trace, --pmc COUNTER... or --spm COUNTER... --spm-beta-enabled"
                    .into(),
        });
    }
    Ok(())
}

/// The database path for process `p`: `<dir>/<file>_results.db` with the template expanded, with
/// `_<n>` added when an earlier session wrote that name.
fn database_path(p: &Planned, env: &EnvList) -> PathBuf {
    let pid = p.report.pid;
    let dir = env.get("ROCPROF_OUTPUT_PATH").unwrap_or(".");
    let file = env
        .get("ROCPROF_OUTPUT_FILE_NAME")
        .filter(|f| !f.is_empty())
        .unwrap_or(crate::options::DEFAULT_OUTPUT_FILE);
    let prefix = crate::outputs::expected_prefix_with(
        pid,
        std::path::Path::new(dir),
        file,
        p.report.environ.as_deref(),
        Some(p.report.own_pid),
    )
    .unwrap_or_else(|| format!("{dir}/{pid}"));
    let first = PathBuf::from(format!("{prefix}_results.db"));
    let inside = |path: &PathBuf| {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        root.join(path.strip_prefix("/").unwrap_or(path))
    };
    if !inside(&first).exists() {
        return first;
    }
    (1..)
        .map(|n| PathBuf::from(format!("{prefix}_{n}_results.db")))
        .find(|p| !inside(p).exists())
        .expect("some name is free")
}

/// The `attach` message: the options as rocprofv3's variables, and ours.
fn attach_message(env: &EnvList, db: &std::path::Path) -> String {
    let mut text = String::from("attach\n");
    for (k, v) in env.forwarded() {
        // The groups of several --pmc flags, one `pmc:` line each, travel on one line (the
        // tool splits them at each `pmc:`); other values with a newline are not ours to send.
        let v = if k == "ROCPROF_COUNTER_GROUPS" {
            std::borrow::Cow::Owned(v.replace('\n', " "))
        } else {
            std::borrow::Cow::Borrowed(v)
        };
        if k.starts_with("ROCPROF_") && !v.contains('\n') {
            text.push_str(&format!("{k}={v}\n"));
        }
    }
    let hip = env
        .get("ROCPROF_HIP_COMPILER_API_TRACE")
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
    if hip {
        text.push_str("ROCPROF_ATTACH_CUDA_DRIVER_API=1\n");
    }
    if let Ok(cupti) = std::env::var("ROCPROF_ATTACH_CUPTI") {
        text.push_str(&format!("ROCPROF_ATTACH_CUPTI={cupti}\n"));
    }
    text.push_str(&format!("ROCPROF_ATTACH_DB={}\n", db.display()));
    text
}

/// What a tool reply says: `ok <json>` or `error <code> <message>`.
pub(super) fn parse_reply<T: serde::de::DeserializeOwned>(
    reply: &str,
) -> std::result::Result<T, String> {
    let reply = reply.trim_end();
    if let Some(json) = reply.strip_prefix("ok") {
        return serde_json::from_str(json.trim())
            .map_err(|e| format!("the CUDA tool's reply could not be read ({e}): {json}"));
    }
    let rest = reply.strip_prefix("error").unwrap_or(reply).trim();
    let message = rest.split_once(' ').map_or(rest, |(_, m)| m);
    Err(message.to_string())
}

/// Load the tool into `p` (or reuse it) and start tracing. Returns the link and the spawn's
/// outcome (None when the tool was loaded already).
pub fn attach(
    p: &Planned,
    env: &EnvList,
    injector: &dyn Injector,
) -> Result<(Link, Option<agent::Outcome>)> {
    let pid = p.report.pid;
    let facts = p.report.cuda.as_ref().ok_or_else(|| Error::NotAttachable {
        pid,
        reason: "internal: not a CUDA target".into(),
    })?;
    refuse_unsupported(pid, env)?;
    let db = database_path(p, env);
    let (conn, outcome) = reach(p, facts, injector)?;
    channel::send_message(&conn, &attach_message(env, &db))?;
    let reply = channel::receive(&conn, ENABLE_TIMEOUT)?.ok_or_else(|| Error::NotAttachable {
        pid,
        reason: format!(
            "our CUDA tool did not start tracing within {} s (loading CUPTI hangs?)",
            ENABLE_TIMEOUT.as_secs()
        ),
    })?;
    let started: Started =
        parse_reply(&reply).map_err(|reason| Error::NotAttachable { pid, reason })?;
    let link = Link {
        conn: Arc::new(conn),
        db,
        started,
        loaded_now: outcome.is_some(),
    };
    Ok((link, outcome))
}

/// A connection to the tool of `p`: the one loaded already, else loaded now (the spawn's
/// outcome given).
pub(super) fn reach(
    p: &Planned,
    facts: &Facts,
    injector: &dyn Injector,
) -> Result<(OwnedFd, Option<agent::Outcome>)> {
    match facts.loaded {
        Some(_) => Ok((channel::connect_tool(p.report.pid, p.report.own_pid)?, None)),
        None => {
            let (conn, o) = load(p, facts, injector)?;
            Ok((conn, Some(o)))
        }
    }
}

/// Load the tool: the spawn on a parked thread (the next one when a thread woke up before it
/// stopped), then the tool's connection.
fn load(p: &Planned, facts: &Facts, injector: &dyn Injector) -> Result<(OwnedFd, agent::Outcome)> {
    let pid = p.report.pid;
    let functions = facts.functions.ok_or_else(|| Error::NotAttachable {
        pid,
        reason: "internal: no functions for the spawn".into(),
    })?;
    let listener = Listener::new(pid)?;
    let job = Job::Spawn(spawn::Spawn {
        dlopen: functions.dlopen,
        dlsym: functions.dlsym,
        dlerror: functions.dlerror,
        tool: facts.tool.display().to_string(),
        symbol: START_SYMBOL.into(),
        payload: format!("version=1\nsocket={}\n", listener.name),
        parked_in: PARKED_IN.iter().map(|(n, _)| *n).collect(),
    });
    let outcome = spawn_on_parked(p, facts, functions.pthread_create, &job, injector)?;
    let started = Instant::now();
    let block = |o: &agent::Outcome| o.spawn_block.map(|b| spawn::read_block(pid, b));
    // The tool connects back; or, when an earlier load got there first (its thread had not named
    // itself yet when the preflight looked), the new thread returns 1 at once and the loaded tool
    // serves us on its own socket.
    while started.elapsed() < START_TIMEOUT {
        if let Some(conn) = listener.accept_from(pid, Duration::from_millis(100))? {
            tracing::debug!(
                "process {pid}: the CUDA tool connected {} ms after the spawn",
                started.elapsed().as_millis()
            );
            return Ok((conn, outcome));
        }
        if let Some(Ok(spawn::Block::Returned(1))) = block(&outcome) {
            tracing::debug!("process {pid}: the CUDA tool was loaded already; connecting to it");
            return Ok((channel::connect_tool(pid, p.report.own_pid)?, outcome));
        }
    }
    let why = match block(&outcome) {
        Some(Ok(spawn::Block::OpenFailed(m))) => format!("the process could not load it: {m}"),
        Some(Ok(spawn::Block::SymbolMissing(m))) => {
            format!("it has no {START_SYMBOL} (not our tool library?): {m}")
        }
        Some(Ok(spawn::Block::Returned(r))) => format!("its start function returned {r}"),
        Some(Ok(spawn::Block::Starting)) => "its thread had not got past dlopen".into(),
        Some(Ok(spawn::Block::Running)) => "it runs but did not connect".into(),
        Some(Err(e)) => format!("its state could not be read: {e}"),
        None => "no state".into(),
    };
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "our CUDA tool {} did not connect within {} s: {why}",
            facts.tool.display(),
            START_TIMEOUT.as_secs()
        ),
    })
}

/// Run the spawn on a parked thread: the preflight's, best first; a thread that woke up before
/// it stopped is released untouched and the next one tried; when every one did, the process's
/// threads are looked at again (three rounds at most).
fn spawn_on_parked(
    p: &Planned,
    facts: &Facts,
    pthread_create: u64,
    job: &Job,
    injector: &dyn Injector,
) -> Result<agent::Outcome> {
    let pid = p.report.pid;
    let mut last: Option<Error> = None;
    let mut candidates = facts.parked.clone();
    for _round in 0..3 {
        for parked in candidates.iter().take(4) {
            let target = agent::Target {
                pid,
                tid: parked.tid,
                site: p.report.entry,
                function: pthread_create,
            };
            match injector.inject(&target, job) {
                Err(e @ rocprof_engine::Error::NotParked { .. }) => last = Some(e.into()),
                Err(e) => return Err(e.into()),
                Ok(o) if o.status == Some(0) => return Ok(o),
                Ok(o) => {
                    return Err(Error::NotAttachable {
                        pid,
                        reason: format!(
                            "pthread_create in the target returned {} (out of threads or memory?); nothing \
                             was loaded",
                            o.status.map_or("nothing".into(), |s| s.to_string())
                        ),
                    })
                }
            }
        }
        candidates = super::preflight::parked_threads(pid)?;
    }
    let why = last.map_or_else(
        || "no parked thread was left to load the tool from".to_string(),
        |e: Error| e.to_string(),
    );
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "{why}: every thread that was waiting woke up before it could be used. Fix: retry while the \
             process is less busy, or start it with CUDA_INJECTION64_PATH=/path/to/librocprof_cuda_tool.so \
             (docs/cuda.md, \"Without ptrace\")"
        ),
    })
}

/// Have the tool stop tracing and write its database. A reply that reports an error still means
/// tracing stopped (the tool disables everything before it writes): [`Error::NoOutput`]. Only a
/// tool that does not answer may still trace: [`Error::DetachFailed`].
pub fn detach(pid: i32, link: &Link) -> Result<Finished> {
    let failed = |reason: String| Error::DetachFailed { pid, reason };
    channel::send_message(&link.conn, "detach\n").map_err(|e| failed(e.to_string()))?;
    let reply = channel::receive(&link.conn, WRITE_TIMEOUT)
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| {
            failed(format!(
                "our CUDA tool did not finish writing {} within {} s",
                link.db.display(),
                WRITE_TIMEOUT.as_secs()
            ))
        })?;
    parse_reply(&reply).map_err(|why| {
        Error::NoOutput(format!(
            "process {pid}: tracing stopped, but our CUDA tool could not write {}: {why}",
            link.db.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_as_the_tool_writes_them() {
        let s: Started =
            parse_reply("ok {\"cupti\":\"/x/libcupti.so.13\",\"kinds\":[\"kernel\"]}").expect("ok");
        assert_eq!(s.kinds, ["kernel"]);
        let e =
            parse_reply::<Started>("error cupti-held another profiler holds CUPTI").unwrap_err();
        assert_eq!(e, "another profiler holds CUPTI");
    }

    #[test]
    fn what_cuda_cannot_do_is_refused_by_name() {
        let mut env = EnvList::default();
        env.set("ROCPROF_ADVANCED_THREAD_TRACE", "1");
        let e = refuse_unsupported(1, &env).unwrap_err().to_string();
        assert!(e.contains("--advanced-thread-trace"), "{e}");
        let mut env = EnvList::default();
        env.set("ROCPROF_COUNTER_COLLECTION", "1");
        env.set("ROCPROF_COUNTERS", "pmc: SQ_WAVES");
        assert!(
            refuse_unsupported(1, &env).is_ok(),
            "--pmc alone is counted"
        );
        let mut env = EnvList::default();
        env.set("ROCPROF_SCRATCH_MEMORY_TRACE", "1");
        let e = refuse_unsupported(1, &env).unwrap_err().to_string();
        assert!(
            e.contains("nothing") || e.contains("none of the options"),
            "{e}"
        );
        env.set("ROCPROF_KERNEL_TRACE", "1");
        assert!(refuse_unsupported(1, &env).is_ok());
    }
}
