//! Tearing CUPTI down after a session, so that the process runs as fast as before it.
//!
//! Disabling every activity kind and unsubscribing is not enough: CUPTI stays initialised in
//! the process, and on the H200 a PyTorch transformer's step stayed 55 % slower after one 2 s
//! session (40 ms unattached, 63 ms after detach, for the rest of the run), as
//! `torch.profiler` leaves training 10-20 % slower unless Kineto calls `cuptiFinalize`. So the
//! detach ends with `cuptiFinalize`, made as NVIDIA's "dynamic detach" asks: not from our
//! thread, which would race with the application's threads inside CUPTI, but from the exit
//! callsite of an API callback, on an application thread, at its next kernel launch. The
//! detach enables the launch callbacks on its subscriber and marks the teardown pending
//! ([`request`]); the first launch that returns runs `cuptiFinalize` ([`on_api_exit`]). A
//! process that launches nothing more keeps CUPTI until it does, at no cost: the callbacks
//! only run on launches.
//!
//! The next attach cancels a teardown still pending ([`cancel`]) or, holding the same lock,
//! waits for one that is running, and then finds CUPTI fresh: it registers its buffers and
//! subscribes again, as every attach does.
//!
//! Only for a CUPTI of CUDA 12.6 or newer (`cuptiGetVersion` 24): older ones crashed on a
//! re-initialisation after a teardown in processes that use CUDA graphs (Kineto turns its
//! teardown off there for that reason). `--pmc` counters are released before the request
//! (docs/cuda.md, "What stays configured between sessions").

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::cupti::Cupti;

/// The oldest CUPTI API version whose teardown is used (CUDA 12.6).
pub const MIN_VERSION: u32 = 24;

/// A teardown waiting for the application's next launch.
struct Pending {
    cupti: &'static Cupti,
    /// The detached session's subscriber (a pointer, kept as an address to be `Send`).
    subscriber: usize,
}

static PENDING: Mutex<Option<Pending>> = Mutex::new(None);
/// Whether [`PENDING`] holds one: the launch callbacks read this, not the lock.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Teardowns done in this process (the attach reply reports it).
static DONE: AtomicU64 = AtomicU64::new(0);

fn lock() -> MutexGuard<'static, Option<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `c` can be torn down.
pub fn supported(c: &Cupti) -> bool {
    c.finalize.is_some() && c.enable_callback.is_some() && c.version >= MIN_VERSION
}

/// Marks `subscriber`'s CUPTI for teardown at the application's next launch; false (and
/// nothing changed) when `c` cannot be torn down or its launch callbacks cannot be enabled,
/// in which case the caller unsubscribes as before.
///
/// # Safety
/// `subscriber` must come from `cuptiSubscribe` of `c` and still be subscribed, with every
/// activity kind disabled and the buffers flushed.
pub unsafe fn request(c: &'static Cupti, subscriber: *mut c_void) -> bool {
    if !supported(c) {
        return false;
    }
    let mut g = lock();
    // SAFETY: as this function's contract.
    if unsafe { crate::pmc::enable_callbacks(c, subscriber) }.is_err() {
        return false;
    }
    *g = Some(Pending {
        cupti: c,
        subscriber: subscriber as usize,
    });
    ARMED.store(true, Ordering::Release);
    true
}

/// Called by the tool's callback at an API's exit callsite: runs a pending teardown. Never
/// blocks: an attach holding the lock is cancelling it.
pub fn on_api_exit() {
    if !ARMED.load(Ordering::Acquire) {
        return;
    }
    let Ok(mut g) = PENDING.try_lock() else {
        return;
    };
    let Some(p) = g.take() else {
        return;
    };
    ARMED.store(false, Ordering::Release);
    if let Some(finalize) = p.cupti.finalize {
        // SAFETY: at an API exit callsite, as NVIDIA's dynamic detach asks; every kind was
        // disabled and flushed by the detach, and the lock keeps our own thread out of CUPTI.
        unsafe { finalize() };
        crate::activity::clear_pool();
        DONE.fetch_add(1, Ordering::Relaxed);
    }
}

/// Before an attach: drops a teardown still pending (unsubscribing its subscriber) or waits
/// for one in progress, so that the attach starts from a CUPTI nobody else is changing.
pub fn cancel() {
    let mut g = lock();
    if let Some(p) = g.take() {
        ARMED.store(false, Ordering::Release);
        // SAFETY: the pending subscriber is still subscribed (the teardown did not run).
        unsafe { (p.cupti.unsubscribe)(p.subscriber as *mut c_void) };
    }
}

/// Teardowns done in this process so far.
pub fn done() -> u64 {
    DONE.load(Ordering::Relaxed)
}
