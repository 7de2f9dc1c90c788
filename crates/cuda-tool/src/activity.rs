//! The CUPTI buffer callbacks: a small pool of page-aligned buffers handed to CUPTI, and the
//! rows parsed out of completed buffers, appended under a mutex.
//!
//! Each buffer is an anonymous mapping of its own ([`Buffer`]), not a `malloc` block: freeing an
//! 8 MiB block that `malloc` had mapped raises glibc's mmap threshold for the whole process, so
//! the next buffers (and the application's own blocks up to that size) came from the heap of
//! the thread that asked for them, an application thread, and stayed resident after the session
//! (16 MiB more from the second `--pmc` session on, on the stand-in). A mapping goes back to the
//! system when it is dropped, and the pool is emptied at detach.
//!
//! The callbacks run on CUPTI's threads and on the application's threads; they never panic
//! (`catch_unwind`), never block on anything but the short row mutex, and never print.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::cupti::Cupti;
use crate::protocol::DEFAULT_BUFFER_BYTES;
use crate::records::{parse, Collected};

/// The loaded CUPTI (set once; the library is never unloaded).
pub static CUPTI: OnceLock<Cupti> = OnceLock::new();

/// Size of the buffers handed out from now on.
pub static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_BYTES);

/// Bytes of records CUPTI has handed over in this process ([`Sizer`] measures the rate).
static DELIVERED: AtomicU64 = AtomicU64::new(0);

/// How long a buffer takes to fill at the rate records come, at most (ms), once the rate is
/// known. CUPTI's default flush hands over no buffer that holds a record still incomplete (a
/// kernel queued or running), and while the GPU is busy the buffer being filled always holds
/// one: it is handed over once full. A process killed meanwhile loses what that buffer holds,
/// on average half of its span: 8 MiB buffers took 1.3 s to fill at the H200 loop's 20,000
/// kernels a second (kernel and API records, about 330 bytes a kernel), and CUPTI had not
/// delivered the last 0.63 s when it was killed.
pub const BUFFER_SPAN_MS: u64 = 200;

/// The smallest buffer the rate picks (1 MiB): at low rates the GPU idles between kernels, and
/// the buffer being filled is handed over at the next tick anyway.
pub const MIN_BUFFER_BYTES: usize = 1 << 20;

/// The size of buffers for records coming at `bytes_per_s`: the power of two that holds
/// [`BUFFER_SPAN_MS`] of them, from [`MIN_BUFFER_BYTES`] to `max` (a power of two, so that the
/// size changes only when the rate doubles or halves, and the pool's buffers keep fitting).
pub fn buffer_size(bytes_per_s: u64, max: usize) -> usize {
    let want = (bytes_per_s.saturating_mul(BUFFER_SPAN_MS) / 1000) as usize;
    want.next_power_of_two()
        .clamp(MIN_BUFFER_BYTES.min(max), max)
}

/// Sizes the buffers handed out to the rate at which CUPTI delivers records (measured over a
/// second or more, on the tool's thread), up to the session's size.
#[derive(Debug)]
pub struct Sizer {
    max: usize,
    since: std::time::Instant,
    delivered: u64,
}

impl Sizer {
    /// Buffers of `max` bytes until the rate is known.
    pub fn new(max: usize) -> Sizer {
        BUFFER_BYTES.store(max, Ordering::Relaxed);
        Sizer {
            max,
            since: std::time::Instant::now(),
            delivered: DELIVERED.load(Ordering::Relaxed),
        }
    }

    /// Called at every tick: once a second has passed since the last change, the buffers
    /// handed out from now on get the size for the rate of that second ([`buffer_size`]).
    pub fn tick(&mut self) {
        let elapsed = self.since.elapsed();
        if elapsed < std::time::Duration::from_secs(1) {
            return;
        }
        let now = DELIVERED.load(Ordering::Relaxed);
        let rate = (now - self.delivered) as f64 / elapsed.as_secs_f64();
        let size = buffer_size(rate as u64, self.max);
        if BUFFER_BYTES.swap(size, Ordering::Relaxed) != size {
            // Unmapped here, not on the application thread that would find them the wrong size.
            clear_pool();
        }
        self.since = std::time::Instant::now();
        self.delivered = now;
    }
}

/// Whether CUPTI was told our buffers come zeroed (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`):
/// buffers are then cleared on CUPTI's thread as they come back, not by CUPTI on the application
/// thread that needs room.
pub static ZEROED: AtomicBool = AtomicBool::new(false);

/// Buffers kept for reuse.
const POOL_MAX: usize = 4;

static POOL: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());

/// A buffer handed to CUPTI: a private anonymous mapping (page-aligned, zeroed when new),
/// unmapped when dropped.
struct Buffer {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by the value alone.
unsafe impl Send for Buffer {}

impl Buffer {
    /// A fresh zeroed mapping of `len` bytes, or None when the system refuses one.
    fn new(len: usize) -> Option<Buffer> {
        // SAFETY: an anonymous private mapping at an address the kernel picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        (p != libc::MAP_FAILED && len > 0).then_some(Buffer {
            ptr: p as *mut u8,
            len,
        })
    }

    /// Zeroes the buffer (on CUPTI's thread as it comes back, so that its pages are present
    /// and zero when an application thread fills it next).
    fn clear(&mut self) {
        // SAFETY: ptr is a live writable mapping of len bytes owned by self.
        unsafe { std::ptr::write_bytes(self.ptr, 0, self.len) };
    }

    /// Gives the mapping to CUPTI: it comes back through [`Buffer::from_cupti`].
    fn into_raw(self) -> (*mut u8, usize) {
        let raw = (self.ptr, self.len);
        std::mem::forget(self);
        raw
    }

    /// # Safety
    /// `ptr` and `len` must come from [`Buffer::into_raw`], once.
    unsafe fn from_cupti(ptr: *mut u8, len: usize) -> Buffer {
        Buffer { ptr, len }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no longer used.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

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
/// predate the promise; at detach and teardown, so that the session's memory goes back).
pub fn clear_pool() {
    lock(&POOL).clear();
}

fn get_buffer() -> Option<Buffer> {
    let len = BUFFER_BYTES.load(Ordering::Relaxed);
    let mut pool = lock(&POOL);
    while let Some(b) = pool.pop() {
        if b.len == len {
            return Some(b);
        }
    }
    drop(pool);
    Buffer::new(len)
}

/// `CUpti_BuffersCallbackRequestFunc`: hands CUPTI a buffer (null on failure: CUPTI then
/// drops records and counts them).
///
/// # Safety
/// Called by CUPTI with valid out pointers.
pub unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let r = catch_unwind(|| get_buffer().map(Buffer::into_raw));
    let (p, len) = r.ok().flatten().unwrap_or((std::ptr::null_mut(), 0));
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
/// Called by CUPTI with a buffer from [`buffer_requested`] of `size` bytes (the size it was
/// given), `valid` of them filled.
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
        DELIVERED.fetch_add(valid as u64, Ordering::Relaxed);
        let mut b = Buffer::from_cupti(buffer, size);
        // A buffer the full pool would not keep is unmapped now, not cleared first.
        if lock(&POOL).len() >= POOL_MAX {
            return;
        }
        if ZEROED.load(Ordering::Relaxed) {
            b.clear();
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

    #[test]
    fn buffers_hold_a_fifth_of_a_second_of_records() {
        const MIB: usize = 1 << 20;
        // The H200 loop: about 6.6 MB a second, 1.3 MB in 200 ms.
        assert_eq!(buffer_size(6_600_000, 8 * MIB), 2 * MIB);
        assert_eq!(buffer_size(0, 8 * MIB), MIB);
        assert_eq!(buffer_size(u64::MAX, 8 * MIB), 8 * MIB);
        // A smaller size asked for (ROCPROF_ATTACH_BUFFER_BYTES) is kept.
        assert_eq!(buffer_size(6_600_000, 65536), 65536);
    }

    /// Buffers are mappings of their own, not `malloc` blocks: handing out and freeing more
    /// than the pool keeps leaves malloc's mmap threshold where it was, so that a block of that
    /// size the application asks for afterwards is still mapped apart. (Freed 8 MiB `malloc`
    /// blocks raised it: the next buffers came from the heap of the application thread that
    /// asked for them and stayed resident, 16 MiB from the second `--pmc` session on.)
    #[test]
    fn freed_buffers_leave_mallocs_threshold_alone() {
        let mut given = Vec::new();
        for _ in 0..POOL_MAX + 2 {
            let (mut p, mut size, mut max) = (std::ptr::null_mut(), 0, 0);
            // SAFETY: valid out pointers.
            unsafe { buffer_requested(&mut p, &mut size, &mut max) };
            assert!(!p.is_null());
            given.push((p, size));
        }
        for (p, size) in given {
            // SAFETY: each buffer came from buffer_requested with this size, once.
            unsafe { buffer_completed(std::ptr::null_mut(), 0, p, size, 0) };
        }
        clear_pool();
        let _ = take_rows();
        // SAFETY: plain glibc calls; the block is freed at once.
        let mapped = unsafe {
            let before = libc::mallinfo2().hblks;
            let p = libc::malloc(BUFFER_BYTES.load(Ordering::Relaxed));
            let mapped = libc::mallinfo2().hblks > before;
            libc::free(p);
            mapped
        };
        assert!(mapped, "malloc serves a buffer-sized block from the heap");
    }
}
