//! Readers for `/proc/PID/...`: the "read the remote process without ptrace" layer.
//!
//! Every reader tells "process gone" ([`Error::ProcessGone`]) apart from "exists but not readable"
//! ([`Error::ProcRead`]) through [`classify`]. Nothing here stops, traces or modifies the target.
//! The parsers are public (`parse_*`) so they can be tested on captured text. Paths inside a
//! target's root directory are in [`root`].

pub mod root;

pub use root::*;

use crate::error::{Error, Result};
use std::collections::{HashSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Start address (inclusive).
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// `r` permission.
    pub read: bool,
    /// `w` permission.
    pub write: bool,
    /// `x` permission.
    pub exec: bool,
    /// `s` (shared) rather than `p` (private).
    pub shared: bool,
    /// File offset of the mapping.
    pub offset: u64,
    /// Device major number.
    pub dev_major: u32,
    /// Device minor number.
    pub dev_minor: u32,
    /// Inode (0 for anonymous mappings).
    pub inode: u64,
    /// Path or pseudo-name (`[stack]`), with any " (deleted)" suffix removed.
    pub path: Option<String>,
    /// The path had a " (deleted)" suffix.
    pub deleted: bool,
}

impl Mapping {
    /// The (major, minor, inode) triple identifying the mapped file.
    pub fn file_id(&self) -> (u32, u32, u64) {
        (self.dev_major, self.dev_minor, self.inode)
    }

    /// True when `addr` lies inside `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// Selected fields of `/proc/PID/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `Name:` (comm of the thread-group leader).
    pub name: String,
    /// First letter of `State:` (R, S, D, T, t, Z, X, I).
    pub state: char,
    /// `Tgid:`.
    pub tgid: i32,
    /// `PPid:`.
    pub ppid: i32,
    /// `TracerPid:` (0 when not traced).
    pub tracer_pid: i32,
    /// `Uid:` real, effective, saved, filesystem.
    pub uid: [u32; 4],
    /// `Gid:` real, effective, saved, filesystem.
    pub gid: [u32; 4],
    /// `Groups:` supplementary group ids.
    pub groups: Vec<u32>,
    /// `NSpid:` the PID in each nested PID namespace, outermost first.
    pub ns_pid: Vec<i32>,
    /// A `VmSize:` line was present: the process has an address space, so it is not a kernel
    /// thread (kernel threads and zombies have none).
    pub has_mm: bool,
}

/// The AT_ENTRY auxv type.
pub const AT_ENTRY: u64 = 9;

/// The `PF_KTHREAD` bit of the per-task flags (field 9 of `/proc/PID/stat`).
pub const PF_KTHREAD: u64 = 0x0020_0000;

const HINT_PERMISSION: &str =
    "Run rocprof-attach as the target's owner or as root (reading another user's \
                               /proc files needs CAP_SYS_PTRACE).";
const HINT_OTHER: &str = "The process may be exiting; retry, and check that /proc is mounted (`mount -t proc proc /proc`).";
const HINT_MISSING: &str =
    "The process exists but this /proc entry is missing; the kernel may lack the \
                            feature (e.g. CONFIG_PROC_CHILDREN) or the thread just exited.";

/// `/proc/PID`.
pub fn proc_dir(pid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}"))
}

/// Error helper used by every reader: ENOENT/ESRCH on a /proc path means the process is gone.
///
/// ENOENT on a file below `/proc/PID` while `/proc/PID` itself still exists is reported as
/// [`Error::ProcRead`] (the entry is missing, not the process).
pub fn classify(pid: i32, path: &Path, e: io::Error) -> Error {
    let gone = match e.raw_os_error() {
        Some(libc::ESRCH) => true,
        Some(libc::ENOENT) => !proc_dir(pid).exists(),
        _ => e.kind() == io::ErrorKind::NotFound && !proc_dir(pid).exists(),
    };
    if gone {
        return Error::ProcessGone { pid };
    }
    let hint = match e.kind() {
        io::ErrorKind::PermissionDenied => HINT_PERMISSION,
        io::ErrorKind::NotFound => HINT_MISSING,
        _ => HINT_OTHER,
    };
    Error::ProcRead {
        path: path.to_path_buf(),
        source: e,
        hint,
    }
}

fn parse_error(path: &Path, what: impl Into<String>) -> Error {
    Error::ProcParse {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Read a whole `/proc` file: no `stat` first (their size is 0 anyway) and a 4 KiB first read
/// that doubles, so a small file is one `read` and a large `maps` a handful.
fn read_bytes(pid: i32, path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| classify(pid, path, e))?;
    // Read into capacity that is not zeroed first (zeroing a buffer per file cost more than
    // the read): `Take` gives no size hint, so no `statx` and `lseek` of the file either.
    let mut buf = Vec::with_capacity(4096);
    std::io::Read::take(&file, u64::MAX)
        .read_to_end(&mut buf)
        .map_err(|e| classify(pid, path, e))?;
    Ok(buf)
}

fn read_text(pid: i32, path: &Path) -> Result<String> {
    // Valid UTF-8 (nearly always) is taken as is, without a second copy.
    Ok(String::from_utf8(read_bytes(pid, path)?)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// True for errors that mean "this thread/child vanished while we looked" (skip it).
fn vanished(e: &Error) -> bool {
    match e {
        Error::ProcessGone { .. } => true,
        Error::ProcRead { source, .. } => {
            matches!(
                source.raw_os_error(),
                Some(libc::ENOENT) | Some(libc::ESRCH)
            )
        }
        _ => false,
    }
}

fn numeric_entries(dir: &Path) -> io::Result<Vec<i32>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        if let Some(n) = entry?
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        {
            out.push(n);
        }
    }
    Ok(out)
}

/// Thread ids of a process (`/proc/PID/task`), in directory order.
pub fn tasks(pid: i32) -> Result<Vec<i32>> {
    let dir = proc_dir(pid).join("task");
    numeric_entries(&dir).map_err(|e| classify(pid, &dir, e))
}

/// `comm` of one thread, newline stripped.
pub fn comm(pid: i32, tid: i32) -> Result<String> {
    let path = proc_dir(pid).join(format!("task/{tid}/comm"));
    let text = read_text(pid, &path)?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// Thread ids whose comm equals `name` exactly. Threads vanishing mid-scan are skipped.
///
/// Returns [`Error::ProcessGone`] when the whole process disappeared during the scan and nothing
/// matched.
pub fn threads_named(pid: i32, name: &str) -> Result<Vec<i32>> {
    let mut found = Vec::new();
    for tid in tasks(pid)? {
        match comm(pid, tid) {
            Ok(c) if c == name => found.push(tid),
            Ok(_) => {}
            Err(e) if vanished(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if found.is_empty() && !proc_dir(pid).exists() {
        return Err(Error::ProcessGone { pid });
    }
    Ok(found)
}

/// The system call thread `tid` of `pid` is blocked in (`/proc/PID/task/TID/syscall`): Some(nr)
/// while it waits in one, None while it runs (or is between system calls). Reading it needs the
/// same permission as ptrace.
pub fn task_syscall(pid: i32, tid: i32) -> Result<Option<u64>> {
    let path = proc_dir(pid).join(format!("task/{tid}/syscall"));
    let text = std::fs::read_to_string(&path).map_err(|e| classify(pid, &path, e))?;
    Ok(parse_syscall(&text))
}

/// The number at the start of a `/proc/PID/task/TID/syscall` line ("running" and "-1 ...": None).
pub fn parse_syscall(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse::<u64>().ok()
}

/// Parsed `/proc/PID/maps`.
pub fn maps(pid: i32) -> Result<Vec<Mapping>> {
    let path = proc_dir(pid).join("maps");
    let text = read_text(pid, &path)?;
    parse_maps(&text, &path)
}

/// Parse the text of a maps file; `path` is only used in error messages.
pub fn parse_maps(text: &str, path: &Path) -> Result<Vec<Mapping>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            parse_maps_line(l).ok_or_else(|| parse_error(path, format!("bad maps line '{l}'")))
        })
        .collect()
}

/// Split off the next whitespace-delimited field, returning (field, rest).
fn next_field(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start_matches(' ');
    if s.is_empty() {
        return None;
    }
    match s.find(' ') {
        Some(i) => Some((&s[..i], &s[i + 1..])),
        None => Some((s, "")),
    }
}

/// Parse one maps line: `start-end perms offset major:minor inode [path]`.
pub fn parse_maps_line(line: &str) -> Option<Mapping> {
    let (range, rest) = next_field(line)?;
    let (perms, rest) = next_field(rest)?;
    let (offset, rest) = next_field(rest)?;
    let (dev, rest) = next_field(rest)?;
    let (inode, rest) = next_field(rest)?;
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let perms = perms.as_bytes();
    if perms.len() < 4 {
        return None;
    }
    let (path, deleted) = split_deleted(rest.trim_start_matches(' '));
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        read: perms[0] == b'r',
        write: perms[1] == b'w',
        exec: perms[2] == b'x',
        shared: perms[3] == b's',
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev_major: u32::from_str_radix(major, 16).ok()?,
        dev_minor: u32::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
        deleted,
    })
}

fn split_deleted(path: &str) -> (Option<String>, bool) {
    if path.is_empty() {
        return (None, false);
    }
    match path.strip_suffix(" (deleted)") {
        Some(p) => (Some(p.to_string()), true),
        None => (Some(path.to_string()), false),
    }
}

/// Parsed `/proc/PID/auxv` as (type, value) pairs up to AT_NULL.
pub fn auxv(pid: i32) -> Result<Vec<(u64, u64)>> {
    let path = proc_dir(pid).join("auxv");
    let bytes = read_bytes(pid, &path)?;
    Ok(parse_auxv(&bytes))
}

/// Parse native-endian 16-byte auxv records up to (not including) AT_NULL.
pub fn parse_auxv(bytes: &[u8]) -> Vec<(u64, u64)> {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        u64::from_ne_bytes(w)
    };
    bytes
        .chunks_exact(16)
        .map(|rec| (word(&rec[..8]), word(&rec[8..])))
        .take_while(|&(t, _)| t != 0)
        .collect()
}

/// The program entry point (AT_ENTRY) of a process.
pub fn at_entry(pid: i32) -> Result<u64> {
    auxv(pid)?
        .into_iter()
        .find(|&(t, _)| t == AT_ENTRY)
        .map(|(_, v)| v)
        .ok_or_else(|| {
            parse_error(
                &proc_dir(pid).join("auxv"),
                "no AT_ENTRY record (the process may be a zombie or a kernel thread)",
            )
        })
}

/// The signals process `pid` catches or ignores: `SigCgt | SigIgn` of `/proc/PID/status`.
pub fn handled_signals(pid: i32) -> Result<u64> {
    let path = proc_dir(pid).join("status");
    Ok(parse_handled_signals(&read_text(pid, &path)?))
}

/// `SigCgt | SigIgn` of the text of a status file (an unreadable mask counts as empty).
pub fn parse_handled_signals(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("SigCgt:")
                .or_else(|| l.strip_prefix("SigIgn:"))
        })
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap_or(0))
        .fold(0, |a, b| a | b)
}

/// Parsed `/proc/PID/status`.
pub fn status(pid: i32) -> Result<Status> {
    let path = proc_dir(pid).join("status");
    let text = read_text(pid, &path)?;
    parse_status(&text, &path)
}

/// Parsed `/proc/PID/task/TID/status` (per-thread state and TracerPid).
pub fn task_status(pid: i32, tid: i32) -> Result<Status> {
    let path = proc_dir(pid).join(format!("task/{tid}/status"));
    let text = read_text(pid, &path)?;
    parse_status(&text, &path)
}

/// Parse the text of a status file; `path` is only used in error messages.
pub fn parse_status(text: &str, path: &Path) -> Result<Status> {
    let mut st = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Name" => st.name = value.to_string(),
            "State" => st.state = value.chars().next().unwrap_or('?'),
            "Tgid" => st.tgid = parse_num(value, path, key)?,
            "PPid" => st.ppid = parse_num(value, path, key)?,
            "TracerPid" => st.tracer_pid = parse_num(value, path, key)?,
            "Uid" => st.uid = parse_uids(value, path)?,
            "Gid" => st.gid = parse_uids(value, path)?,
            "Groups" => st.groups = parse_list(value, path, key)?,
            "NSpid" => st.ns_pid = parse_list(value, path, key)?,
            "VmSize" => {
                st.has_mm = true;
                // Every line read here comes before it (the kernel writes the task's ids, then
                // its memory): the ~40 lines after it are not looked at.
                break;
            }
            _ => {}
        }
    }
    if st.state == '\0' {
        return Err(parse_error(path, "no State: line"));
    }
    Ok(st)
}

fn parse_num<T: std::str::FromStr>(value: &str, path: &Path, key: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| parse_error(path, format!("bad {key}: value '{value}'")))
}

fn parse_list<T: std::str::FromStr>(value: &str, path: &Path, key: &str) -> Result<Vec<T>> {
    value
        .split_whitespace()
        .map(|v| parse_num(v, path, key))
        .collect()
}

fn parse_uids(value: &str, path: &Path) -> Result<[u32; 4]> {
    let v: Vec<u32> = parse_list(value, path, "Uid")?;
    v.try_into()
        .map_err(|_| parse_error(path, format!("Uid: needs four values, got '{value}'")))
}

/// Fields of a `stat` line after the `(comm)` field, starting with the state (field 3).
///
/// The comm may contain spaces and parentheses, so everything up to the last ')' is skipped.
pub fn stat_fields_after_comm(text: &str) -> Option<Vec<&str>> {
    let close = text.rfind(')')?;
    Some(text[close + 1..].split_whitespace().collect())
}

fn stat_fields(pid: i32, path: &Path) -> Result<Vec<String>> {
    let text = read_text(pid, path)?;
    let fields =
        stat_fields_after_comm(&text).ok_or_else(|| parse_error(path, "no ')' after comm"))?;
    if fields.len() < 7 {
        return Err(parse_error(path, "too few fields"));
    }
    Ok(fields.into_iter().map(str::to_string).collect())
}

/// The state letter of one thread (field 3 of `/proc/PID/task/TID/stat`).
pub fn task_state(pid: i32, tid: i32) -> Result<char> {
    let path = proc_dir(pid).join(format!("task/{tid}/stat"));
    let fields = stat_fields(pid, &path)?;
    fields[0]
        .chars()
        .next()
        .ok_or_else(|| parse_error(&path, "empty state field"))
}

/// The name (comm) and state letter of one thread, from one read of `/proc/PID/task/TID/stat`.
pub fn task_comm_state(pid: i32, tid: i32) -> Result<(String, char)> {
    let path = proc_dir(pid).join(format!("task/{tid}/stat"));
    parse_comm_state(&read_text(pid, &path)?, &path)
}

/// The comm (between the first '(' and the last ')') and the state letter after it, from the
/// text of a `stat` file; `path` is only used in error messages.
pub fn parse_comm_state(text: &str, path: &Path) -> Result<(String, char)> {
    let (open, close) = text
        .find('(')
        .zip(text.rfind(')'))
        .filter(|(o, c)| o < c)
        .ok_or_else(|| parse_error(path, "no (comm)"))?;
    let state = text[close + 1..]
        .split_whitespace()
        .next()
        .and_then(|s| s.chars().next())
        .ok_or_else(|| parse_error(path, "no state field"))?;
    Ok((text[open + 1..close].to_string(), state))
}

/// The CPU a thread last ran on (field 39 of `/proc/PID/task/TID/stat`).
pub fn task_cpu(pid: i32, tid: i32) -> Result<usize> {
    let path = proc_dir(pid).join(format!("task/{tid}/stat"));
    let fields = stat_fields(pid, &path)?;
    let cpu = fields
        .get(36)
        .ok_or_else(|| parse_error(&path, "no processor field"))?;
    parse_num(cpu, &path, "processor")
}

/// True for kernel threads (`PF_KTHREAD` in field 9 of `/proc/PID/stat`).
pub fn is_kernel_thread(pid: i32) -> Result<bool> {
    let path = proc_dir(pid).join("stat");
    let fields = stat_fields(pid, &path)?;
    let flags: u64 = parse_num(&fields[6], &path, "flags")?;
    Ok(flags & PF_KTHREAD != 0)
}

/// Direct children of a process: the union of `/proc/PID/task/*/children`.
pub fn children(pid: i32) -> Result<Vec<i32>> {
    let mut out: Vec<i32> = Vec::new();
    for tid in tasks(pid)? {
        let path = proc_dir(pid).join(format!("task/{tid}/children"));
        let text = match read_text(pid, &path) {
            Ok(t) => t,
            Err(e) if vanished(&e) && proc_dir(pid).join(format!("task/{tid}")).exists() => {
                return Err(e)
            }
            Err(e) if vanished(&e) => continue,
            Err(e) => return Err(e),
        };
        for child in parse_children(&text, &path)? {
            if !out.contains(&child) {
                out.push(child);
            }
        }
    }
    Ok(out)
}

/// Parse the text of one `task/TID/children` file (space-separated PIDs); `path` is only used in
/// error messages.
pub fn parse_children(text: &str, path: &Path) -> Result<Vec<i32>> {
    parse_list(text, path, "children")
}

/// Breadth-first snapshot of all descendants of `pid` (root excluded),
/// docs/protocol.md section 5.11.
///
/// Processes that exit during the walk are skipped; processes created later are not included.
pub fn descendants(pid: i32) -> Result<Vec<i32>> {
    let mut seen: HashSet<i32> = HashSet::from([pid]);
    let mut queue: VecDeque<i32> = VecDeque::from([pid]);
    let mut out = Vec::new();
    while let Some(p) = queue.pop_front() {
        let kids = match children(p) {
            Ok(k) => k,
            Err(Error::ProcessGone { .. }) if p != pid => continue,
            Err(e) => return Err(e),
        };
        for kid in kids {
            if seen.insert(kid) {
                out.push(kid);
                queue.push_back(kid);
            }
        }
    }
    Ok(out)
}

fn split_nul(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Command-line arguments (`/proc/PID/cmdline`); empty for kernel threads and zombies.
pub fn cmdline(pid: i32) -> Result<Vec<String>> {
    let path = proc_dir(pid).join("cmdline");
    Ok(split_nul(&read_bytes(pid, &path)?))
}

/// Environment of a process at exec time (`/proc/PID/environ`) as (name, value) pairs, in order.
///
/// Entries without '=' are kept with an empty value. Reading another user's environ needs root.
pub fn environ(pid: i32) -> Result<Vec<(String, String)>> {
    let path = proc_dir(pid).join("environ");
    Ok(parse_environ(&read_bytes(pid, &path)?))
}

/// Parse NUL-separated `NAME=value` entries.
pub fn parse_environ(bytes: &[u8]) -> Vec<(String, String)> {
    split_nul(bytes)
        .into_iter()
        .map(|e| match e.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => (e, String::new()),
        })
        .collect()
}

/// All process ids in `/proc`, ascending.
pub fn list_pids() -> Result<Vec<i32>> {
    let mut pids =
        numeric_entries(Path::new("/proc")).map_err(|e| Error::io("listing /proc", e))?;
    pids.sort_unstable();
    Ok(pids)
}
