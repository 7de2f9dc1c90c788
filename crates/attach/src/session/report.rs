//! What a session returns: per-process results, files and the exit code, serialisable.

use super::attach::AttachOutcome;
use super::detach::DetachOutcome;
use super::events::EndReason;
use super::plan::{Failure, Plan};
use super::{join, plural};
use crate::error::Error;
use rocprof_exit::ExitCode;
use serde::Serialize;
use std::path::PathBuf;

/// What became of one selected process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    /// Attached and detached.
    Attached,
    /// rocprofiler-register returned a non-zero status (attach or detach).
    Rejected,
    /// Preflight, injection or detach failed.
    Failed,
    /// The process exited during the session (it was found, and attached or being attached).
    Exited,
    /// The process did not exist when the session looked for it (never existed, or exited
    /// before the preflight): the same words and exit code (3) as `--check`.
    NotFound,
    /// Attached, but the detach failed, timed out, was rejected or could not run (the process is
    /// stopped): the profiler may still be active in it.
    DetachFailed,
}

impl ProcessStatus {
    /// The lower-case name shown in the per-process table.
    pub fn name(self) -> &'static str {
        match self {
            ProcessStatus::Attached => "attached",
            ProcessStatus::Rejected => "rejected",
            ProcessStatus::Failed => "failed",
            ProcessStatus::Exited => "exited",
            ProcessStatus::NotFound => "not-found",
            ProcessStatus::DetachFailed => "detach-failed",
        }
    }
}

/// One process of the session.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    /// Process id.
    pub pid: i32,
    /// What became of it.
    pub status: ProcessStatus,
    /// Milliseconds the attach sequence took (when it was attached).
    pub attach_ms: Option<f64>,
    /// Milliseconds the detach sequence took (when it was detached).
    pub detach_ms: Option<f64>,
    /// Microseconds its listener was stopped outside the register calls (attach plus detach).
    pub listener_stopped_us: Option<u64>,
    /// Files attributed to it (as the target sees them).
    pub files: Vec<PathBuf>,
    /// Short reason when the status is not `attached` (empty otherwise).
    pub reason: String,
    /// The exit code this process alone would give.
    pub exit_code: ExitCode,
}

/// A file the tool (or our conversion) wrote.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// Path as the target sees it.
    pub path: PathBuf,
    /// Path through which we can read it (`/proc/PID/root/...` or the same path).
    pub host_path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// The process it belongs to, when it could be attributed.
    pub pid: Option<i32>,
    /// What is wrong with it when it is not complete (empty, truncated), else None.
    pub problem: Option<String>,
    /// The records a complete rocpd database holds (kernel dispatches, copies, API calls,
    /// allocations, counter values); None for other files.
    pub rows: Option<u64>,
}

/// How serious a [`Message`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A fact about the output the user should know (where rows went); no fault.
    Note,
    /// The session went on; the user should know.
    Warning,
    /// Why the exit code is not 0.
    Error,
}

/// A conclusion of the session, for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Warning or error.
    pub severity: Severity,
    /// The text (what, why, fix).
    pub text: String,
}

impl Message {
    fn warning(text: String) -> Message {
        Message {
            severity: Severity::Warning,
            text,
        }
    }
    fn error(text: String) -> Message {
        Message {
            severity: Severity::Error,
            text,
        }
    }
}

/// The result of a whole session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionReport {
    /// Per-process results, in plan order (roots first), then processes that failed preflight.
    pub processes: Vec<ProcessReport>,
    /// Files written, sorted by path.
    pub files: Vec<FileReport>,
    /// Why the profiling window ended (None when nothing was attached).
    pub end: Option<EndReason>,
    /// Conclusions, in order, after the files and the table.
    pub messages: Vec<Message>,
    /// The session's exit code (docs/exit-codes.md).
    pub exit_code: ExitCode,
}

impl SessionReport {
    /// The rocpd databases among the files (paths we can open).
    pub fn databases(&self) -> Vec<PathBuf> {
        self.files
            .iter()
            .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
            .map(|f| f.host_path.clone())
            .collect()
    }

    /// Files that could not be attributed to a process.
    pub fn unowned_files(&self) -> usize {
        self.files.iter().filter(|f| f.pid.is_none()).count()
    }
}

fn classify(e: &Error) -> ProcessStatus {
    match e {
        Error::DetachFailed { .. } => ProcessStatus::DetachFailed,
        Error::Rejected { .. } => ProcessStatus::Rejected,
        Error::TargetExited { .. }
        | Error::ProcessGone { .. }
        | Error::Engine(rocprof_engine::Error::TargetDied { .. }) => ProcessStatus::Exited,
        _ => ProcessStatus::Failed,
    }
}

/// Short reason for the table: the register status name, or the first clause of the error.
fn short_reason(e: &Error) -> String {
    match e {
        Error::Rejected {
            call, status, name, ..
        } => format!("{call} returned {status} ({name})"),
        Error::DetachFailed { reason, .. } => {
            let first = reason.rsplit(": ").next().unwrap_or(reason);
            let first = first.split(';').next().unwrap_or("");
            format!(
                "not detached: {}",
                first.chars().take(160).collect::<String>()
            )
        }
        e => {
            let text = e.to_string();
            let first = text.split(['.', ';']).next().unwrap_or("");
            first.chars().take(100).collect()
        }
    }
}

/// Per-process results in plan order, then failures not planned.
pub(super) fn results_of(
    plan: &Plan,
    attach: &AttachOutcome,
    exited: &[i32],
    detach: &DetachOutcome,
) -> Vec<ProcessReport> {
    let failures: Vec<&Failure> = plan.failures.iter().chain(&attach.failures).collect();
    let mut order: Vec<i32> = Vec::new();
    for pid in plan
        .targets
        .iter()
        .map(|p| p.report.pid)
        .chain(failures.iter().map(|f| f.pid))
    {
        if !order.contains(&pid) {
            order.push(pid);
        }
    }
    let mut rows = Vec::new();
    for pid in order {
        let a = attach.attached.iter().find(|a| a.pid == pid);
        let d = detach.detached.iter().find(|d| d.pid == pid);
        let mut row = ProcessReport {
            pid,
            status: ProcessStatus::Attached,
            attach_ms: a.map(|a| a.attach_us as f64 / 1000.0),
            detach_ms: d.map(|d| d.detach_us as f64 / 1000.0),
            listener_stopped_us: a.map(|a| a.stopped_us + d.map_or(0, |d| d.stopped_us)),
            files: Vec::new(),
            reason: String::new(),
            exit_code: ExitCode::Success,
        };
        let failed = failures
            .iter()
            .copied()
            .chain(&detach.failures)
            .find(|f| f.pid == pid);
        if let Some(f) = failed {
            row.status = classify(&f.error);
            // Gone before the preflight could find it: "not found", as `--check` says.
            if matches!(f.error, Error::ProcessGone { .. })
                && a.is_none()
                && plan.failures.iter().any(|p| p.pid == pid)
            {
                row.status = ProcessStatus::NotFound;
            }
            row.reason = short_reason(&f.error);
            row.exit_code = f.error.exit_code();
        } else if exited.contains(&pid) {
            row.status = ProcessStatus::Exited;
            row.reason = "exited while attached".into();
            row.exit_code = ExitCode::TargetExited;
        } else if a.is_none() {
            // A descendant left alone because its root could not be attached.
            continue;
        }
        rows.push(row);
    }
    rows
}

/// The session's exit code from the per-process results: 0 when all were attached and
/// detached; with one process, its own code; with several, 7 when every one exited and 8
/// (partial) otherwise (with a warning naming the processes).
pub(super) fn aggregate(results: &[ProcessReport], messages: &mut Vec<Message>) -> ExitCode {
    let ok = results
        .iter()
        .filter(|r| r.status == ProcessStatus::Attached)
        .count();
    if ok == results.len() {
        return ExitCode::Success;
    }
    if results.len() == 1 {
        return results[0].exit_code;
    }
    let failed: Vec<i32> = results
        .iter()
        .filter(|r| r.status != ProcessStatus::Attached)
        .map(|r| r.pid)
        .collect();
    messages.push(Message::warning(format!(
        "partial success: {ok} of {} processes attached and detached (not: {})",
        results.len(),
        join(&failed)
    )));
    let first = results[0].exit_code;
    if ok == 0 && results.iter().all(|r| r.status == ProcessStatus::Exited) {
        ExitCode::TargetExited
    } else if ok == 0 && results.iter().all(|r| r.exit_code == first) {
        first
    } else {
        ExitCode::Partial
    }
}

/// The report when nothing could be attached (every failure was already reported as an event).
/// When all failed for the same kind of reason, that reason's code is the honest one (3 when all
/// are gone, 6 when all refused, ...); mixed reasons give 8.
pub fn nothing_attached(plan: &Plan, attach: &AttachOutcome) -> SessionReport {
    let processes = results_of(plan, attach, &[], &DetachOutcome::default());
    let failures: Vec<&Failure> = plan.failures.iter().chain(&attach.failures).collect();
    let mut messages = Vec::new();
    let exit_code = match failures.first() {
        None => ExitCode::NotAttachable,
        Some(first) => {
            let code = first.error.exit_code();
            if failures.iter().all(|f| f.error.exit_code() == code) {
                code
            } else {
                messages.push(Message::error(format!(
                    "no process could be attached ({} failed, for different reasons)",
                    failures.len()
                )));
                ExitCode::Partial
            }
        }
    };
    SessionReport {
        processes,
        files: Vec::new(),
        end: None,
        messages,
        exit_code,
    }
}

/// The one error for processes that could not be detached: why (each one's reason, in full
/// from `reasons` when known, else the table's), that the profiler may still be active in them,
/// where what it collects from now on goes, and how to finish their session. `files_listed`: the
/// session lists files (written before or during the failed detach), which the message then does
/// not contradict.
pub(super) fn still_active(
    processes: &[ProcessReport],
    reasons: &[(i32, String)],
    output: &str,
    files_listed: bool,
) -> Option<Message> {
    let failed: Vec<&ProcessReport> = processes
        .iter()
        .filter(|r| r.status == ProcessStatus::DetachFailed)
        .collect();
    let n = failed.len();
    if n == 0 {
        return None;
    }
    let why: Vec<String> = failed
        .iter()
        .map(|r| {
            let reason = reasons
                .iter()
                .find(|(pid, _)| *pid == r.pid)
                .map(|(_, why)| why.as_str())
                .unwrap_or_else(|| r.reason.strip_prefix("not detached: ").unwrap_or(&r.reason));
            format!("process {} was not detached: {reason}", r.pid)
        })
        .collect();
    let fixes: Vec<String> = failed
        .iter()
        .map(|r| {
            format!(
                "`rocprof-attach --detach -p {0}` (continue it first with `kill -CONT {0}` if it is stopped)",
                r.pid
            )
        })
        .collect();
    Some(Message::error(format!(
        "{}; the profiler may still be active in {} and collecting: {}what it collects from now on is \
         written under {output} when {} exit{} or {} session is finished. Fix: finish it with {}; a new \
         attach is refused until then",
        why.join("; "),
        if n == 1 { "it" } else { "them" },
        if files_listed {
            "the files listed were written during this session; "
        } else {
            ""
        },
        if n == 1 { "it" } else { "they" },
        if n == 1 { "s" } else { "" },
        if n == 1 { "its" } else { "their" },
        fixes.join(", "),
    )))
}

/// Conclusions about processes that exited or could not be detached, and the exit code, once the
/// files are known. `output` says where the tool writes (for processes still profiled).
pub(super) fn verdict(
    processes: &[ProcessReport],
    reasons: &[(i32, String)],
    no_files: bool,
    output: &str,
    no_output_hint: impl FnOnce() -> String,
) -> (Vec<Message>, ExitCode) {
    let mut messages = Vec::new();
    if let Some(m) = still_active(processes, reasons, output, !no_files) {
        messages.push(m);
        if no_files {
            // Not "no output": the output has not been written yet.
            let code = aggregate(processes, &mut messages);
            return (messages, code);
        }
    }
    let exited: Vec<i32> = processes
        .iter()
        .filter(|r| r.status == ProcessStatus::Exited)
        .map(|r| r.pid)
        .collect();
    if no_files {
        if !exited.is_empty() && exited.len() == processes.len() {
            // The specific cause beats the generic "no output" (exit code 7, not 9).
            messages.push(Message::error(format!(
                "process{} {} exited before the tool wrote any output; nothing was written (keep the \
                 target running until rocprof-attach has detached)",
                plural(exited.len()),
                join(&exited)
            )));
            return (messages, ExitCode::TargetExited);
        }
        if !exited.is_empty() {
            messages.push(Message::warning(format!(
                "process{} {} exited before the tool could write its output",
                plural(exited.len()),
                join(&exited)
            )));
        }
        let e = Error::NoOutput(no_output_hint());
        messages.push(Message::error(e.to_string()));
        return (messages, e.exit_code());
    }
    if !exited.is_empty() {
        messages.push(Message::warning(format!(
            "process{} {} exited before rocprof-attach detached; {} output may be incomplete",
            plural(exited.len()),
            join(&exited),
            if exited.len() == 1 { "its" } else { "their" }
        )));
    }
    let code = aggregate(processes, &mut messages);
    (messages, code)
}
