//! One session per target, across users and front ends (the CLI, the rocattach C ABI and the
//! Python module that uses it).
//!
//! A session claims each target before any ptrace: one file per target, named
//! `NS-PID-START.claim` after the inode of the target's PID namespace, its PID and its start time
//! (field 22 of `/proc/PID/stat`), so a reused PID is another file, and so are processes of the
//! same PID and start time in two PID namespaces (two containers' ranks started together). A
//! thread id is mapped to its process first ([`crate::targets::process_of`]): one process, one
//! lock. The holder keeps an exclusive `flock` on the file for as long as the session may be
//! active and writes a [`Record`] into it: who holds it (front end, pid and start time, uid,
//! command), since when, where the session is ([`State`]) and where its output goes.
//!
//! **Where.** The file lives in the claims directory of the target's owner (its effective uid),
//! a directory only that user and root can write or even enter ([`dir`]): root's targets in
//! `/run/rocprof-attach/claims` (root, 0700), uid N's in `/tmp/rocprof-attach-N` (uid N, 0700).
//! Everyone who may attach a process (its owner, or root) therefore finds its lock in the same
//! place: root attaching a user's process and that user attaching it at the same moment lock
//! the same file, and one of them is refused. Nobody else can create, open, lock or rewrite
//! it, so no other unprivileged user can block an attach or forge a record; the holder shown
//! is the file's owner, which only root can change. Claim files are mode 0644: the target's
//! owner may open a claim root created in their directory read-only, which is enough to lock it
//! and read it; to take over a stale one of root's they replace it (the directory is theirs).
//! Root takes over a claim of the user's by changing its owner to root.
//!
//! * A lock that cannot be taken means a live front end (or the agent finishing a session whose
//!   front end died) holds the target: the new session is refused with who, since when, and the
//!   lock file ([`Error::ActiveSession`], exit code 4, rocattach status 2).
//! * A lock that can be taken means the holder is gone (the kernel drops a dead process's
//!   locks). If its record says nothing was active ([`State::Claimed`]) the claim was stale and is
//!   taken over. If the profiler may still be active (a failed detach is [`State::Stranded`]; a
//!   front end and its agent both killed during the window leave [`State::Attached`]) a new
//!   attach is refused with the fix, `rocprof-attach --detach -p PID`, which takes such a claim
//!   ([`Purpose::Finish`]), detaches, and removes it.
//!
//! Files are opened relative to the directory's descriptor with `O_NOFOLLOW` (created with
//! `O_EXCL`) and must be regular files with one link. A claim removed while another front end
//! waited on its lock is noticed (the name no longer leads to the locked inode) and taken again.
//! Each claim file's descriptor is `O_CLOEXEC` and known to [`forks`], whose `pthread_atfork`
//! handlers (registered by the rocattach library) keep a fork of the holder from holding its locks.

pub mod dir;
mod file;
pub mod forks;
mod record;

use file::{lock, openat, same_file, try_flock, unlinkat};

pub use record::{now, printable, utc, Record, State};

use crate::error::{Error, Result};
use rocprof_engine::procfs;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

pub use dir::{dir_for_uid, ROOT_CLAIMS_DIR};

/// Claim files are padded to this size, so a rewrite is one write of the same length.
pub const RECORD_SIZE: usize = 4096;

/// Why a claim is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// To attach: refused while anyone holds the target or a session is left active in it.
    Attach,
    /// To finish a session left active (`--detach`): refused while a live front end holds it,
    /// and when no session is recorded.
    Finish,
}

/// Who claims: the front end and where its output goes.
#[derive(Debug, Clone)]
pub struct Holder {
    /// `rocprof-attach` or `the rocattach library`.
    pub front_end: String,
    /// Output directory and file name template.
    pub output: Option<String>,
    /// Whether the tool writes its output before the detach call returns.
    pub sync_output: Option<bool>,
    /// The output directory and the file name template, apart (recorded for `--detach`).
    pub output_parts: Option<(String, String)>,
}

/// A claim on one target, locked by this process. Dropping it removes the file when nothing is
/// active in the target ([`State::Claimed`]) and leaves it, as the record of an active session,
/// otherwise.
#[derive(Debug)]
pub struct Claim {
    file: forks::Tracked,
    dir: dir::Dir,
    name: String,
    record: Record,
    /// The record of the session this claim took over ([`Purpose::Finish`]).
    previous: Option<Record>,
}

impl Claim {
    /// Claim target `pid` for `purpose`.
    pub fn acquire(pid: i32, holder: &Holder, purpose: Purpose) -> Result<Claim> {
        let target_start = start_time(pid)?;
        let owner_uid = target_uid(pid)?;
        let dir = dir::open(owner_uid).map_err(|e| closed(pid, owner_uid, e))?;
        sweep(&dir, pid);
        let name = format!("{}-{pid}-{target_start}.claim", pid_namespace(pid));
        let (file, found) = lock(&dir, &name, pid)?;
        let found = found.filter(|(r, _)| r.target_pid == pid && r.target_start == target_start);
        let owner = found.as_ref().map_or(0, |(_, o)| *o);
        let found = found.map(|(r, _)| r);
        check_purpose(pid, purpose, found.as_ref(), owner, &dir.path.join(&name))?;
        let previous = if purpose == Purpose::Finish {
            found
        } else {
            None
        };
        let record = new_record(pid, target_start, holder, purpose, previous.as_ref());
        let claim = Claim {
            file,
            dir,
            name,
            record,
            previous,
        };
        claim.write()?;
        Ok(claim)
    }

    /// The target's PID.
    pub fn pid(&self) -> i32 {
        self.record.target_pid
    }

    /// The record of the session this claim took over ([`Purpose::Finish`]).
    pub fn previous(&self) -> Option<&Record> {
        self.previous.as_ref()
    }

    /// This claim's record.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The claim file's path.
    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path.join(&self.name)
    }

    /// The locked claim file (the agent that finishes a session whose front end died keeps a
    /// copy of its descriptor, and with it the lock: [`crate::session::will`]).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The record as it would be once the session ended (state `Claimed`), or stranded with
    /// `note`: the bytes written into the claim file before their padding to [`RECORD_SIZE`]
    /// (the agent that writes them pads them: they travel to it a tenth of the size).
    pub fn encoded_as(&self, state: State, note: Option<&str>) -> Vec<u8> {
        let mut r = self.record.clone();
        r.state = state;
        r.changed = now();
        r.note = note.map(str::to_string);
        record_json(&r)
    }

    /// Record a new state (best effort: a claim that cannot be rewritten still locks).
    pub fn set(&mut self, state: State) {
        if self.record.state == state {
            return;
        }
        self.record.state = state;
        self.record.changed = now();
        if let Err(e) = self.write() {
            tracing::warn!("process {}: cannot update its claim: {e}", self.pid());
        }
    }

    /// The detach failed: leave the record of an active session, with why.
    pub fn strand(&mut self, note: &str) {
        self.record.note = Some(note.to_string());
        self.set(State::Stranded);
    }

    fn write(&self) -> Result<()> {
        let text = encode_record(&self.record);
        self.file
            .write_all_at(&text, 0)
            .and_then(|_| self.file.set_len(text.len() as u64))
            .map_err(|e| Error::io(format!("writing claim file {}", self.path().display()), e))
    }
}

/// A record as written into a claim file: JSON padded with spaces to 4 KiB, so a
/// rewrite is one write of the same length.
pub fn encode_record(r: &Record) -> Vec<u8> {
    let mut text = record_json(r);
    let len = text.len().max(RECORD_SIZE);
    text.resize(len, b' ');
    text
}

/// A record as JSON, before the padding of [`encode_record`].
pub fn record_json(r: &Record) -> Vec<u8> {
    serde_json::to_vec(r).unwrap_or_default()
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.record.state.active() {
            return;
        }
        // Still our file (nobody removed and recreated it): remove it while locked.
        if same_file(&self.dir.fd, &self.name, &self.file) {
            let _ = unlinkat(&self.dir.fd, &self.name);
        }
    }
}

/// The claims of one session, by PID (an attach and its detach may run in different calls).
#[derive(Debug, Default)]
pub struct Claims {
    held: Mutex<HashMap<i32, Claim>>,
}

impl Claims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Claim>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `claim`.
    pub fn insert(&self, claim: Claim) {
        self.lock().insert(claim.pid(), claim);
    }

    /// Record a state for `pid`'s claim, if it has one.
    pub fn set(&self, pid: i32, state: State) {
        if let Some(c) = self.lock().get_mut(&pid) {
            c.set(state);
        }
    }

    /// `pid`'s detach failed: leave the record of an active session.
    pub fn strand(&self, pid: i32, note: &str) {
        if let Some(c) = self.lock().get_mut(&pid) {
            c.strand(note);
        }
    }

    /// Take `pid`'s claim out (to keep it elsewhere).
    pub fn take(&self, pid: i32) -> Option<Claim> {
        self.lock().remove(&pid)
    }

    /// Drop `pid`'s claim (removed when nothing is active).
    pub fn release(&self, pid: i32) {
        drop(self.take(pid));
    }

    /// Run `f` on `pid`'s claim, if it has one.
    pub fn with<R>(&self, pid: i32, f: impl FnOnce(&Claim) -> R) -> Option<R> {
        self.lock().get(&pid).map(f)
    }

    /// Whether `pid` is claimed here.
    pub fn holds(&self, pid: i32) -> bool {
        self.lock().contains_key(&pid)
    }
}

/// A claims directory we may not use because it is another user's: [`Error::ClaimsClosed`]
/// (whoever may not use it may not ptrace that user's processes either, short of
/// `CAP_SYS_PTRACE`); any other error as it is.
fn closed(pid: i32, owner: u32, e: Error) -> Error {
    let euid = nix::unistd::geteuid().as_raw();
    match e {
        Error::Io { source, context }
            if source.kind() == std::io::ErrorKind::PermissionDenied && euid != owner && euid != 0 =>
        {
            Error::ClaimsClosed {
                pid,
                message: format!(
                    "process {pid} belongs to uid {owner}, and rocprof-attach runs as uid {euid}: the lock that \
                     keeps one session per process lives in {}, which only uid {owner} and root may use \
                     ({context}). Fix: run rocprof-attach as uid {owner} or as root",
                    dir::dir_for_uid(owner).display()
                ),
            }
        }
        e => e,
    }
}

/// Whether `e` says the target's owner's claims directory is closed to us while ptrace of the
/// target is refused anyway: the preflight then reports the permission problem in its own words
/// (and touches nothing), so a front end goes on to it without a claim.
pub fn closed_and_untraceable(e: &Error) -> bool {
    matches!(e, Error::ClaimsClosed { pid, .. } if crate::preflight::ptrace_refusal(*pid).is_some())
}

/// The refusal for a target whose session was left active.
fn stranded(pid: i32, r: &Record, owner: u32, path: &std::path::Path) -> Error {
    Error::ActiveSession {
        pid,
        message: format!(
            "process {pid} has an active profiling session left by {} {}: {}, so the profiler may still be \
             active in it and {} (lock file {}). A new attach would take that session over and its output \
             would never appear. Fix: run `rocprof-attach --detach -p {pid}` first",
            r.holder(owner),
            r.since(),
            r.why_left(),
            r.output_clause(),
            path.display()
        ),
    }
}

/// The refusal for a target a live front end holds.
fn held(pid: i32, r: Option<&Record>, owner: u32, path: &std::path::Path) -> Error {
    let path = path.display();
    let message = match r {
        Some(r) if r.finishing() => format!(
            "process {pid} already has an active profiling session: its front end {} was killed {} and the \
             agent it left is finishing that session ({}); {}; lock file {path}. One session per process: \
             wait a moment for it to end",
            r.holder(owner),
            r.since(),
            r.doing(),
            r.output_clause(),
        ),
        Some(r) => format!(
            "process {pid} already has an active profiling session: {} holds it {}, {}; {}; lock file \
             {path}. One session per process: wait for it to end, or end it ({})",
            r.holder(owner),
            r.since(),
            r.doing(),
            r.output_clause(),
            if r.front_end == crate::claims::FRONT_END_CLI {
                format!("Enter or Ctrl-C in its terminal, or `kill -INT {}`", r.holder_pid)
            } else {
                format!("rocattach_detach({pid}) in that process")
            }
        ),
        None => format!(
            "process {pid} already has an active profiling session: a front end of uid {owner} holds \
             the lock file {path} (its record is being written or unreadable). One session per process: wait \
             for it to end"
        ),
    };
    Error::ActiveSession { pid, message }
}

/// The command-line front end's name in records.
pub const FRONT_END_CLI: &str = "rocprof-attach";
/// The C ABI's name in records.
pub const FRONT_END_LIBRARY: &str = "the rocattach library";

/// The inode of the PID namespace `pid` lives in (0 when it cannot be read).
fn pid_namespace(pid: i32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(procfs::proc_dir(pid).join("ns/pid")).map_or(0, |m| m.ino())
}

/// The owner of process `pid` (its effective uid): whose claims directory holds its claim.
fn target_uid(pid: i32) -> Result<u32> {
    match procfs::status(pid) {
        Ok(st) => Ok(st.uid[1]),
        Err(rocprof_engine::Error::ProcessGone { .. }) => Err(Error::ProcessGone { pid }),
        Err(e) => Err(e.into()),
    }
}

/// Field 22 of `/proc/PID/stat`: the start time, which tells a reused PID apart.
pub fn start_time(pid: i32) -> Result<u64> {
    let path = procfs::proc_dir(pid).join("stat");
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ProcessGone { pid },
        _ => Error::io(format!("reading {}", path.display()), e),
    })?;
    procfs::stat_fields_after_comm(&text)
        .and_then(|f| f.get(19).and_then(|s| s.parse().ok()))
        .ok_or_else(|| {
            Error::io(
                format!("parsing {}", path.display()),
                std::io::Error::other("no field 22"),
            )
        })
}

/// Our command line, shortened.
fn own_command() -> String {
    let args = procfs::cmdline(std::process::id() as i32).unwrap_or_default();
    printable(&args.join(" "), 200)
}

/// Remove claims nobody holds whose target is gone (or is another process now), so the
/// directory does not grow. Best effort; only other users' files we may not remove stay.
fn sweep(claims: &dir::Dir, except: i32) {
    let dir = &claims.fd;
    let Ok(entries) = std::fs::read_dir(&claims.path) else {
        return;
    };
    let own_ns = pid_namespace(std::process::id() as i32);
    for entry in entries.flatten().take(4096) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((ns, pid, start)) = name.strip_suffix(".claim").and_then(|k| {
            let mut it = k.splitn(3, '-');
            Some((
                it.next()?.parse::<u64>().ok()?,
                it.next()?.parse::<i32>().ok()?,
                it.next()?.parse::<u64>().ok()?,
            ))
        }) else {
            continue;
        };
        // Only claims of our own PID namespace can be judged from here: another namespace's PID
        // means another process (or none) in ours.
        if ns != own_ns || pid == except || start_time(pid).is_ok_and(|s| s == start) {
            continue;
        }
        let base = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_RDONLY;
        if let Ok(f) = openat(dir, name, base) {
            if f.metadata().is_ok_and(|m| m.is_file()) && try_flock(&f) && same_file(dir, name, &f)
            {
                tracing::debug!("removing the claim of process {pid}, which is gone");
                let _ = unlinkat(dir, name);
            }
        }
    }
}

/// Refuse a claim that does not fit what is recorded for the target: an attach while a session
/// is active, a finish when none is; a stale record an attach replaces is logged.
fn check_purpose(
    pid: i32,
    purpose: Purpose,
    found: Option<&Record>,
    owner: u32,
    path: &std::path::Path,
) -> Result<()> {
    // A CUDA session whose front end is gone ended by itself: the tool detaches when its
    // connection closes (docs/cuda.md). Only a failed detach leaves one to finish.
    let ended_by_itself =
        |r: &Record| r.state != State::Stranded && crate::cuda::detaches_by_itself(pid);
    let active = found.filter(|r| r.state.active() && !ended_by_itself(r));
    match (purpose, active) {
        (Purpose::Attach, Some(r)) => return Err(stranded(pid, r, owner, path)),
        (Purpose::Finish, None) => {
            return Err(Error::ActiveSession {
                pid,
                message: format!(
                    "no active session is recorded for process {pid}, so there is nothing to detach \
                     (`rocprof-attach --detach` finishes a session whose detach failed, exit code 11, or \
                     whose front end was killed during its profiling window)"
                ),
            })
        }
        _ => {}
    }
    if let (Purpose::Attach, Some(r)) = (purpose, found) {
        tracing::info!(
            "process {pid}: cleared a stale claim of {} {}",
            r.holder(owner),
            r.since()
        );
    }
    Ok(())
}

/// The record of a new claim on `pid` by this process; a finish takes over the output settings of
/// the `previous` session.
fn new_record(
    pid: i32,
    target_start: u64,
    holder: &Holder,
    purpose: Purpose,
    previous: Option<&Record>,
) -> Record {
    let now = now();
    Record {
        version: 1,
        target_pid: pid,
        target_start,
        front_end: holder.front_end.clone(),
        holder_pid: std::process::id() as i32,
        holder_start: start_time(std::process::id() as i32).unwrap_or(0),
        holder_ns: Some(pid_namespace(std::process::id() as i32)),
        uid: nix::unistd::getuid().as_raw(),
        command: own_command(),
        since: now,
        changed: now,
        state: if purpose == Purpose::Finish {
            State::Detaching
        } else {
            State::Claimed
        },
        output: previous
            .and_then(|p| p.output.clone())
            .or_else(|| holder.output.clone()),
        sync_output: previous.and_then(|p| p.sync_output).or(holder.sync_output),
        output_dir: previous
            .and_then(|p| p.output_dir.clone())
            .or_else(|| holder.output_parts.as_ref().map(|p| p.0.clone())),
        output_file: previous
            .and_then(|p| p.output_file.clone())
            .or_else(|| holder.output_parts.as_ref().map(|p| p.1.clone())),
        note: None,
        finishing_by: None,
    }
}
