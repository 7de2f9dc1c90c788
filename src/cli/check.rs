//! `--check` and `--list`: show what the preflight and the selection found, change nothing.

use crate::attach::envbuf::EnvList;
use crate::attach::preflight::{self, describe_libraries, LISTENER_COMM};
use crate::attach::session::join;
use crate::attach::targets::{self, ListEntry, Listing, TargetSelection};
use crate::attach::Error;
use crate::cli::json;
use crate::cli::render::Ui;
use crate::cli::stdio::outln;
use crate::engine::procfs;
use crate::exit::ExitCode;
use serde_json::json;
use std::path::Path;

/// The processes a selection chooses, reporting the unreadable ones in one line (listed with -v).
fn selected(selection: &TargetSelection, ui: &Ui) -> Result<Vec<i32>, Error> {
    let sel = targets::select(selection)?;
    for (pid, why) in &sel.unreadable {
        tracing::info!("cannot examine process {pid}: {why}");
    }
    let n = sel.unreadable.len();
    if n > 0 {
        ui.warn(format!(
            "{n} process{} could not be examined (not readable by this user; run as their owner or as root to \
             include them; -v lists them)",
            if n == 1 { "" } else { "es" }
        ));
    }
    if sel.pids.is_empty() {
        return Err(Error::NoMatch {
            selection: selection.describe(),
            unreadable_note: String::new(),
        });
    }
    Ok(sel.pids)
}

/// `rocprof-attach --check`: run the preflight (and the output directory check) on every selected
/// process, print a report, return the exit code. Processes chosen by `--match`, `--job` or
/// `--all` without a listener are skipped with a warning, as a session skips them.
pub fn run_check(
    selection: &TargetSelection,
    tool_library: Option<&str>,
    output_dir: Option<&Path>,
    env: Option<&EnvList>,
    ui: &Ui,
    as_json: bool,
) -> ExitCode {
    let pids = match selected(selection, ui) {
        Ok(p) => p,
        Err(e) => {
            ui.error(e.to_string());
            if as_json {
                json::print(
                    "check",
                    e.exit_code(),
                    json!({"processes": [], "error": e.to_string()}),
                );
            }
            return e.exit_code();
        }
    };
    let explicit = matches!(selection, TargetSelection::Pids(_));
    let mut codes = Vec::new();
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for pid in pids {
        let r = check_one(pid, tool_library, output_dir, env);
        if !explicit
            && matches!(r, Err(Error::NotAttachable { .. }))
            && procfs::threads_named(pid, LISTENER_COMM).is_ok_and(|t| t.is_empty())
        {
            ui.warn(format!(
                "skipping selected process {pid} because it has no '{LISTENER_COMM}' thread. Start it with \
                 ROCP_TOOL_ATTACH=1 to profile it."
            ));
            skipped.push(pid);
            continue;
        }
        show(pid, &r, ui, as_json);
        codes.push(
            r.as_ref()
                .map_or_else(|e| e.exit_code(), |_| ExitCode::Success),
        );
        results.push(json::check_result(pid, &r));
    }
    let mut worst = predicted_code(&codes);
    if results.is_empty() && !skipped.is_empty() {
        let e = Error::NothingAttachable {
            selection: selection.describe(),
            count: skipped.len(),
            plural: if skipped.len() == 1 { "" } else { "es" },
            pids: join(&skipped),
        };
        ui.error(e.to_string());
        worst = e.exit_code();
    }
    if as_json {
        json::print(
            "check",
            worst,
            json!({
                "selection": json::selection(selection),
                "processes": results,
                "skipped_without_listener": skipped,
            }),
        );
    }
    worst
}

/// The preflight of one process and, when it passes, the settings a reattach must keep
/// (`env`, what a session would send) and the check of the output directory.
fn check_one(
    pid: i32,
    tool_library: Option<&str>,
    output_dir: Option<&Path>,
    env: Option<&EnvList>,
) -> Result<preflight::Report, Error> {
    let r = preflight::check(pid, tool_library)?;
    if let (None, Some(env)) = (&r.cuda, env) {
        if crate::attach::reattach::asks_for_settings(env) {
            crate::attach::reattach::check_settings(pid, env)?;
        }
    }
    if let Some(dir) = output_dir {
        preflight::check_output_dir(pid, dir)?;
    }
    Ok(r)
}

/// Show what the check of one process found: the report (not with `--json`) and its warnings,
/// or the error and how to get permission.
fn show(pid: i32, r: &Result<preflight::Report, Error>, ui: &Ui, as_json: bool) {
    match r {
        Ok(report) => {
            if !as_json {
                outln!("rocprof-attach: {report}");
                for note in &report.tool.notes {
                    outln!("rocprof-attach: {note}");
                }
            }
            for w in report.warnings.iter().chain(&report.tool.warnings) {
                ui.warn(w);
            }
        }
        Err(e) => {
            ui.error(e.to_string());
            if e.exit_code() == ExitCode::PermissionDenied {
                ui.hint(preflight::permission_hint(pid));
            }
        }
    }
}

/// The exit code a session on these processes would give (docs/exit-codes.md, "Several
/// processes"): 0 when all can be attached; one process: its own code; none attachable: their
/// common code when they share one; otherwise 8 (partial). So a PID that does not exist is exit 3
/// in both `--check` and a session, and a mixed selection is 8 in both.
fn predicted_code(codes: &[ExitCode]) -> ExitCode {
    let failed: Vec<ExitCode> = codes
        .iter()
        .copied()
        .filter(|c| *c != ExitCode::Success)
        .collect();
    match failed.first() {
        None => ExitCode::Success,
        Some(first) if failed.len() == codes.len() && failed.iter().all(|c| c == first) => *first,
        Some(_) => ExitCode::Partial,
    }
}

/// `rocprof-attach --list`: print attachable processes matching the selection. Processes that
/// could not be examined are counted in one warning line (and listed with -v).
pub fn run_list(selection: &TargetSelection, ui: &Ui, verbose: bool, as_json: bool) -> ExitCode {
    let Listing {
        entries,
        unreadable,
    } = match targets::list(selection) {
        Ok(r) => r,
        Err(e) => {
            ui.error(e.to_string());
            if as_json {
                json::print(
                    "list",
                    e.exit_code(),
                    json!({"processes": [], "error": e.to_string()}),
                );
            }
            return e.exit_code();
        }
    };
    let code = if entries.is_empty() {
        ExitCode::NoSuchProcess
    } else {
        ExitCode::Success
    };
    if !unreadable.is_empty() {
        ui.warn(format!(
            "{} process{} could not be examined (not readable by this user; run as their owner or as root to \
             see them{})",
            unreadable.len(),
            if unreadable.len() == 1 { "" } else { "es" },
            if verbose { "" } else { "; -v lists them" }
        ));
    }
    if entries.is_empty() {
        let e = Error::NoMatch {
            selection: match selection {
                TargetSelection::All => "any attachable process".into(),
                s => s.describe(),
            },
            unreadable_note: String::new(),
        };
        ui.error(e.to_string());
    }
    if as_json {
        let unreadable: Vec<_> = unreadable
            .iter()
            .map(|(pid, why)| json!({"pid": pid, "reason": why}))
            .collect();
        json::print(
            "list",
            code,
            json!({
                "selection": json::selection(selection),
                "processes": entries.iter().map(json::list_entry).collect::<Vec<_>>(),
                "unreadable": unreadable,
            }),
        );
        return code;
    }
    if !entries.is_empty() || (verbose && !unreadable.is_empty()) {
        print_list(&entries, &unreadable, verbose);
    }
    code
}

/// The `--list` table: columns as wide as their widest cell, the command last. ATTACH is "yes"
/// only when this caller can attach the process, by the preflight `--check` runs (what options
/// add, such as an output directory or a reattach's settings, aside); -v prints the full reason
/// under a row that says no.
fn print_list(entries: &[ListEntry], unreadable: &[(i32, String)], verbose: bool) {
    let mut rows: Vec<[String; 7]> = vec![[
        "PID".into(),
        "STATE".into(),
        "BACKEND".into(),
        "ATTACH".into(),
        "JOB".into(),
        "ROCPROFILER LIBRARIES".into(),
        "COMMAND".into(),
    ]];
    for e in entries {
        rows.push([
            e.pid.to_string(),
            e.state.to_string(),
            e.backend.0.name().to_string(),
            e.refusal
                .as_ref()
                .map_or("yes".to_string(), |r| format!("no: {}", r.short)),
            e.job.clone().unwrap_or_else(|| "-".into()),
            describe_libraries(&e.libraries),
            e.command.clone(),
        ]);
    }
    if verbose {
        for (pid, why) in unreadable {
            let cannot = format!("cannot read: {why}");
            rows.push([
                pid.to_string(),
                "?".into(),
                "?".into(),
                "?".into(),
                "-".into(),
                "-".into(),
                cannot,
            ]);
        }
    }
    let mut width = [0usize; 6];
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for (i, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (w, cell) in width.iter().zip(r) {
            line.push_str(&format!("{cell:<w$}  "));
        }
        line.push_str(&r[6]);
        outln!("{line}");
        let refusal = i
            .checked_sub(1)
            .and_then(|k| entries.get(k))
            .and_then(|e| e.refusal.as_ref());
        if let (true, Some(r)) = (verbose, refusal) {
            outln!("    {}", r.reason);
        }
    }
}
