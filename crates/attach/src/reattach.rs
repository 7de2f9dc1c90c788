//! Has the target already loaded a tool library (an earlier attach), and does this session's tool
//! match it? rocprofiler-register accepts a reattach only with the exact tool string of the first
//! attach (docs/protocol.md section 3.1, step 4: status 8), so a different tool is refused here,
//! before any ptrace, with the tool to pass.
//!
//! The tool is recognised by what it exports, not by its file name: every mapped object (one per
//! file) that exports the attach entry point [`CONFIGURE_ATTACH_SYMBOL`] is a tool, whatever it is
//! called (`librocprofiler-sdk-tool.so*`, rocprofv3's tool, also counts by name when its file cannot
//! be read). `rocprofiler_configure` alone is not enough: libraries such as PyTorch's
//! `libtorch_cpu.so` export it without being an attach tool. rocprofiler-register keeps the
//! first tool string only in its memory, so the maps are the only view that leaves the target
//! untouched: nothing here uses ptrace or reads the target's memory.
//!
//! Cheap: only absolute tool strings are compared at all; the C and C++ runtime and the
//! rocprofiler libraries themselves are skipped by name; each other object costs a few KiB of
//! reads (header, dynamic section, one hash-chain walk), and the answer is kept per (device,
//! inode) for the rest of the run, so the ranks of a job that map the same libraries read each
//! file once.

use crate::error::{Error, Result};
use crate::toolpath::{classify_library, maps_of, SdkKind, ToolChoice};
use rocprof_engine::elf;
use rocprof_engine::procfs::{self, Mapping};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The function a tool library exports to take part in attach (docs/protocol.md section 4:
/// looked up next to `rocprofiler_configure` in each tool library).
pub const CONFIGURE_ATTACH_SYMBOL: &str = "rocprofiler_configure_attach";

/// (major, minor, inode) of a mapped file.
type FileId = (u32, u32, u64);

/// Basename prefixes of system runtime libraries that are never a profiling tool.
const SYSTEM_PREFIXES: [&str; 16] = [
    "ld-linux",
    "ld64.so",
    "libc.so",
    "libm.so",
    "libmvec.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libutil.so",
    "libresolv.so",
    "libnss_",
    "libstdc++.so",
    "libgcc_s.so",
    "libatomic.so",
    "libz.so",
    "libnuma.so",
];

/// A target that already loaded a tool library (an earlier attach) accepts a reattach only with
/// the same tool: refuse, before any ptrace, a choice whose absolute entries are all other files
/// than the mapped tool (compared by device and inode, or by path inside the target's root).
pub(crate) fn check_reattach(
    pid: i32,
    choice: &ToolChoice,
    given: Option<&[Mapping]>,
) -> Result<()> {
    // What an earlier preflight of this process (an earlier session of a library front end)
    // read may be out of date: this one reads again.
    forget(pid);
    let maps = match maps_of(pid, given) {
        Ok(m) => m,
        Err(rocprof_engine::Error::ProcessGone { pid }) => return Err(Error::ProcessGone { pid }),
        Err(_) => return Ok(()),
    };
    let mapped = loaded_tools(pid, &maps);
    remember_loaded(pid, !mapped.is_empty());
    let Some(first) = mapped.first() else {
        return Ok(());
    };
    // The exact string of the earlier attach, where the target still has it.
    if let Some(sent) = earlier_tool_string(pid, &maps, &mapped) {
        if sent == choice.string {
            return Ok(());
        }
        return Err(Error::NotAttachable {
            pid,
            reason: format!(
                "it already loaded the tool library {} in an earlier attach, sent as '{sent}', and \
                 rocprofiler-register accepts a reattach only with that exact string (status 8), but this \
                 session would send '{}' (another path to the same file is another string). Fix: pass -t {sent}",
                first.path.as_deref().unwrap_or("?"),
                choice.string
            ),
        });
    }
    let entries: Vec<&str> = choice.string.split(':').map(str::trim).collect();
    if entries.is_empty() || entries.iter().any(|e| !e.starts_with('/')) {
        // Names resolved by the target's loader cannot be compared here.
        return Ok(());
    }
    let same = |entry: &str| {
        let Ok(Some(resolved)) = procfs::resolve_in_root(pid, Path::new(entry)) else {
            return false;
        };
        mapped.iter().any(|m| {
            let by_path = m.path.as_deref().map(Path::new) == Some(resolved.as_path());
            let by_id = std::fs::metadata(procfs::in_root(pid, &resolved))
                .is_ok_and(|meta| same_file(&meta, m));
            by_path || by_id
        })
    };
    if entries.iter().any(|e| same(e)) {
        return Ok(());
    }
    let loaded = first.path.as_deref().unwrap_or("?");
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "it already loaded the tool library {loaded} in an earlier attach, and a reattach must use the same \
             tool (rocprofiler-register refuses another one with status 8), but this session would send '{}'. \
             Fix: pass -t {loaded} (the exact string of the first attach if it was another path to the same file)",
            choice.string
        ),
    })
}

/// The variable every attach buffer of ours (and rocprofv3's) carries the tool string in.
const TOOL_VARIABLE: &str = "ROCPROF_ATTACH_TOOL_LIBRARY";

/// The tool string the earlier attach sent, read from the target's live environment
/// (rocprofiler-register applies the attach buffer with `setenv` and keeps it when the attach
/// succeeds; our buffers and rocprofv3's carry [`TOOL_VARIABLE`]), when it names one of the
/// `mapped` tools: by the same file in the target's root, or for a bare name by file name. A value
/// left from the target's start that names another file is not that string.
fn earlier_tool_string(pid: i32, maps: &[Mapping], mapped: &[&Mapping]) -> Option<String> {
    let live = live_settings(pid, Some(maps))?;
    let (_, sent) = live.iter().rev().find(|(n, _)| n == TOOL_VARIABLE)?.clone();
    let names_a_mapped_tool = |entry: &str| {
        if !entry.starts_with('/') {
            return mapped.iter().any(|m| {
                m.path
                    .as_deref()
                    .and_then(|p| p.rsplit('/').next())
                    .is_some_and(|b| b == entry)
            });
        }
        let Ok(Some(resolved)) = procfs::resolve_in_root(pid, Path::new(entry)) else {
            return false;
        };
        let meta = std::fs::metadata(procfs::in_root(pid, &resolved));
        mapped.iter().any(|m| {
            m.path.as_deref().map(Path::new) == Some(resolved.as_path())
                || meta.as_ref().is_ok_and(|meta| same_file(meta, m))
        })
    };
    sent.split(':')
        .map(str::trim)
        .any(names_a_mapped_tool)
        .then_some(sent)
}

/// Whether a variable is one a reattach must send as the first attach did: what is traced or
/// counted and how kernels are filtered (rocprofiler-sdk refuses a reattach asking for other
/// services with status 6; rocprofv3's launcher compares the same options).
pub fn fixed_on_reattach(name: &str) -> bool {
    const FIXED: [&str; 9] = [
        "ROCPROF_COUNTERS",
        "ROCPROF_COUNTER_COLLECTION",
        "ROCPROF_COUNTER_GROUPS",
        "ROCPROF_EXTRA_COUNTERS_CONTENTS",
        "ROCPROF_OUTPUT_CONFIG_FILE",
        "ROCPROF_OMPT_TRACE_OPERATIONS",
        "ROCPROF_KERNEL_FILTER_INCLUDE_REGEX",
        "ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX",
        "ROCPROF_KERNEL_FILTER_RANGE",
    ];
    name.starts_with("ROCPROF_")
        && (name.ends_with("_TRACE")
            || name.starts_with("ROCPROF_PC_SAMPLING_")
            || name.starts_with("ROCPROF_ATT_")
            || FIXED.contains(&name))
}

/// Whether `env` asks for any setting of [`fixed_on_reattach`] other than its "not asked for"
/// value ([`crate::options::defaults::DEFAULTS`]): a `--check` given no tracing or counter option
/// asks about no particular session, so it has no settings to compare.
pub fn asks_for_settings(env: &crate::envbuf::EnvList) -> bool {
    env.iter().any(|(n, v)| {
        let default = crate::options::defaults::DEFAULTS
            .iter()
            .find(|(d, _)| *d == n)
            .map(|(_, d)| *d);
        fixed_on_reattach(n)
            && !v.trim().is_empty()
            && crate::options::parse_bool(v) != Ok(false)
            && Some(v) != default
    })
}

/// A reattach asks for what the earlier attach asked for: the settings of
/// [`fixed_on_reattach`] that `env` (what this session sends) gives other values than the
/// target's live environment holds from the earlier attach are refused before any ptrace, each
/// named with both values. Nothing is read when no tool is loaded (a first attach).
/// The preflight of this run already saw that it loaded none ([`check_reattach`]).
pub fn check_settings(pid: i32, env: &crate::envbuf::EnvList) -> Result<()> {
    let live = match loaded_before(pid) {
        Some(false) => return Ok(()),
        // The preflight found a tool loaded and read the live environment then.
        Some(true) => live_settings(pid, None),
        None => match procfs::maps(pid) {
            Ok(maps) if !loaded_tools(pid, &maps).is_empty() => live_settings(pid, Some(&maps)),
            _ => return Ok(()),
        },
    };
    let Some(live) = live else {
        return Ok(());
    };
    let norm = |v: Option<&str>| match v.map(str::trim) {
        None | Some("") => String::new(),
        Some(v) => match crate::options::parse_bool(v) {
            Ok(true) => "1".into(),
            Ok(false) => String::new(),
            Err(_) => v.to_string(),
        },
    };
    // The last value of each setting the earlier attach left (a later `setenv` replaces).
    // Ordered maps: a few dozen short names, compared more cheaply than hashed.
    let then: BTreeMap<&str, &str> = live
        .iter()
        .filter(|(n, _)| fixed_on_reattach(n))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let now: BTreeMap<&str, &str> = env.iter().filter(|(n, _)| fixed_on_reattach(n)).collect();
    let names: BTreeSet<&str> = then.keys().chain(now.keys()).copied().collect();
    let show = |v: &str| {
        if v.is_empty() {
            "not set".to_string()
        } else {
            format!("'{v}'")
        }
    };
    let differ: Vec<String> = names
        .into_iter()
        .filter_map(|n| {
            let (was, is) = (then.get(n).copied(), now.get(n).copied());
            if was.map(str::trim) == is.map(str::trim) {
                return None;
            }
            let (was, is) = (norm(was), norm(is));
            (was != is).then(|| format!("{n}: {} then, {} now", show(&was), show(&is)))
        })
        .collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(Error::NotAttachable {
        pid,
        reason: format!(
            "an earlier attach loaded the profiler with other services or filters, and rocprofiler-sdk refuses \
             a reattach that changes them (status 6): {}. Fix: use the options of the first attach, or restart \
             the target to profile it with these",
            differ.join("; ")
        ),
    })
}

/// The `ROCPROF_*` variables `pid` holds now, as this run's preflight of it read them from its
/// live environment: only for a process that loaded a tool already (a reattach), whose live
/// environment could be read. The attach leaves out of its buffer what the process holds with
/// the same value ([`crate::envbuf::EnvList::without_held`]): the register would `setenv` it to
/// what it is.
pub fn held_settings(pid: i32) -> Option<Arc<Vec<(String, String)>>> {
    if loaded_before(pid) != Some(true) {
        return None;
    }
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&pid).cloned())
        .flatten()
}

/// Forget what was read of `pid` (its live environment, whether it loaded a tool): a process
/// claimed only after its preflight (a descendant) could have been attached by another session
/// in between, so its attach sends everything.
pub fn forget(pid: i32) {
    if let Some(m) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&pid);
    }
    if let Some(m) = LOADED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&pid);
    }
}

/// The live environments read in this run, by PID (see [`live_settings`]).
type LiveCache = Mutex<Option<HashMap<i32, Option<Arc<Vec<(String, String)>>>>>>;
static LIVE: LiveCache = Mutex::new(None);

/// The `ROCPROF_*` variables of `pid`'s live environment, read once per preflight (the tool
/// string and the settings checks of one preflight and the attach that follows share it).
fn live_settings(pid: i32, maps: Option<&[Mapping]>) -> Option<Arc<Vec<(String, String)>>> {
    let lock = || LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hit) = lock().as_ref().and_then(|m| m.get(&pid).cloned()) {
        return hit;
    }
    let read = |maps: &[Mapping]| {
        rocprof_engine::live_env::read(pid, maps, &["ROCPROF_"])
            .ok()
            .map(Arc::new)
    };
    let live = match maps {
        Some(maps) => read(maps),
        None => procfs::maps(pid).ok().and_then(|maps| read(&maps)),
    };
    lock()
        .get_or_insert_with(HashMap::new)
        .insert(pid, live.clone());
    live
}

/// Whether each process checked by [`check_reattach`] in this run had a tool loaded, so that
/// [`check_settings`] reads nothing more for a first attach.
static LOADED: Mutex<Option<HashMap<i32, bool>>> = Mutex::new(None);

fn remember_loaded(pid: i32, loaded: bool) {
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(pid, loaded);
}

fn loaded_before(pid: i32) -> Option<bool> {
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&pid).copied())
}

/// The tool libraries `pid` has mapped, one mapping per file, in maps order: objects exporting
/// [`CONFIGURE_ATTACH_SYMBOL`], and files named like rocprofv3's tool. Deleted files are left
/// out (a new attach cannot name them).
pub fn loaded_tools(pid: i32, maps: &[Mapping]) -> Vec<&Mapping> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in maps.iter().filter(|m| m.inode != 0 && !m.deleted) {
        let Some(path) = m.path.as_deref().filter(|p| p.starts_with('/')) else {
            continue;
        };
        if seen.contains(&m.file_id()) {
            continue;
        }
        seen.push(m.file_id());
        let base = path.rsplit('/').next().unwrap_or(path);
        let is_tool = match classify_library(base) {
            Some((SdkKind::Tool, _)) => true,
            Some(_) => false,
            None if is_system_library(base) => false,
            None => exports_configure_attach(pid, m),
        };
        if is_tool {
            out.push(m);
        }
    }
    out
}

/// A C/C++ runtime or other system library that never is a tool.
pub fn is_system_library(basename: &str) -> bool {
    SYSTEM_PREFIXES.iter().any(|p| basename.starts_with(p))
}

fn same_file(meta: &std::fs::Metadata, m: &Mapping) -> bool {
    let (major, minor) = elf::dev_major_minor(meta.dev());
    (major, minor, meta.ino()) == m.file_id()
}

/// Does the mapped object export the attach entry point? Read through `/proc/PID/map_files`, else
/// its path inside the target's root, and only when that is the mapped file (same device and
/// inode); anything unreadable counts as no. Answers are kept per mapped file.
fn exports_configure_attach(pid: i32, m: &Mapping) -> bool {
    static ANSWERS: Mutex<Option<HashMap<FileId, bool>>> = Mutex::new(None);
    let lock = || ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hit) = lock().as_ref().and_then(|a| a.get(&m.file_id()).copied()) {
        return hit;
    }
    let Some(path) = mapped_file(pid, m) else {
        return false;
    };
    let Ok(answer) = elf::exports_symbol(&path, CONFIGURE_ATTACH_SYMBOL) else {
        return false;
    };
    lock()
        .get_or_insert_with(HashMap::new)
        .insert(m.file_id(), answer);
    answer
}

/// A path that opens exactly the mapped file, if there is one we may read.
fn mapped_file(pid: i32, m: &Mapping) -> Option<PathBuf> {
    let map_file = procfs::proc_dir(pid).join(format!("map_files/{:x}-{:x}", m.start, m.end));
    let in_root = procfs::in_root(pid, Path::new(m.path.as_deref()?));
    [map_file, in_root].into_iter().find(|p| {
        std::fs::File::open(p)
            .and_then(|f| f.metadata())
            .is_ok_and(|meta| meta.is_file() && same_file(&meta, m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_libraries_are_skipped_by_name() {
        for name in [
            "libc.so.6",
            "ld-linux-x86-64.so.2",
            "libstdc++.so.6.0.30",
            "libgcc_s.so.1",
        ] {
            assert!(is_system_library(name), "{name}");
        }
        for name in [
            "libmy-profiler.so",
            "libcustom.so",
            "libcrypto.so.3",
            "libamdhip64.so.6",
        ] {
            assert!(!is_system_library(name), "{name}");
        }
    }

    #[test]
    fn a_bare_name_is_compared_too_and_a_gone_process_says_so() {
        // A bare name is another string than the earlier attach's path: it is compared like
        // any other, so the maps are read, and a process that is gone is reported as gone.
        let choice = ToolChoice {
            string: "libmy-profiler.so".into(),
            warnings: Vec::new(),
            source: crate::toolpath::ToolSource::Explicit,
            notes: Vec::new(),
        };
        assert!(matches!(
            check_reattach(i32::MAX, &choice, None),
            Err(Error::ProcessGone { .. })
        ));
    }
}
