//! Our own signal handling: SIGINT, SIGTERM and SIGHUP never kill rocprof-attach mid-operation.
//!
//! Once installed, the three signals only post an event on a channel; the session acts on it
//! between operations, so a signal that arrives while a target's listener is stopped or patched
//! is deferred until the thread is restored (the injection itself runs in an agent process that
//! blocks these signals anyway, see [`crate::agent`]).

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use std::sync::mpsc::Sender;

/// Installed handlers; dropping this stops the forwarding thread (handlers stay installed, so a
/// late signal still cannot kill us before we exit).
#[derive(Debug)]
pub struct SignalWatcher {
    handle: Handle,
    thread: Option<std::thread::JoinHandle<()>>,
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
    /// Install handlers for SIGINT, SIGTERM and SIGHUP; each delivery calls `on_signal(sig)`
    /// (for example, sending an event on a channel).
    pub fn install<E: Send + 'static>(tx: Sender<E>, make: fn(i32) -> E) -> std::io::Result<Self> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if tx.send(make(sig)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(SignalWatcher {
            handle,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalWatcher {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
