//! `metrics` (`rocprof-attach -L -p PID`): the metrics the process's GPUs offer, through
//! CUPTI's profiler host. For each chip (`cuptiDeviceGetChipName` of every device) a host object
//! is made with the counter availability image of one of its devices (when one has an active
//! primary context and counters are not denied), asked for its base metrics of each type
//! (`cuptiProfilerHostGetBaseMetrics`: counter, ratio, throughput) and their properties
//! (`cuptiProfilerHostGetMetricProperties`: description, hardware unit, dimension), then released.
//!
//! Nothing is enabled: no range profiler, no sampler, no activity kind. CUPTI does not copy the
//! availability image it is given, so it lives as long as the host object. The primary contexts
//! retained to read the availability are released again.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use crate::cupti::Cupti;
use crate::profiler::{self, Profiler};
use crate::protocol::{Code, ToolError};

/// CUPTI's metric types (`CUpti_MetricType`), in its order.
pub const METRIC_TYPES: [&str; 3] = ["counter", "ratio", "throughput"];

/// One metric of a chip.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Metric {
    /// The base name (`sm__warps_launched`); `--pmc` takes it with a rollup or submetric
    /// (`.sum`, `.avg`, `.max`, `.pct_of_peak_sustained_elapsed`, ...).
    pub name: String,
    /// `counter`, `ratio` or `throughput`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The dimension of its values (`cycles`, `bytes`, ...; may be empty).
    pub unit: String,
    /// The hardware unit it counts in (`sm`, `dram`, `lts`, ...).
    pub hw_unit: String,
    /// CUPTI's description.
    pub description: String,
    /// The rocprofv3 names `--pmc` maps to it ([`crate::metrics::EQUIVALENTS`]): `[name, metric]`.
    pub rocprofv3: Vec<[String; 2]>,
}

/// The metrics of one chip.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Chip {
    /// CUPTI's chip name (`GH100`).
    pub chip: String,
    /// The device ordinals with this chip.
    pub devices: Vec<i32>,
    /// Whether the counter availability image of one of its devices was used (false: CUPTI's
    /// defaults for the chip; no device had an active context, or counters are denied).
    pub availability: bool,
    /// The metrics, by type then name.
    pub metrics: Vec<Metric>,
}

/// The rocprofv3 names of [`crate::metrics::EQUIVALENTS`] whose NVIDIA metric is `base` or
/// `base` with a rollup (`sm__warps_launched` gives `SQ_WAVES` for `sm__warps_launched.sum`).
pub fn rocprofv3_names(base: &str) -> Vec<[String; 2]> {
    crate::metrics::EQUIVALENTS
        .iter()
        .filter(|(_, m, ..)| *m == base || m.strip_prefix(base).is_some_and(|r| r.starts_with('.')))
        .map(|(r, m, ..)| [(*r).to_owned(), (*m).to_owned()])
        .collect()
}

fn failed(c: &Cupti, what: &str, r: c_int) -> ToolError {
    ToolError::new(
        Code::Internal,
        format!("{what} failed with {}; the metrics could not be listed: check that the process's CUDA driver works and CUPTI matches it (ROCPROF_ATTACH_CUPTI), or list them with `ncu --query-metrics`", c.describe(r)),
    )
}

/// A C string CUPTI returned, copied (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string alive for the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// A host object and what CUPTI was handed for it: released (and then the image) on drop.
struct Host<'a> {
    prof: &'a Profiler,
    object: *mut c_void,
    /// The availability image `object` was made with (CUPTI does not copy it).
    _avail: Option<Vec<u8>>,
}

impl Drop for Host<'_> {
    fn drop(&mut self) {
        let object = self.object;
        // SAFETY: our host object, released once.
        let _ =
            unsafe { profiler::call(self.prof.host_deinitialize, |p| p.p_host_object = object) };
    }
}

/// A range profiler host object for `chip`, with `avail` when given.
fn host<'a>(
    c: &Cupti,
    prof: &'a Profiler,
    chip: &CStr,
    avail: Option<Vec<u8>>,
) -> Result<Host<'a>, ToolError> {
    let image = avail.as_ref().map_or(std::ptr::null(), |a| a.as_ptr());
    // SAFETY: valid parameter struct; `chip` outlives the call, the image lives in the Host.
    let object = unsafe {
        profiler::call(prof.host_initialize, |p| {
            p.profiler_type = profiler::TYPE_RANGE_PROFILER;
            p.p_chip_name = chip.as_ptr();
            p.p_counter_availability_image = image;
        })
    }
    .map_err(|r| failed(c, "cuptiProfilerHostInitialize", r))?
    .p_host_object;
    Ok(Host {
        prof,
        object,
        _avail: avail,
    })
}

/// The properties of `name` on host object `h`.
fn properties(c: &Cupti, h: &Host, name: &CStr, kind: usize) -> Result<Metric, ToolError> {
    // SAFETY: our host object; `name` outlives the call; the strings CUPTI returns live as
    // long as the host object and are copied at once.
    unsafe {
        let p = profiler::call(h.prof.host_metric_properties, |p| {
            p.p_host_object = h.object;
            p.p_metric_name = name.as_ptr();
        })
        .map_err(|r| failed(c, "cuptiProfilerHostGetMetricProperties", r))?;
        let base = name.to_string_lossy().into_owned();
        let kind = usize::try_from(p.metric_type)
            .ok()
            .and_then(|t| METRIC_TYPES.get(t))
            .unwrap_or(&METRIC_TYPES[kind]);
        Ok(Metric {
            rocprofv3: rocprofv3_names(&base),
            name: base,
            kind,
            unit: text(p.p_dim_unit),
            hw_unit: text(p.p_hw_unit),
            description: text(p.p_description),
        })
    }
}

/// The base metric names of one type on host object `h`.
fn base_metrics(c: &Cupti, h: &Host, kind: usize) -> Result<Vec<CString>, ToolError> {
    // SAFETY: our host object; CUPTI's name array lives as long as it and is copied now.
    unsafe {
        let p = profiler::call(h.prof.host_base_metrics, |p| {
            p.p_host_object = h.object;
            p.metric_type = kind as c_int;
        })
        .map_err(|r| failed(c, "cuptiProfilerHostGetBaseMetrics", r))?;
        if p.pp_metric_names.is_null() {
            return Ok(Vec::new());
        }
        Ok(std::slice::from_raw_parts(p.pp_metric_names, p.num_metrics)
            .iter()
            .filter(|n| !n.is_null())
            .map(|n| CStr::from_ptr(*n).to_owned())
            .collect())
    }
}

/// Every base metric of host object `h`, by type then name, and notes. The counters must list;
/// a type that does not, or a metric without properties (listed with its name alone), is a
/// note.
fn metrics(c: &Cupti, h: &Host) -> Result<(Vec<Metric>, Vec<String>), ToolError> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (kind, kind_name) in METRIC_TYPES.iter().enumerate() {
        let names = match base_metrics(c, h, kind) {
            Ok(n) => n,
            Err(e) if kind == 0 => return Err(e),
            Err(e) => {
                notes.push(format!(
                    "the {kind_name} metrics are not listed: {}",
                    e.message
                ));
                continue;
            }
        };
        let mut bare = Vec::new();
        let mut of_kind: Vec<Metric> = names
            .iter()
            .map(|n| {
                properties(c, h, n, kind).unwrap_or_else(|e| {
                    bare.push(e.message);
                    let name = n.to_string_lossy().into_owned();
                    Metric {
                        rocprofv3: rocprofv3_names(&name),
                        name,
                        kind: kind_name,
                        unit: String::new(),
                        hw_unit: String::new(),
                        description: String::new(),
                    }
                })
            })
            .collect();
        if let Some(first) = bare.first() {
            notes.push(format!(
                "{} {kind_name} metric(s) are listed without their properties: {first}",
                bare.len()
            ));
        }
        of_kind.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(of_kind);
    }
    Ok((out, notes))
}

/// The counter availability image of `ctx`, or why it was not read (a note).
fn availability(c: &Cupti, prof: &Profiler, ctx: *mut c_void) -> Result<Vec<u8>, String> {
    crate::pmc::availability_of(c, prof, ctx).map_err(|e| {
        format!(
            "the counter availability could not be read, so CUPTI's defaults for the chip are listed: {}",
            e.message
        )
    })
}

/// Serves `metrics` with no session attached: loads CUPTI (`ROCPROF_ATTACH_CUPTI` when the
/// process has none), lists ([`list`]), and has CUPTI torn down at the application's next
/// launch as after a detach ([`crate::teardown`]) unless another profiler holds CUPTI (the
/// subscription then fails and nothing is torn down). The reply says whether a teardown is
/// pending.
pub fn reply(req: &crate::protocol::AttachRequest) -> Result<serde_json::Value, ToolError> {
    crate::teardown::cancel();
    let path = req
        .env
        .get("ROCPROF_ATTACH_CUPTI")
        .filter(|s| !s.trim().is_empty())
        .map(|s| std::path::PathBuf::from(s.trim()));
    let c = crate::backend::CuptiBackend::load(path.as_deref())?;
    let version = crate::backend::cupti_version(c)?;
    // Subscribing first initialises CUPTI again after an earlier teardown: without it the
    // profiler API answered CUPTI_ERROR_NOT_INITIALIZED on the H200.
    let sub = crate::backend::subscribe(c).ok();
    let listed = list(c, version);
    let teardown = sub.is_some_and(|sub| {
        // SAFETY: a fresh subscriber of this CUPTI with nothing enabled.
        let pending = unsafe { crate::teardown::request(c, sub) };
        if !pending {
            // SAFETY: as above.
            unsafe { (c.unsubscribe)(sub) };
        }
        pending
    });
    let mut reply = listed?;
    if let Some(o) = reply.as_object_mut() {
        o.insert("teardown".into(), teardown.into());
    }
    Ok(reply)
}

/// The `metrics` reply: every chip of the process's devices with its metrics, and notes.
pub fn list(c: &Cupti, version: u32) -> Result<serde_json::Value, ToolError> {
    let prof = c.profiler.clone().map_err(|missing| {
        ToolError::new(
            Code::CuptiOld,
            format!(
                "{} lacks {}: listing metrics needs the CUPTI of CUDA 12.6 or newer (ROCPROF_ATTACH_CUPTI), or use `ncu --query-metrics`",
                c.path.display(),
                missing.join(", ")
            ),
        )
    })?;
    let cuda = crate::cuda::query();
    let contexts = crate::cuda::active_primary_contexts().unwrap_or_default();
    let listed = chips(c, &prof, &cuda.devices, &contexts);
    for (ordinal, _) in &contexts {
        crate::cuda::release_primary_context(*ordinal);
    }
    let (chips, notes) = listed?;
    Ok(serde_json::json!({
        "cupti": c.path.display().to_string(),
        "cupti_version": version,
        "driver_version": cuda.driver_version,
        "devices": cuda.devices.iter().map(|d| serde_json::json!({"ordinal": d.ordinal, "name": d.name})).collect::<Vec<_>>(),
        "chips": chips,
        "notes": notes,
    }))
}

/// The chips of `devices` with their metrics (the availability read through `contexts`), and
/// notes.
fn chips(
    c: &Cupti,
    prof: &Profiler,
    devices: &[crate::cuda::Device],
    contexts: &[(i32, *mut c_void)],
) -> Result<(Vec<Chip>, Vec<String>), ToolError> {
    let mut notes = Vec::new();
    let mut chips: Vec<(CString, Vec<i32>)> = Vec::new();
    for d in devices {
        let chip = crate::pmc::chip_name_of(c, prof, d.ordinal)?;
        match chips.iter_mut().find(|(n, _)| *n == chip) {
            Some((_, ds)) => ds.push(d.ordinal),
            None => chips.push((chip, vec![d.ordinal])),
        }
    }
    if chips.is_empty() {
        return Err(ToolError::new(
            Code::Unsupported,
            "the process's CUDA driver reports no device, so there is no chip whose metrics to list; attach once the process sees its GPUs",
        ));
    }
    let mut out = Vec::new();
    for (chip, ordinals) in chips {
        let ctx = contexts
            .iter()
            .find(|(o, _)| ordinals.contains(o))
            .map(|(_, ctx)| *ctx);
        let avail = match ctx.map(|ctx| availability(c, prof, ctx)) {
            Some(Ok(a)) => Some(a),
            Some(Err(note)) => {
                notes.push(note);
                None
            }
            None => None,
        };
        let with_avail = avail.is_some();
        let h = host(c, prof, &chip, avail)?;
        let (metrics, more) = metrics(c, &h)?;
        drop(h);
        notes.extend(more);
        out.push(Chip {
            chip: chip.to_string_lossy().into_owned(),
            devices: ordinals,
            availability: with_avail,
            metrics,
        });
    }
    Ok((out, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocprofv3_names_match_base_and_full_names() {
        let names = rocprofv3_names("sm__warps_launched");
        assert_eq!(
            names,
            [
                ["SQ_WAVES".to_string(), "sm__warps_launched.sum".to_string()],
                ["Wavefronts".into(), "sm__warps_launched.sum".into()]
            ]
        );
        assert_eq!(rocprofv3_names("dram__bytes_read.sum")[0][0], "FETCH_SIZE");
        assert!(
            rocprofv3_names("sm__warps").is_empty(),
            "a prefix of a name is not it"
        );
        assert!(rocprofv3_names("dram__bytes").is_empty());
    }
}
