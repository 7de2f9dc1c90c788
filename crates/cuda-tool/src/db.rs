//! Writing the collected CUDA activity as one rocpd database.
//!
//! Mapping (timestamps are CUPTI ns plus the measured CLOCK_BOOTTIME offset):
//!
//! - agents: one CPU agent (id 0) and one GPU agent per CUDA device (id = ordinal + 1,
//!   `name` = `sm_<major><minor>`, model and product name = `cuDeviceGetName`, vendor
//!   `NVIDIA`, `uuid` = last 8 UUID bytes; the agent JSON carries every key rocprofiler-sdk
//!   writes for an agent (`rocprof_rocpd::agent_json`, completed by the writer): SM count as
//!   `cu_count`, warp size as `wave_front_size`, memory and limits, the full `GPU-...` UUID as
//!   `cuda_uuid`, neutral values for what CUDA has no counterpart of);
//! - kernels → `rocpd_kernel_dispatch` (dispatch ids 1, 2, ... in record order), one kernel
//!   symbol per distinct name (code object 1, `memory://cuda`; display name demangled by the
//!   process's `__cxa_demangle` when libstdc++ is mapped), static shared memory → symbol
//!   `group_segment_size`, dynamic shared memory → dispatch `group_segment_size`, local memory
//!   per thread → `private_segment_size`, registers per thread → `arch_vgpr_count`; workgroup =
//!   block size, grid = total threads per dimension (`gridDim * blockDim`, rocprofv3's grid in
//!   work-items); queue and stream = CUPTI stream id;
//! - memcpy → `rocpd_memory_copy` `MEMORY_COPY_{HOST_TO_DEVICE,DEVICE_TO_HOST,DEVICE_TO_DEVICE,
//!   HOST_TO_HOST,NONE}` between the CPU agent and the GPU agent; memset → `rocpd_memory_copy`
//!   with operation `MEMORY_SET`, source = destination = the GPU;
//! - runtime/driver API → regions of kind [`RUNTIME_KIND`] / [`DRIVER_KIND`] named by
//!   `cuptiGetCallbackName` less its `_vNNNN` version suffix ([`api_display_name`]), region id
//!   = CUPTI correlation id (a repeated id gets a fresh one above 2^40);
//! - MEMORY2 → `rocpd_memory_allocate` (`MEMORY_ALLOCATION_ALLOCATE` / `_FREE`, start = end);
//! - NVTX markers → `MARKER_CORE_API` regions (start/end pairs) or samples (instantaneous).
//!
//! Kernels, copies and allocations take the thread id of the API call with the same
//! correlation id, or the process id when API tracing was off.

use std::collections::HashSet;
use std::path::Path;

use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::model::*;
use rocprof_rocpd::{Result, Writer};

use crate::cuda::{CudaInfo, Device};
use crate::host::{command_line, cpu_model, fnv, uname};
use crate::records::Collected;
pub use crate::sink::Sink;

/// rocpd kind of CUDA runtime API rows (`HIP_RUNTIME_API*` so rocpd's readers file them in
/// the HIP API domain: `hip_api_trace.csv`).
pub const RUNTIME_KIND: &str = "HIP_RUNTIME_API_CUDA";
/// rocpd kind of CUDA driver API rows.
pub const DRIVER_KIND: &str = "HIP_RUNTIME_API_CUDA_DRIVER";

/// Facts about the process and the session.
#[derive(Debug, Clone, Default)]
pub struct SessionInfo {
    /// Attach time (CLOCK_BOOTTIME ns).
    pub init: i64,
    /// Detach time.
    pub fini: i64,
    /// CLOCK_BOOTTIME minus CUPTI's clock (ns).
    pub offset: i64,
    /// The session's JSON for the process `extdata`.
    pub extdata: serde_json::Value,
    /// Demangle kernel names for display.
    pub demangle: bool,
}

/// Row counts written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Kernel dispatches.
    pub kernels: u64,
    /// Copies and memsets.
    pub copies: u64,
    /// API calls and markers.
    pub api: u64,
    /// Allocation events.
    pub allocations: u64,
    /// Records CUPTI dropped (its buffers were full or not handed out).
    pub dropped: u64,
    /// Records of kinds the tool does not write.
    pub ignored: u64,
    /// Rows written after a row of their kind that starts later: CUPTI delivered them more than
    /// [`crate::sink::LAG_NS`] late.
    pub late: u64,
}

/// An API name as users know it: CUPTI's callback names carry the version the entry point
/// appeared in (`cudaLaunchKernel_v7000`), which is dropped; real symbol suffixes of one or
/// two digits (`cuMemAlloc_v2`) stay.
pub fn api_display_name(cupti_name: &str) -> &str {
    match cupti_name.rsplit_once("_v") {
        Some((base, ver))
            if !base.is_empty() && ver.len() >= 4 && ver.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => cupti_name,
    }
}

pub(crate) fn gpu_agent(d: &Device) -> Agent {
    let id = d.ordinal as i64 + 1;
    let name = if d.cc.0 > 0 {
        format!("sm_{}{}", d.cc.0, d.cc.1)
    } else {
        "cuda".to_owned()
    };
    let product = if d.name.is_empty() {
        format!("CUDA device {}", d.ordinal)
    } else {
        d.name.clone()
    };
    let ext = serde_json::json!({
        "node_id": id, "logical_node_id": id, "type": 2, "cu_count": d.sm_count,
        "simd_count": d.sm_count * 4, "wave_front_size": d.warp_size,
        "workgroup_max_size": d.max_threads_per_block,
        "workgroup_max_dim": {"x": d.max_block[0], "y": d.max_block[1], "z": d.max_block[2]},
        "grid_max_dim": {"x": d.max_grid[0], "y": d.max_grid[1], "z": d.max_grid[2]},
        "lds_size_in_kb": d.shared_per_block / 1024, "local_mem_size": d.memory,
        "max_waves_per_cu": if d.warp_size > 0 { d.max_threads_per_sm / d.warp_size } else { 0 },
        "max_engine_clk_fcompute": d.clock_khz / 1000, "domain": d.pci[2],
        "location_id": (d.pci[0] << 8) | (d.pci[1] << 3), "vendor_id": 0x10de,
        "name": name, "vendor_name": "NVIDIA", "product_name": product, "model_name": product,
        "logical_node_type_id": d.ordinal, "simd_per_cu": 4, "num_xcc": 1,
        "max_waves_per_simd": if d.warp_size > 0 { d.max_threads_per_sm / d.warp_size / 4 } else { 0 },
        "uuid": {"value": d.uuid_int()}, "cuda_uuid": d.uuid_text(),
        "compute_capability": format!("{}.{}", d.cc.0, d.cc.1),
        "device_ordinal": d.ordinal, "memory_bytes": d.memory,
    });
    Agent {
        id,
        agent_type: "GPU".into(),
        logical_index: id,
        type_index: d.ordinal as i64,
        uuid: d.uuid_int(),
        name,
        model_name: product.clone(),
        vendor_name: "NVIDIA".into(),
        product_name: product,
        extdata: ext.to_string(),
    }
}

pub(crate) fn copy_operation(kind: u8) -> (&'static str, bool, bool) {
    // (operation, source is host, destination is host)
    match kind {
        1 | 3 => ("MEMORY_COPY_HOST_TO_DEVICE", true, false),
        2 | 4 => ("MEMORY_COPY_DEVICE_TO_HOST", false, true),
        5..=8 | 10 => ("MEMORY_COPY_DEVICE_TO_DEVICE", false, false),
        9 => ("MEMORY_COPY_HOST_TO_HOST", true, true),
        _ => ("MEMORY_COPY_NONE", false, false),
    }
}

/// The database header as the session starts: node, process (its end and session JSON are
/// filled in by [`Header::finish_process`] at detach) and agents: the CPU (0), then every
/// known device (ordinal + 1).
pub(crate) struct Header {
    /// The open database.
    pub writer: Writer,
    /// This process's id.
    pub pid: i64,
    /// Agent id of the first GPU (the code object's agent), 0 if none is known.
    pub first_gpu: i64,
    /// Device ordinals with an agent row.
    pub agents: HashSet<u32>,
}

impl Header {
    /// Creates the database at `path` and writes the header rows.
    pub fn write(path: &Path, cuda: &CudaInfo, session: &SessionInfo) -> Result<Header> {
        // SAFETY: trivial libc getters.
        let (pid, ppid) = unsafe { (libc::getpid() as i64, libc::getppid() as i64) };
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        // As rocprofv3's tool does: the output template may name directories that do not exist
        // yet (`%hostname%/…`); they are made by the target, as its user.
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut w = Writer::create_journaled(
            path,
            &Guid::from_parts(ms, (pid as u64) ^ session.init as u64),
        )?;
        let machine_id = std::fs::read_to_string("/etc/machine-id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let [sysname, hostname, release, version, machine, domain] = uname();
        let hash = fnv(&format!("{machine_id}{hostname}"));
        w.node(&Node {
            id: hash,
            hash,
            machine_id,
            system_name: sysname,
            hostname,
            release,
            version,
            hardware_name: machine,
            domain_name: domain,
        })?;
        w.process(&Process {
            pid,
            ppid,
            init: session.init,
            fini: session.fini,
            command: command_line(),
            environment: rank_environment(),
            extdata: session.extdata.to_string(),
        })?;
        w.agent(&cpu_agent())?;
        let mut agents = HashSet::new();
        for d in &cuda.devices {
            w.agent(&gpu_agent(d))?;
            agents.insert(d.ordinal as u32);
        }
        // The header is committed at once: from here on the file is a rocpd database with its
        // process, whatever happens to the process (no reader can hold a file just created).
        w.commit()?;
        let first_gpu = cuda
            .devices
            .first()
            .map(|d| d.ordinal as i64 + 1)
            .unwrap_or(0);
        Ok(Header {
            writer: w,
            pid,
            first_gpu,
            agents,
        })
    }

    /// Writes an agent for a device ordinal only the records know (once).
    pub fn device_seen(&mut self, ordinal: u32) -> Result<()> {
        if ordinal >= 1 << 16 || !self.agents.insert(ordinal) {
            return Ok(());
        }
        if self.first_gpu == 0 {
            self.first_gpu = ordinal as i64 + 1;
        }
        self.writer.agent(&gpu_agent(&Device {
            ordinal: ordinal as i32,
            ..Default::default()
        }))
    }
}

fn cpu_agent() -> Agent {
    let (cpu, vendor) = cpu_model();
    Agent {
        id: 0,
        agent_type: "CPU".into(),
        logical_index: 0,
        type_index: 0,
        uuid: 0,
        name: if cpu.is_empty() {
            "CPU".into()
        } else {
            cpu.clone()
        },
        model_name: cpu.clone(),
        vendor_name: vendor.clone(),
        product_name: cpu.clone(),
        extdata: serde_json::json!({"node_id": 0, "logical_node_id": 0, "type": 1,
            "cpu_cores_count": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "name": cpu, "vendor_name": vendor, "product_name": cpu, "model_name": cpu})
        .to_string(),
    }
}

/// Writes `rows` as a rocpd database at `path` at once: what a session that streamed nothing
/// during its window writes at detach ([`Sink`]).
pub fn write(
    path: &Path,
    rows: &Collected,
    cuda: &CudaInfo,
    session: &SessionInfo,
    api_name: &dyn Fn(bool, u32) -> String,
) -> Result<Counts> {
    let mut sink = Sink::create(path, cuda, session)?;
    sink.add(rows.clone(), api_name)?;
    sink.finish(session.fini, &session.extdata, api_name)
}

/// The variables of the process's environment that say which rank of a job it is (MPI,
/// Slurm, torchrun), as a JSON object: `summary` and `top` label ranks with them. Only these:
/// the rest of an environment (tokens, keys) has no place in a profile.
fn rank_environment() -> String {
    const RANK_VARS: [&str; 13] = [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_RANK",
        "PMI_SIZE",
        "PMIX_RANK",
        "MV2_COMM_WORLD_RANK",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "MPI_RANK",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
    ];
    let vars: serde_json::Map<String, serde_json::Value> = RANK_VARS
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v.into())))
        .collect();
    if vars.is_empty() {
        String::new()
    } else {
        serde_json::Value::Object(vars).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names() {
        assert_eq!(
            api_display_name("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(
            api_display_name("cudaStreamIsCapturing_v10000"),
            "cudaStreamIsCapturing"
        );
        assert_eq!(api_display_name("cuMemAlloc_v2"), "cuMemAlloc_v2");
        assert_eq!(api_display_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(api_display_name("_v1234"), "_v1234");
    }

    #[test]
    fn copy_kinds() {
        assert_eq!(copy_operation(1).0, "MEMORY_COPY_HOST_TO_DEVICE");
        assert_eq!(copy_operation(2).0, "MEMORY_COPY_DEVICE_TO_HOST");
        assert_eq!(copy_operation(8).0, "MEMORY_COPY_DEVICE_TO_DEVICE");
        assert_eq!(copy_operation(0).0, "MEMORY_COPY_NONE");
    }
}
