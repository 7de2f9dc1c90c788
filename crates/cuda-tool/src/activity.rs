//! The CUPTI buffer callbacks: a small pool of 8-byte-aligned buffers handed to CUPTI, and the
//! rows parsed out of completed buffers, appended under a mutex.
//!
//! The callbacks run on CUPTI's threads and on the application's threads; they never panic
//! (`catch_unwind`), never block on anything but the short row mutex, and never print.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::cupti::Cupti;
use crate::protocol::DEFAULT_BUFFER_BYTES;
use crate::records::{parse, Collected};

/// The loaded CUPTI (set once; the library is never unloaded).
pub static CUPTI: OnceLock<Cupti> = OnceLock::new();

/// Size of the buffers handed out from now on.
pub static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_BYTES);

/// Whether CUPTI was told our buffers come zeroed (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`):
/// buffers are then cleared on CUPTI's thread as they come back, not by CUPTI on the application
/// thread that needs room.
pub static ZEROED: AtomicBool = AtomicBool::new(false);

/// Buffers kept for reuse.
const POOL_MAX: usize = 4;

static POOL: Mutex<Vec<Box<[u64]>>> = Mutex::new(Vec::new());

static ROWS: Mutex<Option<Collected>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes every row collected so far (leaving none).
pub fn take_rows() -> Collected {
    lock(&ROWS).take().unwrap_or_default()
}

/// Appends rows (used by the callbacks, and by tests).
pub fn add_rows(more: Collected) {
    let mut g = lock(&ROWS);
    let rows = g.get_or_insert_with(Collected::default);
    rows.kernels.extend(more.kernels);
    rows.copies.extend(more.copies);
    rows.apis.extend(more.apis);
    rows.allocs.extend(more.allocs);
    rows.markers.extend(more.markers);
    rows.dropped += more.dropped;
    rows.other += more.other;
}

/// Drops the buffers kept for reuse (before promising CUPTI zeroed buffers: a kept one may
/// predate the promise).
pub fn clear_pool() {
    lock(&POOL).clear();
}

fn get_buffer() -> Box<[u64]> {
    let words = BUFFER_BYTES.load(Ordering::Relaxed) / 8;
    let mut pool = lock(&POOL);
    while let Some(b) = pool.pop() {
        if b.len() == words {
            return b;
        }
    }
    drop(pool);
    vec![0u64; words].into_boxed_slice()
}

/// `CUpti_BuffersCallbackRequestFunc`: hands CUPTI a buffer (null on failure: CUPTI then
/// drops records and counts them).
///
/// # Safety
/// Called by CUPTI with valid out pointers.
pub unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let r = catch_unwind(|| {
        let b = get_buffer();
        let len = b.len() * 8;
        (Box::into_raw(b) as *mut u64 as *mut u8, len)
    });
    let (p, len) = r.unwrap_or((std::ptr::null_mut(), 0));
    if !buf.is_null() {
        *buf = p;
    }
    if !size.is_null() {
        *size = len;
    }
    if !max.is_null() {
        *max = 0;
    }
}

/// `CUpti_BuffersCallbackCompleteFunc`: parses the records, counts dropped ones, and returns
/// the buffer to the pool.
///
/// # Safety
/// Called by CUPTI with a buffer from [`buffer_requested`] of `size` bytes, `valid` of them
/// filled.
pub unsafe extern "C" fn buffer_completed(
    ctx: *mut std::ffi::c_void,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if buffer.is_null() {
            return;
        }
        let mut local = Collected::default();
        if let Some(c) = CUPTI.get() {
            if valid > 0 {
                let mut rec: *mut u8 = std::ptr::null_mut();
                while (c.get_next_record)(buffer, valid, &mut rec) == 0 && !rec.is_null() {
                    parse(rec, &mut local);
                }
            }
            let mut dropped = 0usize;
            if (c.get_num_dropped)(ctx, stream, &mut dropped) == 0 {
                local.dropped += dropped as u64;
            }
        }
        add_rows(local);
        let mut b: Box<[u64]> = Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            buffer as *mut u64,
            size / 8,
        ));
        // A buffer the full pool would not keep is freed now, not cleared first.
        if lock(&POOL).len() >= POOL_MAX {
            return;
        }
        if ZEROED.load(Ordering::Relaxed) {
            b.fill(0);
        }
        let mut pool = lock(&POOL);
        if pool.len() < POOL_MAX {
            pool.push(b);
        }
    }));
}

/// `CUpti_CallbackFunc` for the subscription that claims CUPTI; no callback is enabled.
///
/// # Safety
/// Never dereferences anything.
pub unsafe extern "C" fn no_callback(
    _userdata: *mut std::ffi::c_void,
    _domain: std::ffi::c_int,
    _cbid: u32,
    _data: *const std::ffi::c_void,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_round_trip() {
        let mut p = std::ptr::null_mut();
        let mut size = 0;
        let mut max = 1;
        // SAFETY: valid out pointers; the buffer goes back through buffer_completed.
        unsafe {
            buffer_requested(&mut p, &mut size, &mut max);
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            assert_eq!(size, BUFFER_BYTES.load(Ordering::Relaxed));
            assert_eq!(max, 0);
            buffer_completed(std::ptr::null_mut(), 0, p, size, 0);
        }
        let _ = take_rows();
    }
}
