//! `rocprof-attach -p PID ...`: plan, attach, wait, detach, collect, and show each step.

use crate::attach::claims::State;
use crate::attach::session::{
    self, AttachRequest, DetachControl, DetachOutcome, Event, Message, SessionReport, Severity,
    WaitEnd, WaitOptions, Waiter,
};
use crate::cli::json;
use crate::cli::render::{self, Ui};
use crate::engine::agent::{Agents, CallTimeouts};
use crate::engine::ptrace;
use crate::exit::ExitCode;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Wall time and our own CPU time (this process, all its threads) of each step of a session,
/// logged at debug level (`-vv`): where a session's time goes, per step.
struct Phases {
    started: Instant,
    cpu_us: u64,
}

impl Phases {
    fn new() -> Phases {
        Phases {
            started: Instant::now(),
            cpu_us: ptrace::process_cpu_us(),
        }
    }

    /// Log the step that just ended and start the next one.
    fn done(&mut self, step: &str) {
        let cpu = ptrace::process_cpu_us();
        tracing::debug!(
            "session step {step}: {:.2} ms, our CPU {:.2} ms (front end)",
            self.started.elapsed().as_secs_f64() * 1e3,
            cpu.saturating_sub(self.cpu_us) as f64 / 1e3
        );
        *self = Phases {
            started: Instant::now(),
            cpu_us: cpu,
        };
    }
}

/// Run an attach session to completion and return the exit code. With `json`, the file list and
/// the table are replaced by one JSON document on stdout (docs/json.md).
pub fn run(req: AttachRequest, ui: &Ui, json: bool) -> ExitCode {
    let report = session(&req, ui, json);
    if json {
        json::print_session(&req, &report);
    }
    report.exit_code
}

/// A report for a session that stopped before anything was attached.
fn refused(e: &crate::attach::Error) -> SessionReport {
    SessionReport {
        processes: Vec::new(),
        files: Vec::new(),
        end: None,
        messages: vec![Message {
            severity: Severity::Error,
            text: e.to_string(),
        }],
        exit_code: e.exit_code(),
    }
}

fn session(req: &AttachRequest, ui: &Ui, json: bool) -> SessionReport {
    let mut phases = Phases::new();
    // First, while we are still single-threaded: the agent server forks cheap agents.
    // A target stopped by job control while it runs our call holds the agent this long before
    // the session says so (the agent then stays until the call returns).
    let mut timeouts = CallTimeouts::default();
    timeouts.engine.stopped = req.stopped_wait;
    let agents = Agents::start(timeouts);
    let waiter = match Waiter::install() {
        Ok(w) => w,
        Err(e) => {
            ui.error(e.to_string());
            return refused(&e);
        }
    };
    let events = |ev: Event| ui.event(ev);
    phases.done("start (agent server, signal handlers)");
    let plan = match session::plan(req, &events) {
        Ok(p) => p,
        Err(e) => return refused_plan(&e, ui),
    };
    phases.done("plan (select, preflight)");
    let collector = session::Collector::before(&plan, req);
    phases.done("snapshot of the output directory");
    session::will::leave(&agents, &plan);
    let attached = session::attach(&plan, &req.env, req.parallelism, &agents, &events, &|| {
        waiter.interrupted()
    });
    phases.done("attach");
    if attached.attached.is_empty() {
        return nothing_attached(&plan, &attached, &agents, ui, json);
    }
    let end = profiling_window(req, ui, &waiter, &attached, &events);
    phases.done("profiling window");
    let still_running = still_running(&plan, &attached, &end);
    let ctl = DetachControl::new(req.stopped_wait);
    let detached: DetachOutcome = waiter.shielded(
        || {
            session::detach_with(
                &still_running,
                req.parallelism,
                req.sync_output,
                &agents,
                &events,
                &ctl,
            )
        },
        &ctl,
        &events,
        &|signal| abandon_detach(ui, signal, &still_running, &ctl.handed(), req),
    );
    phases.done("detach");
    settle(&plan, &detached, &agents);
    let waited = await_output(req, &collector, &detached, &waiter, &events);
    phases.done("wait for asynchronous output");
    let report = collector.collect(req, &plan, &attached, &end, &detached, waited, &events);
    if !json {
        render::print_files(&report, attached.attached.len() > 1);
        if report.processes.len() > 1 {
            render::print_table(&report);
        }
    }
    phases.done("collect and report");
    if req.summary && !json {
        print_summary(&report.databases(), ui);
    }
    ui.messages(&report);
    // The agent server exits once its socket closes; its CPU shows in our children's usage.
    drop(agents);
    tracing::debug!(
        "session: agent server CPU {:.2} ms",
        ptrace::children_cpu_us() as f64 / 1e3
    );
    report
}

/// Record how each detach ended in its claim (a failed one leaves the record of an active
/// session, for `--detach` to finish), then take back the will handed to the agent server before
/// the attach (attach::session::will): from the attach to here, a front end killed at any moment
/// leaves nothing for a person, since the server detaches and releases the claims itself.
fn settle(plan: &session::Plan, detached: &DetachOutcome, agents: &Agents) {
    session::settle(&plan.claims, &plan.pids(), detached);
    session::will::take_back(agents);
}

/// No process was attached: nothing for the agent server to finish; the report.
fn nothing_attached(
    plan: &session::Plan,
    attached: &session::AttachOutcome,
    agents: &Agents,
    ui: &Ui,
    json: bool,
) -> SessionReport {
    session::will::take_back(agents);
    let report = session::nothing_attached(plan, attached);
    if report.processes.len() > 1 && !json {
        render::print_table(&report);
    }
    ui.messages(&report);
    report
}

/// The plan failed: say why (and how to get permission), and report the refusal.
fn refused_plan(e: &crate::attach::Error, ui: &Ui) -> SessionReport {
    ui.error(e.to_string());
    if let Some(pid) = e.permission_denied_pid() {
        ui.hint(crate::attach::preflight::permission_hint(pid));
    }
    refused(e)
}

/// The profiling window: until its duration, Enter, a signal or the targets' exit (ended at
/// once when the attach was interrupted).
fn profiling_window(
    req: &AttachRequest,
    ui: &Ui,
    waiter: &Waiter,
    attached: &session::AttachOutcome,
    events: session::Events,
) -> WaitEnd {
    if attached.interrupted {
        let reason = session::EndReason::Interrupted;
        events(Event::WaitEnded { reason });
        return WaitEnd {
            reason,
            exited: Vec::new(),
        };
    }
    let opts = WaitOptions {
        duration: req.duration,
        enter: std::io::stdin().is_terminal(),
        tick: ui.status_line.then_some(Duration::from_secs(1)),
    };
    waiter.wait(&attached.pids(), opts, events)
}

/// The attached processes that did not exit during the window, their claims marked detaching.
fn still_running(
    plan: &session::Plan,
    attached: &session::AttachOutcome,
    end: &WaitEnd,
) -> Vec<session::Attachment> {
    let still_running: Vec<_> = attached
        .attached
        .iter()
        .filter(|a| !end.exited.contains(&a.pid))
        .cloned()
        .collect();
    for a in &still_running {
        plan.claims.set(a.pid, State::Detaching);
    }
    still_running
}

/// With asynchronous output the tool writes after the detach: wait (bounded) for its files.
fn await_output(
    req: &AttachRequest,
    collector: &session::Collector,
    detached: &DetachOutcome,
    waiter: &Waiter,
    events: session::Events,
) -> session::OutputWait {
    if req.sync_output || detached.detached.is_empty() || req.output_wait.is_zero() {
        return session::OutputWait::NotWaited;
    }
    events(Event::AwaitingOutput {
        timeout: req.output_wait,
    });
    let pids: Vec<i32> = detached.detached.iter().map(|d| d.pid).collect();
    let w = collector.await_output(&pids, req.output_wait, Some(waiter.signal_fd()));
    if w == session::OutputWait::Stopped {
        // The signal only ends this wait: what was written so far is reported.
        let _ = waiter.interrupted();
    }
    w
}

/// `-S/--summary`: the summary tables of the databases written.
fn print_summary(dbs: &[std::path::PathBuf], ui: &Ui) {
    if dbs.is_empty() {
        ui.warn("--summary needs the rocpd output (add rocpd to --output-format)");
        return;
    }
    let width = crate::rocpd::summary::terminal_width();
    if let Err(e) = crate::rocpd::write_summary(&mut crate::cli::stdio::stdout(), dbs, 10, width) {
        ui.warn(format!("summary: {e}"));
    }
}

/// A second Ctrl-C (or SIGTERM) during a slow detach: stop waiting and say what happens next. A
/// detach call in an agent's hands goes on in its target: the agents (a process of their own,
/// deaf to terminal signals) wait for each call to return and restore its thread, so ending here
/// cannot harm a target. A detach not yet handed over never starts: that profiler stays active.
/// Exit 11: this session did not see its detaches complete.
fn abandon_detach(
    ui: &Ui,
    signal: i32,
    attached: &[crate::attach::session::Attachment],
    handed: &[i32],
    req: &AttachRequest,
) {
    use crate::attach::session::join;
    let (going, left): (Vec<i32>, Vec<i32>) = attached
        .iter()
        .map(|a| a.pid)
        .partition(|p| handed.contains(p));
    let name = crate::attach::signals::name(signal);
    let dir = req.output_dir.display();
    let s = |n: usize| if n == 1 { "" } else { "es" };
    let mut msg = format!("{name} received again: no longer waiting for the detach");
    if !going.is_empty() {
        msg += &format!(
            "; the detach call of process{} {} finishes in the target (the agent restores each \
             thread when its call returns) and the tool writes its output under {dir}",
            s(going.len()),
            join(&going)
        );
    }
    if !left.is_empty() {
        msg += &format!(
            "; the agent tries the detach of process{} {} once this front end has exited, and the \
             tool then writes its output under {dir} (one still stopped stays recorded as active: \
             `rocprof-attach --detach -p PID` finishes it later)",
            s(left.len()),
            join(&left),
        );
    }
    ui.error(msg + "; this session cannot list those files");
    std::process::exit(crate::cli::stdio::finish(ExitCode::DetachFailed) as i32);
}
