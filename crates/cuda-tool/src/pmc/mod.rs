//! Per-kernel hardware counters (`--pmc`) through CUPTI's range profiler: auto range, one
//! range per kernel, started and stopped on the tool's thread (docs/cuda.md, "Counters").
//!
//! * Per session ([`Counters`], released at detach): the profiler is initialised, the counter
//!   availability read (it stalls the application about 0.6 s on the H200), a config built for
//!   the metrics, and a range profiler enabled on every active primary context. Objects kept
//!   enabled between sessions left the H200 transformer 20 % slower and 3 GB larger, so detach
//!   disables them ([`release`]) and CUPTI is torn down with the session.
//! * Per window: the counter data image is reset, `SetConfig`, `Start`, and the launch callbacks
//!   ([`launches`]) record the launches in order. Counting serialises kernels, so the window
//!   stops counting after [`crate::metrics::DEFAULT_MAX_RANGES`] launches or when nothing more
//!   is kept; then (at the next tick, or at detach) `Stop`, `DecodeData`, and every range is
//!   evaluated and given to its launch: range *i* is launch *i*.
//! * A refusal (no privileges, unknown metric, a set needing several passes) happens before
//!   anything is enabled.

mod attribute;
pub mod launches;
pub mod multiplex;
mod setup;

pub use attribute::Anchor;
use attribute::{attribute, Uncertain};

pub(crate) use setup::{availability_of, chip_name_of, pm_config, refuse_or_fail_of};

/// The names of the metrics evaluated: the plan's, then the anchor added (if any).
fn plan_names(plan: &CounterPlan, evaluated: usize) -> Vec<String> {
    let mut names: Vec<String> = plan.counters.iter().map(|c| c.name.clone()).collect();
    names.resize(evaluated.max(names.len()), "sm__ctas_launched.sum".into());
    names
}

/// Disables every range profiler of `counters` and releases its host object (at detach: the
/// counters are not kept between sessions).
pub(crate) fn release(counters: Counters) {
    setup::disable(counters);
}

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use std::time::Instant;

use crate::metrics::CounterPlan;
use crate::profiler::{self, Profiler};
use crate::protocol::{Code, ToolError};
use launches::{Launch, StopReason};

/// The counter values of one counted launch, and its launch call's times.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelValues {
    /// One value per counter of the plan, in its order (scaled: [`crate::metrics::Counter`]);
    /// empty for a launch counted but not kept (or not attributed).
    pub values: Vec<f64>,
    /// API entry and exit of the launch, CUPTI's clock.
    pub enter: u64,
    /// See `enter`.
    pub exit: u64,
}

/// A range profiler enabled on one context.
struct Object {
    ordinal: i32,
    ctx: *mut c_void,
    object: *mut c_void,
    /// The counter data image (8-byte aligned) and its size in bytes.
    image: Vec<u64>,
    size: usize,
}

impl Object {
    fn image_bytes(&mut self) -> (*mut u8, usize) {
        (self.image.as_mut_ptr() as *mut u8, self.size)
    }
}

/// The counter state of a session: set up at attach, released at detach ([`release`]).
pub struct Counters {
    prof: Profiler,
    /// (metrics, kernel replay) the objects are configured for.
    key: (Vec<String>, bool),
    host: *mut c_void,
    config: Vec<u8>,
    /// The counter availability image the host object was made with: kept as long as it,
    /// since CUPTI need not copy what it is given.
    _avail: Vec<u8>,
    passes: usize,
    metrics: Vec<CString>,
    objects: Vec<Object>,
    max_ranges: usize,
    /// The metric that checks a range against its launch's grid (maybe added, not written).
    anchor: Anchor,
    /// The open window's plan and report.
    window: Option<(Arc<CounterPlan>, Report, Instant)>,
    /// Iteration multiplexing's cycle of passes (`--replay-mode iteration`, several passes).
    multiplex: Option<multiplex::Multiplex>,
}

/// What a window counted and cost: the `counters` object of the detach reply.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// `name -> NVIDIA metric` in the plan's order.
    pub metrics: Vec<(String, String)>,
    /// `--replay-mode kernel` (every pass replayed per kernel) or user replay (one pass).
    pub replay: &'static str,
    /// Passes of the metric set.
    pub passes: usize,
    /// Contexts (devices) counted.
    pub devices: Vec<i32>,
    /// Launches counted (each serialised by the range profiler), and the launches kept.
    pub launches: usize,
    /// Launches whose values were kept and written.
    pub kept: usize,
    /// Ranges decoded and ranges CUPTI dropped.
    pub ranges: usize,
    /// See `ranges`.
    pub dropped: usize,
    /// Why counting stopped: "budget", "nothing-left" (every kernel had its launches) or
    /// "detach".
    pub stopped_by: &'static str,
    /// From `Start` to `Stop` (ms): the time kernels were serialised.
    pub counting_ms: u64,
    /// Set-up costs of this session (µs): configuring and enabling.
    pub setup_us: u64,
    /// `Start`, `Stop` and decoding with evaluation (µs).
    pub start_us: u64,
    /// See `start_us`.
    pub stop_us: u64,
    /// See `start_us`.
    pub decode_us: u64,
    /// What the user should know (mismatches, re-enabling).
    pub notes: Vec<String>,
    /// Iteration multiplexing: the passes counted, their groups and every kernel's launches
    /// per pass (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplexed: Option<multiplex::Multiplexed>,
}

impl Report {
    /// Adds a later pass's window to this one (iteration multiplexing).
    pub fn add(&mut self, later: Report) {
        self.launches += later.launches;
        self.kept += later.kept;
        self.ranges += later.ranges;
        self.dropped += later.dropped;
        self.stopped_by = later.stopped_by;
        self.counting_ms += later.counting_ms;
        self.start_us += later.start_us;
        self.stop_us += later.stop_us;
        self.decode_us += later.decode_us;
        self.notes.extend(later.notes);
        self.multiplexed = later.multiplexed;
    }
}

/// How long a window's `Start` waits at most for the launches in their call to end.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(100);

/// Enables the tool's launch callbacks on subscriber `sub` (runtime and driver launches).
///
/// # Safety
/// `sub` must come from `cuptiSubscribe` of `c` and still be subscribed.
pub unsafe fn enable_callbacks(c: &crate::cupti::Cupti, sub: *mut c_void) -> Result<(), ToolError> {
    let Some(enable) = c.enable_callback else {
        return Err(ToolError::new(
            Code::CuptiOld,
            format!("{} lacks cuptiEnableCallback; use the libcupti of CUDA 12 or 13 (ROCPROF_ATTACH_CUPTI)", c.path.display()),
        ));
    };
    let domains = [
        (
            crate::cupti::CUPTI_CB_DOMAIN_RUNTIME_API,
            &launches::RUNTIME_LAUNCHES[..],
        ),
        (
            crate::cupti::CUPTI_CB_DOMAIN_DRIVER_API,
            &launches::DRIVER_LAUNCHES[..],
        ),
    ];
    launches::reset_in_flight();
    for (domain, cbids) in domains {
        for &cbid in cbids {
            // SAFETY: sub came from cuptiSubscribe.
            let r = unsafe { enable(1, sub, domain, cbid) };
            if r != 0 {
                return Err(failed(
                    &format!("cuptiEnableCallback({domain}, {cbid})"),
                    c,
                    r,
                ));
            }
        }
    }
    Ok(())
}

fn failed(what: &str, c: &crate::cupti::Cupti, r: i32) -> ToolError {
    ToolError::new(
        Code::Internal,
        format!("{what} failed with {}; counters are not collected: attach without --pmc, or report this", c.describe(r)),
    )
}

impl Counters {
    /// Sets the counters up for `plan` (a session's: they are released at detach), with notes
    /// for the session; a refusal happens before anything is enabled.
    pub fn prepare(
        c: &crate::cupti::Cupti,
        plan: &CounterPlan,
    ) -> Result<(Counters, Vec<String>), ToolError> {
        let key = (
            plan.counters
                .iter()
                .map(|x| x.metric.clone())
                .collect::<Vec<_>>(),
            plan.kernel_replay,
        );
        setup::create(c, plan, key)
    }

    /// Opens a counting window: resets every image, sets the config, starts the range profilers
    /// and the launch callbacks' recording.
    pub fn start(
        &mut self,
        c: &crate::cupti::Cupti,
        plan: Arc<CounterPlan>,
        setup_us: u64,
    ) -> Result<(), ToolError> {
        let t0 = Instant::now();
        let replay = if self.key.1 {
            profiler::KERNEL_REPLAY
        } else {
            profiler::USER_REPLAY
        };
        let (config, max_ranges) = (self.config.as_ptr(), self.max_ranges);
        let config_size = self.config.len();
        let contexts = self.objects.iter().map(|o| o.ctx as usize).collect();
        let want = self
            .multiplex
            .as_ref()
            .filter(|m| m.pass > 0)
            .map(|m| m.first_pass_names());
        launches::open(plan.clone(), contexts, want);
        // Launches in their call end before Start (a launch still in its call after that is
        // counted as uncertain, and resolved by the anchor metric where the pass counts it).
        let _ = launches::drain(DRAIN);
        let started = match self.multiplex.as_mut() {
            Some(m) if m.pass > 0 => self.restart_objects(c),
            Some(m) => {
                m.plan = Some(plan.clone());
                self.start_objects(c, replay, config, config_size, max_ranges)
            }
            None => self.start_objects(c, replay, config, config_size, max_ranges),
        };
        if let Err(e) = started {
            launches::close();
            return Err(e);
        }
        launches::started();
        let report = Report {
            metrics: plan
                .counters
                .iter()
                .map(|x| (x.name.clone(), x.metric.clone()))
                .collect(),
            replay: match (self.key.1, &self.multiplex) {
                (true, _) => "kernel",
                (false, Some(_)) => "iteration",
                (false, None) => "user",
            },
            passes: self.passes,
            devices: self.objects.iter().map(|o| o.ordinal).collect(),
            setup_us,
            start_us: t0.elapsed().as_micros() as u64,
            ..Default::default()
        };
        self.window = Some((plan, report, Instant::now()));
        Ok(())
    }

    /// Resets every image, sets the config and starts every object; on a failure the objects
    /// already started are stopped again (nothing is left counting).
    fn start_objects(
        &mut self,
        c: &crate::cupti::Cupti,
        replay: i32,
        config: *const u8,
        config_size: usize,
        max_ranges: usize,
    ) -> Result<(), ToolError> {
        let mut started = 0;
        let r = self.start_each(c, replay, config, config_size, max_ranges, &mut started);
        if r.is_err() {
            let prof = self.prof;
            for o in &self.objects[..started] {
                let obj = o.object;
                // SAFETY: an object of ours that this call started.
                let _ =
                    unsafe { profiler::call(prof.rp_stop, |p| p.p_range_profiler_object = obj) };
            }
        }
        r
    }

    /// Starts every object again for the next pass of the cycle (its image and config stay: a
    /// pass decoded merges into the image); on a failure the objects started are stopped.
    fn restart_objects(&mut self, c: &crate::cupti::Cupti) -> Result<(), ToolError> {
        let prof = self.prof;
        for (i, o) in self.objects.iter().enumerate() {
            let obj = o.object;
            // SAFETY: a configured, stopped object of ours.
            let r = unsafe { profiler::call(prof.rp_start, |p| p.p_range_profiler_object = obj) };
            if let Err(r) = r {
                for o in &self.objects[..i] {
                    let obj = o.object;
                    // SAFETY: an object this call started.
                    let _ = unsafe {
                        profiler::call(prof.rp_stop, |p| p.p_range_profiler_object = obj)
                    };
                }
                return Err(failed("cuptiRangeProfilerStart", c, r));
            }
        }
        Ok(())
    }

    /// The next pass of iteration multiplexing is due (the last window stopped by itself and
    /// the cycle is not complete): its plan, to [`Counters::start`] it at once.
    pub fn next_pass(&self) -> Option<Arc<CounterPlan>> {
        let m = self.multiplex.as_ref()?;
        if m.next && self.window.is_none() {
            m.plan.clone()
        } else {
            None
        }
    }

    /// [`Counters::start_objects`]'s loop; `started` counts the objects started.
    fn start_each(
        &mut self,
        c: &crate::cupti::Cupti,
        replay: i32,
        config: *const u8,
        config_size: usize,
        max_ranges: usize,
        started: &mut usize,
    ) -> Result<(), ToolError> {
        let prof = self.prof;
        for o in &mut self.objects {
            let (image, size) = o.image_bytes();
            let obj = o.object;
            // SAFETY: the object came from cuptiRangeProfilerEnable; image and config live in
            // self for as long as the object is configured with them.
            unsafe {
                profiler::call(prof.rp_data_init, |p| {
                    p.p_range_profiler_object = obj;
                    p.counter_data_size = size;
                    p.p_counter_data = image;
                })
                .map_err(|r| failed("cuptiRangeProfilerCounterDataImageInitialize", c, r))?;
                profiler::call(prof.rp_set_config, |p| {
                    p.p_range_profiler_object = obj;
                    p.config_size = config_size;
                    p.p_config = config;
                    p.counter_data_image_size = size;
                    p.p_counter_data_image = image;
                    p.range = profiler::AUTO_RANGE;
                    p.replay_mode = replay;
                    p.max_ranges_per_pass = max_ranges;
                    p.num_nesting_levels = 1;
                    p.min_nesting_level = 1;
                    p.pass_index = 0;
                    p.target_nesting_level = 1;
                })
                .map_err(|r| failed("cuptiRangeProfilerSetConfig", c, r))?;
                profiler::call(prof.rp_start, |p| p.p_range_profiler_object = obj)
                    .map_err(|r| failed("cuptiRangeProfilerStart", c, r))?;
            }
            *started += 1;
        }
        Ok(())
    }

    /// Whether a window is open and its recording stopped (budget or nothing left to keep):
    /// time to [`Counters::finish`].
    pub fn due(&self) -> bool {
        self.window.is_some() && launches::stop_reason() != StopReason::Running
    }

    /// Whether a window is open.
    pub fn counting(&self) -> bool {
        self.window.is_some()
    }

    /// Stops the window: `Stop`, `DecodeData`, evaluation; the values of the kept launches by
    /// correlation id, and the report. `None` when no window is open.
    pub fn finish(
        &mut self,
        c: &crate::cupti::Cupti,
    ) -> Option<(HashMap<u32, KernelValues>, Report)> {
        let (plan, mut report, started) = self.window.take()?;
        let t0 = Instant::now();
        let prof = self.prof;
        launches::stopping();
        let mut all_submitted = true;
        for o in &self.objects {
            let obj = o.object;
            // SAFETY: a started object of ours.
            match unsafe { profiler::call(prof.rp_stop, |p| p.p_range_profiler_object = obj) } {
                Ok(p) => all_submitted &= p.is_all_pass_submitted != 0,
                Err(r) => report.notes.push(format!(
                    "cuptiRangeProfilerStop failed with {}",
                    c.describe(r)
                )),
            }
        }
        let window = launches::close();
        report.stop_us = t0.elapsed().as_micros() as u64;
        report.counting_ms = started.elapsed().as_millis() as u64;
        let t1 = Instant::now();
        let mut values = HashMap::new();
        if let Some(w) = window.as_ref() {
            report.stopped_by = match w.stop {
                StopReason::Budget => "budget",
                StopReason::NothingLeft => "nothing-left",
                StopReason::Running => "detach",
            };
            report.launches = w.launches.len();
            for i in 0..self.objects.len() {
                let (mut ranges, dropped) = self.decode(c, i, &mut report);
                if let Some(m) = self.multiplex.as_mut() {
                    ranges = m.fresh(i, ranges, &plan_names(&plan, self.metrics.len()));
                }
                let ctx = self.objects[i].ctx as usize;
                let mine: Vec<&Launch> = w.launches.iter().filter(|l| l.ctx == ctx).collect();
                let uncertain = Uncertain {
                    after: w.after.get(&ctx).copied().unwrap_or(0) as usize,
                    during_start: w.during_start as usize,
                    during_stop: w.during_stop as usize,
                    dropped,
                };
                let anchor = self.anchor;
                attribute(
                    &plan,
                    &mine,
                    &uncertain,
                    anchor,
                    ranges,
                    &mut values,
                    &mut report,
                );
            }
        }
        report.kept = values.values().filter(|v| !v.values.is_empty()).count();
        report.decode_us = t1.elapsed().as_micros() as u64;
        if let (Some(m), Some(w)) = (self.multiplex.as_mut(), window.as_ref()) {
            let given = |k: u32| {
                values
                    .get(&k)
                    .is_some_and(|v: &KernelValues| v.values.iter().any(|x| !x.is_nan()))
            };
            m.count(&w.launches, given);
            m.end_pass(all_submitted, w.stop != StopReason::Running);
            report.multiplexed = Some(m.summary.clone());
        }
        Some((values, report))
    }

    /// Decodes object `i`'s ranges and evaluates each: one value per metric (unscaled), and the
    /// ranges CUPTI dropped.
    fn decode(
        &mut self,
        c: &crate::cupti::Cupti,
        i: usize,
        report: &mut Report,
    ) -> (Vec<Vec<f64>>, usize) {
        let prof = self.prof;
        let names: Vec<*const std::ffi::c_char> = self.metrics.iter().map(|m| m.as_ptr()).collect();
        let host = self.host;
        let o = &mut self.objects[i];
        let obj = o.object;
        let (image, size) = o.image_bytes();
        // SAFETY: a stopped object of ours and its image; `names` outlives the calls.
        unsafe {
            let dropped = match profiler::call(prof.rp_decode, |p| p.p_range_profiler_object = obj)
            {
                Ok(p) => p.num_of_range_dropped,
                Err(r) => {
                    report.notes.push(format!(
                        "cuptiRangeProfilerDecodeData failed with {}: no values",
                        c.describe(r)
                    ));
                    return (Vec::new(), 0);
                }
            };
            report.dropped += dropped;
            let total = profiler::call(prof.rp_data_info, |p| {
                p.p_counter_data_image = image;
                p.counter_data_image_size = size;
            })
            .map_or(0, |p| p.num_total_ranges);
            let mut out = Vec::with_capacity(total);
            for r in 0..total {
                let mut v = vec![f64::NAN; names.len()];
                let ok = profiler::call(prof.host_evaluate, |p| {
                    p.p_host_object = host;
                    p.p_counter_data_image = image;
                    p.counter_data_image_size = size;
                    p.range_index = r;
                    p.pp_metric_names = names.as_ptr();
                    p.num_metrics = names.len();
                    p.p_metric_values = v.as_mut_ptr();
                });
                if ok.is_err() {
                    v.fill(f64::NAN);
                }
                out.push(v);
            }
            report.ranges += total;
            (out, dropped)
        }
    }
}
