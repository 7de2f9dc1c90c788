//! Step three, for front ends that wait: the profiling window. It ends on Enter (when asked
//! for), SIGINT/SIGTERM/SIGHUP, the duration, or the exit of every attached process. A library
//! front end that attaches now and detaches later does not use it.

use super::detach::DetachControl;
use super::events::{EndReason, Event, Events};
use crate::error::{Error, Result};
use crate::signals::{Notify, SignalWatcher};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rocprof_engine::ptrace;
use serde::Serialize;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// How the window is run.
#[derive(Debug, Clone, Copy, Default)]
pub struct WaitOptions {
    /// Detach after this long; None waits for Enter, a signal or the targets' exit.
    pub duration: Option<Duration>,
    /// A line on stdin ends the window (use when stdin is a terminal).
    pub enter: bool,
    /// Post an [`Event::Tick`] this often (for a status line).
    pub tick: Option<Duration>,
}

/// How the window ended.
#[derive(Debug, Clone, Serialize)]
pub struct WaitEnd {
    /// Why.
    pub reason: EndReason,
    /// Attached processes that exited during the window (not to be detached).
    pub exited: Vec<i32>,
}

/// What one poll of the window found.
struct Ready {
    /// A signal arrived.
    signal: bool,
    /// Stdin is readable.
    enter: bool,
    /// Indexes in the watched processes of those that exited.
    gone: Vec<usize>,
}

/// A pidfd for each of `pids` to watch, and those already gone. A process that is already gone
/// (it exited between its attach and now) has exited during the window: without this, a window
/// with no duration would wait for it forever. One whose pidfd cannot be opened for another
/// reason is noticed at detach.
fn watch(pids: &[i32]) -> (Vec<(i32, OwnedFd)>, Vec<i32>) {
    let mut watched: Vec<(i32, OwnedFd)> = Vec::new();
    let mut gone_before = Vec::new();
    for &p in pids {
        match ptrace::pidfd_open(p) {
            Ok(fd) => watched.push((p, fd)),
            Err(rocprof_engine::Error::ProcessGone { .. }) => gone_before.push(p),
            Err(e) => tracing::debug!("cannot watch process {p} ({e}): noticed at detach"),
        }
    }
    (watched, gone_before)
}

/// Our SIGINT/SIGTERM/SIGHUP handling for a session: once installed, those signals only record
/// themselves and wake a `poll`, which the session acts on between operations, so they never
/// kill us mid-operation. The window is one `poll` loop over the signals, the attached
/// processes' pidfds and (when asked) stdin: no thread.
pub struct Waiter {
    signals: SignalWatcher,
}

impl Waiter {
    /// Install the signal handlers.
    pub fn install() -> Result<Waiter> {
        let signals = SignalWatcher::install()
            .map_err(|e| Error::io("installing the SIGINT/SIGTERM/SIGHUP handlers", e))?;
        Ok(Waiter { signals })
    }

    /// Readable when a signal arrived (for a wait of the session's own, e.g.
    /// [`super::Collector::await_output`]).
    pub fn signal_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.signals.fd()
    }

    /// Whether a signal arrived since the last call.
    pub fn interrupted(&self) -> bool {
        self.signals.take().is_some()
    }

    /// Run the profiling window for `pids`.
    pub fn wait(&self, pids: &[i32], opts: WaitOptions, events: Events) -> WaitEnd {
        let (mut watched, gone_before) = watch(pids);
        let mut stdin_open = opts.enter;
        events(Event::Waiting {
            duration: opts.duration,
            enter: opts.enter,
        });
        let start = Instant::now();
        let deadline = opts.duration.map(|d| start + d);
        let mut exited = Vec::new();
        for pid in gone_before {
            tracing::debug!("process {pid} exited before the window began");
            events(Event::Exited { pid });
            exited.push(pid);
        }
        let reason = loop {
            // Every target gone (before the window or during it): nothing left to profile.
            if !pids.is_empty() && exited.len() == pids.len() {
                break EndReason::TargetsExited;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break EndReason::Duration;
            }
            let until_deadline = deadline.map(|d| d - now);
            let timeout = match (until_deadline, opts.tick) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if opts.tick.is_some() {
                events(Event::Tick {
                    elapsed: start.elapsed(),
                    remaining: deadline.map(|d| d.saturating_duration_since(Instant::now())),
                    live: pids
                        .iter()
                        .copied()
                        .filter(|p| !exited.contains(p))
                        .collect(),
                });
            }
            let Some(Ready {
                signal,
                enter,
                gone,
            }) = self.poll(&watched, stdin_open, timeout)
            else {
                break EndReason::Interrupted;
            };
            if signal {
                if let Some(s) = self.signals.take() {
                    break EndReason::Signal(s);
                }
            }
            if enter {
                let mut line = String::new();
                match std::io::stdin().read_line(&mut line) {
                    Ok(n) if n > 0 => break EndReason::Enter,
                    // End of input: nothing more to wait for there.
                    _ => stdin_open = false,
                }
            }
            for i in gone.into_iter().rev() {
                let (pid, _) = watched.remove(i);
                tracing::debug!("process {pid} exited (pidfd readable)");
                events(Event::Exited { pid });
                exited.push(pid);
            }
        };
        tracing::info!(
            "profiling window ended after {:.1} ms: {}",
            start.elapsed().as_secs_f64() * 1e3,
            reason.describe()
        );
        events(Event::WaitEnded { reason });
        WaitEnd { reason, exited }
    }

    /// Wait (up to `timeout`, without one forever) for a signal, the exit of a `watched` process
    /// or, when `stdin_open`, a line on stdin; None if the poll failed.
    fn poll(
        &self,
        watched: &[(i32, OwnedFd)],
        stdin_open: bool,
        timeout: Option<Duration>,
    ) -> Option<Ready> {
        let stdin = std::io::stdin();
        let mut set = vec![PollFd::new(self.signals.fd(), PollFlags::POLLIN)];
        set.extend(
            watched
                .iter()
                .map(|(_, fd)| PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
        );
        if stdin_open {
            set.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
        }
        let timeout = timeout.map(nix::sys::time::TimeSpec::from_duration);
        match nix::poll::ppoll(&mut set, timeout, None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
        }
        let ready = |p: &PollFd| p.revents().is_some_and(|r| !r.is_empty());
        let gone: Vec<usize> = (0..watched.len()).filter(|&i| ready(&set[i + 1])).collect();
        Some(Ready {
            signal: ready(&set[0]),
            enter: stdin_open && set.last().is_some_and(ready),
            gone,
        })
    }

    /// Run `f` (a detach) to completion while reporting signals that arrive meanwhile as
    /// [`Event::SignalWhileDetaching`]: the detach calls must finish for the output to be
    /// complete; the first signal makes the waits for stopped targets give up
    /// ([`DetachControl::give_up`]). A later signal, when no stopped target is left to give up on,
    /// calls `abandon` with its number: the front end stops waiting for the detach calls (they
    /// finish in the target while their agents wait for them and restore each thread) and ends.
    /// `abandon` does not return; if it does, the wait goes on.
    pub fn shielded<R: Send>(
        &self,
        f: impl FnOnce() -> R + Send,
        ctl: &DetachControl,
        events: Events,
        abandon: &(dyn Fn(i32) + Sync),
    ) -> R {
        let Ok(done) = Notify::new() else {
            return f();
        };
        std::thread::scope(|scope| {
            let done = &done;
            let worker = scope.spawn(move || {
                let r = f();
                done.notify();
                r
            });
            let mut signalled = false;
            loop {
                let mut set = [
                    PollFd::new(self.signals.fd(), PollFlags::POLLIN),
                    PollFd::new(done.fd(), PollFlags::POLLIN),
                ];
                match poll(&mut set, PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => break,
                }
                if set[1].revents().is_some_and(|r| !r.is_empty()) {
                    break;
                }
                if let Some(signal) = self.signals.take() {
                    let stopped = ctl.stopped();
                    ctl.give_up();
                    if signalled && stopped.is_empty() {
                        abandon(signal);
                    }
                    signalled = true;
                    events(Event::SignalWhileDetaching { signal, stopped });
                }
            }
            worker.join().expect("the detach does not panic")
        })
    }
}
