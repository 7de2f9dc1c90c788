//! `rocprof-attach --detach -p PID`: finish a session left active in a process, for what the
//! agent of a killed front end could not finish itself (the agent killed too, a detach that
//! failed: exit code 11). The claim recorded for the process ([`crate::attach::claims`]) says that
//! a session is active and where its output goes; this takes it over, detaches, removes it, and
//! then reports the session's files as a session does: the output template expanded for the
//! process (or under `-d`), every file it names written since the session began, each checked
//! (empty or truncated files are INCOMPLETE, exit code 9), and `--json` (docs/json.md).

use crate::attach::claims::{Claim, Holder, Purpose, Record, State, FRONT_END_CLI};
use crate::attach::outputs::{self, Snapshot};
use crate::attach::session::{self, DetachControl, Event, FileReport, SessionReport, Waiter};
use crate::attach::{targets, Error};
use crate::cli::json;
use crate::cli::render::{self, Ui};
use crate::engine::agent::{Agents, CallTimeouts};
use crate::engine::procfs;
use crate::exit::ExitCode;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// What finishing one process's session did.
struct Finished {
    pid: i32,
    code: ExitCode,
    files: Vec<FileReport>,
    error: Option<String>,
    output: Option<String>,
}

/// Finish the sessions of `pids` (thread ids stand for their process), one after the other;
/// the exit code of the last that failed.
pub fn run(
    pids: &[i32],
    stopped_wait: Duration,
    dir: Option<&Path>,
    ui: &Ui,
    as_json: bool,
) -> ExitCode {
    let mut timeouts = CallTimeouts::default();
    timeouts.engine.stopped = stopped_wait;
    let agents = Agents::start(timeouts);
    let waiter = match Waiter::install() {
        Ok(w) => w,
        Err(e) => {
            ui.error(e.to_string());
            return e.exit_code();
        }
    };
    let mut seen = Vec::new();
    let mut results = Vec::new();
    for &id in pids {
        let pid = targets::process_of(id);
        if seen.contains(&pid) {
            continue;
        }
        seen.push(pid);
        let f = finish(pid, stopped_wait, dir, &agents, &waiter, ui);
        if !as_json {
            show(&f, ui);
        }
        results.push(f);
    }
    let code = results
        .iter()
        .rev()
        .map(|f| f.code)
        .find(|c| *c != ExitCode::Success)
        .unwrap_or(ExitCode::Success);
    if as_json {
        json::print("detach", code, document(&results));
    }
    code
}

/// The `--detach --json` document: per process, its exit code, files and error.
fn document(results: &[Finished]) -> serde_json::Value {
    let processes: Vec<_> = results
        .iter()
        .map(|f| {
            json!({
                "pid": f.pid,
                "exit_code": f.code.code(),
                "exit_name": f.code.name(),
                "output": f.output,
                "error": f.error,
                "files": f.files,
            })
        })
        .collect();
    let files: Vec<&FileReport> = results.iter().flat_map(|f| &f.files).collect();
    json!({ "processes": processes, "files": files })
}

/// The files of one finished session on stdout, and what is wrong with them.
fn show(f: &Finished, ui: &Ui) {
    let report = SessionReport {
        processes: Vec::new(),
        files: f.files.clone(),
        end: None,
        messages: Vec::new(),
        exit_code: f.code,
    };
    render::print_files(&report, false);
    if f.code == ExitCode::NoOutput {
        if let Some(e) = &f.error {
            ui.error(e.clone());
        }
    }
}

fn finish(
    pid: i32,
    stopped_wait: Duration,
    dir: Option<&Path>,
    agents: &Agents,
    waiter: &Waiter,
    ui: &Ui,
) -> Finished {
    let holder = Holder {
        front_end: FRONT_END_CLI.into(),
        output: None,
        sync_output: None,
        output_parts: None,
    };
    let mut done = Finished {
        pid,
        code: ExitCode::Success,
        files: Vec::new(),
        error: None,
        output: None,
    };
    let mut claim = match Claim::acquire(pid, &holder, Purpose::Finish) {
        Ok(c) => c,
        Err(e) => return failed_early(done, e, ui),
    };
    if let Some(prev) = claim.previous() {
        ui.info(format!(
            "process {pid}: finishing the session left by {} {}: {}; {}",
            prev.front_end,
            prev.since(),
            prev.why_left(),
            prev.output_clause()
        ));
    }
    let record = claim.record().clone();
    let sync_output = record.sync_output.unwrap_or(true);
    let template = template_of(&record, dir);
    let snapshot = template
        .as_ref()
        .map(|(d, f)| Snapshot::take(pid, &pattern(pid, d, f)));
    done.output = template.map(|(d, f)| format!("{}/{f}", d.trim_end_matches('/')));
    let attachment = match session::lookup(pid) {
        Ok(a) => a,
        Err(e) => {
            done.code = failed(&mut claim, e, ui);
            return with_files(done, snapshot.as_ref(), &record, sync_output);
        }
    };
    let events = |ev: Event| ui.event(ev);
    let ctl = DetachControl::new(stopped_wait);
    let mut out = waiter.shielded(
        || session::detach_with(&[attachment], 1, sync_output, agents, &events, &ctl),
        &ctl,
        &events,
        // Finishing a session is the one way to its output: a second Ctrl-C keeps waiting.
        &|_| {},
    );
    if let Some(f) = out.failures.pop() {
        // Detach failures are not shown as events (a session's conclusion says them once).
        if matches!(f.error, Error::DetachFailed { .. }) {
            ui.error(f.error.to_string());
        }
        done.code = failed(&mut claim, f.error, ui);
    } else {
        claim.set(State::Claimed);
        ui.info(format!("process {pid}: its session is finished"));
    }
    with_files(done, snapshot.as_ref(), &record, sync_output)
}

/// The session's output directory and file name templates: `-d` replaces the recorded
/// directory.
fn template_of(r: &Record, dir: Option<&Path>) -> Option<(String, String)> {
    let file = r
        .output_file
        .clone()
        .unwrap_or_else(|| crate::attach::options::DEFAULT_OUTPUT_FILE.to_string());
    match (dir, &r.output_dir, &r.output) {
        (Some(d), _, _) => Some((d.display().to_string(), file)),
        (None, Some(d), _) => Some((d.clone(), file)),
        // A record of an older version: only `DIR/FILE`, split before its first placeholder.
        (None, None, Some(whole)) => {
            let d = outputs::static_prefix(Path::new(whole));
            let rest = Path::new(whole).strip_prefix(&d).ok()?;
            Some((d.display().to_string(), rest.display().to_string()))
        }
        (None, None, None) => None,
    }
}

/// The template expanded for process `pid` (its environment, its host name, its PID).
fn pattern(pid: i32, dir: &str, file: &str) -> crate::attach::templates::Pattern {
    let environ = procfs::environ(pid).ok();
    outputs::pattern_of(pid, Path::new(dir), file, environ.as_deref(), None, &[])
}

/// Add the files the session wrote (every file its template names that was written since it
/// began), each checked as a session checks it; none at all is exit code 9.
fn with_files(
    mut done: Finished,
    snapshot: Option<&Snapshot>,
    r: &Record,
    sync_output: bool,
) -> Finished {
    let since = UNIX_EPOCH + Duration::from_secs(r.since);
    let files = snapshot
        .map(|s| s.modified_since(since))
        .unwrap_or_default();
    done.files = files
        .into_iter()
        .map(|f| session::file_report(f.path, f.host_path, f.size, Some(done.pid)))
        .collect();
    let settled = matches!(done.code, ExitCode::Success | ExitCode::Rejected);
    if settled && done.files.iter().any(|f| f.problem.is_some()) {
        done.code = ExitCode::NoOutput;
        done.error = Some(format!(
            "process {}: some files of its session are INCOMPLETE (listed above)",
            done.pid
        ));
    } else if settled && done.files.is_empty() && sync_output {
        done.code = ExitCode::NoOutput;
        done.error = Some(format!(
            "process {}: its session is finished, but no file of it was found under {} (written since {})",
            done.pid,
            done.output.as_deref().unwrap_or("the directory it recorded"),
            crate::attach::claims::utc(
                since
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            )
        ));
    }
    done
}

/// The claim could not be taken (nothing recorded, a live holder, no such process).
fn failed_early(mut done: Finished, e: Error, ui: &Ui) -> Finished {
    ui.error(e.to_string());
    done.code = e.exit_code();
    done.error = Some(e.to_string());
    done
}

/// The detach did not happen: a target that exited has no session any more; any other failure
/// leaves the record of an active session, with why.
fn failed(claim: &mut Claim, e: Error, ui: &Ui) -> ExitCode {
    let pid = claim.pid();
    match &e {
        Error::ProcessGone { .. } | Error::TargetExited { .. } => {
            claim.set(State::Claimed);
            ui.error(format!(
                "process {pid} exited: its session ended with it (the tool writes its output when the process exits)"
            ));
        }
        // The call ran and rocprofiler-register answered: nothing more a detach can do (the
        // session was already over, e.g. a detach call that finished after its front end gave
        // up). The record goes, so the process can be attached again.
        Error::DetachFailed { reason, .. } if reason.starts_with("the target rejected") => {
            claim.set(State::Claimed);
            ui.warn(format!(
                "process {pid}: its session is no longer recorded as active, since the detach call ran \
                 but was refused (the session had probably ended already)"
            ));
            return ExitCode::Rejected;
        }
        Error::DetachFailed { reason, .. } => {
            claim.strand(reason);
            ui.hint(format!(
                "rocprof-attach: the session of process {pid} is still recorded as active; run `rocprof-attach \
                 --detach -p {pid}` again once it can run the detach call"
            ));
        }
        other => {
            claim.strand(&other.to_string());
            ui.error(other.to_string());
        }
    }
    e.exit_code()
}
