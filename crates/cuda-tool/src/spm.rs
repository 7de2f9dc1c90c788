//! GPU-wide counter time series (`--spm`) through CUPTI's PM sampling (docs/cuda.md, "Sampled
//! counters"): on the tool's own thread, `SetConfig` and `Start` at attach, the completed samples
//! decoded and evaluated at every tick (and written then: [`Sampler::take`]), `Stop` and `Disable`
//! at detach. The first sample of a `Start` is stale (it began before `Start`) and is dropped.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};

use crate::cupti::Cupti;
use crate::metrics::{parse_names, resolve, Counter};
use crate::profiler::{self, Profiler};
use crate::protocol::{Code, ToolError};

/// The default sampled set when `--spm` names nothing: single-pass metrics (SM and graphics
/// engine activity against elapsed cycles).
pub const DEFAULT_METRICS: [&str; 3] = [
    "sm__cycles_active.avg",
    "gr__cycles_active.avg",
    "gpc__cycles_elapsed.max",
];

/// The default interval (1 ms: PM sampling at 1 ms cost nothing measurable on the H200).
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000;

/// The table of the samples, created by the tool's writer (docs/output.md).
pub const TABLE_SQL: &str = "CREATE TABLE IF NOT EXISTS rocpd_spm_sample (id INTEGER PRIMARY KEY, agent_id INTEGER, start INTEGER NOT NULL, end INTEGER NOT NULL, counter TEXT NOT NULL, metric TEXT NOT NULL, value REAL)";

/// Samples the counter data image holds between two decodes.
const MAX_SAMPLES: u32 = 4000;

/// What `--spm` asks for.
#[derive(Debug, Clone)]
pub struct SpmPlan {
    /// The sampled counters (rocprofv3 names mapped as for `--pmc`).
    pub counters: Vec<Counter>,
    /// Sample length in ns.
    pub interval_ns: u64,
}

/// The `--spm` plan of the attach settings, `None` without `ROCPROF_SPM_COUNTER_COLLECTION`.
pub fn spm_plan(env: &BTreeMap<String, String>) -> Result<Option<SpmPlan>, ToolError> {
    let on = env
        .get("ROCPROF_SPM_COUNTER_COLLECTION")
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
    if !on {
        return Ok(None);
    }
    let mut names = parse_names(env.get("ROCPROF_SPM_COUNTERS").map_or("", |s| s.as_str()));
    if names.is_empty() {
        names = DEFAULT_METRICS.iter().map(|s| s.to_string()).collect();
    }
    let counters = names
        .iter()
        .map(|n| resolve(n))
        .collect::<Result<Vec<_>, _>>()?;
    let value: u64 = env
        .get("ROCPROF_SPM_SAMPLE_INTERVAL")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let unit = env
        .get("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT")
        .map_or("none", |s| s.as_str());
    if unit == "sclk_cycles" {
        return Err(ToolError::new(
            Code::Unsupported,
            "--spm-sample-interval-unit sclk_cycles has no CUDA counterpart (PM sampling takes a time); nothing was enabled. Fix: drop the unit and give --spm-sample-interval in microseconds",
        ));
    }
    let interval_ns = match (value, unit) {
        (0, _) => DEFAULT_INTERVAL_NS,
        (v, "ns" | "nsec") => v,
        (v, "ms" | "msec") => v.saturating_mul(1_000_000),
        (v, _) => v.saturating_mul(1_000), // microseconds by default
    };
    if interval_ns < 1000 {
        return Err(ToolError::new(
            Code::Unsupported,
            format!("--spm-sample-interval of {interval_ns} ns is below what PM sampling takes on CUDA (1 us); nothing was enabled. Fix: pass --spm-sample-interval 1000 (1 ms, the default) or more"),
        ));
    }
    Ok(Some(SpmPlan {
        counters,
        interval_ns,
    }))
}

/// One sample: its CUPTI-clock times and one value per counter (scaled).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Start of the sample (cuptiGetTimestamp's clock).
    pub start: u64,
    /// End of the sample.
    pub end: u64,
    /// One value per counter of the plan.
    pub values: Vec<f64>,
}

/// What `--spm` costs the tool's thread at its ticks (the detach reply's `spm_tick_us`): the
/// decode (CUPTI's `DecodeData` and the evaluation of each sample) and the write of the samples,
/// in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct TickCost {
    ticks: u64,
    decode_total: u64,
    decode_max: u64,
    write_total: u64,
    write_max: u64,
}

impl TickCost {
    /// Adds one tick's decode and write times.
    pub fn add(&mut self, decode: std::time::Duration, write: std::time::Duration) {
        let (d, w) = (decode.as_micros() as u64, write.as_micros() as u64);
        self.ticks += 1;
        self.decode_total += d;
        self.decode_max = self.decode_max.max(d);
        self.write_total += w;
        self.write_max = self.write_max.max(w);
    }

    /// `{"ticks", "decode_mean", "decode_max", "write_mean", "write_max"}` (µs).
    pub fn json(&self) -> serde_json::Value {
        let mean = |t: u64| t.checked_div(self.ticks).unwrap_or(0);
        serde_json::json!({
            "ticks": self.ticks,
            "decode_mean": mean(self.decode_total), "decode_max": self.decode_max,
            "write_mean": mean(self.write_total), "write_max": self.write_max,
        })
    }
}

/// A running PM sampler on one device.
pub struct Sampler {
    prof: Profiler,
    host: *mut c_void,
    object: *mut c_void,
    image: Vec<u64>,
    size: usize,
    /// The metric names `kept.2` points into.
    _metrics: Vec<CString>,
    /// What the host object, `SetConfig` and `GetCounterDataSize` were given (the availability
    /// image, the config image, the metric name pointers), kept while sampling runs: CUPTI
    /// need not copy them, and a target died of SIGSEGV within 400 ms of sampling on the H200
    /// while they were freed after `Start`.
    kept: (Vec<u8>, Vec<u8>, Vec<*const c_char>),
    scales: Vec<f64>,
    stale_dropped: bool,
    /// `CLOCK_BOOTTIME` just after `Start` returned, and the end of the stale first sample
    /// (which ends at `Start`, on the samples' clock): the samples' own clock offset.
    started_boot: i64,
    stale_end: Option<u64>,
    /// The samples decoded and not taken yet.
    pub samples: Vec<Sample>,
}

/// How far the samples' clock may stray from CUPTI's timestamp clock before the samples are
/// placed by their own `Start` instead (ns). On the H200 the two agreed in a session that also
/// traced kernels and were 20 days apart in one that did not.
const CLOCK_TRUST_NS: i64 = 1_000_000_000;

fn failed(what: &str, c: &Cupti, r: i32) -> ToolError {
    ToolError::new(
        Code::Internal,
        format!("{what} failed with {}; sampled counters are not collected: attach without --spm, or report this", c.describe(r)),
    )
}

/// Device 0's PM sampling counter availability image (the host object takes it).
fn availability(c: &Cupti, prof: &Profiler) -> Result<Vec<u8>, ToolError> {
    let what = "cuptiPmSamplingGetCounterAvailability";
    // SAFETY: size query, then the buffer of that size.
    unsafe {
        let p = profiler::call(prof.pm_availability, |p| p.device_index = 0)
            .map_err(|r| crate::pmc::refuse_or_fail_of(c, what, r))?;
        let mut image = vec![0u8; p.counter_availability_image_size];
        profiler::call(prof.pm_availability, |p| {
            p.device_index = 0;
            p.counter_availability_image_size = image.len();
            p.p_counter_availability_image = image.as_mut_ptr();
        })
        .map_err(|r| crate::pmc::refuse_or_fail_of(c, what, r))?;
        Ok(image)
    }
}

impl Sampler {
    /// Configures and starts PM sampling of `plan` on device 0; a refusal (no privileges, an
    /// unknown metric, a set needing several passes) leaves nothing enabled.
    pub fn start(c: &Cupti, plan: &SpmPlan) -> Result<Sampler, ToolError> {
        let prof = *c.profiler.as_ref().map_err(|missing| {
            ToolError::new(
                Code::Unsupported,
                format!("this libcupti lacks the PM sampling API ({}); sampled counters need CUDA 12.6 or later. Fix: point ROCPROF_ATTACH_CUPTI at a newer libcupti, or attach without --spm", missing.join(", ")),
            )
        })?;
        let chip = crate::pmc::chip_name_of(c, &prof, 0)?;
        let metrics: Vec<CString> = plan
            .counters
            .iter()
            .map(|x| CString::new(x.metric.as_str()).unwrap_or_default())
            .collect();
        let avail = availability(c, &prof)?;
        let (host, config, passes) =
            crate::pmc::pm_config(c, &prof, &chip, &avail, &metrics).map_err(|(e, bad)| match bad {
                Some(i) => ToolError::new(
                    Code::Unsupported,
                    format!("CUPTI does not know the metric {} for PM sampling on this GPU ({}): {}. Fix: list the metrics with `ncu --query-metrics` and pass one of them", plan.counters[i].metric, chip.to_string_lossy(), e.message),
                ),
                None => e,
            })?;
        let mut s = Sampler {
            prof,
            host,
            object: std::ptr::null_mut(),
            image: Vec::new(),
            size: 0,
            kept: (
                Vec::new(),
                Vec::new(),
                metrics.iter().map(|m| m.as_ptr()).collect(),
            ),
            _metrics: metrics,
            scales: plan.counters.iter().map(|x| x.scale).collect(),
            stale_dropped: false,
            started_boot: 0,
            stale_end: None,
            samples: Vec::new(),
        };
        if passes > 1 {
            s.release();
            return Err(ToolError::new(
                Code::Unsupported,
                format!("these metrics need {passes} passes as a PM sampling set and sampling takes one; nothing was enabled. Fix: sample single-pass metrics such as {}", DEFAULT_METRICS.join(", ")),
            ));
        }
        s.kept.0 = avail;
        s.kept.1 = config;
        if let Err(e) = s.enable(c, plan.interval_ns) {
            s.release();
            return Err(e);
        }
        Ok(s)
    }

    fn enable(&mut self, c: &Cupti, interval_ns: u64) -> Result<(), ToolError> {
        let prof = self.prof;
        // SAFETY: valid parameter structs; the config, names and image live as long as `self`.
        unsafe {
            self.object = profiler::call(prof.pm_enable, |p| p.device_index = 0)
                .map_err(|r| crate::pmc::refuse_or_fail_of(c, "cuptiPmSamplingEnable", r))?
                .p_pm_sampling_object;
            let obj = self.object;
            let (names, n_names) = (self.kept.2.as_ptr(), self.kept.2.len());
            let (config, n_config) = (self.kept.1.as_ptr(), self.kept.1.len());
            // NVIDIA's order (its PM sampling sample): SetConfig, then the counter data image.
            profiler::call(prof.pm_set_config, |p| {
                p.p_pm_sampling_object = obj;
                p.config_size = n_config;
                p.p_config = config;
                p.hardware_buffer_size = 512 << 20;
                p.sampling_interval = interval_ns;
                p.trigger_mode = profiler::TRIGGER_GPU_TIME_INTERVAL;
                p.hw_buffer_append_mode = profiler::APPEND_KEEP_LATEST;
            })
            .map_err(|r| failed("cuptiPmSamplingSetConfig", c, r))?;
            self.size = profiler::call(prof.pm_data_size, |p| {
                p.p_pm_sampling_object = obj;
                p.p_metric_names = names;
                p.num_metrics = n_names;
                p.max_samples = MAX_SAMPLES;
            })
            .map_err(|r| failed("cuptiPmSamplingGetCounterDataSize", c, r))?
            .counter_data_size;
            self.image = vec![0u64; self.size.div_ceil(8)];
            self.reset_image(c)?;
            profiler::call(prof.pm_start, |p| p.p_pm_sampling_object = obj)
                .map_err(|r| failed("cuptiPmSamplingStart", c, r))?;
            self.started_boot = crate::backend::boottime_ns();
        }
        Ok(())
    }

    fn reset_image(&mut self, c: &Cupti) -> Result<(), ToolError> {
        let (obj, size, ptr) = (self.object, self.size, self.image.as_mut_ptr() as *mut u8);
        // SAFETY: our object and image of `size` bytes.
        unsafe {
            profiler::call(self.prof.pm_data_init, |p| {
                p.p_pm_sampling_object = obj;
                p.counter_data_size = size;
                p.p_counter_data = ptr;
            })
        }
        .map(|_| ())
        .map_err(|r| failed("cuptiPmSamplingCounterDataImageInitialize", c, r))
    }

    /// Decodes the samples completed since the last call and evaluates them (the tool's tick).
    pub fn poll(&mut self, c: &Cupti) {
        let (prof, obj, host) = (self.prof, self.object, self.host);
        let (size, ptr) = (self.size, self.image.as_mut_ptr() as *mut u8);
        let names = self.kept.2.clone();
        // SAFETY: our object, image and host object; `names` outlives the calls.
        let n = unsafe {
            if profiler::call(prof.pm_decode, |p| {
                p.p_pm_sampling_object = obj;
                p.p_counter_data_image = ptr;
                p.counter_data_image_size = size;
            })
            .is_err()
            {
                return;
            }
            match profiler::call(prof.pm_data_info, |p| {
                p.p_counter_data_image = ptr;
                p.counter_data_image_size = size;
            }) {
                Ok(p) => p.num_completed_samples,
                Err(_) => return,
            }
        };
        for i in 0..n {
            // SAFETY: as above; `i` is below the completed count.
            let sample = unsafe {
                let Ok(info) = profiler::call(prof.pm_sample_info, |p| {
                    p.p_pm_sampling_object = obj;
                    p.p_counter_data_image = ptr;
                    p.counter_data_image_size = size;
                    p.sample_index = i;
                }) else {
                    continue;
                };
                let mut v = vec![f64::NAN; names.len()];
                let ok = profiler::call(prof.host_evaluate, |p| {
                    p.p_host_object = host;
                    p.p_counter_data_image = ptr;
                    p.counter_data_image_size = size;
                    p.range_index = i;
                    p.pp_metric_names = names.as_ptr();
                    p.num_metrics = names.len();
                    p.p_metric_values = v.as_mut_ptr();
                });
                if ok.is_err() {
                    v.fill(f64::NAN);
                }
                for (x, s) in v.iter_mut().zip(&self.scales) {
                    *x *= s;
                }
                Sample {
                    start: info.start_timestamp,
                    end: info.end_timestamp,
                    values: v,
                }
            };
            if !self.stale_dropped {
                self.stale_dropped = true; // sample 0 began before Start
                self.stale_end = Some(sample.end);
                continue;
            }
            self.samples.push(sample);
        }
        if n > 0 {
            let _ = self.reset_image(c);
        }
    }

    /// The samples decoded since the last call, and the offset that puts them on
    /// `CLOCK_BOOTTIME` given `cupti_offset` ([`Sampler::boot_offset`]): fixed once the stale
    /// first sample is decoded, which comes before any sample, so every sample of a session
    /// gets the same offset whenever it is taken.
    pub fn take(&mut self, cupti_offset: i64) -> (Vec<Sample>, i64) {
        (
            std::mem::take(&mut self.samples),
            self.boot_offset(cupti_offset),
        )
    }

    /// Stops sampling, decodes the last samples and disables: the samples not taken yet, and
    /// the offset that puts them on `CLOCK_BOOTTIME` given `cupti_offset`, the session's offset
    /// of CUPTI's timestamp clock ([`Sampler::take`]).
    pub fn stop(mut self, c: &Cupti, cupti_offset: i64) -> (Vec<Sample>, i64) {
        let obj = self.object;
        // SAFETY: our started object.
        let _ = unsafe { profiler::call(self.prof.pm_stop, |p| p.p_pm_sampling_object = obj) };
        self.poll(c);
        self.release();
        self.take(cupti_offset)
    }

    /// The offset from the samples' clock to `CLOCK_BOOTTIME`: CUPTI's timestamp offset when it
    /// places the stale sample's end (the `Start`) within [`CLOCK_TRUST_NS`] of when `Start`
    /// returned, else the offset that puts that end at `Start` (a few ms of uncertainty).
    pub fn boot_offset(&self, cupti_offset: i64) -> i64 {
        let Some(end) = self.stale_end else {
            return cupti_offset;
        };
        let by_start = self.started_boot - end as i64;
        if (by_start - cupti_offset).abs() > CLOCK_TRUST_NS {
            by_start
        } else {
            cupti_offset
        }
    }

    fn release(&mut self) {
        let (obj, host) = (self.object, self.host);
        // SAFETY: our object and host object, released once.
        unsafe {
            if !obj.is_null() {
                let _ = profiler::call(self.prof.pm_disable, |p| p.p_pm_sampling_object = obj);
            }
            let _ = profiler::call(self.prof.host_deinitialize, |p| p.p_host_object = host);
        }
        self.object = std::ptr::null_mut();
    }
}

/// Writes the samples `sampler` decoded since the last call (the tick's decode) to `sink`, on
/// the database's clock; the next commit makes them readable (`rocprof-attach top --spm`).
pub fn write_taken(
    sampler: Option<&mut Sampler>,
    plan: Option<&SpmPlan>,
    sink: &mut crate::sink::Sink,
) -> rocprof_rocpd::Result<()> {
    let (Some(sampler), Some(sp)) = (sampler, plan) else {
        return Ok(());
    };
    let (samples, offset) = sampler.take(sink.offset());
    sink.write_spm(&sp.counters, &samples, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plans_names_the_default_set_and_intervals() {
        assert!(spm_plan(&env(&[])).unwrap().is_none());
        let on = ("ROCPROF_SPM_COUNTER_COLLECTION", "1");
        let p = spm_plan(&env(&[on])).unwrap().unwrap();
        let metrics: Vec<&str> = p.counters.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(metrics, DEFAULT_METRICS);
        assert_eq!(p.interval_ns, DEFAULT_INTERVAL_NS);
        let p = spm_plan(&env(&[
            on,
            (
                "ROCPROF_SPM_COUNTERS",
                "spm: GRBM_COUNT sm__cycles_active.avg",
            ),
            ("ROCPROF_SPM_SAMPLE_INTERVAL", "250"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(p.counters[0].metric, "gpc__cycles_elapsed.max");
        assert_eq!(p.counters[1].name, "sm__cycles_active.avg");
        assert_eq!(p.interval_ns, 250_000);
        for bad in [
            vec![on, ("ROCPROF_SPM_COUNTERS", "spm: SQ_INSTS_VALU")],
            vec![on, ("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", "sclk_cycles")],
        ] {
            let e = spm_plan(&env(&bad)).unwrap_err();
            assert!(matches!(e.code, Code::Unsupported), "{}", e.message);
        }
    }
}
