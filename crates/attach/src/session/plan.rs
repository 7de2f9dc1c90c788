//! Step one: resolve the selection to processes and preflight each one (and, with tree attach,
//! its descendants). Only reads `/proc`.

use super::events::{Event, Events, Stage};
use super::{join, parallel, plural, AttachRequest};
use crate::claims::{Claim, Claims, Holder, Purpose, FRONT_END_CLI};
use crate::envbuf::EnvList;
use crate::error::{Error, Result};
use crate::preflight::{self, Report, LISTENER_COMM};
use crate::targets::{self, TargetSelection};
use crate::toolpath::ToolChecks;
use rocprof_engine::procfs;
use std::collections::HashMap;

/// A process that passed preflight and will be attached.
#[derive(Debug, Clone)]
pub struct Planned {
    /// What the preflight found (listener, register addresses, tool).
    pub report: Report,
    /// The selected process whose tree it belongs to (itself for a root).
    pub root: i32,
}

/// A process that could not be planned, attached or detached.
#[derive(Debug)]
pub struct Failure {
    /// Process id.
    pub pid: i32,
    /// Which step failed.
    pub stage: Stage,
    /// Why.
    pub error: Error,
}

/// The processes a session will attach, roots first, and those that failed preflight.
#[derive(Debug, Default)]
pub struct Plan {
    /// Processes to attach, in order (each root followed by its descendants).
    pub targets: Vec<Planned>,
    /// Processes that failed preflight (only when several were selected).
    pub failures: Vec<Failure>,
    /// The claims on the planned processes ([`crate::claims`]): one session per target.
    pub claims: Claims,
}

impl Plan {
    /// The planned process ids, in order.
    pub fn pids(&self) -> Vec<i32> {
        self.targets.iter().map(|p| p.report.pid).collect()
    }
}

/// Resolve the selection to root PIDs. Processes that could not be examined are reported in one
/// [`Event::Unreadable`] (and listed at info level); a selection that chose nothing is
/// [`Error::NoMatch`].
pub fn select(targets: &TargetSelection, events: Events) -> Result<Vec<i32>> {
    let sel = targets::select(targets)?;
    for &pid in &sel.not_started {
        events(Event::Warning {
            pid: Some(pid),
            message: format!(
                "process {pid} maps libcuda.so.1 but has not started CUDA (no {} thread), like a \
                 launcher such as torchrun: skipped. To attach it anyway, name it: --pid {pid}",
                crate::cuda::EVENT_THREAD
            ),
        });
    }
    for (pid, why) in &sel.unreadable {
        tracing::info!("cannot examine process {pid}: {why}");
    }
    if !sel.unreadable.is_empty() {
        events(Event::Unreadable {
            pids: sel.unreadable.iter().map(|(p, _)| *p).collect(),
        });
    }
    if sel.pids.is_empty() {
        let n = sel.unreadable.len();
        return Err(Error::NoMatch {
            selection: targets.describe(),
            unreadable_note: if n == 0 {
                String::new()
            } else {
                format!(
                    " among the processes rocprof-attach may read ({n} other{} could not be examined: run as their \
                     owner or as root to include them; -v lists them)",
                    plural(n)
                )
            },
        });
    }
    tracing::info!(
        "selected {} process{} with {}: {}",
        sel.pids.len(),
        if sel.pids.len() == 1 { "" } else { "es" },
        targets.describe(),
        join(&sel.pids)
    );
    if sel.pids.len() > 1 || !matches!(targets, TargetSelection::Pids(_)) {
        events(Event::Selected {
            selection: targets.describe(),
            pids: sel.pids.clone(),
        });
    }
    Ok(sel.pids)
}

/// [`select`] then [`plan_roots`] for a request, then the output directory check of every
/// planned process ([`preflight::check_output_dir`]). Processes chosen by `--match`, `--job` or
/// `--all` that have no listener are skipped with a warning, as descendants are.
pub fn plan(req: &AttachRequest, events: Events) -> Result<Plan> {
    let roots = select(&req.targets, events)?;
    let selection = !matches!(req.targets, TargetSelection::Pids(_));
    // Each root is claimed before its preflight, so a target another session holds is refused
    // with who holds it (not with what that session's attach is doing to it right now).
    let holder = Holder {
        front_end: FRONT_END_CLI.into(),
        output: Some(format!(
            "{}/{}",
            req.output_dir.display().to_string().trim_end_matches('/'),
            req.output_file
        )),
        sync_output: Some(req.sync_output),
        output_parts: Some((
            req.output_dir.display().to_string(),
            req.output_file.clone(),
        )),
    };
    let claims = Claims::default();
    let mut refused = Vec::new();
    let mut free = Vec::with_capacity(roots.len());
    for &root in &roots {
        match Claim::acquire(root, &holder, Purpose::Attach) {
            Ok(c) => {
                claims.insert(c);
                free.push(root);
            }
            // Its preflight says so, in the words it always uses (a process gone, or one of
            // another user's that we may not trace).
            Err(Error::ProcessGone { .. }) => free.push(root),
            Err(e) if crate::claims::closed_and_untraceable(&e) => free.push(root),
            Err(e) if roots.len() == 1 => return Err(e),
            Err(e) => {
                events(failed(root, Stage::Plan, &e));
                refused.push(Failure {
                    pid: root,
                    stage: Stage::Plan,
                    error: e,
                });
            }
        }
    }
    let mut plan = plan_inner(
        &free,
        req.children,
        req.tool_library.as_deref(),
        selection,
        req.parallelism,
        events,
    )?;
    if plan.targets.is_empty() && plan.failures.is_empty() && selection {
        return Err(Error::NothingAttachable {
            selection: req.targets.describe(),
            count: roots.len(),
            plural: if roots.len() == 1 { "" } else { "es" },
            pids: join(&roots),
        });
    }
    plan.failures.splice(0..0, refused);
    plan.claims = claims;
    claim_descendants(&mut plan, &holder, events);
    check_outputs(&mut plan, &req.output_dir, events)?;
    check_reattach_settings(&mut plan, &req.env, events)?;
    for f in &plan.failures {
        plan.claims.release(f.pid);
    }
    Ok(plan)
}

/// Claim every planned process not claimed yet (descendants): one another session holds, or
/// that has a session left active, is skipped with a warning.
pub fn claim_descendants(plan: &mut Plan, holder: &Holder, events: Events) {
    let mut keep = Vec::with_capacity(plan.targets.len());
    for p in std::mem::take(&mut plan.targets) {
        let pid = p.report.pid;
        if plan.claims.holds(pid) {
            keep.push(p);
            continue;
        }
        match Claim::acquire(pid, holder, Purpose::Attach) {
            Ok(c) => {
                // Claimed after its preflight: what it read may be out of date.
                crate::reattach::forget(pid);
                plan.claims.insert(c);
                keep.push(p);
            }
            Err(e) => {
                events(Event::Warning {
                    pid: Some(pid),
                    message: format!("skipping descendant process {pid}: {e}"),
                });
                plan.failures.push(Failure {
                    pid,
                    stage: Stage::Plan,
                    error: e,
                });
            }
        }
    }
    plan.targets = keep;
}

/// Move planned ROCm processes whose earlier attach asked for other services or filters than
/// `env` does to the failures (or return the error when there is only one process):
/// [`crate::reattach::check_settings`].
fn check_reattach_settings(plan: &mut Plan, env: &EnvList, events: Events) -> Result<()> {
    let only_one = plan.targets.len() == 1 && plan.failures.is_empty();
    let mut keep = Vec::with_capacity(plan.targets.len());
    for p in std::mem::take(&mut plan.targets) {
        let pid = p.report.pid;
        let result = match p.report.cuda {
            Some(_) => Ok(()),
            None => crate::reattach::check_settings(pid, env),
        };
        match result {
            Ok(()) => keep.push(p),
            Err(e) if only_one => return Err(e),
            Err(e) => {
                events(failed(pid, Stage::Plan, &e));
                plan.failures.push(Failure {
                    pid,
                    stage: Stage::Plan,
                    error: e,
                });
            }
        }
    }
    plan.targets = keep;
    Ok(())
}

/// Move planned processes that cannot create or write the output directory to the failures (or
/// return the error when there is only one process).
fn check_outputs(plan: &mut Plan, dir: &std::path::Path, events: Events) -> Result<()> {
    let only_one = plan.targets.len() == 1 && plan.failures.is_empty();
    // (root directory, [uid, gid]) -> the verdict, so a job's processes are checked once.
    type Verdict = ((u64, u64), [u32; 2], std::result::Result<(), String>);
    let mut checked: Vec<Verdict> = Vec::new();
    let mut keep = Vec::new();
    for p in std::mem::take(&mut plan.targets) {
        let pid = p.report.pid;
        let root = p.report.root_id;
        // As read by the preflight just before.
        let ids = p.report.fs_ids;
        let known = checked
            .iter()
            .find(|(r, i, _)| *r == root && *i == ids)
            .map(|(_, _, res)| res.clone());
        let result = match known {
            Some(Ok(())) => Ok(()),
            Some(Err(msg)) => Err(Error::Usage(msg)),
            None => {
                let r = preflight::check_output_dir(pid, dir);
                if !matches!(r, Err(Error::ProcessGone { .. })) {
                    let memo = r.as_ref().map(|_| ()).map_err(|e| e.to_string());
                    checked.push((root, ids, memo));
                }
                r
            }
        };
        match result {
            Ok(()) => keep.push(p),
            Err(e) if only_one => return Err(e),
            Err(e) => {
                events(failed(pid, Stage::Plan, &e));
                plan.failures.push(Failure {
                    pid,
                    stage: Stage::Plan,
                    error: e,
                });
            }
        }
    }
    plan.targets = keep;
    Ok(())
}

/// Preflight every root and, with `children`, its descendants. Roots are mandatory: with one
/// root its failure is the error; with several, a root that fails is recorded and leaves its
/// descendants untouched. Descendants without a listener are skipped with a warning.
///
/// The preflights (they only read `/proc` and ELF files) run on up to `parallelism` threads;
/// everything is reported in order afterwards, as if they had run one after the other.
pub fn plan_roots(
    roots: &[i32],
    children: bool,
    tool: Option<&str>,
    parallelism: usize,
    events: Events,
) -> Result<Plan> {
    plan_inner(roots, children, tool, false, parallelism, events)
}

/// What the preflight of one process found, and whether it has no listener at all (only looked
/// at when the preflight refused it).
struct Checked {
    report: Result<Report>,
    no_listener: bool,
}

/// The warning for a process skipped because it has no listener.
fn skipped_without_listener(pid: i32, what: &str, why: &str) -> Event {
    Event::Warning {
        pid: Some(pid),
        message: format!(
            "skipping {what} process {pid} because it has no '{LISTENER_COMM}' thread. {why}"
        ),
    }
}

/// What the preflights before planning found: every root's tree, and each process's preflight.
struct Preflights {
    /// Each root, in order, with its descendants (none without `children`).
    trees: Vec<(i32, Vec<i32>)>,
    /// The preflight of every root and descendant, taken out as it is planned.
    checked: HashMap<i32, Checked>,
}

fn plan_inner(
    roots: &[i32],
    children: bool,
    tool: Option<&str>,
    skip_without_listener: bool,
    parallelism: usize,
    events: Events,
) -> Result<Plan> {
    let Preflights { trees, mut checked } = preflight_trees(roots, children, tool, parallelism);
    let mut plan = Plan::default();
    let only_root = roots.len() == 1;
    for (root, descendants) in trees {
        let planned = plan_root(
            &mut plan,
            root,
            &mut checked,
            only_root,
            skip_without_listener,
            events,
        )?;
        if planned && children {
            plan_descendants(&mut plan, root, descendants, &mut checked, events);
        }
    }
    Ok(plan)
}

/// One parallel pass over the roots (each root's tree, then its preflight), then one over the
/// descendants that are not roots themselves, only when there are any: starting the threads
/// costs more than a tree's few `/proc` reads, so the common case starts them once. The
/// preflights only read `/proc` and ELF files.
fn preflight_trees(
    roots: &[i32],
    children: bool,
    tool: Option<&str>,
    parallelism: usize,
) -> Preflights {
    let started = std::time::Instant::now();
    // Many processes (every rank of a job) name the same tool: check it once per mount namespace
    // and root. One process keeps the plain check (no extra `stat`s).
    let checks = ToolChecks::default();
    let shared = (roots.len() > 1).then_some(&checks);
    let check = |pid: i32, checks: Option<&ToolChecks>| {
        let report = preflight::check_with(pid, tool, checks);
        let no_listener = matches!(report, Err(Error::NotAttachable { .. }))
            && procfs::threads_named(pid, LISTENER_COMM).is_ok_and(|t| t.is_empty());
        Checked {
            report,
            no_listener,
        }
    };
    let first = parallel(roots, parallelism, |&root| {
        let descendants = if children {
            procfs::descendants(root).unwrap_or_default()
        } else {
            Vec::new()
        };
        (descendants, check(root, shared))
    });
    let mut checked: HashMap<i32, Checked> = HashMap::with_capacity(roots.len());
    let mut trees: Vec<(i32, Vec<i32>)> = Vec::with_capacity(roots.len());
    for (&root, (descendants, c)) in roots.iter().zip(first) {
        checked.entry(root).or_insert(c);
        trees.push((root, descendants));
    }
    let mut rest: Vec<i32> = Vec::new();
    for (_, descendants) in &trees {
        for &d in descendants {
            if !checked.contains_key(&d) && !rest.contains(&d) {
                rest.push(d);
            }
        }
    }
    if !rest.is_empty() {
        let more = parallel(&rest, parallelism, |&pid| check(pid, Some(&checks)));
        checked.extend(rest.iter().copied().zip(more));
    }
    tracing::debug!(
        "plan: trees and preflight of {} process{} ({} descendant{}) in {:.2} ms",
        checked.len(),
        if checked.len() == 1 { "" } else { "es" },
        rest.len(),
        plural(rest.len()),
        started.elapsed().as_secs_f64() * 1e3
    );
    Preflights { trees, checked }
}

/// Plan one root from its preflight; whether it was planned. A root that fails is the error when
/// it is the only one, else recorded; with `skip_without_listener`, one that is gone or has no
/// listener is skipped (with a warning for the latter).
fn plan_root(
    plan: &mut Plan,
    root: i32,
    checked: &mut HashMap<i32, Checked>,
    only_root: bool,
    skip_without_listener: bool,
    events: Events,
) -> Result<bool> {
    // A selected process may already be planned as a descendant of an earlier root.
    if plan.targets.iter().any(|p| p.report.pid == root) {
        return Ok(false);
    }
    let Some(Checked {
        report,
        no_listener,
    }) = checked.remove(&root)
    else {
        return Ok(false);
    };
    match report {
        Ok(report) => {
            planned(&report, root, events);
            plan.targets.push(Planned { report, root });
            Ok(true)
        }
        Err(Error::ProcessGone { .. }) if skip_without_listener => Ok(false),
        Err(_) if skip_without_listener && no_listener => {
            let why = "Start it with ROCP_TOOL_ATTACH=1 to profile it.";
            events(skipped_without_listener(root, "selected", why));
            Ok(false)
        }
        Err(e) if only_root => Err(e),
        Err(e) => {
            events(failed(root, Stage::Plan, &e));
            plan.failures.push(Failure {
                pid: root,
                stage: Stage::Plan,
                error: e,
            });
            Ok(false)
        }
    }
}

/// Plan a planned root's descendants from their preflights: those that fail are skipped with a
/// warning (and recorded unless gone or without a listener).
fn plan_descendants(
    plan: &mut Plan,
    root: i32,
    descendants: Vec<i32>,
    checked: &mut HashMap<i32, Checked>,
    events: Events,
) {
    tracing::debug!(
        "process {root}: {} descendant{} to check: {}",
        descendants.len(),
        plural(descendants.len()),
        join(&descendants)
    );
    for d in descendants {
        if plan.targets.iter().any(|p| p.report.pid == d) {
            continue;
        }
        let Some(Checked {
            report,
            no_listener,
        }) = checked.remove(&d)
        else {
            continue;
        };
        match report {
            Ok(report) => {
                planned(&report, root, events);
                plan.targets.push(Planned { report, root });
            }
            Err(Error::ProcessGone { .. }) => {}
            Err(_) if no_listener => {
                let why = "Fork-only descendants do not inherit the parent's attachment listener.";
                events(skipped_without_listener(d, "descendant", why));
            }
            Err(e) => {
                events(Event::Warning {
                    pid: Some(d),
                    message: format!("skipping descendant process {d}: {e}"),
                });
                plan.failures.push(Failure {
                    pid: d,
                    stage: Stage::Plan,
                    error: e,
                });
            }
        }
    }
}

/// Report a planned process: the plan at info level, its warnings as events.
fn planned(r: &Report, root: i32, events: Events) {
    match &r.cuda {
        Some(c) => log_cuda_plan(r, c, root),
        None => log_rocm_plan(r, root),
    }
    tracing::debug!("plan: process {}: command {}", r.pid, r.command);
    for l in &r.sdk_libraries {
        tracing::debug!(
            "plan: process {}: maps {} ({})",
            r.pid,
            l.path,
            l.kind.name()
        );
    }
    for note in &r.tool.notes {
        tracing::info!("plan: process {}: {note}", r.pid);
    }
    events(Event::Planned {
        pid: r.pid,
        root,
        listener_tid: r.listener_tid,
        tool: r.tool.string.clone(),
    });
    for w in r.warnings.iter().chain(&r.tool.warnings) {
        events(Event::Warning {
            pid: Some(r.pid),
            message: format!("process {}: {w}", r.pid),
        });
    }
}

/// The plan of a CUDA process at info level, in CUDA's words: CUPTI, the tool thread.
fn log_cuda_plan(r: &Report, c: &crate::cuda::Facts, root: i32) {
    let how = match (c.loaded, c.parked.first()) {
        (Some(tid), _) => format!(
            "tool thread {tid} ({}) loaded by an earlier session, reused (no ptrace)",
            crate::cuda::TOOL_COMM
        ),
        (None, Some(p)) => format!(
            "thread {} ({}, waiting in {}) starts the tool thread ({})",
            p.tid,
            p.comm,
            crate::cuda::preflight::parked_name(p.syscall).unwrap_or("?"),
            crate::cuda::TOOL_COMM
        ),
        (None, None) => "no thread to start the tool from".to_string(),
    };
    tracing::info!(
        "plan: process {} (root {root}): CUDA through CUPTI ({}); driver {}; {how}; tool library {}",
        r.pid,
        c.cupti.as_deref().unwrap_or("libcupti not mapped yet: the tool loads one"),
        c.driver,
        c.tool.display()
    );
}

/// The plan of a ROCm process at info level: the listener and the register's functions.
fn log_rocm_plan(r: &Report, root: i32) {
    tracing::info!(
        "plan: process {} (root {root}): listener thread {} ({LISTENER_COMM}); {} at {:#x}, \
         rocprofiler_register_detach at {:#x} in {}; injection site (AT_ENTRY) {:#x}; tool library {} ({})",
        r.pid,
        r.listener_tid,
        preflight::ATTACH_SYMBOL,
        r.register_attach_addr,
        r.register_detach_addr,
        r.register_path,
        r.entry,
        r.tool.string,
        r.tool.source.describe(),
    );
}

/// The event for a failure, with the permission hint when the kernel refused us.
pub(super) fn failed(pid: i32, stage: Stage, e: &Error) -> Event {
    Event::Failed {
        pid,
        stage,
        message: e.to_string(),
        hint: e.permission_denied_pid().map(preflight::permission_hint),
        exited: matches!(e, Error::TargetExited { .. }),
    }
}
