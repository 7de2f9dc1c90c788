//! Readers for `/proc/PID/...` (owned by the procfs/elf work; this is the agreed interface).
//!
//! Every reader tells "process gone" ([`Error::ProcessGone`]) apart from "exists but not readable"
//! ([`Error::ProcRead`]).

use crate::error::{Error, Result};
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
    /// `NSpid:` the PID in each nested PID namespace, outermost first.
    pub ns_pid: Vec<i32>,
}

/// The AT_ENTRY auxv type.
pub const AT_ENTRY: u64 = 9;

/// Thread ids of a process (`/proc/PID/task`), in directory order.
pub fn tasks(pid: i32) -> Result<Vec<i32>> {
    let _ = pid;
    todo!()
}

/// `comm` of one thread, newline stripped.
pub fn comm(pid: i32, tid: i32) -> Result<String> {
    let _ = (pid, tid);
    todo!()
}

/// Thread ids whose comm equals `name` exactly. Threads vanishing mid-scan are skipped.
pub fn threads_named(pid: i32, name: &str) -> Result<Vec<i32>> {
    let _ = (pid, name);
    todo!()
}

/// Parsed `/proc/PID/maps`.
pub fn maps(pid: i32) -> Result<Vec<Mapping>> {
    let _ = pid;
    todo!()
}

/// Parsed `/proc/PID/auxv` as (type, value) pairs up to AT_NULL.
pub fn auxv(pid: i32) -> Result<Vec<(u64, u64)>> {
    let _ = pid;
    todo!()
}

/// The program entry point (AT_ENTRY) of a process.
pub fn at_entry(pid: i32) -> Result<u64> {
    let _ = pid;
    todo!()
}

/// Parsed `/proc/PID/status`.
pub fn status(pid: i32) -> Result<Status> {
    let _ = pid;
    todo!()
}

/// The state letter of one thread (field 3 of `/proc/PID/task/TID/stat`).
pub fn task_state(pid: i32, tid: i32) -> Result<char> {
    let _ = (pid, tid);
    todo!()
}

/// Direct children of a process: the union of `/proc/PID/task/*/children`.
pub fn children(pid: i32) -> Result<Vec<i32>> {
    let _ = pid;
    todo!()
}

/// `path` as seen inside the target's root: `/proc/PID/root/<path without leading />`.
pub fn in_root(pid: i32, path: &Path) -> PathBuf {
    let _ = (pid, path);
    todo!()
}

/// Error helper used by every reader: ENOENT/ESRCH on a /proc path means the process is gone.
pub fn classify(pid: i32, path: &Path, e: std::io::Error) -> Error {
    let _ = (pid, path, e);
    todo!()
}
