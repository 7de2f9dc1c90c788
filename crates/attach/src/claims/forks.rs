//! Claim locks never pass to a fork of the process that holds them (issue 29).
//!
//! A `flock` belongs to the open file description, which `fork` shares: a fork of a front end
//! that keeps running (Python's multiprocessing with the fork start method, a C `fork` without
//! `exec`) would hold every claim lock of its parent for as long as it lives, and new attaches of
//! those targets would be refused after the parent's own detach. `O_CLOEXEC` covers `exec`; for a
//! fork without one, every claim file this process opens is a [`Tracked`] descriptor, and a front
//! end that runs inside someone else's process (the rocattach library) registers
//! [`prepare`], [`parent`] and [`child`] with `pthread_atfork`: in the child each of them is
//! replaced by `/dev/null` with `dup3` (the number stays valid, so nothing closes it twice, and
//! the lock stays with the parent's copy alone).
//!
//! The set of descriptors is guarded by a mutex that is held across the fork ([`prepare`]) and
//! across each open and each close, so no fork happens between a claim file's open and its
//! registration, or between its removal from the set and its close.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, MutexGuard};

/// The claim files this process has open.
static OPEN: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

thread_local! {
    /// The set's lock, held by the forking thread from [`prepare`] to [`parent`] or [`child`].
    static HELD: RefCell<Option<MutexGuard<'static, Vec<RawFd>>>> = const { RefCell::new(None) };
}

fn open_set() -> MutexGuard<'static, Vec<RawFd>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A claim file's descriptor, known to the fork handlers while it is open.
#[derive(Debug)]
pub struct Tracked(Option<File>);

impl Tracked {
    /// Open a file with `open` and register its descriptor, with no fork in between.
    pub fn open(open: impl FnOnce() -> std::io::Result<File>) -> std::io::Result<Tracked> {
        let mut set = open_set();
        let file = open()?;
        set.push(file.as_raw_fd());
        Ok(Tracked(Some(file)))
    }
}

impl std::ops::Deref for Tracked {
    type Target = File;
    fn deref(&self) -> &File {
        self.0.as_ref().expect("open until dropped")
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut set = open_set();
        if let Some(file) = self.0.take() {
            let fd = file.as_raw_fd();
            set.retain(|&f| f != fd);
            drop(file);
        }
    }
}

/// `pthread_atfork` prepare handler: hold the set's lock across the fork.
pub fn prepare() {
    let guard = open_set();
    HELD.with(|h| *h.borrow_mut() = Some(guard));
}

/// `pthread_atfork` parent handler: release the set's lock.
pub fn parent() {
    HELD.with(|h| drop(h.borrow_mut().take()));
}

/// `pthread_atfork` child handler: every claim descriptor inherited becomes `/dev/null` (with
/// `O_CLOEXEC`), so this process holds none of its parent's locks; then the set's lock is
/// released. Async-signal-safe calls only, apart from the lock's release.
pub fn child() {
    HELD.with(|h| {
        let Some(set) = h.borrow_mut().take() else {
            return;
        };
        let null = c"/dev/null";
        // SAFETY: a C string; the descriptor is closed below.
        let devnull = unsafe { libc::open(null.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        for &fd in set.iter() {
            if devnull >= 0 {
                // SAFETY: replaces a descriptor this process owns (a Tracked file) atomically.
                unsafe { libc::dup3(devnull, fd, libc::O_CLOEXEC) };
            } else {
                // No /dev/null (a bare chroot): drop the lock's reference at least; the number
                // may then be reused, which only a later drop of a copied claim would close.
                // SAFETY: a descriptor this process owns.
                unsafe { libc::close(fd) };
            }
        }
        if devnull >= 0 {
            // SAFETY: opened above.
            unsafe { libc::close(devnull) };
        }
        drop(set);
    });
}
