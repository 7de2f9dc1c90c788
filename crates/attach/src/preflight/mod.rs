//! Preflight checks before any ptrace (docs/protocol.md section 6.3): everything `--check` reports.
//!
//! Everything here only reads `/proc`; the target is never stopped or modified. Each failure is a
//! distinct error naming the cause and the exact fix ([`diagnose`] explains a missing listener,
//! [`hints`] a refused ptrace).

use crate::error::{Error, Result};
use crate::toolpath::{self, SdkKind, SdkLibrary, ToolChecks, ToolChoice};
use rocprof_engine::elf::RemoteLibrary;
use rocprof_engine::procfs::{self, Mapping};
use std::fmt;

pub mod backend;
pub mod diagnose;
pub mod hints;
pub mod output;

pub use hints::{permission_hint, ptrace_refusal};
pub use output::check_output_dir;

/// comm of the target's attach listener thread.
pub const LISTENER_COMM: &str = "rocp-bg-attach";
/// The library whose entry points are called.
pub const REGISTER_LIBRARY: &str = "librocprofiler-register.so";
/// The function called to attach.
pub const ATTACH_SYMBOL: &str = "rocprofiler_register_attach";
/// A function whose export makes rocprofiler-register choose start-up profiling (PyTorch case).
pub const CONFIGURE_SYMBOL: &str = "rocprofiler_configure";
/// The note of a CUDA process whose tool a previous session loaded.
pub(crate) const TOOL_NOTE: &str =
    "our CUDA tool is loaded in it already: this session talks to it, nothing is injected";
/// What the preflight found about an attachable process.
#[derive(Debug, Clone)]
pub struct Report {
    /// Process id.
    pub pid: i32,
    /// The `rocp-bg-attach` thread that will be used (the first one found).
    pub listener_tid: i32,
    /// Path of the mapped librocprofiler-register (as in maps).
    pub register_path: String,
    /// Address of `rocprofiler_register_attach` in the target.
    pub register_attach_addr: u64,
    /// Address of `rocprofiler_register_detach` in the target.
    pub register_detach_addr: u64,
    /// Injection site: the program entry point (AT_ENTRY).
    pub entry: u64,
    /// The mapped librocprofiler-sdk-attach, if any.
    pub attach_library: Option<SdkLibrary>,
    /// Every ROCm profiling library mapped (register, core, attach, tool), with versions.
    pub sdk_libraries: Vec<SdkLibrary>,
    /// The process's environment as read for the checks (None when it could not be read); the
    /// session expands output file names from it instead of reading it again.
    pub environ: Option<Vec<(String, String)>>,
    /// Filesystem user and group ids of the process (from the status read for the checks).
    pub fs_ids: [u32; 2],
    /// The PID the process sees for itself (its innermost PID namespace's), for `%pid%`.
    pub own_pid: i32,
    /// Device and inode of the process's root directory (`/proc/PID/root`): processes that share
    /// it see the same files (one output-directory check and snapshot for all of them).
    pub root_id: (u64, u64),
    /// The tool library string that will be sent.
    pub tool: ToolChoice,
    /// Things the user should know; the attach can proceed.
    pub warnings: Vec<String>,
    /// Command line of the target, space-joined.
    pub command: String,
    /// The profiler this process gets.
    pub backend: crate::cuda::Backend,
    /// Why it gets that backend (for `--check`, `--list` and `--json`).
    pub backend_reason: &'static str,
    /// What the CUDA preflight found (CUDA targets only; then `listener_tid` is the thread the
    /// tool is loaded from or the tool's own thread, and `register_*` describe libcuda).
    pub cuda: Option<crate::cuda::Facts>,
}

pub(crate) fn not_attachable(pid: i32, reason: impl Into<String>) -> Error {
    Error::NotAttachable {
        pid,
        reason: reason.into(),
    }
}

pub(crate) fn our_pid() -> i32 {
    std::process::id() as i32
}

/// Run every check on `pid` without touching it; `tool` is the user's tool string, if any.
pub fn check(pid: i32, tool: Option<&str>) -> Result<Report> {
    check_with(pid, tool, None)
}

/// [`check`] reusing the clean tool checks of `checks`: a plan over many processes shares one.
pub fn check_with(pid: i32, tool: Option<&str>, checks: Option<&ToolChecks>) -> Result<Report> {
    // The listener threads, read once for both backends' checks.
    let listeners = procfs::threads_named(pid, LISTENER_COMM);
    if let Some(report) = backend::check_cuda(pid, listeners.as_deref().ok())? {
        return Ok(report);
    }
    let mut warnings = Vec::new();
    let f = check_process_state(pid, listeners, &mut warnings)?;
    let tool = toolpath::choose_with(pid, tool, toolpath::at_secure(), Some(&f.maps), checks)?;
    env_warnings(pid, &f.env, &mut warnings);
    library_warnings(&f.libs, &mut warnings);
    Ok(Report {
        pid,
        listener_tid: f.listener_tid,
        register_path: f.register.0,
        register_attach_addr: f.register.1,
        register_detach_addr: f.register.2,
        entry: f.entry,
        attach_library: f.libs.iter().find(|l| l.kind == SdkKind::Attach).cloned(),
        sdk_libraries: f.libs,
        environ: f.env.ok(),
        fs_ids: [f.status.uid[3], f.status.gid[3]],
        own_pid: f.status.ns_pid.last().copied().unwrap_or(pid),
        root_id: root_id(pid),
        tool,
        warnings,
        command: command_line(pid),
        backend: crate::cuda::Backend::Rocm,
        backend_reason: "it has the rocp-bg-attach listener",
        cuda: None,
    })
}

/// What [`check_process_state`] found.
struct Facts {
    status: procfs::Status,
    maps: Vec<procfs::Mapping>,
    env: Result<Vec<(String, String)>, rocprof_engine::Error>,
    libs: Vec<SdkLibrary>,
    listener_tid: i32,
    register: (String, u64, u64),
    entry: u64,
}

fn check_process_state(
    pid: i32,
    listeners: rocprof_engine::Result<Vec<i32>>,
    warnings: &mut Vec<String>,
) -> Result<Facts> {
    let status = check_process(pid)?;
    let stopped = |state: char| {
        not_attachable(
            pid,
            format!(
                "it is stopped (state {state}: SIGSTOP, Ctrl-Z or a debugger), so its listener cannot run the attach \
                 call. Fix: continue it with `kill -CONT {pid}` (or `fg` in its shell), then retry"
            ),
        )
    };
    // The leader's state from the status just read; the listener's from its own status below.
    if matches!(status.state, 'T' | 't') {
        return Err(stopped(status.state));
    }
    let maps = procfs::maps(pid)?;
    let env = procfs::environ(pid);
    let libs = toolpath::sdk_libraries(&maps);
    let listener_tid = find_listener(
        pid,
        listeners?,
        (&status, &maps, &libs, env.as_ref().ok()),
        warnings,
    )?;
    let listener = procfs::task_status(pid, listener_tid)?;
    check_tracer(pid, Some(listener_tid), listener.tracer_pid)?;
    if matches!(listener.state, 'T' | 't') {
        return Err(stopped(listener.state));
    }
    let register = locate_register(pid, &libs, &maps)?;
    let entry = procfs::at_entry(pid)?;
    Ok(Facts {
        status,
        maps,
        env,
        libs,
        listener_tid,
        register,
        entry,
    })
}

/// Device and inode of `/proc/PID/root` ((0, pid) when it cannot be read: then unique).
pub fn root_id(pid: i32) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/root"))
        .map(|m| (m.dev(), m.ino()))
        .unwrap_or((0, pid as u64))
}

/// The state letter when `pid` (or its listener thread) is stopped (T or t), else None.
pub fn stopped_state(pid: i32) -> Option<char> {
    let stopped = |c: char| matches!(c, 'T' | 't');
    if let Ok(s) = procfs::task_state(pid, pid) {
        if stopped(s) {
            return Some(s);
        }
    }
    let tids = procfs::threads_named(pid, LISTENER_COMM).unwrap_or_default();
    tids.iter()
        .filter_map(|&t| procfs::task_state(pid, t).ok())
        .find(|&c| stopped(c))
}

/// PID sanity, ourselves, kernel thread, zombie, already traced.
pub(crate) fn check_process(pid: i32) -> Result<procfs::Status> {
    if pid <= 0 {
        return Err(Error::usage(format!(
            "invalid PID {pid}: pass the positive process id of the target"
        )));
    }
    if pid == our_pid() {
        return Err(not_attachable(
            pid,
            "that is rocprof-attach itself; pass the PID of the application to profile",
        ));
    }
    let status = procfs::status(pid)?;
    // A process with an address space is no kernel thread: no need to read its stat flags.
    if !status.has_mm && procfs::is_kernel_thread(pid)? {
        return Err(not_attachable(
            pid,
            format!("it is a kernel thread ({}), not a user process; pass the PID of a ROCm application", status.name),
        ));
    }
    if is_zombie(pid, &status)? {
        return Err(not_attachable(
            pid,
            format!(
                "it is a zombie (state {}): it has exited and its parent (PID {}) has not collected it yet; \
                 there is nothing left to profile",
                status.state, status.ppid
            ),
        ));
    }
    check_tracer(pid, None, status.tracer_pid)?;
    Ok(status)
}

/// Zombie when the leader is Z/X and no other thread is alive.
fn is_zombie(pid: i32, status: &procfs::Status) -> Result<bool> {
    if !matches!(status.state, 'Z' | 'X') {
        return Ok(false);
    }
    for tid in procfs::tasks(pid)? {
        if tid != pid && procfs::task_state(pid, tid).is_ok_and(|s| !matches!(s, 'Z' | 'X')) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Refuse when `tracer` (a TracerPid already read) is not 0.
pub(crate) fn check_tracer(pid: i32, tid: Option<i32>, tracer: i32) -> Result<()> {
    if tracer == 0 {
        return Ok(());
    }
    let name = procfs::comm(tracer, tracer).unwrap_or_else(|_| "?".into());
    let what = tid.map_or(String::from("it"), |t| format!("its listener thread {t}"));
    Err(not_attachable(
        pid,
        format!(
            "{what} is already traced by PID {tracer} ({name}); a thread can have only one tracer. Fix: detach \
             that tracer first (gdb: `detach` or quit; strace/ltrace: stop it with Ctrl-C), then retry"
        ),
    ))
}

pub(crate) fn env_value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

pub(crate) fn is_truthy(v: &str) -> bool {
    !matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "no" | "off"
    )
}

/// What the preflight read that explains a missing listener: status, maps, SDK libraries and
/// environment.
type ListenerFacts<'a> = (
    &'a procfs::Status,
    &'a [Mapping],
    &'a [SdkLibrary],
    Option<&'a Vec<(String, String)>>,
);

/// The listener among `tids` (the process's `rocp-bg-attach` threads), or why there is none,
/// from what the preflight read (`facts`).
fn find_listener(
    pid: i32,
    tids: Vec<i32>,
    facts: ListenerFacts<'_>,
    warnings: &mut Vec<String>,
) -> Result<i32> {
    let (status, maps, libs, env) = facts;
    if tids.len() > 1 {
        warnings.push(format!(
            "process {pid} has {} '{LISTENER_COMM}' threads ({}): more than one attach library is loaded; using \
             thread {}. Make the target load a single ROCm installation",
            tids.len(),
            join_ids(&tids),
            tids[0]
        ));
    }
    match tids.first() {
        Some(&tid) => Ok(tid),
        None => Err(not_attachable(
            pid,
            diagnose::no_listener_reason(pid, status, maps, libs, env),
        )),
    }
}

fn join_ids(ids: &[i32]) -> String {
    ids.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn has_kind(libs: &[SdkLibrary], kind: SdkKind) -> bool {
    libs.iter().any(|l| l.kind == kind)
}

/// Locate librocprofiler-register and `rocprofiler_register_attach` (only reads /proc and memory).
fn locate_register(
    pid: i32,
    libs: &[SdkLibrary],
    maps: &[procfs::Mapping],
) -> Result<(String, u64, u64)> {
    if !has_kind(libs, SdkKind::Register) {
        return Err(not_attachable(
            pid,
            format!(
                "librocprofiler-register is not mapped (librocprofiler-sdk-attach is {}), so there is no \
                 `{ATTACH_SYMBOL}` to call. Fix: make sure the target uses a ROCm runtime (HIP/HSA) from a ROCm with \
                 rocprofiler-register, and check `grep rocprofiler /proc/{pid}/maps`",
                if has_kind(libs, SdkKind::Attach) { "mapped" } else { "not mapped either" }
            ),
        ));
    }
    let lib = RemoteLibrary::locate_in(pid, REGISTER_LIBRARY, maps)?;
    let attach = lib.symbol(ATTACH_SYMBOL)?;
    let detach = lib.symbol("rocprofiler_register_detach")?;
    Ok((lib.path, attach, detach))
}

fn env_warnings(
    pid: i32,
    env: &rocprof_engine::Result<Vec<(String, String)>>,
    warnings: &mut Vec<String>,
) {
    match env {
        Err(e) => warnings.push(format!("cannot read the environment of process {pid}: {e}")),
        Ok(env) if env_value(env, "ROCP_TOOL_ATTACH") == Some("") => warnings.push(format!(
            "process {pid} has ROCP_TOOL_ATTACH set to an empty string; rocprofiler-register may fail on it. \
             Start the target with ROCP_TOOL_ATTACH=1"
        )),
        Ok(_) => {}
    }
}

fn library_warnings(libs: &[SdkLibrary], warnings: &mut Vec<String>) {
    for l in libs.iter().filter(|l| l.deleted) {
        warnings.push(format!(
            "{} was deleted or replaced on disk after the target loaded it; a tool library found on disk now may \
             not match the SDK the target runs",
            l.path
        ));
    }
    let dir_of = |k| libs.iter().find(|l| l.kind == k).map(SdkLibrary::dir);
    if let (Some(a), Some(c)) = (dir_of(SdkKind::Attach), dir_of(SdkKind::Core)) {
        if a != c {
            warnings.push(format!("the attach library ({a}) and the SDK core library ({c}) come from different directories"));
        }
    }
}

pub(crate) fn command_line(pid: i32) -> String {
    match procfs::cmdline(pid) {
        Ok(args) if !args.is_empty() => args.join(" "),
        _ => procfs::status(pid)
            .map(|s| format!("[{}]", s.name))
            .unwrap_or_default(),
    }
}

/// The ROCm profiling libraries as one short line (`register 0.6.0, attach 1.1.0 (deleted)`).
pub fn describe_libraries(libs: &[SdkLibrary]) -> String {
    if libs.is_empty() {
        return "-".into();
    }
    libs.iter()
        .map(|l| {
            format!(
                "{} {}{}",
                l.kind.name(),
                l.suffix.as_deref().unwrap_or("?"),
                if l.deleted { " (deleted)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.cuda {
            return backend::describe(self, c, f);
        }
        let source = self.tool.source.describe();
        writeln!(f, "process {} is attachable", self.pid)?;
        writeln!(f, "  command:         {}", self.command)?;
        writeln!(
            f,
            "  listener thread: {} ({LISTENER_COMM})",
            self.listener_tid
        )?;
        writeln!(
            f,
            "  register:        {} ({ATTACH_SYMBOL} at {:#x})",
            self.register_path, self.register_attach_addr
        )?;
        if let Some(a) = &self.attach_library {
            writeln!(
                f,
                "  attach library:  {} (version {})",
                a.path,
                a.version().unwrap_or("unknown")
            )?;
        }
        writeln!(
            f,
            "  libraries:       {}",
            describe_libraries(&self.sdk_libraries)
        )?;
        write!(f, "  tool library:    {} ({source})", self.tool.string)
    }
}
