//! Which processes a session works on: explicit PIDs, `--match`, `--job`, `--all`, and the rows
//! of `--list`. Only reads `/proc`.

use crate::error::{Error, Result};
use crate::preflight::{command_line, env_value, has_kind, our_pid, LISTENER_COMM};
use crate::toolpath::{self, SdkKind, SdkLibrary};
use rocprof_engine::{self as engine, procfs};
use serde::Serialize;

/// Which processes to attach to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
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

impl TargetSelection {
    /// The selection as the user wrote it on the command line.
    pub fn describe(&self) -> String {
        match self {
            TargetSelection::Pids(p) => format!(
                "--attach {}",
                p.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
            ),
            TargetSelection::Match(re) => format!("--match '{re}'"),
            TargetSelection::Job(id) => format!("--job {id}"),
            TargetSelection::All => "--all".into(),
        }
    }
}

/// Environment variables carrying a job id (Slurm, Open MPI, PMIx, PMI, Flux), for `--job`.
pub const JOB_ID_VARIABLES: [&str; 6] = [
    "SLURM_JOB_ID",
    "OMPI_MCA_orte_ess_jobid",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_JOBID",
    "FLUX_JOB_ID",
];
/// Processes chosen by a [`TargetSelection`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Selected process ids, ascending (explicit PIDs keep the user's order).
    pub pids: Vec<i32>,
    /// Processes that could not be examined, with the reason.
    pub unreadable: Vec<(i32, String)>,
    /// Matched processes that map the CUDA driver but have not started it (no
    /// [`crate::cuda::EVENT_THREAD`] thread): launchers such as torchrun, left out.
    pub not_started: Vec<i32>,
}

/// Result of [`list`]: rows plus processes that could not be examined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// One row per selected process.
    pub entries: Vec<ListEntry>,
    /// Processes that could not be examined, with the reason.
    pub unreadable: Vec<(i32, String)>,
}

/// One row of `--list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// Process id.
    pub pid: i32,
    /// Has a `rocp-bg-attach` thread.
    pub listener: bool,
    /// ROCm profiling libraries mapped (empty if maps were unreadable).
    pub libraries: Vec<SdkLibrary>,
    /// Command line, space-joined.
    pub command: String,
    /// The job id found in its environment (first of [`JOB_ID_VARIABLES`]), if readable.
    pub job: Option<String>,
    /// Process state letter (R, S, D, T, t, ...).
    pub state: char,
    /// Why this caller cannot attach it (the preflight `--check` runs, without options), or None.
    pub refusal: Option<Refusal>,
    /// Maps the CUDA driver (`libcuda.so.1`).
    pub cuda: bool,
    /// The profiler it gets, and why ([`crate::cuda::decide`]).
    pub backend: (crate::cuda::Backend, &'static str),
}

/// Why `--list` says a process cannot be attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A word or two for the table: `stopped`, `permission`, `traced`, `no listener`, ...
    pub short: &'static str,
    /// The preflight's whole message, with the fix.
    pub reason: String,
}

fn refusal(
    pid: i32,
    status: Option<&procfs::Status>,
    e: &ListEntry,
    checks: &crate::toolpath::ToolChecks,
) -> Option<Refusal> {
    let listener = e.listener;
    if let Some(reason) = crate::preflight::ptrace_refusal(pid) {
        return Some(Refusal {
            short: "permission",
            reason,
        });
    }
    // The preflight `--check` runs (tool choice and an earlier attach's tool included), so the
    // two never disagree.
    let e = crate::preflight::check_with(pid, None, Some(checks)).err()?;
    let short = match e.exit_code() {
        rocprof_exit::ExitCode::PermissionDenied => "permission",
        rocprof_exit::ExitCode::NoSuchProcess => "exited",
        _ if status.is_some_and(|s| matches!(s.state, 'T' | 't')) => "stopped",
        _ if status.is_some_and(|s| s.tracer_pid != 0) => "traced",
        _ if !listener => "no listener",
        _ => "see --check",
    };
    Some(Refusal {
        short,
        reason: e.to_string(),
    })
}

/// Processes for an attach session. `Pids` are returned as given (deduplicated); `Match` and `Job`
/// select user processes whose command line / job environment matches and that use ROCm (have a
/// listener or map librocprofiler-register) or CUDA; `All` selects every process with a listener
/// or CUDA. A CUDA process that has not started the driver (a launcher that imports torch) is
/// left out of `Match`, `Job` and `All`, in [`Selection::not_started`].
pub fn select(selection: &TargetSelection) -> Result<Selection> {
    if let TargetSelection::Pids(pids) = selection {
        return explicit_pids(pids).map(|pids| Selection {
            pids,
            ..Selection::default()
        });
    }
    let Listing {
        entries,
        unreadable,
    } = scan(selection)?;
    let all = matches!(selection, TargetSelection::All);
    let mut pids = Vec::new();
    let mut not_started = Vec::new();
    for e in entries {
        let cuda = e.backend.0 == crate::cuda::Backend::Cuda;
        if cuda && !crate::cuda::started(e.pid) {
            not_started.push(e.pid);
        } else if e.listener || cuda || !all {
            pids.push(e.pid);
        }
    }
    Ok(Selection {
        pids,
        unreadable,
        not_started,
    })
}

/// Rows for `--list`: like [`select`], except that `All` also shows ROCm processes without a
/// listener, and explicit PIDs that vanished are reported as unreadable.
pub fn list(selection: &TargetSelection) -> Result<Listing> {
    let TargetSelection::Pids(pids) = selection else {
        return scan(selection).map(with_verdicts);
    };
    let mut entries = Vec::new();
    let mut unreadable = Vec::new();
    for pid in explicit_pids(pids)? {
        match entry(pid) {
            Ok(e) => entries.push(e),
            Err(e) => unreadable.push((pid, e.to_string())),
        }
    }
    Ok(with_verdicts(Listing {
        entries,
        unreadable,
    }))
}

fn explicit_pids(pids: &[i32]) -> Result<Vec<i32>> {
    let mut out: Vec<i32> = Vec::new();
    for &p in pids {
        if p <= 0 {
            return Err(Error::usage(format!(
                "invalid PID {p}: pass positive process ids"
            )));
        }
        let p = process_of(p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The process that `id` names: `id` itself for a process, the thread group's leader (`Tgid`
/// of `/proc/ID/status`) for a thread id, so one process is one target (and one lock) whatever
/// id is passed. Every front end maps the ids it takes through here: the CLI's `-p`, `--check`
/// and `--detach` (through [`select`] and [`list`]), the C ABI and the Python module (through
/// the C ABI). A thread is logged at info level (`-v`): "thread 17502 belongs to process 17500".
/// An id that cannot be read is returned as it is: the caller's own checks report it.
pub fn process_of(id: i32) -> i32 {
    match procfs::status(id) {
        Ok(st) if st.tgid > 0 && st.tgid != id => {
            tracing::info!(
                "thread {id} belongs to process {}: using the process",
                st.tgid
            );
            st.tgid
        }
        _ => id,
    }
}

/// Build a list row; maps unreadable leaves `libraries` empty (listener comes from comm).
fn entry(pid: i32) -> Result<ListEntry> {
    let listener = !procfs::threads_named(pid, LISTENER_COMM)?.is_empty();
    let maps = match procfs::maps(pid) {
        Ok(m) => m,
        Err(engine::Error::ProcessGone { pid }) => return Err(Error::ProcessGone { pid }),
        Err(_) => Vec::new(),
    };
    Ok(row(pid, listener, &maps))
}

/// Whether a user process is in the selection (errors: its cmdline/environ cannot be read).
fn selected(selection: &TargetSelection, re: Option<&regex::Regex>, pid: i32) -> Result<bool> {
    match selection {
        TargetSelection::Match(_) => {
            let cmd = procfs::cmdline(pid)?.join(" ");
            Ok(re.is_some_and(|r| r.is_match(&cmd)))
        }
        TargetSelection::Job(id) => {
            let env = procfs::environ(pid)?;
            Ok(JOB_ID_VARIABLES
                .iter()
                .any(|v| env_value(&env, v) == Some(id.as_str())))
        }
        TargetSelection::All | TargetSelection::Pids(_) => Ok(true),
    }
}

/// Scan /proc for ROCm user processes in the selection.
fn scan(selection: &TargetSelection) -> Result<Listing> {
    let re = match selection {
        TargetSelection::Match(pattern) => Some(regex::Regex::new(pattern).map_err(|e| {
            Error::usage(format!("invalid --match regular expression '{pattern}': {e}. Fix the pattern (Rust regex syntax)"))
        })?),
        _ => None,
    };
    let mut entries = Vec::new();
    let mut unreadable = Vec::new();
    for pid in procfs::list_pids()? {
        if pid == our_pid() || procfs::is_kernel_thread(pid).unwrap_or(true) {
            continue;
        }
        match selected(selection, re.as_ref(), pid).and_then(|yes| {
            if yes {
                rocm_entry(pid)
            } else {
                Ok(None)
            }
        }) {
            Ok(Some(e)) => entries.push(e),
            Ok(None) | Err(Error::ProcessGone { .. }) => {}
            Err(e) => unreadable.push((pid, e.to_string())),
        }
    }
    Ok(Listing {
        entries,
        unreadable,
    })
}

/// A list row when the process uses ROCm (listener, or librocprofiler-register mapped) or CUDA
/// (libcuda.so.1 mapped).
fn rocm_entry(pid: i32) -> Result<Option<ListEntry>> {
    let listener = !procfs::threads_named(pid, LISTENER_COMM)?.is_empty();
    let maps = match procfs::maps(pid) {
        Ok(m) => m,
        Err(e) if !listener => return Err(e.into()),
        Err(_) => Vec::new(),
    };
    let e = row(pid, listener, &maps);
    if !listener && !has_kind(&e.libraries, SdkKind::Register) && !e.cuda {
        return Ok(None);
    }
    Ok(Some(e))
}

/// A row without its verdict ([`list`] adds it; a session's own preflight decides instead).
fn row(pid: i32, listener: bool, maps: &[procfs::Mapping]) -> ListEntry {
    let cuda = maps
        .iter()
        .any(|m| m.path.as_deref().is_some_and(crate::cuda::is_driver_path));
    let asked = crate::preflight::backend::asked_backend();
    ListEntry {
        pid,
        listener,
        libraries: toolpath::sdk_libraries(maps),
        cuda,
        backend: crate::cuda::decide(asked, listener, cuda),
        command: command_line(pid),
        job: job_id(pid),
        state: procfs::status(pid).map_or('?', |s| s.state),
        refusal: None,
    }
}

/// Add to each row whether this caller can attach it (read-only checks, no tool).
fn with_verdicts(mut listing: Listing) -> Listing {
    let checks = crate::toolpath::ToolChecks::default();
    for e in &mut listing.entries {
        let status = procfs::status(e.pid).ok();
        if let Some(s) = &status {
            e.state = s.state;
        }
        e.refusal = refusal(e.pid, status.as_ref(), e, &checks);
    }
    listing
}

/// The job id in the environment of `pid`: the first of [`JOB_ID_VARIABLES`] that is set.
fn job_id(pid: i32) -> Option<String> {
    let env = procfs::environ(pid).ok()?;
    JOB_ID_VARIABLES
        .iter()
        .find_map(|v| env_value(&env, v).map(str::to_string))
}
