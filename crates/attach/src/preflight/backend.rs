//! Which profiler a process gets (`--backend`, `ROCPROF_ATTACH_BACKEND`) and the preflight of a
//! CUDA process ([`crate::cuda::preflight`]) as a [`Report`].

use super::TOOL_NOTE;
use super::{check_process, check_tracer, command_line, not_attachable, root_id, Report};
use crate::cuda::{self, Backend};
use crate::error::Result;
use crate::toolpath::{ToolChoice, ToolSource};
use rocprof_engine::procfs;
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that chooses the backend when `--backend` is not given.
pub const BACKEND_ENV: &str = "ROCPROF_ATTACH_BACKEND";

/// 0: not set (read `ROCPROF_ATTACH_BACKEND`), else 1 + the backend's index.
static ASKED: AtomicU8 = AtomicU8::new(0);

/// Choose the backend for every later preflight in this process (`--backend`).
pub fn set_backend(b: Backend) {
    ASKED.store(1 + b as u8, Ordering::Relaxed);
}

/// The backend asked for: [`set_backend`], else `ROCPROF_ATTACH_BACKEND` (auto, rocm, cuda),
/// else auto.
pub fn asked_backend() -> Backend {
    match ASKED.load(Ordering::Relaxed) {
        2 => Backend::Rocm,
        3 => Backend::Cuda,
        1 => Backend::Auto,
        _ => match std::env::var(BACKEND_ENV).as_deref() {
            Ok("rocm") => Backend::Rocm,
            Ok("cuda") => Backend::Cuda,
            _ => Backend::Auto,
        },
    }
}

/// The preflight of a process that gets the CUDA backend; None for one that gets ROCm (its
/// preflight is the usual one, which explains a missing listener).
/// `listeners`: the process's `rocp-bg-attach` threads, read once by the caller (its ROCm
/// preflight uses them too).
pub fn check_cuda(pid: i32, listeners: Option<&[i32]>) -> Result<Option<Report>> {
    let asked = asked_backend();
    if asked == Backend::Rocm {
        return Ok(None);
    }
    let has_listener = listeners.is_some_and(|t| !t.is_empty());
    if asked == Backend::Auto && has_listener {
        return Ok(None);
    }
    let status = check_process(pid)?;
    let maps = procfs::maps(pid)?;
    let maps_cuda = maps
        .iter()
        .any(|m| m.path.as_deref().is_some_and(cuda::is_driver_path));
    let (backend, why) = cuda::decide(asked, has_listener, maps_cuda);
    if backend != Backend::Cuda {
        return Ok(None);
    }
    if matches!(status.state, 'T' | 't') {
        return Err(not_attachable(
            pid,
            format!(
                "it is stopped (state {}: SIGSTOP, Ctrl-Z or a debugger), so no thread of it can load the \
                 CUDA tool. Fix: continue it with `kill -CONT {pid}`, then retry",
                status.state
            ),
        ));
    }
    check_tracer(pid, None, status.tracer_pid)?;
    let facts = cuda::preflight::check(pid, &maps)?;
    let thread = facts
        .loaded
        .or(facts.parked.first().map(|p| p.tid))
        .unwrap_or(pid);
    let mut notes = Vec::new();
    if facts.loaded.is_some() {
        notes.push(TOOL_NOTE.to_string());
    }
    Ok(Some(Report {
        pid,
        listener_tid: thread,
        register_path: facts.driver.clone(),
        register_attach_addr: facts.functions.map_or(0, |f| f.pthread_create),
        register_detach_addr: 0,
        entry: procfs::at_entry(pid)?,
        attach_library: None,
        sdk_libraries: Vec::new(),
        environ: procfs::environ(pid).ok(),
        fs_ids: [status.uid[3], status.gid[3]],
        own_pid: status.ns_pid.last().copied().unwrap_or(pid),
        root_id: root_id(pid),
        tool: ToolChoice {
            string: facts.tool.display().to_string(),
            warnings: Vec::new(),
            source: ToolSource::Cuda,
            notes,
        },
        warnings: Vec::new(),
        command: command_line(pid),
        backend,
        backend_reason: why,
        cuda: Some(facts),
    }))
}

/// `--check`'s report of a CUDA process.
pub fn describe(r: &Report, c: &cuda::Facts, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    writeln!(f, "process {} is attachable", r.pid)?;
    writeln!(f, "  command:         {}", r.command)?;
    writeln!(f, "  backend:         cuda ({})", r.backend_reason)?;
    writeln!(f, "  driver:          {}", c.driver)?;
    match &c.cupti {
        Some(p) => writeln!(f, "  cupti:           {p} (mapped already, used as is)")?,
        None => match &c.cupti_found {
            Some(p) => writeln!(
                f,
                "  cupti:           not mapped; the tool will load {p} (found in the process's file system: \
                 ROCPROF_ATTACH_CUPTI, beside libcudart, the nvidia Python packages, the CUDA toolkit)"
            )?,
            None => writeln!(
                f,
                "  cupti:           not mapped; the tool looks beside libcudart, in the CUDA toolkit and the \
                 nvidia Python packages (ROCPROF_ATTACH_CUPTI overrides)"
            )?,
        },
    }
    match (c.loaded, c.parked.first()) {
        (Some(tid), _) => writeln!(
            f,
            "  tool thread:     {tid} ({}; loaded by an earlier session, reused: no ptrace)",
            cuda::TOOL_COMM
        )?,
        (None, Some(p)) => writeln!(
            f,
            "  injection:       thread {} ({}, waiting in {}) starts a fresh thread that loads the tool",
            p.tid,
            p.comm,
            cuda::preflight::parked_name(p.syscall).unwrap_or("?")
        )?,
        (None, None) => {}
    }
    write!(f, "  tool library:    {}", c.tool.display())
}
