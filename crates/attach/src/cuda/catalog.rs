//! `-L`/`--list-avail` for a CUDA process: the metrics its GPUs offer, as our tool reads them
//! through CUPTI's profiler host (crates/cuda-tool/src/catalog.rs). The tool is reached as an
//! attach reaches it (loaded on a parked thread, or the one loaded already) and sent `metrics`
//! instead of `attach`: nothing is traced, counted or left enabled, and the target is claimed
//! for the moment it takes, so no session starts in between.

use super::channel;
use super::link::{parse_reply, reach, ENABLE_TIMEOUT};
use crate::claims::{Claim, Holder, Purpose};
use crate::error::{Error, Result};
use crate::preflight::{self, LISTENER_COMM};
use crate::session::{Injector, Planned};
use rocprof_engine::procfs;
use serde::{Deserialize, Serialize};

/// What `-L` says for a process that is not a CUDA process (rocprofv3 lists the counters of
/// the local GPUs, with no process).
pub const NOT_CUDA: &str =
    "rocprofv3 lists the counters of the local GPUs; run `rocprofv3 --list-avail` for that \
     (rocprof-attach -L -p PID lists the metrics of a CUDA process's GPUs; docs/cuda.md)";

/// One metric of a chip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metric {
    /// CUPTI's base name (`sm__warps_launched`); `--pmc` takes it with a rollup (`.sum`,
    /// `.avg`, `.min`, `.max`) or a submetric.
    pub name: String,
    /// `counter`, `ratio` or `throughput`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The dimension of the values (`cycles`, `bytes`; may be empty).
    pub unit: String,
    /// The hardware unit (`sm`, `dram`, `lts`, ...).
    pub hw_unit: String,
    /// CUPTI's description.
    pub description: String,
    /// `[rocprofv3 name, NVIDIA metric]`: the rocprofv3 names `--pmc` maps to it.
    pub rocprofv3: Vec<(String, String)>,
}

/// The metrics of one chip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Chip {
    /// CUPTI's chip name (`GH100`).
    pub chip: String,
    /// The CUDA device ordinals with this chip.
    pub devices: Vec<i64>,
    /// Whether the counter availability image of one of its devices was used (false: CUPTI's
    /// defaults for the chip).
    pub availability: bool,
    /// The metrics, by type then name.
    pub metrics: Vec<Metric>,
}

/// A CUDA device of the process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Device {
    /// The CUDA ordinal.
    pub ordinal: i64,
    /// `cuDeviceGetName`.
    pub name: String,
}

/// The tool's reply to `metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Catalog {
    /// The libcupti the tool uses.
    pub cupti: String,
    /// CUPTI's API version.
    pub cupti_version: i64,
    /// The driver's CUDA version (13000 for 13.0).
    pub driver_version: i64,
    /// The process's devices.
    pub devices: Vec<Device>,
    /// One entry per chip.
    pub chips: Vec<Chip>,
    /// Caveats (the availability could not be read, ...).
    pub notes: Vec<String>,
    /// Whether CUPTI is torn down at the application's next launch, as after a detach.
    pub teardown: bool,
    /// True when this call loaded the tool into the process.
    #[serde(skip_deserializing)]
    pub loaded_now: bool,
}

/// The metrics the GPUs of CUDA process `pid` offer. A process that is not a CUDA process (a
/// ROCm process, one without either) is [`Error::Usage`] with [`NOT_CUDA`]; one another
/// session holds is refused as an attach would be. `front_end` names us in the claim.
pub fn list(pid: i32, front_end: &str, injector: &dyn Injector) -> Result<Catalog> {
    let listeners = procfs::threads_named(pid, LISTENER_COMM);
    let Some(report) = preflight::backend::check_cuda(pid, listeners.as_deref().ok())? else {
        return Err(Error::Usage(format!(
            "-L/--list-avail has no meaning when attaching to process {pid}, which is not a CUDA process: {NOT_CUDA}"
        )));
    };
    let holder = Holder {
        front_end: front_end.into(),
        output: None,
        sync_output: None,
        output_parts: None,
    };
    let _claim = match Claim::acquire(pid, &holder, Purpose::Attach) {
        Ok(c) => Some(c),
        Err(e) if crate::claims::closed_and_untraceable(&e) => None,
        Err(e) => return Err(e),
    };
    let facts = report.cuda.clone().ok_or_else(|| Error::NotAttachable {
        pid,
        reason: "internal: not a CUDA target".into(),
    })?;
    let planned = Planned { report, root: pid };
    let (conn, outcome) = reach(&planned, &facts, injector)?;
    let mut text = String::from("metrics\n");
    if let Ok(cupti) = std::env::var("ROCPROF_ATTACH_CUPTI") {
        text.push_str(&format!("ROCPROF_ATTACH_CUPTI={cupti}\n"));
    }
    channel::send_message(&conn, &text)?;
    let reply = channel::receive(&conn, ENABLE_TIMEOUT)?.ok_or_else(|| Error::NotAttachable {
        pid,
        reason: format!(
            "our CUDA tool did not list the metrics within {} s (loading CUPTI hangs?)",
            ENABLE_TIMEOUT.as_secs()
        ),
    })?;
    let mut catalog: Catalog =
        parse_reply(&reply).map_err(|reason| Error::NotAttachable { pid, reason })?;
    catalog.loaded_now = outcome.is_some();
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_read_as_the_tool_writes_it() {
        let c: Catalog = parse_reply(
            "ok {\"cupti\":\"/x/libcupti.so.13\",\"chips\":[{\"chip\":\"GH100\",\"devices\":[0],\"availability\":true,\
             \"metrics\":[{\"name\":\"sm__warps_launched\",\"type\":\"counter\",\"unit\":\"warps\",\"hw_unit\":\"sm\",\
             \"description\":\"# of warps launched\",\"rocprofv3\":[[\"SQ_WAVES\",\"sm__warps_launched.sum\"]]}]}],\
             \"teardown\":true}",
        )
        .expect("ok");
        assert_eq!(c.chips[0].chip, "GH100");
        let m = &c.chips[0].metrics[0];
        assert_eq!(m.kind, "counter");
        assert_eq!(m.rocprofv3[0].0, "SQ_WAVES");
        assert!(c.teardown && !c.loaded_now);
    }
}
