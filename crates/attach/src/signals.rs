//! Our own signal handling: SIGINT, SIGTERM and SIGHUP never kill rocprof-attach mid-operation.
//!
//! Once installed, the three signals only record which one arrived and make a pipe readable;
//! the session acts on it between operations (waiting in `poll` on the pipe, with no thread of
//! its own), so a signal that arrives while a target's listener is stopped or patched is
//! deferred until the thread is restored (the injection itself runs in the agent server, which
//! blocks these signals anyway, see [`rocprof_engine::agent`]).

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::SigId;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Installed handlers: a readable end that wakes a `poll`, and the last signal received.
/// Dropping this unregisters nothing: the handlers stay installed, so a late signal still cannot
/// kill us before we exit.
#[derive(Debug)]
pub struct SignalWatcher {
    wake: UnixStream,
    last: Arc<AtomicUsize>,
    _ids: Vec<SigId>,
}

/// Name of a signal number we handle.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

impl SignalWatcher {
    /// Install handlers for SIGINT, SIGTERM and SIGHUP: each delivery records the signal and
    /// writes a byte to a non-blocking socket pair (both async-signal-safe).
    pub fn install() -> std::io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let last = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            // The flag first, so the signal is known when the wake-up byte is read.
            ids.push(signal_hook::flag::register_usize(
                sig,
                last.clone(),
                sig as usize,
            )?);
            ids.push(signal_hook::low_level::pipe::register(
                sig,
                write.try_clone()?,
            )?);
        }
        Ok(SignalWatcher {
            wake: read,
            last,
            _ids: ids,
        })
    }

    /// Readable when a signal arrived (for `poll`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// The signal that arrived since the last call, if any (reads the wake-up bytes).
    pub fn take(&self) -> Option<i32> {
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        match self.last.swap(0, Ordering::SeqCst) {
            0 => None,
            sig => Some(sig as i32),
        }
    }
}

/// A one-shot wake-up for `poll`: [`Notify::notify`] makes [`Notify::fd`] readable.
#[derive(Debug)]
pub struct Notify {
    read: OwnedFd,
    write: OwnedFd,
}

impl Notify {
    /// A new, unset notification.
    pub fn new() -> std::io::Result<Self> {
        let (read, write) = nix::unistd::pipe().map_err(std::io::Error::from)?;
        Ok(Notify { read, write })
    }

    /// Readable once notified.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Make [`Notify::fd`] readable.
    pub fn notify(&self) {
        let _ = nix::unistd::write(&self.write, &[1]);
    }
}
