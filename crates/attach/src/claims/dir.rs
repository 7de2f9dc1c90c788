//! Where the claims of a target live: a directory that only the target's owner and root can
//! write (module docs of [`super`]).
//!
//! * Targets owned by root: [`ROOT_CLAIMS_DIR`] (`/run/rocprof-attach/claims`, root, mode
//!   0700, under a root-owned 0755 `/run/rocprof-attach`). Nobody else may create, open or lock
//!   a file there.
//! * Targets owned by uid N (not root): `/tmp/rocprof-attach-N` ([`dir_for_uid`]), a directory
//!   owned by uid N with mode 0700. The first session that needs it creates it: the user's own,
//!   or root's (which hands it to uid N before anything is put in it). Only uid N and root can
//!   enter it, so nobody else can create, lock or rewrite a claim in it.
//!
//! A directory of that name that another user made (`/tmp` is writable by everyone) is not
//! trusted: root moves it aside (to `NAME.untrusted-TIME-PID`) and makes its own, so another user
//! cannot block root's sessions; uid N is told to have it removed.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The parent of root's claims directory (root, mode 0755).
pub const RUN_DIR: &str = "/run/rocprof-attach";
/// The claims of targets owned by root.
pub const ROOT_CLAIMS_DIR: &str = "/run/rocprof-attach/claims";

/// The claims directory for targets owned by `uid`.
pub fn dir_for_uid(uid: u32) -> PathBuf {
    if uid == 0 {
        PathBuf::from(ROOT_CLAIMS_DIR)
    } else {
        PathBuf::from(format!("/tmp/rocprof-attach-{uid}"))
    }
}

/// An open claims directory.
#[derive(Debug)]
pub struct Dir {
    /// The directory's descriptor: claim files are opened relative to it.
    pub fd: OwnedFd,
    /// Its path (for messages and listing).
    pub path: PathBuf,
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in our paths")
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Open the claims directory of targets owned by `uid`, creating it when missing.
pub fn open(uid: u32) -> Result<Dir> {
    let path = dir_for_uid(uid);
    if uid == 0 {
        ensure(Path::new(RUN_DIR), 0, 0o755)?;
    }
    for _ in 0..3 {
        ensure(&path, uid, 0o700)?;
        let fd = open_nofollow(&path)?;
        let meta = File::from(
            fd.try_clone()
                .map_err(|e| Error::io("claims directory", e))?,
        )
        .metadata()
        .map_err(|e| Error::io(format!("claims directory {}", path.display()), e))?;
        if meta.uid() == uid && meta.mode() & 0o077 == 0 {
            return Ok(Dir { fd, path });
        }
        if meta.uid() == uid && (euid() == uid || euid() == 0) {
            // Its owner loosened the mode: tighten it again (nobody else could have).
            // SAFETY: a valid descriptor.
            unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) };
            return Ok(Dir { fd, path });
        }
        untrusted(&path, &meta, uid)?;
    }
    Err(Error::io(
        format!("claims directory {} keeps changing", path.display()),
        std::io::Error::from(std::io::ErrorKind::WouldBlock),
    ))
}

/// Create `path` (owned by `uid`, with `mode`) unless it exists.
fn ensure(path: &Path, uid: u32, mode: u32) -> Result<()> {
    let c = cstr(path);
    // SAFETY: a valid C string; mkdir has no other effect.
    if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EEXIST) => Ok(()),
            Some(libc::EACCES | libc::EPERM) => Err(Error::io(
                format!(
                    "cannot create the claims directory {} (it holds the locks of processes owned by uid \
                     {uid}, and only {} may create it): run rocprof-attach as {}",
                    path.display(),
                    if uid == 0 { "root" } else { "that user or root" },
                    if uid == 0 { "root" } else { "the process's owner or root" },
                ),
                e,
            )),
            _ => Err(Error::io(
                format!("creating the claims directory {}", path.display()),
                e,
            )),
        };
    }
    // New and ours, mode 0700 so far: nobody else can enter it before it is handed over.
    let fd = open_nofollow(path)?;
    // SAFETY: a valid descriptor.
    unsafe {
        if uid != euid() {
            libc::fchown(fd.as_raw_fd(), uid, u32::MAX);
        }
        libc::fchmod(fd.as_raw_fd(), mode);
    }
    Ok(())
}

fn open_nofollow(path: &Path) -> Result<OwnedFd> {
    let c = cstr(path);
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(Error::io(
            format!(
                "cannot open the claims directory {} (it must be a directory, not a symbolic link; \
                 remove it as root and rocprof-attach creates it again)",
                path.display()
            ),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: a descriptor we just opened and own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A directory of the claims' name that its rightful owner did not make: root moves it aside
/// (so nobody can block root's sessions with it); anyone else is told to have it removed.
fn untrusted(path: &Path, meta: &std::fs::Metadata, uid: u32) -> Result<()> {
    let found = format!(
        "the claims directory {} belongs to uid {} with mode {:o}, but must belong to uid {uid} with \
         mode 700",
        path.display(),
        meta.uid(),
        meta.mode() & 0o7777
    );
    if euid() != 0 {
        return Err(Error::io(
            format!(
                "{found}: another user made it, so the locks in it cannot be trusted. Fix: remove it as \
                 root (`sudo rm -rf {}`); rocprof-attach creates it again",
                path.display()
            ),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    let aside = PathBuf::from(format!(
        "{}.untrusted-{}-{}",
        path.display(),
        super::now(),
        std::process::id()
    ));
    std::fs::rename(path, &aside).map_err(|e| Error::io(format!("{found}; moving it aside"), e))?;
    tracing::warn!(
        "{found}; moved it to {} and made a new one",
        aside.display()
    );
    Ok(())
}
