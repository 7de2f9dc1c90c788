//! Why a process has no `rocp-bg-attach` listener, and what to do about it.

use super::{env_value, has_kind, is_truthy, CONFIGURE_SYMBOL, LISTENER_COMM};
use crate::toolpath::{SdkKind, SdkLibrary};
use rocprof_engine::elf;
use rocprof_engine::procfs::{self, Mapping};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Explain why there is no listener and what to do.
pub(super) fn no_listener_reason(
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
