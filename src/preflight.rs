//! Preflight checks before any ptrace (protocol section 6.3), `--check` and `--list`.
//!
//! Everything here only reads `/proc`; the target is never stopped or modified. Each failure is a
//! distinct error naming the cause and the exact fix.

use crate::elf::{self, RemoteLibrary};
use crate::error::{Error, Result};
use crate::procfs::{self, Mapping};
use crate::session::TargetSelection;
use crate::toolpath::{self, SdkKind, SdkLibrary, ToolChoice, ToolSource};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// comm of the target's attach listener thread.
pub const LISTENER_COMM: &str = "rocp-bg-attach";
/// The library whose entry points are called.
pub const REGISTER_LIBRARY: &str = "librocprofiler-register.so";
/// The function called to attach.
pub const ATTACH_SYMBOL: &str = "rocprofiler_register_attach";
/// A function whose export makes rocprofiler-register choose start-up profiling (PyTorch case).
pub const CONFIGURE_SYMBOL: &str = "rocprofiler_configure";
/// Environment variables carrying a job id (Slurm, Open MPI, PMIx, PMI, Flux), for `--job`.
pub const JOB_ID_VARIABLES: [&str; 6] = [
    "SLURM_JOB_ID",
    "OMPI_MCA_orte_ess_jobid",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_JOBID",
    "FLUX_JOB_ID",
];
/// CAP_SYS_PTRACE bit in CapEff.
pub const CAP_SYS_PTRACE: u32 = 19;

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
    /// The tool library string that will be sent.
    pub tool: ToolChoice,
    /// Things the user should know; the attach can proceed.
    pub warnings: Vec<String>,
    /// Command line of the target, space-joined.
    pub command: String,
}

/// Processes chosen by a [`TargetSelection`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Selected process ids, ascending (explicit PIDs keep the user's order).
    pub pids: Vec<i32>,
    /// Processes that could not be examined, with the reason.
    pub unreadable: Vec<(i32, String)>,
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
}

fn not_attachable(pid: i32, reason: impl Into<String>) -> Error {
    Error::NotAttachable {
        pid,
        reason: reason.into(),
    }
}

fn our_pid() -> i32 {
    std::process::id() as i32
}

/// Run every check on `pid` without touching it; `tool` is the user's tool string, if any.
pub fn check(pid: i32, tool: Option<&str>) -> Result<Report> {
    let status = check_process(pid)?;
    let mut warnings = Vec::new();
    if status.state == 'T' || status.state == 't' {
        warnings.push(format!(
            "process {pid} is stopped (state {}); the attach call runs only after it continues (`kill -CONT {pid}`)",
            status.state
        ));
    }
    let maps = procfs::maps(pid)?;
    let env = procfs::environ(pid);
    let libs = toolpath::sdk_libraries(&maps);
    let listener_tid = find_listener(pid, &status, &maps, &libs, env.as_ref().ok(), &mut warnings)?;
    check_not_traced(pid, Some(listener_tid))?;
    let (register_path, register_attach_addr, register_detach_addr) =
        locate_register(pid, &libs, &maps)?;
    let entry = procfs::at_entry(pid)?;
    let tool = toolpath::choose(pid, tool, toolpath::at_secure())?;
    env_warnings(pid, &env, &mut warnings);
    library_warnings(&libs, &mut warnings);
    Ok(Report {
        pid,
        listener_tid,
        register_path,
        register_attach_addr,
        register_detach_addr,
        entry,
        attach_library: libs.iter().find(|l| l.kind == SdkKind::Attach).cloned(),
        sdk_libraries: libs,
        tool,
        warnings,
        command: command_line(pid),
    })
}

/// PID sanity, ourselves, kernel thread, zombie, already traced.
fn check_process(pid: i32) -> Result<procfs::Status> {
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
    if procfs::is_kernel_thread(pid)? {
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

/// Refuse when the process (or the listener thread) already has a tracer.
fn check_not_traced(pid: i32, tid: Option<i32>) -> Result<()> {
    let status = match tid {
        Some(t) => procfs::task_status(pid, t)?,
        None => procfs::status(pid)?,
    };
    check_tracer(pid, tid, status.tracer_pid)
}

/// Refuse when `tracer` (a TracerPid already read) is not 0.
fn check_tracer(pid: i32, tid: Option<i32>, tracer: i32) -> Result<()> {
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

fn env_value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

fn is_truthy(v: &str) -> bool {
    !matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "no" | "off"
    )
}

fn find_listener(
    pid: i32,
    status: &procfs::Status,
    maps: &[Mapping],
    libs: &[SdkLibrary],
    env: Option<&Vec<(String, String)>>,
    warnings: &mut Vec<String>,
) -> Result<i32> {
    let tids = procfs::threads_named(pid, LISTENER_COMM)?;
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
            no_listener_reason(pid, status, maps, libs, env),
        )),
    }
}

fn join_ids(ids: &[i32]) -> String {
    ids.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn has_kind(libs: &[SdkLibrary], kind: SdkKind) -> bool {
    libs.iter().any(|l| l.kind == kind)
}

/// Explain why there is no listener and what to do.
fn no_listener_reason(
    pid: i32,
    status: &procfs::Status,
    maps: &[Mapping],
    libs: &[SdkLibrary],
    env: Option<&Vec<(String, String)>>,
) -> String {
    let yes_no = |b: bool| if b { "loaded" } else { "not loaded" };
    let mut text = format!(
        "'{LISTENER_COMM}' thread not found in process {pid} (librocprofiler-register: {}, \
         librocprofiler-sdk-attach: {}). ",
        yes_no(has_kind(libs, SdkKind::Register)),
        yes_no(has_kind(libs, SdkKind::Attach))
    );
    let Some(env) = env else {
        text.push_str(
            "Its environment is not readable, so the cause is unknown. Start the target with \
             ROCP_TOOL_ATTACH=1; run rocprof-attach as the target's owner or root for a precise diagnosis",
        );
        return text;
    };
    match env_value(env, "ROCP_TOOL_ATTACH") {
        None => text.push_str(
            "The target was not started with ROCP_TOOL_ATTACH=1. Fix: restart it with ROCP_TOOL_ATTACH=1 in its \
             environment (or use a rocprofiler-register built with ROCPROFILER_REGISTER_BUILD_DEFAULT_ATTACHMENT=ON)",
        ),
        Some("") => text.push_str(
            "ROCP_TOOL_ATTACH is set to an empty string, which rocprofiler-register cannot parse. Fix: restart the \
             target with ROCP_TOOL_ATTACH=1",
        ),
        Some(v) if !is_truthy(v) => text.push_str(&format!(
            "ROCP_TOOL_ATTACH={v} disables attaching. Fix: restart the target with ROCP_TOOL_ATTACH=1"
        )),
        Some(_) => text.push_str(&opted_in_reason(pid, status, maps, libs, env)),
    }
    text
}

/// The target opted in (ROCP_TOOL_ATTACH=1) and still has no listener: find out why.
fn opted_in_reason(
    pid: i32,
    status: &procfs::Status,
    maps: &[Mapping],
    libs: &[SdkLibrary],
    env: &[(String, String)],
) -> String {
    if let Some(parent) = fork_parent_with_listener(pid, status) {
        return format!(
            "ROCP_TOOL_ATTACH is set, but this process is a fork() of PID {parent} (which has the listener) without \
             exec; forked children do not inherit the listener thread. Fix: attach to PID {parent} (tree attach \
             skips such children), or start the workers with exec (e.g. Python multiprocessing start method \
             'spawn')"
        );
    }
    let exporters = configure_exporters(pid, maps);
    if !exporters.is_empty() {
        return format!(
            "ROCP_TOOL_ATTACH is set, but {} exports `{CONFIGURE_SYMBOL}`: rocprofiler-register then treats it as \
             a start-up tool, chooses start-up profiling and never starts the attach listener (the known PyTorch \
             libtorch_cpu.so case). Fix: use a build of that library without the `{CONFIGURE_SYMBOL}` export, or \
             profile from the start with `rocprofv3 ... -- <command>`",
            exporters.join(", ")
        );
    }
    for var in ["ROCP_TOOL_LIBRARIES", "ROCPROFILER_REGISTER_LIBRARY"] {
        if let Some(v) = env_value(env, var).filter(|v| !v.is_empty()) {
            return format!(
                "ROCP_TOOL_ATTACH is set, but so is {var}={v}, which makes rocprofiler-register load the profiler \
                 at start-up instead of starting the attach listener. Fix: restart the target without {var}"
            );
        }
    }
    if !has_kind(libs, SdkKind::Register) {
        return "ROCP_TOOL_ATTACH is set, but no ROCm runtime has registered yet (librocprofiler-register is not \
                loaded); the listener starts when the target initializes HIP/HSA. Fix: retry after the target's \
                first GPU call"
            .to_string();
    }
    if !has_kind(libs, SdkKind::Attach) {
        return "ROCP_TOOL_ATTACH is set, but librocprofiler-sdk-attach is not loaded: rocprofiler-register did not \
                find the SDK's attach library. Fix: install a rocprofiler-sdk with attach support in the same ROCm \
                installation as librocprofiler-register"
            .to_string();
    }
    attach_library_reason(pid, libs)
}

/// The attach library is mapped but no listener runs: too old, or the thread has not started.
fn attach_library_reason(pid: i32, libs: &[SdkLibrary]) -> String {
    let attach: Vec<&SdkLibrary> = libs.iter().filter(|l| l.kind == SdkKind::Attach).collect();
    let scans: Vec<Option<bool>> = attach
        .iter()
        .map(|l| file_contains(&procfs::in_root(pid, Path::new(&l.path)), LISTENER_COMM))
        .collect();
    if scans.iter().all(|s| *s == Some(false)) && attach.iter().all(|l| !l.deleted) {
        let lib = attach[0];
        return format!(
            "process {pid} runs rocprofiler-sdk{} from {}, which predates attaching via the '{LISTENER_COMM}' \
             thread. Fix: profile this process with the rocprofv3 of the target's own installation, or upgrade it",
            lib.version().map(|v| format!(" v{v}")).unwrap_or_default(),
            lib.dir()
        );
    }
    "ROCP_TOOL_ATTACH is set and the attach library is loaded, but the listener is not running (it may still be \
     starting, or it exited). Fix: retry in a moment; if it persists, check the target's log for rocprofiler errors"
        .to_string()
}

/// Does the file contain `needle`? None when it cannot be read. Reads in 1 MiB chunks.
fn file_contains(path: &Path, needle: &str) -> Option<bool> {
    let mut file = std::fs::File::open(path).ok()?;
    let needle = needle.as_bytes();
    let mut buf = vec![0u8; (1 << 20) + needle.len()];
    let mut carry = 0usize;
    loop {
        let n = file.read(&mut buf[carry..]).ok()?;
        if n == 0 {
            return Some(false);
        }
        let filled = carry + n;
        if buf[..filled].windows(needle.len()).any(|w| w == needle) {
            return Some(true);
        }
        carry = needle.len().min(filled);
        buf.copy_within(filled - carry..filled, 0);
    }
}

/// PPid when the parent has a listener and runs the same executable (fork without exec).
fn fork_parent_with_listener(pid: i32, status: &procfs::Status) -> Option<i32> {
    let parent = status.ppid;
    if parent <= 1
        || procfs::threads_named(parent, LISTENER_COMM)
            .ok()?
            .is_empty()
    {
        return None;
    }
    let exe = |p: i32| std::fs::read_link(procfs::proc_dir(p).join("exe")).ok();
    match (exe(pid), exe(parent)) {
        (Some(a), Some(b)) if a != b => None,
        _ => Some(parent),
    }
}

/// A readable path for a mapping: map_files when usable, else the path inside the target root.
fn readable_path(pid: i32, m: &Mapping) -> PathBuf {
    let map_file = procfs::proc_dir(pid).join(format!("map_files/{:x}-{:x}", m.start, m.end));
    if std::fs::File::open(&map_file).is_ok() {
        return map_file;
    }
    procfs::in_root(pid, Path::new(m.path.as_deref().unwrap_or_default()))
}

/// Mapped objects (one per file) that export a `rocprofiler_configure` function.
fn configure_exporters(pid: i32, maps: &[Mapping]) -> Vec<String> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in maps.iter().filter(|m| m.inode != 0 && m.offset == 0) {
        let Some(path) = m.path.as_deref().filter(|p| p.starts_with('/')) else {
            continue;
        };
        if seen.contains(&m.file_id()) {
            continue;
        }
        seen.push(m.file_id());
        if elf::exports_symbol(&readable_path(pid, m), CONFIGURE_SYMBOL).unwrap_or(false) {
            out.push(path.to_string());
        }
    }
    out
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

fn env_warnings(pid: i32, env: &Result<Vec<(String, String)>>, warnings: &mut Vec<String>) {
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

fn command_line(pid: i32) -> String {
    match procfs::cmdline(pid) {
        Ok(args) if !args.is_empty() => args.join(" "),
        _ => procfs::status(pid)
            .map(|s| format!("[{}]", s.name))
            .unwrap_or_default(),
    }
}

fn describe_libraries(libs: &[SdkLibrary]) -> String {
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
        let source = match self.tool.source {
            ToolSource::Explicit => "given with -t / ROCPROF_ATTACH_TOOL_LIBRARY",
            ToolSource::TargetInstall => "from the target's rocprofiler-sdk installation",
            ToolSource::Default => "default, resolved by the target's dynamic loader",
        };
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

/// `rocprof-attach --check --pid PID`: run the preflight only, print a report, return the exit code.
pub fn run_check(pid: i32, tool_library: Option<&str>) -> crate::ExitCode {
    match check(pid, tool_library) {
        Ok(report) => {
            println!("rocprof-attach: {report}");
            for note in &report.tool.notes {
                println!("rocprof-attach: {note}");
            }
            for w in report.warnings.iter().chain(&report.tool.warnings) {
                eprintln!("rocprof-attach: warning: {w}");
            }
            crate::ExitCode::Success
        }
        Err(e) => {
            eprintln!("rocprof-attach: error: {e}");
            let code = e.exit_code();
            if code == crate::ExitCode::PermissionDenied {
                eprintln!("{}", permission_hint(pid));
            }
            code
        }
    }
}

/// `rocprof-attach --list`: print attachable processes matching the selection.
pub fn run_list(selection: &TargetSelection) -> crate::ExitCode {
    let Listing {
        entries,
        unreadable,
    } = match list(selection) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rocprof-attach: error: {e}");
            return e.exit_code();
        }
    };
    println!(
        "{:<8} {:<9} {:<12} {:<50} COMMAND",
        "PID", "LISTENER", "JOB", "ROCPROFILER LIBRARIES"
    );
    for e in &entries {
        let listener = if e.listener { "yes" } else { "no" };
        println!(
            "{:<8} {:<9} {:<12} {:<50} {}",
            e.pid,
            listener,
            e.job.as_deref().unwrap_or("-"),
            describe_libraries(&e.libraries),
            e.command
        );
    }
    for (pid, why) in &unreadable {
        println!("{pid:<8} {:<9} cannot read: {why}", "?");
    }
    if !unreadable.is_empty() {
        eprintln!(
            "rocprof-attach: warning: {} process(es) could not be examined; run as their owner or as root to see them",
            unreadable.len()
        );
    }
    if entries.is_empty() && unreadable.is_empty() {
        eprintln!("rocprof-attach: no matching ROCm processes found");
        return crate::ExitCode::NoSuchProcess;
    }
    crate::ExitCode::Success
}

/// Processes for an attach session. `Pids` are returned as given (deduplicated); `Match` and `Job`
/// select user processes whose command line / job environment matches and that use ROCm (have a
/// listener or map librocprofiler-register); `All` selects every process with a listener.
pub fn select(selection: &TargetSelection) -> Result<Selection> {
    if let TargetSelection::Pids(pids) = selection {
        return explicit_pids(pids).map(|pids| Selection {
            pids,
            unreadable: Vec::new(),
        });
    }
    let Listing {
        entries,
        unreadable,
    } = scan(selection)?;
    let all = matches!(selection, TargetSelection::All);
    let pids = entries
        .into_iter()
        .filter(|e| e.listener || !all)
        .map(|e| e.pid)
        .collect();
    Ok(Selection { pids, unreadable })
}

/// Rows for `--list`: like [`select`], except that `All` also shows ROCm processes without a
/// listener, and explicit PIDs that vanished are reported as unreadable.
pub fn list(selection: &TargetSelection) -> Result<Listing> {
    let TargetSelection::Pids(pids) = selection else {
        return scan(selection);
    };
    let mut entries = Vec::new();
    let mut unreadable = Vec::new();
    for pid in explicit_pids(pids)? {
        match entry(pid) {
            Ok(e) => entries.push(e),
            Err(e) => unreadable.push((pid, e.to_string())),
        }
    }
    Ok(Listing {
        entries,
        unreadable,
    })
}

fn explicit_pids(pids: &[i32]) -> Result<Vec<i32>> {
    let mut out: Vec<i32> = Vec::new();
    for &p in pids {
        if p <= 0 {
            return Err(Error::usage(format!(
                "invalid PID {p}: pass positive process ids"
            )));
        }
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Build a list row; maps unreadable leaves `libraries` empty (listener comes from comm).
fn entry(pid: i32) -> Result<ListEntry> {
    let listener = !procfs::threads_named(pid, LISTENER_COMM)?.is_empty();
    let libraries = match procfs::maps(pid) {
        Ok(m) => toolpath::sdk_libraries(&m),
        Err(Error::ProcessGone { pid }) => return Err(Error::ProcessGone { pid }),
        Err(_) => Vec::new(),
    };
    Ok(ListEntry {
        pid,
        listener,
        libraries,
        command: command_line(pid),
        job: job_id(pid),
    })
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

/// A list row when the process uses ROCm (listener, or librocprofiler-register mapped).
fn rocm_entry(pid: i32) -> Result<Option<ListEntry>> {
    let listener = !procfs::threads_named(pid, LISTENER_COMM)?.is_empty();
    let libraries = match procfs::maps(pid) {
        Ok(m) => toolpath::sdk_libraries(&m),
        Err(e) if !listener => return Err(e),
        Err(_) => Vec::new(),
    };
    if !listener && !has_kind(&libraries, SdkKind::Register) {
        return Ok(None);
    }
    Ok(Some(ListEntry {
        pid,
        listener,
        libraries,
        command: command_line(pid),
        job: job_id(pid),
    }))
}

/// The job id in the environment of `pid`: the first of [`JOB_ID_VARIABLES`] that is set.
fn job_id(pid: i32) -> Option<String> {
    let env = procfs::environ(pid).ok()?;
    JOB_ID_VARIABLES
        .iter()
        .find_map(|v| env_value(&env, v).map(str::to_string))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn has_cap_sys_ptrace() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim()
        .to_string();
    let caps = u64::from_str_radix(&hex, 16).ok()?;
    Some(caps & (1 << CAP_SYS_PTRACE) != 0)
}

fn in_container() -> bool {
    if Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists() {
        return true;
    }
    read_trimmed("/proc/1/cgroup").is_some_and(|c| {
        ["docker", "kubepods", "containerd", "lxc", "libpod"]
            .iter()
            .any(|k| c.contains(k))
    })
}

fn yama_hint() -> Option<String> {
    let scope = read_trimmed("/proc/sys/kernel/yama/ptrace_scope")?;
    Some(match scope.as_str() {
        "0" => "Yama ptrace_scope is 0 (classic ptrace permissions).".to_string(),
        "1" => "Yama ptrace_scope is 1: only a parent may trace its children. Fix: \
                `sudo sysctl kernel.yama.ptrace_scope=0`, or run rocprof-attach as root / with CAP_SYS_PTRACE."
            .to_string(),
        "2" => "Yama ptrace_scope is 2: only processes with CAP_SYS_PTRACE may trace. Fix: run rocprof-attach as \
                root (sudo) or grant it CAP_SYS_PTRACE."
            .to_string(),
        "3" => "Yama ptrace_scope is 3: ptrace is disabled until reboot. Fix: set kernel.yama.ptrace_scope=0 at boot \
                (sysctl.d) and reboot."
            .to_string(),
        other => format!("Yama ptrace_scope is {other}."),
    })
}

fn uid_hint(pid: i32) -> Option<String> {
    let target = procfs::status(pid).ok()?;
    let ours = nix::unistd::geteuid().as_raw();
    (ours != 0 && target.uid[1] != ours).then(|| {
        format!(
            "process {pid} runs as uid {} but rocprof-attach runs as uid {ours}. Fix: run as the target's owner or as root.",
            target.uid[1]
        )
    })
}

fn namespace_hint(pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    if let (Some(a), Some(b)) = (ns("self"), ns(&pid.to_string())) {
        if a != b {
            out.push(format!(
                "process {pid} is in a different PID namespace than rocprof-attach. Fix: run rocprof-attach in the \
                 target's container (`docker exec`) or on the host with the PID as the host sees it."
            ));
        }
    }
    if let Ok(st) = procfs::status(pid) {
        if st.ns_pid.len() > 1 {
            out.push(format!(
                "process {pid} lives in a nested PID namespace (it sees itself as PID {}); use PID {pid} from here, \
                 or the inner PID from inside its container.",
                st.ns_pid[st.ns_pid.len() - 1]
            ));
        }
    }
    out
}

fn seccomp_hint() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mode = status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))?
        .trim()
        .to_string();
    (mode == "2").then(|| {
        "rocprof-attach runs under a seccomp filter that may block ptrace. Fix: in Docker older than 19.03 add \
         `--security-opt seccomp=unconfined`."
            .to_string()
    })
}

/// Explain why ptrace or /proc access to `pid` may be refused, with the exact fixes.
pub fn permission_hint(pid: i32) -> String {
    let mut lines: Vec<String> = Vec::new();
    lines.extend(yama_hint());
    match has_cap_sys_ptrace() {
        Some(true) => lines.push("rocprof-attach has CAP_SYS_PTRACE.".into()),
        Some(false) => lines.push(
            "rocprof-attach lacks CAP_SYS_PTRACE (bit 19 of CapEff). Fix: run it as root (sudo) or with \
             CAP_SYS_PTRACE."
                .into(),
        ),
        None => {}
    }
    lines.extend(uid_hint(pid));
    if in_container() {
        lines.push(
            "rocprof-attach runs inside a container. Fix: start the container with `docker run --cap-add SYS_PTRACE` \
             (Kubernetes: securityContext.capabilities.add: [\"SYS_PTRACE\"])."
                .into(),
        );
    }
    lines.extend(seccomp_hint());
    lines.extend(namespace_hint(pid));
    lines
        .iter()
        .map(|l| format!("rocprof-attach: hint: {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
