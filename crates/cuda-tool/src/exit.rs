//! A process that ends while a session is attached keeps its data (docs/cuda.md, "When the
//! target ends").
//!
//! The database is committed as the session runs ([`crate::sink`]), so whatever ends the process
//! it is a valid rocpd file with every committed row. On the ways out that run code, the tool
//! also writes what it still holds and finishes the database:
//!
//! - a normal exit (return from `main`, `exit()`, Python's `sys.exit` or an uncaught Python
//!   exception): an `atexit` handler, registered at the first attach (so it runs before the
//!   CUDA runtime's own exit handlers, registered earlier), finishes the session on the exiting
//!   thread;
//! - SIGTERM, SIGINT and SIGABRT (`abort()`, an uncaught C++ exception) *while their
//!   disposition is the default*: for the length of a session the tool installs a handler that
//!   only does async-signal-safe things: it wakes the tool's exit thread through a pipe, waits
//!   for it at most [`SIGNAL_WAIT_MS`] (`poll`), restores the default disposition and raises
//!   the signal again, so the process still dies of it (same status, same core dump). A signal
//!   the application handles itself is left alone; a second signal during the wait kills at
//!   once. In a child forked from the process, the handler does nothing but die.
//! - SIGKILL and `_exit` run no code: the committed rows are what remains (all but the last
//!   moments: what CUPTI had not delivered, each kind's lag ([`crate::order`]) and a tick).
//!
//! Nothing here may crash or hang the exiting process: every wait is bounded, and panics are
//! caught.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Once;
use std::time::Duration;

/// How long a fatal signal waits for the database to be finished (ms).
pub const SIGNAL_WAIT_MS: i64 = 5000;

/// How long the exit path waits for the tool thread to let go of the session (a tick or a
/// detach in progress).
pub const LOCK_WAIT: Duration = Duration::from_secs(3);

/// The signals whose default action is handled while a session is attached.
pub const SIGNALS: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGABRT];

/// Write end of the pipe that wakes the exit thread (-1: not started).
static NOTIFY: AtomicI32 = AtomicI32::new(-1);
/// Read end of the pipe the exit thread answers on.
static DONE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handlers (a forked child is another).
static OWNER: AtomicI32 = AtomicI32::new(0);
/// Set once a fatal signal started the exit path: a second signal does not wait.
static EXITING: AtomicI32 = AtomicI32::new(0);
/// Bit `sig` set: our handler was installed for `sig` by this session.
static INSTALLED: AtomicU32 = AtomicU32::new(0);

static START: Once = Once::new();

/// The name of a handled signal.
pub fn signal_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGABRT => "SIGABRT",
        _ => "signal",
    }
}

/// Registers the exit handler and starts the exit thread (once per process), then installs the
/// signal handlers for this session where the disposition is the default.
pub fn arm() {
    START.call_once(|| {
        // SAFETY: a plain libc registration of an extern "C" fn that never unwinds.
        unsafe { libc::atexit(at_exit) };
        start_thread();
    });
    // SAFETY: trivial getter.
    OWNER.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    if NOTIFY.load(Ordering::SeqCst) < 0 {
        return; // no exit thread: a handler could not be served
    }
    for sig in SIGNALS {
        // SAFETY: sigaction with valid pointers; the handler is async-signal-safe.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fatal as extern "C" fn(c_int) as usize;
            sa.sa_flags = libc::SA_NODEFER | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0 {
                INSTALLED.fetch_or(1 << sig, Ordering::SeqCst);
            }
        }
    }
}

/// Gives the signals back their default disposition where our handler is still installed (the
/// session ended); a handler the application installed since stays.
pub fn disarm() {
    let installed = INSTALLED.swap(0, Ordering::SeqCst);
    for sig in SIGNALS {
        if installed & (1 << sig) == 0 {
            continue;
        }
        // SAFETY: sigaction with valid pointers.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == on_fatal as extern "C" fn(c_int) as usize
            {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

/// Starts the thread that finishes the session when a fatal signal arrives; it blocks every
/// signal and waits in `read`.
fn start_thread() {
    let (mut notify, mut done) = ([0 as c_int; 2], [0 as c_int; 2]);
    // SAFETY: pipe2 with valid arrays.
    let ok = unsafe {
        libc::pipe2(notify.as_mut_ptr(), libc::O_CLOEXEC) == 0
            && libc::pipe2(done.as_mut_ptr(), libc::O_CLOEXEC) == 0
    };
    if !ok {
        return;
    }
    let (notify_r, done_w) = (notify[0], done[1]);
    let spawned = std::thread::Builder::new()
        .name("rocp-cu-exit".into())
        .spawn(move || exit_thread(notify_r, done_w));
    if spawned.is_ok() {
        NOTIFY.store(notify[1], Ordering::SeqCst);
        DONE.store(done[0], Ordering::SeqCst);
    }
}

fn exit_thread(notify_r: c_int, done_w: c_int) {
    // SAFETY: sigset calls on our own thread with valid pointers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    loop {
        let mut sig = 0u8;
        // SAFETY: reading one byte into a valid buffer.
        let n = unsafe { libc::read(notify_r, (&mut sig as *mut u8).cast(), 1) };
        if n == 1 {
            let ending = format!("signal {}", signal_name(sig as c_int));
            let _ = std::panic::catch_unwind(|| crate::backend::finish_at_exit(&ending));
            // SAFETY: writing one byte from a valid buffer.
            unsafe { libc::write(done_w, (&sig as *const u8).cast(), 1) };
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The `atexit` handler: finishes the session on the exiting thread.
extern "C" fn at_exit() {
    // SAFETY: trivial getter.
    if OWNER.load(Ordering::SeqCst) != unsafe { libc::getpid() } {
        return; // a forked child: the session and its database are the parent's
    }
    let _ = std::panic::catch_unwind(|| crate::backend::finish_at_exit("exit"));
}

fn monotonic_ms() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer; async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1000 + t.tv_nsec / 1_000_000
}

/// The handler of [`SIGNALS`]: async-signal-safe calls only (write, poll, read, sigaction,
/// raise).
extern "C" fn on_fatal(sig: c_int) {
    // SAFETY: async-signal-safe libc calls with valid pointers.
    unsafe {
        let mine = OWNER.load(Ordering::SeqCst) == libc::getpid();
        let first = EXITING.swap(1, Ordering::SeqCst) == 0;
        let (notify, done) = (NOTIFY.load(Ordering::SeqCst), DONE.load(Ordering::SeqCst));
        if mine && first && notify >= 0 && done >= 0 {
            let byte = sig as u8;
            if libc::write(notify, (&byte as *const u8).cast(), 1) == 1 {
                let deadline = monotonic_ms() + SIGNAL_WAIT_MS;
                loop {
                    let left = deadline - monotonic_ms();
                    if left <= 0 {
                        break;
                    }
                    let mut p = libc::pollfd {
                        fd: done,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    if libc::poll(&mut p, 1, left as c_int) == 1 {
                        let mut b = 0u8;
                        libc::read(done, (&mut b as *mut u8).cast(), 1);
                        break;
                    }
                }
            }
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
        libc::raise(sig);
    }
}
