//! The tool's own launch callbacks while a counting window is open: every kernel launch on a
//! counted context is recorded, in order, with its correlation id, kernel name and whether its
//! values are kept (`--kernel-include-regex`, `--kernel-exclude-regex`,
//! `--kernel-iteration-range`). Range *i* of the range profiler is the *i*-th launch recorded
//! (ranges are named "0", "1", ... in execution order, and counted kernels are serialised).
//!
//! The callback runs on the application's launching threads: it never blocks on anything but
//! the short window mutex, never panics across the boundary and does nothing while no window
//! is open (one atomic load).

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::metrics::CounterPlan;

/// `CUPTI_CB_DOMAIN_RUNTIME_API` launch callbacks the window enables (cupti_runtime_cbid.h):
/// cudaLaunch, cudaLaunchKernel, their _ptsz forms, cudaLaunchCooperativeKernel(_ptsz),
/// cudaLaunchKernelExC(_ptsz), __cudaLaunchKernel(_ptsz).
pub const RUNTIME_LAUNCHES: [u32; 11] = [13, 211, 213, 214, 269, 270, 430, 431, 505, 506, 272];
/// `CUPTI_CB_DOMAIN_DRIVER_API` launch callbacks (cupti_driver_cbid.h): cuLaunch, cuLaunchGrid,
/// cuLaunchGridAsync, cuLaunchKernel(_ptsz), cuLaunchCooperativeKernel(_ptsz),
/// cuLaunchKernelEx(_ptsz). A driver launch made inside a runtime launch is the same launch.
pub const DRIVER_LAUNCHES: [u32; 9] = [115, 116, 117, 307, 442, 477, 478, 652, 653];

/// One launch seen while counting.
#[derive(Debug, Clone)]
pub struct Launch {
    /// CUPTI's correlation id (the kernel record's).
    pub correlation: u32,
    /// The context it was launched on.
    pub ctx: usize,
    /// The kernel's name (its launch callback's symbol name).
    pub name: String,
    /// Whether its values are kept (filters and iteration range).
    pub keep: bool,
    /// Blocks and threads per block, from the launch's parameters (where CUPTI's parameter
    /// struct has them): checked against the range's anchor metric.
    pub grid: Option<(u64, u64)>,
    /// API entry and exit, CUPTI's clock (the counted kernel's record may lack its start).
    pub enter: u64,
    /// See `enter`.
    pub exit: u64,
}

/// Why a window stopped counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Still counting.
    Running,
    /// `max_ranges` launches were counted.
    Budget,
    /// No launch was kept for a while: every kernel seen has its launches.
    NothingLeft,
}

/// Where the window is with respect to the range profiler's `Start` and `Stop` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `Start` is being called: a launch now may or may not become a range.
    Starting,
    /// Between `Start` and `Stop`: every launch is a range.
    Recording,
    /// `Stop` is being called: a launch now may or may not become a range.
    Stopping,
}

/// The open window.
pub struct Window {
    /// See [`Phase`].
    pub phase: Phase,
    /// Launches that went on while `Start` was called (the gate timed out), and launches in
    /// flight when the window opened (seen only at their exit): each may be a range before the
    /// first recorded one.
    pub during_start: u64,
    /// Index of each recorded launch by correlation id.
    pub index: HashMap<u32, usize>,
    /// See `during_start`.
    pub during_stop: u64,
    /// What to keep.
    pub plan: Arc<CounterPlan>,
    /// Contexts counted (their range profiler is started).
    pub contexts: Vec<usize>,
    /// Launches recorded, in order.
    pub launches: Vec<Launch>,
    /// Launches seen after recording stopped, per context (they may still be ranges until Stop).
    pub after: HashMap<usize, u64>,
    /// Launches seen per kernel name.
    pub per_name: HashMap<String, u64>,
    /// Launches recorded since the last kept one.
    pub since_kept: usize,
    /// Set when recording stopped.
    pub stop: StopReason,
    /// Iteration multiplexing, a pass after the first: the kernel names the first pass gave
    /// values to. The window does not stop for "nothing left" before each was kept here too
    /// (the budget still bounds it), so a kernel launched once a step gets every group.
    pub want: Option<HashSet<String>>,
    /// Names kept so far (see `want`).
    pub kept_names: HashSet<String>,
}

static ON: AtomicBool = AtomicBool::new(false);
/// Launch calls between their entry and exit callbacks (past the gate), whether or not a window
/// is open: [`drain`] waits for them before `Start`.
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);
static WINDOW: Mutex<Option<Window>> = Mutex::new(None);
/// Signalled when the window's phase changes: launches wait at the gate while `Start` and
/// `Stop` are called.
static GATE: Condvar = Condvar::new();

/// How long a launch waits at the gate at most (then it goes on, counted as uncertain): the
/// application is never held longer, whatever CUPTI does meanwhile.
pub const GATE_MS: u64 = 250;

thread_local! {
    static IN_RUNTIME_LAUNCH: Cell<bool> = const { Cell::new(false) };
}

fn lock() -> MutexGuard<'static, Option<Window>> {
    WINDOW.lock().unwrap_or_else(|e| e.into_inner())
}

/// Opens a window before `Start` is called: launches are counted as uncertain until
/// [`started`].
pub fn open(plan: Arc<CounterPlan>, contexts: Vec<usize>, want: Option<HashSet<String>>) {
    *lock() = Some(Window {
        phase: Phase::Starting,
        during_start: 0,
        index: HashMap::new(),
        during_stop: 0,
        plan,
        contexts,
        launches: Vec::new(),
        after: HashMap::new(),
        per_name: HashMap::new(),
        since_kept: 0,
        stop: StopReason::Running,
        want,
        kept_names: HashSet::new(),
    });
    ON.store(true, Ordering::SeqCst);
}

/// Forgets launches counted in flight (the launch callbacks were just enabled: a launch in its
/// call then has no entry to match its exit).
pub fn reset_in_flight() {
    IN_FLIGHT.store(0, Ordering::SeqCst);
}

/// After [`open`], waits (at most `max`) until no launch is in its call: new launches wait at
/// the gate, and those that entered before the window opened end before `Start` is called, so
/// none of them may or may not become a range (an uncertain first range cannot be resolved in
/// a pass that does not count the anchor metric). Whether none was left.
pub fn drain(max: Duration) -> bool {
    let g = lock();
    let busy = |_: &mut Option<Window>| IN_FLIGHT.load(Ordering::SeqCst) > 0;
    match GATE.wait_timeout_while(g, max, busy) {
        Ok((_, t)) => !t.timed_out(),
        Err(e) => !e.into_inner().1.timed_out(),
    }
}

/// One launch call past the gate (`entering`) or out of its call; the last one out wakes
/// [`drain`].
fn in_flight(entering: bool) {
    if entering {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    } else {
        let left = IN_FLIGHT
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some((n - 1).max(0)))
            .unwrap_or(0);
        if left <= 1 && ON.load(Ordering::Relaxed) {
            GATE.notify_all();
        }
    }
}

/// `Start` returned: launches are recorded from now on (those waiting at the gate go on).
pub fn started() {
    if let Some(w) = lock().as_mut() {
        w.phase = Phase::Recording;
    }
    GATE.notify_all();
}

/// `Stop` is about to be called: launches wait at the gate until [`close`].
pub fn stopping() {
    if let Some(w) = lock().as_mut() {
        w.phase = Phase::Stopping;
    }
}

/// Closes the window (after the range profiler stopped): what it recorded.
pub fn close() -> Option<Window> {
    ON.store(false, Ordering::SeqCst);
    let w = lock().take();
    GATE.notify_all();
    w
}

/// Why recording stopped ([`StopReason::Running`] while it goes on or with no window).
pub fn stop_reason() -> StopReason {
    lock().as_ref().map_or(StopReason::Running, |w| w.stop)
}

/// Correlation ids of the launches recorded so far: their kernel rows wait for their values
/// (kept ones) or their launch times (counted kernels' records may lack a start).
pub fn recorded_correlations() -> Vec<u32> {
    lock().as_ref().map_or_else(Vec::new, |w| {
        w.launches.iter().map(|l| l.correlation).collect()
    })
}

/// The head of `CUpti_CallbackData` (cupti_callbacks.h) as far as the tool reads it.
#[repr(C)]
pub struct CallbackData {
    /// `callbackSite`: 0 API entry, 1 exit.
    pub site: c_int,
    /// `functionName`.
    pub function_name: *const std::ffi::c_char,
    /// `functionParams`.
    pub function_params: *const c_void,
    /// `functionReturnValue`.
    pub function_return_value: *mut c_void,
    /// `symbolName`: the kernel's name for launches.
    pub symbol_name: *const std::ffi::c_char,
    /// `context`.
    pub context: *mut c_void,
    /// `contextUid`.
    pub context_uid: u32,
    /// `correlationData`.
    pub correlation_data: *mut u64,
    /// `correlationId`.
    pub correlation_id: u32,
}

fn timestamp() -> u64 {
    let mut t = 0u64;
    if let Some(c) = crate::activity::CUPTI.get() {
        // SAFETY: valid out pointer.
        unsafe { (c.get_timestamp)(&mut t) };
    }
    t
}

/// Blocks and threads per block of launch callback `cbid`'s parameters: the runtime's
/// `cudaLaunchKernel*` and `cudaLaunchCooperativeKernel*` and the driver's `cuLaunchKernel*` and
/// `cuLaunchCooperativeKernel*` start with a pointer then six `unsigned int`s (grid, block);
/// `cudaLaunchKernelExC*` and `cuLaunchKernelEx*` start with a pointer to a config that starts
/// with the same six (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h, cuda.h).
///
/// # Safety
/// `params` must be CUPTI's `functionParams` of that callback, or null.
unsafe fn grid_of(runtime: bool, cbid: u32, params: *const c_void) -> Option<(u64, u64)> {
    if params.is_null() {
        return None;
    }
    let dims: *const u32 = match (runtime, cbid) {
        (true, 211 | 214 | 269 | 270) | (false, 307 | 442 | 477 | 478) => {
            (params as *const u8).add(8) as *const u32
        }
        (true, 430 | 431) | (false, 652 | 653) => {
            let config = *(params as *const *const u32);
            if config.is_null() {
                return None;
            }
            config
        }
        _ => return None,
    };
    let d = std::slice::from_raw_parts(dims, 6);
    let blocks = d[0] as u64 * d[1] as u64 * d[2] as u64;
    let threads = d[3] as u64 * d[4] as u64 * d[5] as u64;
    Some((blocks, threads))
}

impl Window {
    fn enter(&mut self, d: &CallbackData, name: &str, grid: Option<(u64, u64)>) {
        let ctx = d.context as usize;
        if !self.contexts.contains(&ctx) {
            return;
        }
        match self.phase {
            Phase::Starting => {
                self.during_start += 1;
                return;
            }
            Phase::Stopping => {
                self.during_stop += 1;
                return;
            }
            Phase::Recording => {}
        }
        self.index.insert(d.correlation_id, self.launches.len());
        if self.stop != StopReason::Running {
            *self.after.entry(ctx).or_default() += 1;
            return;
        }
        let n = self.per_name.entry(name.to_owned()).or_default();
        *n += 1;
        let keep = self.plan.keeps(name, *n);
        self.since_kept = if keep { 0 } else { self.since_kept + 1 };
        if keep && self.want.is_some() {
            self.kept_names.insert(name.to_owned());
        }
        self.launches.push(Launch {
            correlation: d.correlation_id,
            ctx,
            name: name.to_owned(),
            keep,
            grid,
            enter: timestamp(),
            exit: 0,
        });
        if self.launches.len() >= self.plan.max_ranges {
            self.stop = StopReason::Budget;
        } else if self.since_kept >= (2 * self.per_name.len()).max(64) && self.has_wanted() {
            self.stop = StopReason::NothingLeft;
        }
    }

    /// Whether every name of `want` was kept (always, without one).
    fn has_wanted(&self) -> bool {
        self.want
            .as_ref()
            .is_none_or(|w| w.iter().all(|n| self.kept_names.contains(n)))
    }

    fn exit(&mut self, ctx: usize, correlation: u32) {
        match self.index.get(&correlation) {
            Some(&i) => self.launches[i].exit = timestamp(),
            // A launch in flight when the window opened that ends before `Start` is called
            // ([`drain`]) is no range; one that ends after may have become one.
            None if self.phase == Phase::Starting => {}
            None if self.contexts.contains(&ctx) && self.launches.is_empty() => {
                self.during_start += 1
            }
            None => {}
        }
    }
}

/// `CUpti_CallbackFunc` of the tool's subscriber: records launches while a window is open, and
/// runs a detached session's CUPTI teardown at a launch's exit ([`crate::teardown`]).
///
/// # Safety
/// Called by CUPTI with `cbdata` pointing at a `CUpti_CallbackData` for API domains.
pub unsafe extern "C" fn on_callback(
    _userdata: *mut c_void,
    domain: c_int,
    cbid: u32,
    cbdata: *const c_void,
) {
    if cbdata.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if (*(cbdata as *const CallbackData)).site == 1 {
            crate::teardown::on_api_exit(); // a detached session's teardown, if one waits
        }
        let runtime = domain == crate::cupti::CUPTI_CB_DOMAIN_RUNTIME_API;
        let driver = domain == crate::cupti::CUPTI_CB_DOMAIN_DRIVER_API;
        if !(runtime && RUNTIME_LAUNCHES.contains(&cbid)
            || driver && DRIVER_LAUNCHES.contains(&cbid))
        {
            return;
        }
        let d = &*(cbdata as *const CallbackData);
        let entering = d.site == 0;
        // Kept whether or not a window is open, so a runtime launch that straddles a window's
        // edge cannot leave its thread's later driver launches ignored.
        if runtime {
            IN_RUNTIME_LAUNCH.with(|c| c.set(entering));
        }
        if driver && IN_RUNTIME_LAUNCH.with(Cell::get) {
            return; // the runtime launch around it is the one recorded
        }
        if !ON.load(Ordering::Relaxed) {
            in_flight(entering);
            return;
        }
        let mut g = lock();
        // While Start or Stop is called, a launch waits (bounded) so that it is plainly before
        // or after: the range profiler's own calls then decide nothing about it.
        if entering {
            let closed = |w: &mut Option<Window>| {
                w.as_ref()
                    .is_some_and(|w| matches!(w.phase, Phase::Starting | Phase::Stopping))
            };
            g = match GATE.wait_timeout_while(g, Duration::from_millis(GATE_MS), closed) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        in_flight(entering);
        let Some(w) = g.as_mut() else { return };
        if entering {
            let name = if d.symbol_name.is_null() {
                std::borrow::Cow::Borrowed("")
            } else {
                CStr::from_ptr(d.symbol_name).to_string_lossy()
            };
            w.enter(d, &name, grid_of(runtime, cbid, d.function_params));
        } else {
            w.exit(d.context as usize, d.correlation_id);
        }
    }));
}
