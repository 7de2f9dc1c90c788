//! What a CUDA process offers an attach, found by reading `/proc` and ELF files only.
//!
//! The injection needs a thread parked in a blocking system call that the C library never makes
//! while holding one of its own locks ([`PARKED_IN`]; docs/cuda.md, "Safety"), `pthread_create`,
//! `dlopen`, `dlsym` and `dlerror` in the target, and our tool library where the target can open
//! it. A process whose tool is loaded already needs none of it: the next session talks to the
//! tool's thread ([`super::TOOL_COMM`]) directly.

use super::{is_driver_path, TOOL_COMM, TOOL_FILE};
use crate::error::{Error, Result};
use rocprof_engine::elf::RemoteLibrary;
use rocprof_engine::procfs::{self, Mapping};
use std::path::{Path, PathBuf};

/// System calls (x86-64 numbers) a thread may be parked in to run the spawn: event waits and
/// sleeps, which glibc never enters while holding the locks `pthread_create` takes (the stack
/// cache, malloc's arenas, the TLS lock). `futex` is left out on purpose: a thread waiting for a
/// lock may hold another one.
pub const PARKED_IN: [(u64, &str); 16] = [
    (7, "poll"),
    (271, "ppoll"),
    (232, "epoll_wait"),
    (281, "epoll_pwait"),
    (441, "epoll_pwait2"),
    (23, "select"),
    (270, "pselect6"),
    (35, "nanosleep"),
    (230, "clock_nanosleep"),
    (34, "pause"),
    (128, "rt_sigtimedwait"),
    (43, "accept"),
    (288, "accept4"),
    (45, "recvfrom"),
    (47, "recvmsg"),
    (61, "wait4"),
];

/// Name of system call `nr` if it is one of [`PARKED_IN`].
pub fn parked_name(nr: u64) -> Option<&'static str> {
    PARKED_IN.iter().find(|(n, _)| *n == nr).map(|(_, s)| *s)
}

/// A thread the spawn may run on.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Parked {
    /// Thread id.
    pub tid: i32,
    /// Its name.
    pub comm: String,
    /// The system call it waits in.
    pub syscall: u64,
}

/// Addresses in the target for the spawn.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Functions {
    /// `pthread_create`.
    pub pthread_create: u64,
    /// `dlopen`.
    pub dlopen: u64,
    /// `dlsym`.
    pub dlsym: u64,
    /// `dlerror`.
    pub dlerror: u64,
}

/// What the preflight found about a CUDA process.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Facts {
    /// The CUDA driver library as mapped.
    pub driver: String,
    /// A libcupti the process maps already (the tool uses it), if any.
    pub cupti: Option<String>,
    /// Our tool library, as both we and the target open it.
    pub tool: PathBuf,
    /// The tool's thread when the tool is loaded already (a later session reuses it).
    pub loaded: Option<i32>,
    /// Threads the spawn may run on, best first (empty when the tool is loaded).
    pub parked: Vec<Parked>,
    /// Where to call, when the tool must be loaded.
    pub functions: Option<Functions>,
    /// When no libcupti is mapped: the one the tool will load, the first of its candidates that
    /// exists in the target's file system ([`cupti_candidates`]).
    pub cupti_found: Option<String>,
}

/// The CUPTI libraries the tool looks for when the process maps none, in its order: the tool's
/// own list, included from crates/cuda-tool/src/candidates.rs so that the two never disagree.
#[path = "../../../cuda-tool/src/candidates.rs"]
mod candidates;

/// [`candidates::cupti_candidates`] over the target's mappings (paths as the target sees them).
pub fn cupti_candidates(maps: &[Mapping], override_path: Option<&str>) -> Vec<PathBuf> {
    candidates::cupti_candidates(
        maps.iter().filter_map(|m| m.path.as_deref()),
        override_path.map(std::path::Path::new),
    )
}

/// The libcupti the tool would load into `pid`, which maps none: the first of
/// [`cupti_candidates`] that is a file in its root, or the refusal with where it looked and the
/// fix.
fn find_cupti(pid: i32, maps: &[Mapping]) -> Result<String> {
    let override_path = std::env::var("ROCPROF_ATTACH_CUPTI").ok();
    let candidates = cupti_candidates(maps, override_path.as_deref().filter(|p| !p.is_empty()));
    if let Some(found) = candidates
        .iter()
        .find(|c| procfs::in_root(pid, c).is_file())
    {
        return Ok(found.display().to_string());
    }
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "it maps no libcupti and none is where our tool looks for one in its file system ({} places: \
             {}{}), so the tool could not trace it; nothing was touched. Fix: install CUPTI where the process \
             can open it (the CUDA toolkit's extras/CUPTI, or `pip install nvidia-cuda-cupti-cu12` in its \
             Python environment) and pass its path with ROCPROF_ATTACH_CUPTI=/path/to/libcupti.so",
            candidates.len(),
            candidates
                .iter()
                .take(4)
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if candidates.len() > 4 { ", ..." } else { "" }
        ),
    })
}

/// Examine CUDA process `pid` (its maps read already). Refuses, with the reason and the fix, a
/// process we cannot load the tool into safely.
pub fn check(pid: i32, maps: &[Mapping]) -> Result<Facts> {
    let driver = maps
        .iter()
        .filter_map(|m| m.path.as_deref())
        .find(|p| is_driver_path(p))
        .map(str::to_string)
        .ok_or_else(|| Error::NotAttachable {
            pid,
            reason: "it does not map libcuda.so.1, so it is not a CUDA process (yet: a process maps the \
                     driver when it first uses CUDA). Fix: attach after it has used the GPU"
                .into(),
        })?;
    let cupti = maps
        .iter()
        .filter_map(|m| m.path.as_deref())
        .find(|p| file_name(p).starts_with("libcupti.so"))
        .map(str::to_string);
    let tool = tool_library(pid)?;
    let loaded = procfs::threads_named(pid, TOOL_COMM)?.first().copied();
    let mut facts = Facts {
        driver,
        cupti,
        tool,
        loaded,
        parked: Vec::new(),
        functions: None,
        cupti_found: None,
    };
    if loaded.is_some() {
        return Ok(facts);
    }
    if facts.cupti.is_none() {
        facts.cupti_found = Some(find_cupti(pid, maps)?);
    }
    facts.parked = parked_soon(pid)?;
    if facts.parked.is_empty() {
        return Err(Error::NotAttachable {
            pid,
            reason: "none of its threads waits in a system call where loading our tool is safe (poll, \
                     epoll_wait, nanosleep and the like; a thread waiting on a lock may hold another), so \
                     nothing was touched. Fix: retry while it is idle, or start it with \
                     CUDA_INJECTION64_PATH=/path/to/librocprof_cuda_tool.so (docs/cuda.md, \"Without ptrace\")"
                .into(),
        });
    }
    facts.functions = Some(functions(pid, maps)?);
    Ok(facts)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// How long [`parked_soon`] looks for a parked thread, and how often.
const PARKED_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
const PARKED_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// [`parked_threads`], looked for again for up to a second when none is parked right now: a
/// driver thread that woke up for an event, or a loop between two sleeps, is parked again a
/// moment later (and on a loaded machine may wait for a CPU before it is).
fn parked_soon(pid: i32) -> Result<Vec<Parked>> {
    let deadline = std::time::Instant::now() + PARKED_WAIT;
    loop {
        let found = parked_threads(pid)?;
        if !found.is_empty() || std::time::Instant::now() >= deadline {
            return Ok(found);
        }
        std::thread::sleep(PARKED_EVERY);
    }
}

/// Threads parked in one of [`PARKED_IN`], not stopped: other threads before the main thread
/// (its stop would delay the application's own work), poll-like waits before sleeps.
pub fn parked_threads(pid: i32) -> Result<Vec<Parked>> {
    let mut found = Vec::new();
    for tid in procfs::tasks(pid)? {
        let Ok((comm, state)) = procfs::task_comm_state(pid, tid) else {
            continue;
        };
        if !matches!(state, 'S' | 'D') {
            continue;
        }
        if let Ok(Some(nr)) = procfs::task_syscall(pid, tid) {
            if parked_name(nr).is_some() {
                found.push(Parked {
                    tid,
                    comm,
                    syscall: nr,
                });
            }
        }
    }
    let rank = |p: &Parked| {
        let order = PARKED_IN.iter().position(|(n, _)| *n == p.syscall);
        (p.tid == pid, order)
    };
    found.sort_by_key(rank);
    Ok(found)
}

/// `pthread_create`, `dlopen`, `dlsym` and `dlerror` in the target: in libc.so.6 (glibc 2.34
/// and later), else `dl*` in libdl.so.2.
fn functions(pid: i32, maps: &[Mapping]) -> Result<Functions> {
    let libc = RemoteLibrary::locate_in(pid, "libc.so.6", maps)?;
    let libdl = RemoteLibrary::locate_in(pid, "libdl.so.2", maps).ok();
    let find = |name: &str| -> Result<u64> {
        match libc.symbol(name) {
            Ok(a) => Ok(a),
            Err(e) => match &libdl {
                Some(dl) => Ok(dl.symbol(name)?),
                None => Err(Error::NotAttachable {
                    pid,
                    reason: format!(
                        "its C library has no {name} and libdl.so.2 is not loaded ({e}); glibc 2.34 or \
                         later, or a process that links libdl, is needed"
                    ),
                }),
            },
        }
    };
    let pthread_create = match libc.symbol("pthread_create") {
        Ok(a) => a,
        Err(_) => {
            RemoteLibrary::locate_in(pid, "libpthread.so.0", maps)?.symbol("pthread_create")?
        }
    };
    Ok(Functions {
        pthread_create,
        dlopen: find("dlopen")?,
        dlsym: find("dlsym")?,
        dlerror: find("dlerror")?,
    })
}

/// Our tool library: `ROCPROF_ATTACH_CUDA_TOOL`, else [`tool_candidates`]. The target must see
/// the same file.
pub fn tool_library(pid: i32) -> Result<PathBuf> {
    let mut tried = Vec::new();
    let candidates = match std::env::var_os("ROCPROF_ATTACH_CUDA_TOOL").filter(|p| !p.is_empty()) {
        Some(p) => vec![PathBuf::from(p)],
        None => tool_candidates(),
    };
    for c in candidates {
        let Ok(path) = c.canonicalize() else {
            tried.push(c.display().to_string());
            continue;
        };
        if !same_file_in_target(pid, &path) {
            return Err(Error::NotAttachable {
                pid,
                reason: format!(
                    "it cannot open our CUDA tool library {} (it runs in another filesystem root, e.g. a \
                     container). Fix: copy {TOOL_FILE} where the process can read it and set \
                     ROCPROF_ATTACH_CUDA_TOOL to that path",
                    path.display()
                ),
            });
        }
        return Ok(path);
    }
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "the CUDA tool library {TOOL_FILE} was not found (tried {}). Fix: build it with `cargo build \
             --release --workspace` (it lands beside rocprof-attach) or set ROCPROF_ATTACH_CUDA_TOOL",
            tried.join(", ")
        ),
    })
}

/// Where the tool library may be, in order: beside this executable (a build tree); beside the
/// library that holds this code (the rocattach C library: in the Python package, where pip puts
/// the tool as `librocprof_cuda_tool*.so`); in the executable's `../lib/rocprof-attach/` (an
/// installation); and for a command pip installed in `bin/`, its package
/// ([`crate::toolsearch::pip_package_dirs`]).
pub fn tool_candidates() -> Vec<PathBuf> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    let mut dirs: Vec<PathBuf> = exe_dir.iter().cloned().collect();
    dirs.extend(own_object_dir());
    if let Some(dir) = &exe_dir {
        dirs.push(dir.join("../lib/rocprof-attach"));
        dirs.extend(crate::toolsearch::pip_package_dirs(dir));
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        // setuptools-rust names the library after the Python extension suffix.
        let named = crate::toolsearch::shared_objects(&dir, "librocprof_cuda_tool.");
        for f in std::iter::once(dir.join(TOOL_FILE)).chain(named) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// The directory of the file (executable or shared library) that holds this code, from
/// `/proc/self/maps`.
fn own_object_dir() -> Option<PathBuf> {
    let here = own_object_dir as *const () as u64;
    let maps = procfs::maps(std::process::id() as i32).ok()?;
    let m = maps.iter().find(|m| m.start <= here && here < m.end)?;
    Path::new(m.path.as_deref()?)
        .parent()
        .map(Path::to_path_buf)
}

/// True when `path` names the same file inside the target's root as here.
fn same_file_in_target(pid: i32, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let inside =
        Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path));
    match (std::fs::metadata(path), std::fs::metadata(inside)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
