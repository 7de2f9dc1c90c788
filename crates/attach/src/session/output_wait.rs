//! Asynchronous output (`--attach-sync-output=false`): after the detach the tool writes its files
//! from a thread of its own, so the collector waits for them, bounded by `--output-timeout`.
//!
//! The wait is driven by events, never by a sleep loop: one `poll` over an inotify instance
//! watching the directories the output templates name (and those created below them), the
//! detached processes' pidfds (a tool also writes at exit, so an exit ends the wait) and, when
//! given, a stop descriptor (the front end's signal pipe). After each wake the output directory is
//! compared with the snapshot again; the wait ends once the expected files are there and
//! complete, that is:
//!
//! * every detached process whose file-name prefix is known owns at least one file (any file
//!   at all when no prefix is known);
//! * every file passes the completeness check of [`super::verify::problem`];
//! * no file is still open in a detached process (the tool has closed what it wrote);
//! * and no further file event arrives for [`SETTLE`] (a tool writing several files closes one
//!   before it opens the next).

use super::Collector;
use crate::outputs::WrittenFile;
use nix::poll::{PollFd, PollFlags};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use rocprof_engine::ptrace;
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Default bound of the wait for asynchronous output (`--output-timeout`).
pub const DEFAULT_OUTPUT_WAIT: Duration = Duration::from_secs(30);

/// How long the directory must stay quiet once the files look complete.
pub const SETTLE: Duration = Duration::from_millis(50);

/// Depth below a watched directory to which new directories are watched too.
const WATCH_DEPTH: usize = 8;

/// How the wait for asynchronous output ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputWait {
    /// Not waited: synchronous output, a zero timeout, or nothing detached.
    NotWaited,
    /// The expected files are there and complete.
    Complete,
    /// Every detached process exited (it wrote what it would write at exit).
    TargetsExited,
    /// The stop descriptor became readable (a signal).
    Stopped,
    /// The timeout passed before the files were complete.
    TimedOut,
}

/// What woke one poll of the wait.
struct Woken {
    /// A file event (inotify is readable).
    file_events: bool,
    /// Indexes in the watched processes of those that exited.
    gone: Vec<usize>,
    /// The stop descriptor is readable.
    stopped: bool,
}

/// Wait, at most `until`, for a file event, the exit of a `watched` process or the `stop`
/// descriptor; None if the poll failed.
fn poll(
    inotify: Option<&Inotify>,
    watched: &[(i32, OwnedFd)],
    stop: Option<BorrowedFd<'_>>,
    until: Duration,
) -> Option<Woken> {
    let mut set = Vec::new();
    if let Some(ino) = inotify {
        set.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
    }
    let first_pid = set.len();
    set.extend(
        watched
            .iter()
            .map(|(_, fd)| PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
    );
    let stop_at = set.len();
    if let Some(s) = stop {
        set.push(PollFd::new(s, PollFlags::POLLIN));
    }
    let t = nix::sys::time::TimeSpec::from_duration(until);
    match nix::poll::ppoll(&mut set, Some(t), None) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
        Err(e) => {
            tracing::debug!("poll failed while waiting for output: {e}");
            return None;
        }
    }
    let ready = |p: &PollFd| p.revents().is_some_and(|r| !r.is_empty());
    Some(Woken {
        file_events: inotify.is_some() && ready(&set[0]),
        gone: (0..watched.len())
            .filter(|&i| ready(&set[first_pid + i]))
            .collect(),
        stopped: stop.is_some() && ready(&set[stop_at]),
    })
}

impl Collector {
    /// Wait, at most `timeout`, until the tool of each of `pids` (the processes just detached
    /// with asynchronous output) has written its files; see the module documentation.
    pub fn await_output(
        &self,
        pids: &[i32],
        timeout: Duration,
        stop: Option<BorrowedFd<'_>>,
    ) -> OutputWait {
        if pids.is_empty() || timeout.is_zero() {
            return OutputWait::NotWaited;
        }
        let start = Instant::now();
        let deadline = start + timeout;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| tracing::debug!("inotify unavailable ({e}): waiting on pidfds only"))
            .ok();
        let mut watched: Vec<(i32, OwnedFd)> = pids
            .iter()
            .filter_map(|&p| ptrace::pidfd_open(p).ok().map(|fd| (p, fd)))
            .collect();
        let mut live: Vec<i32> = watched.iter().map(|(p, _)| *p).collect();
        let mut complete_since: Option<Instant> = None;
        let outcome = loop {
            if let Some(ino) = &inotify {
                self.watch_dirs(ino);
            }
            // The watches are in place before this look, so nothing written now is missed.
            let files = self.written();
            if self.complete(&files, pids, &live) {
                let since = *complete_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SETTLE {
                    break OutputWait::Complete;
                }
            } else {
                complete_since = None;
            }
            if watched.is_empty() && !pids.is_empty() && live.is_empty() {
                break OutputWait::TargetsExited;
            }
            let now = Instant::now();
            if now >= deadline {
                break OutputWait::TimedOut;
            }
            let mut until = deadline - now;
            if let Some(since) = complete_since {
                until = until.min(SETTLE.saturating_sub(since.elapsed()));
            }
            let Some(Woken {
                file_events,
                gone,
                stopped,
            }) = poll(inotify.as_ref(), &watched, stop, until)
            else {
                break OutputWait::TimedOut;
            };
            if file_events {
                if let Some(ino) = &inotify {
                    // Only the wake matters: the directory is looked at again above.
                    while matches!(ino.read_events(), Ok(ev) if !ev.is_empty()) {}
                }
                complete_since = None;
            }
            for i in gone.into_iter().rev() {
                let (pid, _) = watched.remove(i);
                tracing::debug!("process {pid} exited while its output was awaited");
                live.retain(|p| *p != pid);
            }
            if stopped {
                break OutputWait::Stopped;
            }
        };
        tracing::info!(
            "waited {:.1} ms for asynchronous output: {outcome:?}",
            start.elapsed().as_secs_f64() * 1e3
        );
        outcome
    }

    /// Watch the directory of every snapshot and the directories below it.
    fn watch_dirs(&self, ino: &Inotify) {
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ONLYDIR;
        for root in self.roots_now() {
            // A directory the tool has yet to create: watch the nearest one that exists.
            match root.ancestors().find(|d| d.is_dir()) {
                Some(d) if d == root => watch_tree(ino, &root, flags, 0),
                Some(d) => watch_tree(ino, d, flags, WATCH_DEPTH),
                None => {}
            }
        }
    }

    /// Whether the files look like the whole output of `pids` (see the module documentation).
    fn complete(&self, files: &[WrittenFile], pids: &[i32], live: &[i32]) -> bool {
        if files.is_empty() {
            return false;
        }
        let owners = crate::outputs::owners(files, &self.prefixes);
        let owned_by_each = self
            .prefixes
            .iter()
            .filter(|(pid, prefix)| pids.contains(pid) && prefix.is_some())
            .all(|(pid, _)| owners.contains(&Some(*pid)));
        if !owned_by_each {
            return false;
        }
        if files
            .iter()
            .any(|f| super::verify::problem(&f.host_path).is_some())
        {
            return false;
        }
        let ids: HashSet<(u64, u64)> = files
            .iter()
            .filter_map(|f| std::fs::metadata(&f.host_path).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        !live.iter().any(|&pid| holds_open(pid, &ids))
    }
}

/// Add a watch on `dir` and, to [`WATCH_DEPTH`], the directories below it (an existing watch is
/// kept: inotify merges watches of the same inode).
fn watch_tree(ino: &Inotify, dir: &Path, flags: AddWatchFlags, depth: usize) {
    if ino.add_watch(dir, flags).is_err() || depth >= WATCH_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            watch_tree(ino, &e.path(), flags, depth + 1);
        }
    }
}

/// Whether process `pid` has one of the files `ids` (device, inode) open.
fn holds_open(pid: i32, ids: &HashSet<(u64, u64)>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| ids.contains(&(m.dev(), m.ino()))))
}

/// A duration as a person writes it: `200 ms`, `30 s`, `1.5 s`.
pub fn describe(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
