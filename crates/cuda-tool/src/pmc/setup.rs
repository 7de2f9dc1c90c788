//! Setting the range profiler up once per process (or again for other metrics): checks first,
//! then enables; a refusal leaves nothing enabled.

use std::ffi::{c_char, c_void, CStr, CString};
use std::time::Instant;

use super::{failed, Counters, Object};
use crate::cupti::Cupti;
use crate::metrics::CounterPlan;
use crate::profiler::{self, Profiler};
use crate::protocol::{Code, ToolError};

type Key = (Vec<String>, bool);

/// Counters denied by the driver or the sandbox: CUPTI's reason and the fix.
pub(crate) fn denied(c: &Cupti, what: &str, r: i32) -> ToolError {
    ToolError::new(
        Code::CountersDenied,
        format!("{what} failed with {}: this process may not read GPU counters. Fix: run the process as root or allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0 in /etc/modprobe.d, then reload the nvidia module; docs: https://developer.nvidia.com/ERR_NVGPUCTRPERM); in a container or sandbox (gVisor, some VMs) counters may not be reachable at all: check with `ncu --metrics sm__warps_launched.sum` there. Nothing was enabled", c.describe(r)),
    )
}

fn refuse_or_fail(c: &Cupti, what: &str, r: i32) -> ToolError {
    if r == profiler::INSUFFICIENT_PRIVILEGES || r == profiler::VIRTUALIZED_INSUFFICIENT_PRIVILEGES
    {
        denied(c, what, r)
    } else {
        failed(what, c, r)
    }
}

/// Disables every object of `counters` and releases its host object.
pub(crate) fn disable(counters: Counters) {
    for o in &counters.objects {
        let obj = o.object;
        // SAFETY: an enabled object of ours.
        let _ = unsafe {
            profiler::call(counters.prof.rp_disable, |p| {
                p.p_range_profiler_object = obj
            })
        };
    }
    // SAFETY: our host object.
    let _ = unsafe {
        profiler::call(counters.prof.host_deinitialize, |p| {
            p.p_host_object = counters.host
        })
    };
}

/// A configured host object.
struct Host {
    host: *mut c_void,
    config: Vec<u8>,
    passes: usize,
}

impl Host {
    fn deinit(&self, prof: &Profiler) {
        // SAFETY: our host object.
        let _ = unsafe { profiler::call(prof.host_deinitialize, |p| p.p_host_object = self.host) };
    }
}

fn chip_name(c: &Cupti, prof: &Profiler, ordinal: i32) -> Result<CString, ToolError> {
    // SAFETY: plain calls with valid parameter structs.
    unsafe {
        profiler::call(prof.initialize, |_| {})
            .map_err(|r| failed("cuptiProfilerInitialize", c, r))?;
        let p = profiler::call(prof.chip_name, |p| p.device_index = ordinal as usize)
            .map_err(|r| failed("cuptiDeviceGetChipName", c, r))?;
        if p.p_chip_name.is_null() {
            return Err(failed("cuptiDeviceGetChipName", c, 999));
        }
        Ok(CStr::from_ptr(p.p_chip_name).to_owned())
    }
}

/// A PM sampling set's host object, config image and passes.
pub(crate) type PmConfig = (*mut c_void, Vec<u8>, usize);

/// The host object, config image and passes of a PM sampling set (for [`crate::spm`]).
pub(crate) fn pm_config(
    c: &Cupti,
    prof: &Profiler,
    chip: &CStr,
    avail: &[u8],
    names: &[CString],
) -> Result<PmConfig, (ToolError, Option<usize>)> {
    let h = config_of_type(
        c,
        prof,
        profiler::TYPE_PM_SAMPLING,
        chip,
        Some(avail),
        names,
    )?;
    Ok((h.host, h.config, h.passes))
}

/// The chip name of device `ordinal` (for [`crate::spm`]).
pub(crate) fn chip_name_of(c: &Cupti, prof: &Profiler, ordinal: i32) -> Result<CString, ToolError> {
    chip_name(c, prof, ordinal)
}

/// The counter availability image of `ctx` (for [`crate::catalog`]).
pub(crate) fn availability_of(
    c: &Cupti,
    prof: &Profiler,
    ctx: *mut c_void,
) -> Result<Vec<u8>, ToolError> {
    availability(c, prof, ctx)
}

/// A failed counter call: denied (privileges) or failed (for [`crate::spm`]).
pub(crate) fn refuse_or_fail_of(c: &Cupti, what: &str, r: i32) -> ToolError {
    refuse_or_fail(c, what, r)
}

/// The counter availability image of `ctx` (`cuptiProfilerGetCounterAvailability`).
fn availability(c: &Cupti, prof: &Profiler, ctx: *mut c_void) -> Result<Vec<u8>, ToolError> {
    let what = "cuptiProfilerGetCounterAvailability";
    // SAFETY: size query, then the buffer of that size.
    unsafe {
        let p = profiler::call(prof.counter_availability, |p| p.ctx = ctx)
            .map_err(|r| refuse_or_fail(c, what, r))?;
        let mut image = vec![0u8; p.counter_availability_image_size];
        profiler::call(prof.counter_availability, |p| {
            p.ctx = ctx;
            p.counter_availability_image_size = image.len();
            p.p_counter_availability_image = image.as_mut_ptr();
        })
        .map_err(|r| refuse_or_fail(c, what, r))?;
        Ok(image)
    }
}

/// A host object for `names` on `chip`, with its config image and passes.
fn config_for(
    c: &Cupti,
    prof: &Profiler,
    chip: &CStr,
    avail: Option<&[u8]>,
    names: &[CString],
) -> Result<Host, (ToolError, Option<usize>)> {
    config_of_type(c, prof, profiler::TYPE_RANGE_PROFILER, chip, avail, names)
}

/// A host object of `kind` (range profiler or PM sampling) for `names` on `chip`, with its
/// config image and passes; the index of a metric CUPTI does not know.
///
/// The metrics go to CUPTI in one `cuptiProfilerHostConfigAddMetrics` call: CUPTI 13.0 on the
/// H200 scheduled each call in passes of its own, so three single-pass metrics added one by one
/// needed three passes (`ncu` reads them in one).
fn config_of_type(
    c: &Cupti,
    prof: &Profiler,
    kind: std::ffi::c_int,
    chip: &CStr,
    avail: Option<&[u8]>,
    names: &[CString],
) -> Result<Host, (ToolError, Option<usize>)> {
    let h = host_object(c, prof, kind, chip, avail).map_err(|e| (e, None))?;
    let mut host = Host {
        host: h,
        config: Vec::new(),
        passes: 0,
    };
    if let Err(r) = add_metrics(prof, h, names) {
        host.deinit(prof);
        let bad = first_unknown(c, prof, kind, chip, avail, names);
        return Err((failed("cuptiProfilerHostConfigAddMetrics", c, r), bad));
    }
    match config_image(c, prof, h) {
        Ok((config, passes)) => {
            host.config = config;
            host.passes = passes;
            Ok(host)
        }
        Err(e) => {
            host.deinit(prof);
            Err((e, None))
        }
    }
}

/// Adds `names` to host object `h` in one `cuptiProfilerHostConfigAddMetrics` call.
fn add_metrics(prof: &Profiler, h: *mut c_void, names: &[CString]) -> Result<(), i32> {
    let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    // SAFETY: `h` is a live host object; `ptrs` points into `names`, alive for the call.
    unsafe {
        profiler::call(prof.host_add_metrics, |p| {
            p.p_host_object = h;
            p.pp_metric_names = ptrs.as_ptr();
            p.num_metrics = ptrs.len();
        })
    }
    .map(drop)
}

/// A fresh host object (`cuptiProfilerHostInitialize`).
fn host_object(
    c: &Cupti,
    prof: &Profiler,
    kind: std::ffi::c_int,
    chip: &CStr,
    avail: Option<&[u8]>,
) -> Result<*mut c_void, ToolError> {
    // SAFETY: valid parameter struct; `chip` and `avail` outlive the call.
    unsafe {
        profiler::call(prof.host_initialize, |p| {
            p.profiler_type = kind;
            p.p_chip_name = chip.as_ptr();
            p.p_counter_availability_image = avail.map_or(std::ptr::null(), |a| a.as_ptr());
        })
        .map(|p| p.p_host_object)
        .map_err(|r| failed("cuptiProfilerHostInitialize", c, r))
    }
}

/// The first of `names` that CUPTI refuses on its own (each tried on a host object of its own),
/// to name it when the whole set was refused.
fn first_unknown(
    c: &Cupti,
    prof: &Profiler,
    kind: std::ffi::c_int,
    chip: &CStr,
    avail: Option<&[u8]>,
    names: &[CString],
) -> Option<usize> {
    names.iter().position(|n| {
        let Ok(h) = host_object(c, prof, kind, chip, avail) else {
            return false;
        };
        let refused = add_metrics(prof, h, std::slice::from_ref(n)).is_err();
        Host {
            host: h,
            config: Vec::new(),
            passes: 0,
        }
        .deinit(prof);
        refused
    })
}

/// The config image of host object `h` and the passes it needs.
fn config_image(c: &Cupti, prof: &Profiler, h: *mut c_void) -> Result<(Vec<u8>, usize), ToolError> {
    // SAFETY: our host object; `config` outlives the calls that take its pointer.
    unsafe {
        let size = profiler::call(prof.host_config_size, |p| p.p_host_object = h)
            .map_err(|r| failed("cuptiProfilerHostGetConfigImageSize", c, r))?
            .config_image_size;
        let mut config = vec![0u8; size];
        profiler::call(prof.host_config_image, |p| {
            p.p_host_object = h;
            p.config_image_size = size;
            p.p_config_image = config.as_mut_ptr();
        })
        .map_err(|r| failed("cuptiProfilerHostGetConfigImage", c, r))?;
        let passes = profiler::call(prof.host_passes, |p| {
            p.config_image_size = size;
            p.p_config_image = config.as_mut_ptr();
        })
        .map_err(|r| failed("cuptiProfilerHostGetNumOfPasses", c, r))?
        .num_of_passes;
        Ok((config, passes))
    }
}

/// The host config for the plan, refused (naming the metric) when CUPTI does not know a name
/// and (naming the passes) when it needs several passes without kernel replay; `avail`: the
/// GPU's counter availability image (None: CUPTI's defaults).
fn host_config(
    c: &Cupti,
    prof: &Profiler,
    plan: &CounterPlan,
    chip: &CStr,
    avail: Option<&[u8]>,
) -> Result<Host, ToolError> {
    let names: Vec<CString> = plan
        .counters
        .iter()
        .map(|x| CString::new(x.metric.as_str()).unwrap_or_default())
        .collect();
    let host = config_for(c, prof, chip, avail, &names).map_err(|(e, bad)| match bad {
        Some(i) => ToolError::new(
            Code::Unsupported,
            format!("CUPTI does not know the metric {} on this GPU ({}): {}. Fix: list the metrics this GPU offers with `rocprof-attach -L -p PID` (or `ncu --query-metrics`) and pass one of them", plan.counters[i].metric, chip.to_string_lossy(), e.message),
        ),
        None => e,
    })?;
    if host.passes > 1 && !plan.kernel_replay && !plan.iteration_replay {
        host.deinit(prof);
        let groups = pass_groups(c, prof, chip, avail, &names);
        return Err(ToolError::new(
            Code::Unsupported,
            format!("these metrics need {} passes ({groups}), and one pass is all a running process gives without replay; nothing was enabled. Fix: count one pass per session; or add --replay-mode iteration (each pass counts later launches of the kernels: every kernel that launches in every pass gets every group, each value from one launch); or --replay-mode kernel --kernel-replay-beta-enabled (CUPTI replays each counted kernel once per pass, saving and restoring its memory: 20-33 ms per kernel on the H200)", host.passes, groups = groups.join("; ")),
        ));
    }
    if host.passes > 1 && plan.iteration_replay {
        let mixed = composite(c, prof, chip, avail, &names);
        if !mixed.is_empty() {
            host.deinit(prof);
            return Err(ToolError::new(
                Code::Unsupported,
                format!("{} need(s) several passes by itself, so with --replay-mode iteration each of its values would mix different launches; nothing was enabled. Fix: count it with --replay-mode kernel --kernel-replay-beta-enabled, or leave it out", mixed.join(", ")),
            ));
        }
    }
    Ok(host)
}

/// The metrics of `names` that need several passes by themselves.
fn composite(
    c: &Cupti,
    prof: &Profiler,
    chip: &CStr,
    avail: Option<&[u8]>,
    names: &[CString],
) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            config_for(c, prof, chip, avail, std::slice::from_ref(*n)).is_ok_and(|h| {
                h.deinit(prof);
                h.passes > 1
            })
        })
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

/// The metrics in single-pass groups, greedily in the order given: "pass 1: a, b".
fn pass_groups(
    c: &Cupti,
    prof: &Profiler,
    chip: &CStr,
    avail: Option<&[u8]>,
    names: &[CString],
) -> Vec<String> {
    let mut groups: Vec<Vec<CString>> = Vec::new();
    for n in names {
        let fits = groups.last().is_some_and(|g| {
            let mut trial = g.clone();
            trial.push(n.clone());
            config_for(c, prof, chip, avail, &trial).is_ok_and(|h| {
                h.deinit(prof);
                h.passes <= 1
            })
        });
        match (fits, groups.last_mut()) {
            (true, Some(g)) => g.push(n.clone()),
            _ => groups.push(vec![n.clone()]),
        }
    }
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let names: Vec<String> = g.iter().map(|n| n.to_string_lossy().into_owned()).collect();
            format!("pass {}: {}", i + 1, names.join(", "))
        })
        .collect()
}

/// Checks everything (privileges, names, passes), then enables a range profiler on every
/// active primary context; on a failure what was enabled is disabled again.
pub(super) fn create(
    c: &Cupti,
    plan: &CounterPlan,
    key: Key,
) -> Result<(Counters, Vec<String>), ToolError> {
    let prof = c.profiler.clone().map_err(|missing| {
        ToolError::new(
            Code::CuptiOld,
            format!(
                "{} lacks {}: counters need the CUPTI of CUDA 12.6 or newer (ROCPROF_ATTACH_CUPTI)",
                c.path.display(),
                missing.join(", ")
            ),
        )
    })?;
    let t0 = Instant::now();
    let contexts = crate::cuda::active_primary_contexts()
        .map_err(|e| ToolError::new(Code::Internal, format!("the CUDA contexts could not be read ({e}); counters need the process's CUDA driver")))?;
    let Some(&(first, first_ctx)) = contexts.first() else {
        return Err(ToolError::new(
            Code::Unsupported,
            "no CUDA context is active in this process yet (its first CUDA call has not happened), so there is nothing to count; attach once the process uses the GPU",
        ));
    };
    let chip = chip_name(c, &prof, first)?;
    let avail = availability(c, &prof, first_ctx)?;
    let checked = host_config(c, &prof, plan, &chip, Some(&avail))?;
    checked.deinit(&prof);
    let (names, anchor) = with_anchor(c, &prof, plan, &chip, &avail, checked.passes);
    let host = config_for(c, &prof, &chip, Some(&avail), &names).map_err(|(e, _)| e)?;
    let mut counters = Counters {
        prof,
        key,
        host: host.host,
        config: host.config,
        _avail: avail,
        passes: host.passes,
        metrics: names,
        objects: Vec::new(),
        max_ranges: plan.max_ranges,
        anchor,
        window: None,
        multiplex: None,
    };
    for (ordinal, ctx) in contexts {
        match enable(c, &counters, ordinal, ctx) {
            Ok(o) => counters.objects.push(o),
            Err(e) => {
                disable(counters);
                return Err(e);
            }
        }
    }
    if plan.iteration_replay && counters.passes > 1 {
        counters.multiplex = Some(super::multiplex::Multiplex::new(
            counters.passes,
            counters.objects.len(),
        ));
    }
    let notes = vec![format!(
        "counters set up on device(s) {} in {} ms (released at detach)",
        counters
            .objects
            .iter()
            .map(|o| o.ordinal.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        t0.elapsed().as_millis()
    )];
    Ok((counters, notes))
}

/// The metrics to configure, and the anchor that checks each range against its launch's grid:
/// the plan's `sm__ctas_launched.sum` or `sm__warps_launched.sum`, else `sm__ctas_launched.sum`
/// added (evaluated, never written) when it needs no extra pass.
fn with_anchor(
    c: &Cupti,
    prof: &Profiler,
    plan: &CounterPlan,
    chip: &CStr,
    avail: &[u8],
    passes: usize,
) -> (Vec<CString>, super::Anchor) {
    let mut names: Vec<CString> = plan
        .counters
        .iter()
        .map(|x| CString::new(x.metric.as_str()).unwrap_or_default())
        .collect();
    let at = |m: &str| plan.counters.iter().position(|x| x.metric == m);
    if let Some(i) = at("sm__ctas_launched.sum") {
        return (names, Some((i, false)));
    }
    if let Some(i) = at("sm__warps_launched.sum") {
        return (names, Some((i, true)));
    }
    names.push(CString::new("sm__ctas_launched.sum").expect("no NUL"));
    let fits = config_for(c, prof, chip, Some(avail), &names).is_ok_and(|h| {
        h.deinit(prof);
        h.passes <= passes
    });
    if fits {
        let i = names.len() - 1;
        (names, Some((i, false)))
    } else {
        names.pop();
        (names, None)
    }
}

/// Enables a range profiler on `ctx` with a counter data image for the plan's ranges.
fn enable(
    c: &Cupti,
    counters: &Counters,
    ordinal: i32,
    ctx: *mut c_void,
) -> Result<Object, ToolError> {
    let prof = &counters.prof;
    let names: Vec<*const c_char> = counters.metrics.iter().map(|m| m.as_ptr()).collect();
    // SAFETY: valid parameter structs; `names` outlives the calls.
    unsafe {
        let object = profiler::call(prof.rp_enable, |p| p.ctx = ctx)
            .map_err(|r| refuse_or_fail(c, "cuptiRangeProfilerEnable", r))?
            .p_range_profiler_object;
        let size = profiler::call(prof.rp_data_size, |p| {
            p.p_range_profiler_object = object;
            p.p_metric_names = names.as_ptr();
            p.num_metrics = names.len();
            p.max_num_of_ranges = counters.max_ranges;
            p.max_num_range_tree_nodes = counters.max_ranges as u32;
        });
        match size {
            Ok(s) => Ok(Object {
                ordinal,
                ctx,
                object,
                image: vec![0u64; s.counter_data_size.div_ceil(8)],
                size: s.counter_data_size,
            }),
            Err(r) => {
                let _ = profiler::call(prof.rp_disable, |p| p.p_range_profiler_object = object);
                Err(failed("cuptiRangeProfilerGetCounterDataSize", c, r))
            }
        }
    }
}
