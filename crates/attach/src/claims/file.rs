//! The claim files themselves: opened relative to their directory's descriptor, created
//! exclusively, locked with `flock`, read, and taken over (module docs of [`super`]).

use super::forks::Tracked;
use super::{dir, held, pid_namespace, start_time, Record};
use crate::error::{Error, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in our names")
}

pub(super) fn openat(dir: &OwnedFd, name: &str, flags: i32) -> std::io::Result<File> {
    let c = cstr(name);
    // SAFETY: a valid directory descriptor and C string; mode is used only with O_CREAT.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just opened and own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

pub(super) fn unlinkat(dir: &OwnedFd, name: &str) -> std::io::Result<()> {
    let c = cstr(name);
    // SAFETY: a valid directory descriptor and C string.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `name` in `dir` is (still) the file `file` has open.
pub(super) fn same_file(dir: &OwnedFd, name: &str, file: &File) -> bool {
    let c = cstr(name);
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, C string and stat buffer.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    r == 0
        && file
            .metadata()
            .is_ok_and(|m| m.dev() == st.st_dev && m.ino() == st.st_ino)
}

pub(super) fn try_flock(file: &File) -> bool {
    // SAFETY: a valid descriptor.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// The record in a claim file (None when empty or unreadable).
fn read_record(file: &File) -> Option<Record> {
    let mut text = String::new();
    let mut f = file;
    let _ = std::io::Seek::rewind(&mut f);
    f.take(64 * 1024).read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim_end()).ok()
}

/// How long an attach waits for the agent of a killed front end to finish that session (its
/// detach call) before it is refused.
const FINISH_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Open or create `name` and lock it: the file, and the record found in it with the uid that
/// wrote it. A lock held by someone else is [`Error::ActiveSession`], except that the agent of
/// a killed front end finishing its session is waited for (bounded by [`FINISH_WAIT`]). A file
/// another user wrote is taken over: root makes it its own, the target's owner replaces it.
// Long because: one loop over the races of open, create, lock and replace, each a few lines.
pub(super) fn lock(
    dir: &dir::Dir,
    name: &str,
    pid: i32,
) -> Result<(Tracked, Option<(Record, u32)>)> {
    let base = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    let path = dir.path.join(name);
    let shown = path.display();
    let euid = nix::unistd::geteuid().as_raw();
    let mut inherited: Option<(Record, u32)> = None;
    let deadline = std::time::Instant::now() + FINISH_WAIT;
    for _ in 0..10_000 {
        let file = match Tracked::open(|| openat(&dir.fd, name, base | libc::O_RDWR)) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                match Tracked::open(|| {
                    openat(
                        &dir.fd,
                        name,
                        base | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
                    )
                }) {
                    Ok(f) => {
                        // Readable by the target's owner (a claim of root's in their directory);
                        // the umask may have taken bits away.
                        // SAFETY: a valid descriptor.
                        unsafe { libc::fchmod(f.as_raw_fd(), 0o644) };
                        f
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                    Err(e) => return Err(Error::io(format!("creating claim file {shown}"), e)),
                }
            }
            // Root's claim in the target owner's directory: enough to lock and read it.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                Tracked::open(|| openat(&dir.fd, name, base | libc::O_RDONLY))
                    .map_err(|e| Error::io(format!("opening claim file {shown}"), e))?
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Error::io(
                    format!("claim file {shown} is a symbolic link; remove it"),
                    e,
                ))
            }
            Err(e) => return Err(Error::io(format!("opening claim file {shown}"), e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io(format!("claim file {shown}"), e))?;
        if !meta.is_file() || meta.nlink() != 1 {
            return Err(Error::io(
                format!("claim file {shown} is not a regular file with one link; remove it"),
                std::io::Error::from(std::io::ErrorKind::InvalidData),
            ));
        }
        if !try_flock(&file) {
            let found = read_record(&file);
            // The agent of a dead front end is finishing it, is about to say so, or has just
            // written its last record and not yet exited: the holder, checkable from our PID
            // namespace, is gone while its lock is still held, whatever the record's state.
            let own_ns = pid_namespace(std::process::id() as i32);
            let finishing = |r: &Record| {
                r.finishing()
                    || (r.holder_ns == Some(own_ns)
                        && start_time(r.holder_pid).ok() != Some(r.holder_start))
            };
            if found.as_ref().is_some_and(finishing) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            return Err(held(pid, found.as_ref(), meta.uid(), &path));
        }
        if !same_file(&dir.fd, name, &file) {
            // Removed (or replaced) by its holder before we locked it: start again.
            continue;
        }
        let found = read_record(&file)
            .map(|r| (r, meta.uid()))
            .or(inherited.take());
        if meta.uid() != euid {
            if euid == 0 {
                // SAFETY: a valid descriptor; root takes over the file (it is locked).
                unsafe { libc::fchown(file.as_raw_fd(), 0, 0) };
            } else {
                // Root's file in our directory: replace it by one of ours (we hold its lock).
                inherited = found;
                unlinkat(&dir.fd, name)
                    .map_err(|e| Error::io(format!("replacing claim file {shown}"), e))?;
                continue;
            }
        }
        return Ok((file, found));
    }
    Err(Error::io(
        format!("claim file {shown} keeps changing"),
        std::io::Error::from(std::io::ErrorKind::WouldBlock),
    ))
}
