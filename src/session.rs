//! The attach session: select targets, preflight, attach, wait, detach, report.
//!
//! Nothing of ours stays attached to a target during the profiling window: each attach and each
//! detach is one short injection run by a forked agent ([`crate::agent`]), and the listener is
//! released in between (protocol section 11.9). Every way a session can end (Enter, a signal,
//! the duration, the target's exit) goes through the same detach of every attached process.

use crate::agent::{self, Agents, CallTimeouts, Job, Outcome};
use crate::elf::RemoteLibrary;
use crate::envbuf::{self, EnvList};
use crate::error::{Error, ExitCode, Result};
use crate::format::OutputFormat;
use crate::outputs::{self, Snapshot, WrittenFile};
use crate::preflight::{self, Report};
use crate::procfs;
use crate::signals::{self, SignalWatcher};
use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Which processes to attach to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSelection {
    /// Explicit PIDs (`--attach 1234,1240`, repeated flags, `ROCPROF_ATTACH_PID`).
    Pids(Vec<i32>),
    /// Processes on this node whose command line matches this regular expression (`--match`).
    Match(String),
    /// Processes whose environment carries this job id (`--job`).
    Job(String),
    /// Every attachable process on this node (`--all`).
    All,
}

/// Everything the front end decided; built by [`crate::cli`], executed by [`run`].
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
}

/// Name and meaning of a rocprofiler-register status code (protocol section 3.4).
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

/// Run an attach session to completion and return the exit code.
pub fn run(req: AttachRequest) -> ExitCode {
    match Session::new(req).and_then(|s| s.run()) {
        Ok(code) => code,
        Err(e) => {
            report_error(&e);
            e.exit_code()
        }
    }
}

/// Print an error, with the permission hint when the kernel refused us.
pub fn report_error(e: &Error) {
    eprintln!("rocprof-attach: error: {e}");
    if let Error::PtracePermission { pid, .. } = e {
        eprintln!("{}", preflight::permission_hint(*pid));
    }
}

fn info(msg: impl AsRef<str>) {
    eprintln!("rocprof-attach: {}", msg.as_ref());
}

fn warn(msg: impl AsRef<str>) {
    eprintln!("rocprof-attach: warning: {}", msg.as_ref());
}

/// Things that end the wait or report progress.
#[derive(Debug)]
enum Event {
    Signal(i32),
    Enter,
    Exited(i32),
    Detached(Vec<(i32, Result<Outcome>)>),
}

/// Per-process failures: (pid, what went wrong).
type Failures = Vec<(i32, Error)>;

/// A process that passed preflight and will be attached.
#[derive(Debug, Clone)]
struct Planned {
    report: Report,
    root: i32,
}

/// A process we attached to.
#[derive(Debug, Clone)]
struct Attached {
    pid: i32,
    tool: String,
    outcome: Outcome,
}

/// Why the profiling window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndReason {
    Enter,
    Signal(i32),
    Duration,
    TargetsExited,
    Interrupted,
}

struct Session {
    req: AttachRequest,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    _signals: SignalWatcher,
    agents: Agents,
}

impl Session {
    fn new(req: AttachRequest) -> Result<Self> {
        // First, while we are still single-threaded: the agent server forks cheap agents.
        let agents = Agents::start(CallTimeouts::default());
        let (tx, rx) = channel();
        let signals = SignalWatcher::install(tx.clone(), Event::Signal)
            .map_err(|e| Error::io("installing the SIGINT/SIGTERM/SIGHUP handlers", e))?;
        Ok(Session {
            req,
            tx,
            rx,
            _signals: signals,
            agents,
        })
    }

    fn run(self) -> Result<ExitCode> {
        let roots = self.select()?;
        let (plan, mut failures) = self.plan(&roots)?;
        let snapshots = snapshots(&plan, &self.req.output_dir);
        // Expanded before attaching: a process that exits during the session can still be
        // credited with its files. With a single process every file is its own: no need to read
        // its environment on the way to the attach.
        let prefixes: Vec<(i32, Option<String>)> = plan
            .iter()
            .map(|p| {
                let pid = p.report.pid;
                let prefix = (plan.len() > 1).then(|| {
                    outputs::expected_prefix(pid, &self.req.output_dir, &self.req.output_file)
                });
                (pid, prefix.flatten())
            })
            .collect();

        let (attached, attach_failures, interrupted) = self.attach_all(&plan);
        failures.extend(attach_failures);
        if attached.is_empty() {
            if failures.len() > 1 {
                print_table(&results_of(&[], &[], &[], &failures, &[]), &[]);
            }
            return Ok(nothing_attached(&failures));
        }
        let pids: Vec<i32> = attached.iter().map(|a| a.pid).collect();
        info(format!(
            "attached to {} process{}: {}",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" },
            join(&pids)
        ));
        let (reason, exited) = if interrupted {
            (EndReason::Interrupted, Vec::new())
        } else {
            self.wait(&attached)
        };
        match reason {
            EndReason::Signal(s) => info(format!("{} received: detaching", signals::name(s))),
            EndReason::Interrupted => {
                info("interrupted while attaching: detaching what was attached")
            }
            EndReason::TargetsExited => info("every attached process exited"),
            EndReason::Duration | EndReason::Enter => {}
        }
        let still_running: Vec<Attached> = attached
            .iter()
            .filter(|a| !exited.contains(&a.pid))
            .cloned()
            .collect();
        let (detached, detach_failures) = self.detach_all(&still_running);
        for (pid, e) in &detach_failures {
            if !matches!(e, Error::TargetExited { .. }) {
                warn(format!("detach from process {pid}: {e}"));
            }
        }
        let files: Vec<WrittenFile> = snapshots.values().flat_map(Snapshot::changes).collect();
        let results = results_of(&plan, &attached, &exited, &failures, &detach_failures);
        self.finish(&attached, &detached, &results, &prefixes, files)
    }

    /// Resolve the selection to root PIDs, reporting processes we could not read.
    fn select(&self) -> Result<Vec<i32>> {
        let sel = preflight::select(&self.req.targets)?;
        for (pid, why) in &sel.unreadable {
            warn(format!("cannot inspect process {pid}: {why}"));
        }
        if sel.pids.is_empty() {
            let reason = format!(
                "no process matches {}; `rocprof-attach --list` shows the attachable processes on this machine",
                describe(&self.req.targets)
            );
            if !sel.unreadable.is_empty() {
                return Err(Error::ProcRead {
                    path: PathBuf::from("/proc"),
                    source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                    hint:
                        "no process matched among those readable, and some could not be examined \
                           (listed above): run rocprof-attach as their owner or as root",
                });
            }
            return Err(Error::NotAttachable { pid: 0, reason });
        }
        if sel.pids.len() > 1 || !matches!(self.req.targets, TargetSelection::Pids(_)) {
            info(format!(
                "selected {} process{} ({}): {}",
                sel.pids.len(),
                if sel.pids.len() == 1 { "" } else { "es" },
                describe(&self.req.targets),
                join(&sel.pids)
            ));
        }
        Ok(sel.pids)
    }

    /// Preflight every root and, with tree attach, its descendants. Roots are mandatory; a root
    /// that fails leaves its descendants untouched.
    fn plan(&self, roots: &[i32]) -> Result<(Vec<Planned>, Failures)> {
        let tool = self.req.tool_library.as_deref();
        let mut plan = Vec::new();
        let mut failures = Vec::new();
        for &root in roots {
            // A selected process may already be planned as a descendant of an earlier root.
            if plan.iter().any(|p: &Planned| p.report.pid == root) {
                continue;
            }
            let report = match preflight::check(root, tool) {
                Ok(r) => r,
                Err(e) => {
                    if roots.len() == 1 {
                        return Err(e);
                    }
                    report_error(&e);
                    failures.push((root, e));
                    continue;
                }
            };
            self.print_warnings(&report);
            plan.push(Planned { report, root });
            if !self.req.children {
                continue;
            }
            for d in procfs::descendants(root).unwrap_or_default() {
                if plan.iter().any(|p| p.report.pid == d) {
                    continue;
                }
                match preflight::check(d, tool) {
                    Ok(report) => {
                        self.print_warnings(&report);
                        plan.push(Planned { report, root });
                    }
                    Err(Error::ProcessGone { .. }) => {}
                    Err(e @ Error::NotAttachable { .. })
                        if procfs::threads_named(d, LISTENER).is_ok_and(|t| t.is_empty()) =>
                    {
                        let _ = e;
                        warn(format!(
                            "skipping descendant process {d} because it has no 'rocp-bg-attach' thread. \
                             Fork-only descendants do not inherit the parent's attachment listener."
                        ));
                    }
                    Err(e) => {
                        warn(format!("skipping descendant process {d}: {e}"));
                        failures.push((d, e));
                    }
                }
            }
        }
        Ok((plan, failures))
    }

    fn print_warnings(&self, r: &Report) {
        for w in r.warnings.iter().chain(&r.tool.warnings) {
            warn(format!("process {}: {w}", r.pid));
        }
    }

    /// Attach roots first, then descendants of the roots that succeeded, each phase in parallel.
    /// Returns (attached, failures, interrupted by a signal).
    fn attach_all(&self, plan: &[Planned]) -> (Vec<Attached>, Failures, bool) {
        let mut attached = Vec::new();
        let mut failures = Vec::new();
        let (roots, rest): (Vec<&Planned>, Vec<&Planned>) =
            plan.iter().partition(|p| p.report.pid == p.root);
        for phase in [roots, rest] {
            let phase: Vec<&Planned> = phase
                .into_iter()
                .filter(|p| {
                    p.report.pid == p.root || attached.iter().any(|a: &Attached| a.pid == p.root)
                })
                .collect();
            let (req, agents) = (&self.req, &self.agents);
            let results = parallel(&phase, req.parallelism, |p| attach_one(req, agents, p));
            for (p, r) in phase.iter().zip(results) {
                match r {
                    Ok(a) => {
                        info(format!(
                            "attached to PID {} (listener thread {}) in {:.2} ms; listener stopped {:.0} µs outside the call",
                            a.pid,
                            p.report.listener_tid,
                            a.outcome.total_us as f64 / 1000.0,
                            a.outcome.stopped_us
                        ));
                        attached.push(a);
                    }
                    Err(e) => {
                        eprintln!("rocprof-attach: error: {e}");
                        failures.push((p.report.pid, e));
                    }
                }
            }
            if self.signal_pending() {
                return (attached, failures, true);
            }
        }
        (attached, failures, false)
    }

    fn signal_pending(&self) -> bool {
        let mut pending = false;
        while let Ok(ev) = self.rx.try_recv() {
            if matches!(ev, Event::Signal(_)) {
                pending = true;
            }
        }
        pending
    }

    /// Wait for Enter (terminal only), a signal, the duration or the exit of every target.
    fn wait(&self, attached: &[Attached]) -> (EndReason, Vec<i32>) {
        let pids: Vec<i32> = attached.iter().map(|a| a.pid).collect();
        let watcher = ExitWatcher::start(&pids, self.tx.clone());
        let tty_in = std::io::stdin().is_terminal();
        let tty_err = std::io::stderr().is_terminal();
        if tty_in {
            let tx = self.tx.clone();
            let _ = std::thread::Builder::new()
                .name("enter".into())
                .spawn(move || {
                    let mut line = String::new();
                    if std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
                        let _ = tx.send(Event::Enter);
                    }
                });
        }
        match self.req.duration {
            Some(d) => info(format!("profiling for {} ms (Ctrl-C to stop early)", d.as_millis())),
            None if tty_in => info("profiling: press Enter or Ctrl-C to detach"),
            None => info("profiling until SIGINT/SIGTERM or until the target exits (stdin is not a terminal)"),
        }
        let start = Instant::now();
        let deadline = self.req.duration.map(|d| start + d);
        let mut exited = Vec::new();
        let reason = loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break EndReason::Duration;
            }
            let until_deadline = deadline.map(|d| d - now);
            let tick = if tty_err {
                Some(Duration::from_secs(1))
            } else {
                None
            };
            let timeout = match (until_deadline, tick) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if tty_err {
                status_line(start, deadline, &pids, &exited);
            }
            let ev = match timeout {
                Some(t) => self.rx.recv_timeout(t),
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match ev {
                Ok(Event::Signal(s)) => break EndReason::Signal(s),
                Ok(Event::Enter) => break EndReason::Enter,
                Ok(Event::Exited(pid)) => {
                    if tty_err {
                        eprintln!();
                    }
                    warn(format!("process {pid} exited during the session"));
                    exited.push(pid);
                    if exited.len() == pids.len() {
                        break EndReason::TargetsExited;
                    }
                }
                Ok(Event::Detached(_)) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break EndReason::Interrupted,
            }
        };
        if tty_err {
            eprint!("\r\x1b[2K");
        }
        drop(watcher);
        (reason, exited)
    }

    /// Detach every attached process (in parallel). A signal during detach only gets an
    /// explanation: the detach call must finish for the output to be complete.
    fn detach_all(&self, attached: &[Attached]) -> (Vec<(i32, Outcome)>, Failures) {
        if attached.is_empty() {
            return (Vec::new(), Vec::new());
        }
        if self.req.sync_output {
            info("detaching; the tool writes its output before detach returns (this can take a while for large traces)");
        } else {
            info("detaching (output is written in the background by the target)");
        }
        let (req, agents) = (&self.req, &self.agents);
        let results = std::thread::scope(|scope| {
            let tx = self.tx.clone();
            scope.spawn(move || {
                let r: Vec<(i32, Result<Outcome>)> = attached
                    .iter()
                    .map(|a| a.pid)
                    .zip(parallel(attached, req.parallelism, |a| {
                        detach_one(agents, a)
                    }))
                    .collect();
                let _ = tx.send(Event::Detached(r));
            });
            loop {
                match self.rx.recv() {
                    Ok(Event::Detached(r)) => break r,
                    Ok(Event::Signal(s)) => info(format!(
                        "{} received: detach is finishing (the target is writing its output); rocprof-attach exits as soon as it is done",
                        signals::name(s)
                    )),
                    Ok(_) => {}
                    Err(_) => break Vec::new(),
                }
            }
        });
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for (pid, r) in results {
            match r {
                Ok(o) => ok.push((pid, o)),
                Err(e) => failed.push((pid, e)),
            }
        }
        (ok, failed)
    }

    /// Report files and per-process results, and decide the exit code: 0 when every process
    /// was attached and detached, 8 when only some were, else the code of what went wrong.
    fn finish(
        &self,
        attached: &[Attached],
        detached: &[(i32, Outcome)],
        results: &[ProcessResult],
        prefixes: &[(i32, Option<String>)],
        files: Vec<WrittenFile>,
    ) -> Result<ExitCode> {
        let pids: Vec<i32> = attached.iter().map(|a| a.pid).collect();
        for (pid, o) in detached {
            info(format!(
                "detached from PID {pid} in {:.1} ms",
                o.total_us as f64 / 1000.0
            ));
        }
        let mut files = files;
        files.extend(self.convert_missing_formats(&files));
        let owners = outputs::owners(&files, prefixes);
        print_files(&files, &owners, pids.len() > 1);
        if results.len() > 1 {
            let pairs: Vec<(Option<i32>, &WrittenFile)> =
                owners.iter().copied().zip(files.iter()).collect();
            print_table(results, &pairs);
        }
        if self.req.summary {
            self.print_summary(&files);
        }
        let exited: Vec<i32> = results
            .iter()
            .filter(|r| r.status == Status::Exited)
            .map(|r| r.pid)
            .collect();
        if files.is_empty() {
            if !exited.is_empty() && exited.len() == results.len() {
                // The specific cause beats the generic "no output" (exit code 7, not 9).
                eprintln!(
                    "rocprof-attach: error: process{} {} exited during the session before the tool wrote any \
                     output; nothing was written (keep the target running until rocprof-attach has detached)",
                    plural(exited.len()),
                    join(&exited)
                );
                return Ok(ExitCode::TargetExited);
            }
            if !exited.is_empty() {
                warn(format!(
                    "process{} {} exited during the session, before the tool could write its output",
                    plural(exited.len()),
                    join(&exited)
                ));
            }
            return Err(Error::NoOutput(no_output_hint(&self.req, attached)));
        }
        if !exited.is_empty() {
            warn(format!(
                "process{} {} exited during the session; {} output may be incomplete",
                plural(exited.len()),
                join(&exited),
                if exited.len() == 1 { "its" } else { "their" }
            ));
        }
        Ok(aggregate(results))
    }

    /// If the user asked for CSV or JSON and the tool only wrote rocpd databases, convert them.
    fn convert_missing_formats(&self, files: &[WrittenFile]) -> Vec<WrittenFile> {
        let dbs = databases(files);
        if dbs.is_empty() {
            return Vec::new();
        }
        let has = |ext: &str| {
            files
                .iter()
                .any(|f| f.path.extension().is_some_and(|e| e == ext))
        };
        let missing: Vec<OutputFormat> = self
            .req
            .formats
            .iter()
            .copied()
            .filter(|f| match f {
                OutputFormat::Csv => !has("csv"),
                OutputFormat::Json => !has("json"),
                _ => false,
            })
            .collect();
        let mut out = Vec::new();
        for db in dbs {
            let dir = db.parent().map(PathBuf::from).unwrap_or_default();
            let stem = db.file_name().map(|n| {
                n.to_string_lossy()
                    .trim_end_matches("_results.db")
                    .trim_end_matches(".db")
                    .to_string()
            });
            let name = stem.unwrap_or_else(|| "results".into());
            match crate::rocpd::convert_outputs(std::slice::from_ref(&db), &missing, &dir, &name) {
                Ok(written) => out.extend(written.into_iter().map(|p| {
                    let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                    WrittenFile {
                        path: p.clone(),
                        host_path: p,
                        size,
                    }
                })),
                Err(e) => warn(format!(
                    "could not convert {} to {}: {e}",
                    db.display(),
                    join_formats(&missing)
                )),
            }
        }
        out
    }

    fn print_summary(&self, files: &[WrittenFile]) {
        let dbs = databases(files);
        if dbs.is_empty() {
            warn("--summary needs the rocpd output (add rocpd to --output-format)");
            return;
        }
        if let Err(e) = crate::rocpd::print_summary(&dbs, 10) {
            warn(format!("summary: {e}"));
        }
    }
}

/// Attach one process through the agent.
fn attach_one(req: &AttachRequest, agents: &Agents, p: &Planned) -> Result<Attached> {
    let pid = p.report.pid;
    // Located by the preflight just before (same maps snapshot, no second ELF lookup).
    let (function, site) = (p.report.register_attach_addr, p.report.entry);
    let tool = p.report.tool.string.clone();
    let mut env = req.env.clone();
    // As the launcher does: the chosen tool travels in the buffer too.
    env.set("ROCPROF_ATTACH_TOOL_LIBRARY", &tool);
    let job = Job::Attach {
        env: envbuf::encode(&env),
        tool: tool.clone().into_bytes(),
    };
    let target = agent::Target {
        pid,
        tid: p.report.listener_tid,
        site,
        function,
    };
    let outcome = agents.run(&target, &job)?;
    let outcome = call_result(pid, "attach", outcome)?;
    Ok(Attached { pid, tool, outcome })
}

/// Detach one process through the agent.
fn detach_one(agents: &Agents, a: &Attached) -> Result<Outcome> {
    let pid = a.pid;
    let gone = |e: Error| match e {
        Error::ProcessGone { .. } | Error::TargetDied { .. } => Error::TargetExited { pid },
        e => e,
    };
    let tid = *procfs::threads_named(pid, LISTENER)
        .map_err(gone)?
        .first()
        .ok_or(Error::NotAttachable {
            pid,
            reason: "its 'rocp-bg-attach' thread is gone, so it cannot be detached".into(),
        })?;
    let lib = RemoteLibrary::locate(pid, REGISTER_LIBRARY).map_err(gone)?;
    let function = lib.symbol("rocprofiler_register_detach")?;
    let site = procfs::at_entry(pid).map_err(gone)?;
    let outcome = agents
        .run(
            &agent::Target {
                pid,
                tid,
                site,
                function,
            },
            &Job::Detach,
        )
        .map_err(gone)?;
    call_result(pid, "detach", outcome)
}

/// The comm of the listener thread.
const LISTENER: &str = "rocp-bg-attach";
/// The library that owns the attach entry points.
const REGISTER_LIBRARY: &str = "librocprofiler-register.so";

/// The rocpd databases among the files written (paths we can open).
fn databases(files: &[WrittenFile]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
        .map(|f| f.host_path.clone())
        .collect()
}

/// Turn the register function's return value into the session's result.
fn call_result(pid: i32, call: &'static str, outcome: Outcome) -> Result<Outcome> {
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
        None => Err(Error::Agent {
            pid,
            message: format!("the {call} call did not complete"),
        }),
    }
}

/// One snapshot per distinct target root (processes in one container share one).
fn snapshots(plan: &[Planned], dir: &std::path::Path) -> HashMap<(u64, u64), Snapshot> {
    let mut map = HashMap::new();
    for p in plan {
        let pid = p.report.pid;
        let key = std::fs::metadata(format!("/proc/{pid}/root"))
            .map(|m| (m.dev(), m.ino()))
            .unwrap_or((0, pid as u64));
        map.entry(key).or_insert_with(|| Snapshot::take(pid, dir));
    }
    map
}

fn print_files(files: &[WrittenFile], owners: &[Option<i32>], by_pid: bool) {
    if files.is_empty() {
        return;
    }
    let mut by_owner: BTreeMap<Option<i32>, Vec<&WrittenFile>> = BTreeMap::new();
    for (f, owner) in files.iter().zip(owners) {
        by_owner.entry(*owner).or_default().push(f);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "rocprof-attach: wrote {} file{}:",
        files.len(),
        plural(files.len())
    );
    for (owner, list) in by_owner {
        if let (Some(pid), true) = (owner, by_pid) {
            let _ = writeln!(out, "  PID {pid}:");
        }
        for f in list {
            let _ = writeln!(
                out,
                "  {:>10}  {}",
                outputs::human_size(f.size),
                f.path.display()
            );
        }
    }
}

/// What became of one selected process, for the per-process table and the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Attached and detached.
    Attached,
    /// rocprofiler-register returned a non-zero status (attach or detach).
    Rejected,
    /// Preflight, injection or detach failed.
    Failed,
    /// The process exited before or during the session.
    Exited,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Attached => "attached",
            Status::Rejected => "rejected",
            Status::Failed => "failed",
            Status::Exited => "exited",
        }
    }
}

/// One row of the per-process table.
#[derive(Debug, Clone)]
struct ProcessResult {
    pid: i32,
    status: Status,
    /// Short reason when the status is not `Attached`.
    detail: String,
    /// Exit code this process alone would give.
    code: ExitCode,
}

fn classify(e: &Error) -> Status {
    match e {
        Error::Rejected { .. } => Status::Rejected,
        Error::TargetExited { .. } | Error::TargetDied { .. } | Error::ProcessGone { .. } => {
            Status::Exited
        }
        _ => Status::Failed,
    }
}

/// Short reason for the table: the register status name, or the first clause of the error.
fn short_reason(e: &Error) -> String {
    match e {
        Error::Rejected {
            call, status, name, ..
        } => format!("{call} returned {status} ({name})"),
        e => {
            let text = e.to_string();
            let first = text.split(['.', ';']).next().unwrap_or("");
            first.chars().take(100).collect()
        }
    }
}

/// Per-process results in plan order (roots first, as selected), then failures not planned.
fn results_of(
    plan: &[Planned],
    attached: &[Attached],
    exited: &[i32],
    failures: &[(i32, Error)],
    detach_failures: &[(i32, Error)],
) -> Vec<ProcessResult> {
    let mut order: Vec<i32> = Vec::new();
    for pid in plan
        .iter()
        .map(|p| p.report.pid)
        .chain(failures.iter().map(|(p, _)| *p))
    {
        if !order.contains(&pid) {
            order.push(pid);
        }
    }
    let mut rows = Vec::new();
    for pid in order {
        let failed = failures
            .iter()
            .chain(detach_failures)
            .find(|(p, _)| *p == pid);
        let row = if let Some((_, e)) = failed {
            ProcessResult {
                pid,
                status: classify(e),
                detail: short_reason(e),
                code: e.exit_code(),
            }
        } else if exited.contains(&pid) {
            ProcessResult {
                pid,
                status: Status::Exited,
                detail: "exited while attached".into(),
                code: ExitCode::TargetExited,
            }
        } else if attached.iter().any(|a| a.pid == pid) {
            ProcessResult {
                pid,
                status: Status::Attached,
                detail: String::new(),
                code: ExitCode::Success,
            }
        } else {
            // A descendant left alone because its root could not be attached.
            continue;
        };
        rows.push(row);
    }
    rows
}

/// The session's exit code from the per-process results: 0 when all were attached and
/// detached; with one process, its own code; with several, 7 when every one exited and 8
/// (partial) otherwise.
fn aggregate(results: &[ProcessResult]) -> ExitCode {
    let ok = results
        .iter()
        .filter(|r| r.status == Status::Attached)
        .count();
    if ok == results.len() {
        return ExitCode::Success;
    }
    if results.len() == 1 {
        return results[0].code;
    }
    let failed: Vec<i32> = results
        .iter()
        .filter(|r| r.status != Status::Attached)
        .map(|r| r.pid)
        .collect();
    warn(format!(
        "partial success: {ok} of {} processes attached and detached (not: {})",
        results.len(),
        join(&failed)
    ));
    if ok == 0 && results.iter().all(|r| r.status == Status::Exited) {
        ExitCode::TargetExited
    } else {
        ExitCode::Partial
    }
}

/// The per-process summary table on stdout: PID, status, files (or why there are none).
fn print_table(results: &[ProcessResult], owners_of_files: &[(Option<i32>, &WrittenFile)]) {
    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
    let counts: Vec<String> = [
        Status::Attached,
        Status::Rejected,
        Status::Failed,
        Status::Exited,
    ]
    .into_iter()
    .filter(|s| count(*s) > 0)
    .map(|s| format!("{} {}", count(s), s.name()))
    .collect();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "rocprof-attach: {} processes: {}",
        results.len(),
        counts.join(", ")
    );
    let _ = writeln!(out, "  {:<8} {:<9} FILES", "PID", "STATUS");
    for r in results {
        let files: Vec<&WrittenFile> = owners_of_files
            .iter()
            .filter(|(o, _)| *o == Some(r.pid))
            .map(|(_, f)| *f)
            .collect();
        let mut lines: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
        if !r.detail.is_empty() {
            lines.push(format!("({})", r.detail));
        }
        if lines.is_empty() {
            lines.push("-".into());
        }
        for (i, l) in lines.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "  {:<8} {:<9} {l}", r.pid, r.status.name());
            } else {
                let _ = writeln!(out, "  {:<8} {:<9} {l}", "", "");
            }
        }
    }
    let unowned = owners_of_files.iter().filter(|(o, _)| o.is_none()).count();
    if unowned > 0 {
        let _ = writeln!(
            out,
            "  ({unowned} file{} could not be attributed to a process; see the list above)",
            plural(unowned)
        );
    }
}

fn no_output_hint(req: &AttachRequest, attached: &[Attached]) -> String {
    let tools: Vec<&str> = attached.iter().map(|a| a.tool.as_str()).collect();
    let mut msg = format!(
        "the session ran but no output file appeared under {} (as seen by the target). Likely causes: \
         the tool library ({}) did not load in the target (check the target's stderr; pass an absolute path with -t); \
         no enabled service produced data during the window (choose tracing options that match what the target does, \
         or profile longer with --attach-duration-msec)",
        outputs::static_prefix(&req.output_dir).display(),
        tools.join(", ")
    );
    if !req.sync_output {
        msg.push_str(
            "; with --attach-sync-output=false the target writes output in the background after detach, so look again shortly",
        );
    }
    msg
}

/// The exit code when nothing could be attached (every failure was already printed). When all
/// failed for the same kind of reason, that reason's code is the honest one (3 when all are gone,
/// 6 when all refused, ...); mixed reasons give 8.
fn nothing_attached(failures: &Failures) -> ExitCode {
    let Some((_, first)) = failures.first() else {
        return ExitCode::NotAttachable;
    };
    let code = first.exit_code();
    if failures.iter().all(|(_, e)| e.exit_code() == code) {
        return code;
    }
    eprintln!(
        "rocprof-attach: error: no process could be attached ({} failed, for different reasons)",
        failures.len()
    );
    ExitCode::Partial
}

/// The selection as the user wrote it.
fn describe(t: &TargetSelection) -> String {
    match t {
        TargetSelection::Pids(p) => format!(
            "--attach {}",
            p.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
        ),
        TargetSelection::Match(re) => format!("--match '{re}'"),
        TargetSelection::Job(id) => format!("--job {id}"),
        TargetSelection::All => "--all".into(),
    }
}

fn join(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn join_formats(f: &[OutputFormat]) -> String {
    f.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn status_line(start: Instant, deadline: Option<Instant>, pids: &[i32], exited: &[i32]) {
    let elapsed = start.elapsed().as_secs_f64();
    let remaining = match deadline {
        Some(d) => format!(
            ", {:.0} s left",
            d.saturating_duration_since(Instant::now())
                .as_secs_f64()
                .ceil()
        ),
        None => ", Enter or Ctrl-C to detach".into(),
    };
    let live: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !exited.contains(p))
        .collect();
    eprint!(
        "\r\x1b[2Krocprof-attach: profiling {elapsed:.0} s{remaining}; attached: {}",
        join(&live)
    );
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

/// Posts `Event::Exited(pid)` when an attached process exits (pidfd, no polling).
struct ExitWatcher {
    stop: Option<std::os::fd::OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ExitWatcher {
    fn start(pids: &[i32], tx: Sender<Event>) -> ExitWatcher {
        let fds: Vec<(i32, std::os::fd::OwnedFd)> = pids
            .iter()
            .filter_map(|&p| crate::ptrace::pidfd_open(p).ok().map(|fd| (p, fd)))
            .collect();
        let Ok((stop_r, stop_w)) = nix::unistd::pipe() else {
            return ExitWatcher {
                stop: None,
                thread: None,
            };
        };
        let thread = std::thread::Builder::new()
            .name("exit-watch".into())
            .spawn(move || watch_exits(fds, stop_r, tx))
            .ok();
        ExitWatcher {
            stop: Some(stop_w),
            thread,
        }
    }
}

impl Drop for ExitWatcher {
    fn drop(&mut self) {
        self.stop.take(); // closing the pipe wakes the watcher
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch_exits(
    mut fds: Vec<(i32, std::os::fd::OwnedFd)>,
    stop: std::os::fd::OwnedFd,
    tx: Sender<Event>,
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    while !fds.is_empty() {
        let mut set: Vec<PollFd> = fds
            .iter()
            .map(|(_, fd)| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        set.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
        match poll(&mut set, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        if set
            .last()
            .and_then(|p| p.revents())
            .is_some_and(|r| !r.is_empty())
        {
            return;
        }
        let ready: Vec<usize> = set[..fds.len()]
            .iter()
            .enumerate()
            .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
            .map(|(i, _)| i)
            .collect();
        drop(set);
        for i in ready.into_iter().rev() {
            let (pid, _) = fds.remove(i);
            let _ = tx.send(Event::Exited(pid));
        }
    }
}
