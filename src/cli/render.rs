//! How the CLI shows a session: progress lines and warnings on stderr (from the session's
//! events), the status line on a terminal, and the file list and per-process table on stdout.

use crate::attach::outputs::human_size;
use crate::attach::session::{
    join, EndReason, Event, ProcessStatus, SessionReport, Severity, Stage,
};
use crate::attach::signals;
use crate::cli::stdio::{errln, errout};
use crate::exit::ExitCode;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The terminal side of the CLI: what to print, and where.
///
/// With `-q` a failing command prints exactly one line, the reason for its exit code: the first
/// error, or (when the session reported none, e.g. a partial success) its last warning as an
/// error; later errors and hints are dropped.
#[derive(Debug)]
pub struct Ui {
    /// `-q`: errors only on stderr.
    pub quiet: bool,
    /// An error line has been printed.
    error_shown: AtomicBool,
    /// stderr is a terminal: show the status line.
    pub status_line: bool,
    /// The status line is on screen (the next line must start on a fresh line).
    line_open: AtomicBool,
    /// The session asked for synchronous output (known once detaching starts).
    sync_output: AtomicBool,
}

fn plural_es(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "es"
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl Ui {
    /// A UI for `-q` (`quiet`) writing the status line when `status_line` is true.
    pub fn new(quiet: bool, status_line: bool) -> Ui {
        Ui {
            quiet,
            error_shown: AtomicBool::new(false),
            status_line: status_line && !quiet,
            line_open: AtomicBool::new(false),
            sync_output: AtomicBool::new(true),
        }
    }

    /// A progress line (not with `-q`).
    pub fn info(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            errln!("rocprof-attach: {}", msg.as_ref());
        }
    }

    /// A warning (not with `-q`).
    pub fn warn(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            errln!("rocprof-attach: warning: {}", msg.as_ref());
        }
    }

    /// An error (always; with `-q` only the first one).
    pub fn error(&self, msg: impl AsRef<str>) {
        if self.error_shown.swap(true, Ordering::Relaxed) && self.quiet {
            return;
        }
        errln!("rocprof-attach: error: {}", msg.as_ref());
    }

    /// A line that follows an error with how to fix it (not with `-q`: one line there).
    pub fn hint(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            errln!("{}", msg.as_ref());
        }
    }

    /// Show one session event.
    // Long because: one flat match, one message per event.
    pub fn event(&self, ev: Event) {
        match ev {
            Event::Unreadable { pids } => self.warn(format!(
                "{} process{} could not be examined (not readable by this user; run as their owner or as root \
                 to include them; -v lists them)",
                pids.len(),
                if pids.len() == 1 { "" } else { "es" }
            )),
            Event::Selected { selection, pids } => self.info(format!(
                "selected {} process{} ({selection}): {}",
                pids.len(),
                if pids.len() == 1 { "" } else { "es" },
                join(&pids)
            )),
            Event::Planned { .. } => {}
            Event::Warning { message, .. } => self.warn(message),
            // The session's conclusion says it once, with what was written and the fix.
            Event::Failed {
                stage: Stage::Detach,
                ..
            } => {}
            Event::Failed { message, hint, .. } => {
                self.error(message);
                if let Some(h) = hint {
                    self.hint(h);
                }
            }
            Event::Attached {
                pid,
                listener_tid,
                attach_ms,
                stopped_us,
                cuda_loaded_now,
            } => self.info(match cuda_loaded_now {
                None => format!(
                    "attached to PID {pid} (listener thread {listener_tid}) in {attach_ms:.2} ms; listener stopped {:.0} µs outside the call",
                    stopped_us as f64
                ),
                Some(true) => format!(
                    "attached to PID {pid} through CUPTI in {attach_ms:.2} ms: thread {listener_tid} started the tool thread ({}), stopped {stopped_us} µs outside the call",
                    crate::attach::cuda::TOOL_COMM
                ),
                Some(false) => format!(
                    "attached to PID {pid} through CUPTI in {attach_ms:.2} ms: its tool thread {listener_tid} ({}) was loaded by an earlier session (no ptrace)",
                    crate::attach::cuda::TOOL_COMM
                ),
            }),
            Event::AttachedAll { pids } => self.info(format!(
                "attached to {} process{}: {}",
                pids.len(),
                if pids.len() == 1 { "" } else { "es" },
                join(&pids)
            )),
            Event::Waiting { duration, enter } => match duration {
                Some(d) => self.info(format!(
                    "profiling for {} ms (Ctrl-C to stop early)",
                    d.as_millis()
                )),
                None if enter => self.info("profiling: press Enter or Ctrl-C to detach"),
                None => self.info(
                    "profiling until SIGINT/SIGTERM or until the target exits (stdin is not a terminal)",
                ),
            },
            Event::Tick {
                elapsed,
                remaining,
                live,
            } => self.status(elapsed, remaining, &live),
            Event::Exited { pid } => {
                if self.line_open.swap(false, Ordering::Relaxed) {
                    errln!();
                }
                self.warn(format!("process {pid} exited during the session"));
            }
            Event::WaitEnded { reason } => self.wait_ended(reason),
            Event::Detaching { sync_output } => {
                self.sync_output.store(sync_output, Ordering::Relaxed);
                if sync_output {
                    self.info("detaching; the tool writes its output before detach returns (this can take a while for large traces)");
                } else {
                    self.info("detaching (output is written in the background by the target)");
                }
            }
            Event::SignalWhileDetaching { signal, stopped } => {
                self.signal_while_detaching(signal, &stopped)
            }
            Event::Stopped { pid, state, wait } => self.warn(format!(
                "process {pid} is stopped (state {state}), so it cannot run the detach call: continue it with \
                 `kill -CONT {pid}`; waiting up to {} ms for it (Ctrl-C gives up now)",
                wait.as_millis()
            )),
            Event::Continued { pid } => self.info(format!("process {pid} continued; detaching it")),
            Event::AwaitingOutput { timeout } => self.info(format!(
                "waiting up to {} for the tool to write its output in the background (--output-timeout)",
                crate::attach::session::describe_duration(timeout)
            )),
            Event::Detached { pid, detach_ms } => {
                self.info(format!("detached from PID {pid} in {detach_ms:.1} ms"))
            }
        }
    }

    /// The wait ended: clear the status line and say why.
    fn wait_ended(&self, reason: EndReason) {
        if self.status_line {
            errout!("\r\x1b[2K");
            self.line_open.store(false, Ordering::Relaxed);
        }
        match reason {
            EndReason::Signal(s) => self.info(format!("{} received: detaching", signals::name(s))),
            EndReason::Interrupted => {
                self.info("interrupted while attaching: detaching what was attached")
            }
            EndReason::TargetsExited => self.info("every attached process exited"),
            EndReason::Duration | EndReason::Enter => {}
        }
    }

    /// A signal came while detaching: say what is given up on and what is still waited for.
    fn signal_while_detaching(&self, signal: i32, stopped: &[i32]) {
        let name = signals::name(signal);
        if !stopped.is_empty() {
            self.warn(format!(
                "{name} received: giving up on detaching stopped process{} {} (the profiler stays active in \
                 {}); other detach calls still finish",
                plural_es(stopped.len()),
                join(stopped),
                if stopped.len() == 1 { "it" } else { "them" }
            ));
        } else if self.sync_output.load(Ordering::Relaxed) {
            self.info(format!(
                "{name} received: waiting for the detach calls to return (with synchronous output the tool \
                 writes its files during them); rocprof-attach exits as soon as they do. Press Ctrl-C \
                 again to stop waiting (the calls still finish in the target)"
            ));
        } else {
            self.info(format!(
                "{name} received: waiting for the detach calls to return; rocprof-attach exits as soon as they \
                 do. Press Ctrl-C again to stop waiting (the calls still finish in the target)"
            ));
        }
    }

    /// The status line: elapsed time, time left, attached processes.
    fn status(&self, elapsed: Duration, remaining: Option<Duration>, live: &[i32]) {
        if !self.status_line {
            return;
        }
        let remaining = match remaining {
            Some(d) => format!(", {:.0} s left", d.as_secs_f64().ceil()),
            None => ", Enter or Ctrl-C to detach".into(),
        };
        errout!(
            "\r\x1b[2Krocprof-attach: profiling {:.0} s{remaining}; attached: {}",
            elapsed.as_secs_f64(),
            join(live)
        );
        self.line_open.store(true, Ordering::Relaxed);
    }

    /// The session's conclusions on stderr (errors always, warnings unless `-q`). With `-q`, a
    /// session that fails without an error line says why in one (see [`Ui`]).
    pub fn messages(&self, report: &SessionReport) {
        for m in &report.messages {
            match m.severity {
                Severity::Note => self.info(&m.text),
                Severity::Warning => self.warn(&m.text),
                Severity::Error => self.error(&m.text),
            }
        }
        if self.quiet
            && report.exit_code != ExitCode::Success
            && !self.error_shown.load(Ordering::Relaxed)
        {
            match report
                .messages
                .iter()
                .rev()
                .find(|m| m.severity != Severity::Note)
            {
                Some(m) => self.error(&m.text),
                None => self.error(format!(
                    "the session ended with exit code {} ({}); run without -q for details",
                    report.exit_code.code(),
                    report.exit_code.name()
                )),
            }
        }
    }
}

/// The files written, on stdout, grouped by process when there are several.
pub fn print_files(report: &SessionReport, by_pid: bool) {
    if report.files.is_empty() {
        return;
    }
    let mut by_owner: BTreeMap<Option<i32>, Vec<_>> = BTreeMap::new();
    for f in &report.files {
        by_owner.entry(f.pid).or_default().push(f);
    }
    let mut out = crate::cli::stdio::stdout();
    let _ = writeln!(
        out,
        "rocprof-attach: wrote {} file{}:",
        report.files.len(),
        plural(report.files.len())
    );
    for (owner, list) in by_owner {
        if let (Some(pid), true) = (owner, by_pid) {
            let _ = writeln!(out, "  PID {pid}:");
        }
        for f in list {
            match &f.problem {
                None => {
                    let rows = f
                        .rows
                        .map(|n| format!("  ({} rows)", crate::attach::session::group(n)))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  {:>10}  {}{rows}",
                        human_size(f.size),
                        f.path.display()
                    );
                }
                Some(p) => {
                    let _ = writeln!(
                        out,
                        "  {:>10}  {}  (INCOMPLETE: {p})",
                        human_size(f.size),
                        f.path.display()
                    );
                }
            }
        }
    }
}

/// The per-process summary table on stdout: PID, status, files (or why there are none).
pub fn print_table(report: &SessionReport) {
    let results = &report.processes;
    let count = |s: ProcessStatus| results.iter().filter(|r| r.status == s).count();
    let counts: Vec<String> = [
        ProcessStatus::Attached,
        ProcessStatus::Rejected,
        ProcessStatus::Failed,
        ProcessStatus::Exited,
        ProcessStatus::NotFound,
        ProcessStatus::DetachFailed,
    ]
    .into_iter()
    .filter(|s| count(*s) > 0)
    .map(|s| format!("{} {}", count(s), s.name()))
    .collect();
    let mut out = crate::cli::stdio::stdout();
    let _ = writeln!(
        out,
        "rocprof-attach: {} processes: {}",
        results.len(),
        counts.join(", ")
    );
    let _ = writeln!(out, "  {:<8} {:<13} FILES", "PID", "STATUS");
    for r in results {
        let mut lines: Vec<String> = r.files.iter().map(|f| f.display().to_string()).collect();
        if !r.reason.is_empty() {
            lines.push(format!("({})", r.reason));
        }
        if lines.is_empty() {
            lines.push("-".into());
        }
        for (i, l) in lines.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "  {:<8} {:<13} {l}", r.pid, r.status.name());
            } else {
                let _ = writeln!(out, "  {:<8} {:<13} {l}", "", "");
            }
        }
    }
    let unowned = report.unowned_files();
    if unowned > 0 {
        let _ = writeln!(
            out,
            "  ({unowned} file{} could not be attributed to a process; see the list above)",
            plural(unowned)
        );
    }
}
