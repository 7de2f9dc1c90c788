//! The deadline of a blocking wait: a per-thread POSIX timer whose signal interrupts `waitpid`.

use crate::error::{Error, Result};
use nix::errno::Errno;
use std::sync::Once;
use std::time::Duration;

/// The signal our wait timer uses to interrupt `waitpid`.
fn wake_signal() -> i32 {
    libc::SIGRTMAX() - 2
}

extern "C" fn wake_handler(_: libc::c_int) {}

/// A POSIX timer that sends [`wake_signal`] to one thread, to bound blocking waits.
#[derive(Debug)]
pub(super) struct WaitTimer {
    id: libc::timer_t,
}

impl WaitTimer {
    pub(super) fn new(tid_for_errors: i32) -> Result<Self> {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            // SAFETY: a zeroed sigaction is a valid starting value; the handler is an
            // async-signal-safe no-op; no SA_RESTART so blocking syscalls return EINTR.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = wake_handler as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = 0;
                libc::sigaction(wake_signal(), &sa, std::ptr::null_mut());
            }
        });
        // SAFETY: zeroed sigevent is valid; fields set below; `id` is a valid out-pointer.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, wake_signal());
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = wake_signal();
            sev.sigev_notify_thread_id = libc::gettid();
            let mut id: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) != 0 {
                return Err(Error::Sys {
                    op: "timer_create",
                    tid: tid_for_errors,
                    errno: Errno::last(),
                });
            }
            Ok(WaitTimer { id })
        }
    }

    fn set(&self, d: Duration, repeat: Duration) -> Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: repeat.subsec_nanos() as _,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as _,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old-value pointer may be null.
        if unsafe { libc::timer_settime(self.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(Error::Sys {
                op: "timer_settime",
                tid: 0,
                errno: Errno::last(),
            });
        }
        Ok(())
    }

    pub(super) fn arm(&self, d: Duration) -> Result<()> {
        // A zero it_value would disarm: wait at least a microsecond. The timer keeps firing every
        // 10 ms after the deadline, so a signal that lands just before waitpid blocks cannot be
        // lost: the next one interrupts the wait.
        self.set(d.max(Duration::from_micros(1)), Duration::from_millis(10))
    }

    pub(super) fn disarm(&self) {
        let _ = self.set(Duration::ZERO, Duration::ZERO);
    }
}

impl Drop for WaitTimer {
    fn drop(&mut self) {
        // SAFETY: `id` was returned by timer_create and is deleted once.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}
