//! Writing the collected CUDA activity as one rocpd database.
//!
//! Mapping (timestamps are CUPTI ns plus the measured CLOCK_BOOTTIME offset):
//!
//! - agents: one CPU agent (id 0) and one GPU agent per CUDA device (id = ordinal + 1,
//!   `name` = `sm_<major><minor>`, model and product name = `cuDeviceGetName`, vendor
//!   `NVIDIA`, `uuid` = last 8 UUID bytes, the full `GPU-...` UUID, SM count (`cu_count`),
//!   memory and limits in the agent JSON);
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

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::model::*;
use rocprof_rocpd::Writer;

use crate::cuda::{CudaInfo, Device};
use crate::host::{command_line, cpu_model, demangle, fnv, uname};
use crate::records::{Collected, MARKER_END, MARKER_INSTANTANEOUS, MARKER_START};

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

fn gpu_agent(d: &Device) -> Agent {
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
        "uuid": d.uuid_text(), "compute_capability": format!("{}.{}", d.cc.0, d.cc.1),
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

fn copy_operation(kind: u8) -> (&'static str, bool, bool) {
    // (operation, source is host, destination is host)
    match kind {
        1 | 3 => ("MEMORY_COPY_HOST_TO_DEVICE", true, false),
        2 | 4 => ("MEMORY_COPY_DEVICE_TO_HOST", false, true),
        5..=8 | 10 => ("MEMORY_COPY_DEVICE_TO_DEVICE", false, false),
        9 => ("MEMORY_COPY_HOST_TO_HOST", true, true),
        _ => ("MEMORY_COPY_NONE", false, false),
    }
}

/// `rows` in start order (a stable sort of references: equal starts keep CUPTI's order).
fn by_start<T>(rows: &[T], start: impl Fn(&T) -> u64) -> Vec<&T> {
    let mut sorted: Vec<&T> = rows.iter().collect();
    sorted.sort_by_key(|r| start(r));
    sorted
}

/// Writes `rows` as a rocpd database at `path`.
pub fn write(
    path: &Path,
    rows: &Collected,
    cuda: &CudaInfo,
    session: &SessionInfo,
    api_name: &dyn Fn(bool, u32) -> String,
) -> rocprof_rocpd::Result<Counts> {
    // SAFETY: trivial libc getters.
    let (pid, ppid) = unsafe { (libc::getpid() as i64, libc::getppid() as i64) };
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // As rocprofv3's tool does: the output template may name directories that do not exist yet
    // (`%hostname%/…`); they are made by the target, as its user.
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut w = Writer::create(
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
        environment: String::new(),
        extdata: session.extdata.to_string(),
    })?;

    // Agents: CPU 0, then every known device, then any device ordinal only the records know.
    let (cpu, vendor) = cpu_model();
    w.agent(&Agent {
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
            "name": cpu, "vendor_name": vendor, "product_name": cpu, "model_name": cpu})
        .to_string(),
    })?;
    let mut devices: Vec<Device> = cuda.devices.clone();
    let known: HashSet<u32> = devices.iter().map(|d| d.ordinal as u32).collect();
    let mut seen: Vec<u32> = rows
        .kernels
        .iter()
        .map(|k| k.device)
        .chain(rows.copies.iter().map(|c| c.device))
        .chain(rows.allocs.iter().map(|a| a.device))
        .filter(|d| !known.contains(d) && *d < 1 << 16)
        .collect();
    seen.sort_unstable();
    seen.dedup();
    for d in seen {
        devices.push(Device {
            ordinal: d as i32,
            ..Default::default()
        });
    }
    let agent_of = |d: u32| d as i64 + 1;
    for d in &devices {
        w.agent(&gpu_agent(d))?;
    }
    let first_gpu = devices.first().map(|d| d.ordinal as i64 + 1).unwrap_or(0);

    // Thread ids by correlation id.
    let mut tid_of: HashMap<u32, i64> = HashMap::new();
    for a in &rows.apis {
        tid_of.entry(a.correlation).or_insert(a.tid as i64);
    }
    let tid = |c: u32, alt: u32| {
        tid_of
            .get(&c)
            .or_else(|| tid_of.get(&alt))
            .copied()
            .unwrap_or(pid)
    };
    let off = session.offset;
    let ts = |t: u64| (t as i64).saturating_add(off);
    let mut counts = Counts::default();

    if !rows.kernels.is_empty() {
        w.code_object(&CodeObject {
            id: 1,
            agent_id: first_gpu,
            uri: "memory://cuda".into(),
            ..Default::default()
        })?;
    }
    let mut symbols: HashMap<&str, i64> = HashMap::new();
    // In start order, as rocprofv3's databases are: CUPTI completes buffers in no particular
    // order, and readers (the Perfetto converter's single pass) rely on id order being time order.
    for (i, k) in by_start(&rows.kernels, |k| k.start).into_iter().enumerate() {
        let next = symbols.len() as i64 + 1;
        let kid = match symbols.get(k.name.as_str()) {
            Some(&id) => id,
            None => {
                w.kernel_symbol(&KernelSymbol {
                    id: next,
                    code_object_id: 1,
                    kernel_name: k.name.clone(),
                    display_name: if session.demangle {
                        demangle(&k.name)
                    } else {
                        k.name.clone()
                    },
                    group_segment_size: k.static_shared as i64,
                    private_segment_size: k.local_per_thread as i64,
                    arch_vgpr_count: k.registers as i64,
                    ..Default::default()
                })?;
                symbols.insert(&k.name, next);
                next
            }
        };
        let g = |n: usize| k.grid[n] as i64 * k.block[n] as i64;
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i as i64 + 1,
            tid: tid(k.correlation, 0),
            agent_id: agent_of(k.device),
            kernel_id: kid,
            queue_id: k.stream as i64,
            stream_id: k.stream as i64,
            correlation: Correlation {
                internal: k.correlation as i64,
                ..Default::default()
            },
            start: ts(k.start),
            end: ts(k.end),
            private_segment_size: k.local_per_thread as i64,
            group_segment_size: k.dynamic_shared as i64,
            workgroup: [k.block[0] as i64, k.block[1] as i64, k.block[2] as i64],
            grid: [g(0), g(1), g(2)],
            ..Default::default()
        })?;
        counts.kernels += 1;
    }

    for c in by_start(&rows.copies, |c| c.start) {
        let gpu = agent_of(c.device);
        let (op, src_host, dst_host) = if c.memset {
            ("MEMORY_SET", false, false)
        } else {
            copy_operation(c.copy_kind)
        };
        w.memory_copy(&MemoryCopy {
            tid: tid(c.correlation, c.runtime_correlation),
            operation: op.into(),
            correlation: Correlation {
                internal: c.correlation as i64,
                ..Default::default()
            },
            start: ts(c.start),
            end: ts(c.end),
            src_agent_id: if src_host { 0 } else { gpu },
            dst_agent_id: if dst_host { 0 } else { gpu },
            size: c.bytes as i64,
            stream_id: c.stream as i64,
            ..Default::default()
        })?;
        counts.copies += 1;
    }

    // API regions: id = correlation id; a repeated id gets a fresh one above 2^40.
    let mut region_ids: HashSet<i64> = HashSet::new();
    let mut spare: i64 = 1 << 40;
    let mut fresh = |want: i64, ids: &mut HashSet<i64>| {
        if ids.insert(want) {
            return want;
        }
        loop {
            spare += 1;
            if ids.insert(spare) {
                return spare;
            }
        }
    };
    let mut names: HashMap<(bool, u32), String> = HashMap::new();
    for a in by_start(&rows.apis, |a| a.start) {
        let name = names
            .entry((a.driver, a.cbid))
            .or_insert_with(|| api_name(a.driver, a.cbid))
            .clone();
        let id = fresh(a.correlation as i64, &mut region_ids);
        let (start, mut end) = (ts(a.start), ts(a.end));
        if end == start {
            end += 1; // a zero-length call would become a sample
        }
        w.api_call(&ApiCall {
            kind: if a.driver { DRIVER_KIND } else { RUNTIME_KIND }.into(),
            operation: name,
            tid: a.tid as i64,
            correlation: Correlation {
                internal: id,
                ..Default::default()
            },
            start,
            end,
            ..Default::default()
        })?;
        counts.api += 1;
    }

    // NVTX markers: pair start/end by id.
    let mut open: HashMap<u32, (u64, Option<u32>, String)> = HashMap::new();
    for (i, m) in rows.markers.iter().enumerate() {
        let (start, end, tid_m, name) = if m.flags & MARKER_INSTANTANEOUS != 0 {
            (
                m.timestamp,
                m.timestamp,
                m.tid,
                m.name.clone().unwrap_or_default(),
            )
        } else if m.flags & MARKER_START != 0 {
            open.insert(
                m.id,
                (m.timestamp, m.tid, m.name.clone().unwrap_or_default()),
            );
            continue;
        } else if m.flags & MARKER_END != 0 {
            let Some((s, t, n)) = open.remove(&m.id) else {
                continue;
            };
            (s, m.timestamp.max(s + 1), t.or(m.tid), n)
        } else {
            continue;
        };
        let id = fresh((1 << 41) + i as i64, &mut region_ids);
        w.api_call(&ApiCall {
            kind: "MARKER_CORE_API".into(),
            operation: name.clone(),
            tid: tid_m.map(|t| t as i64).unwrap_or(pid),
            correlation: Correlation {
                internal: id,
                ..Default::default()
            },
            start: ts(start),
            end: ts(end),
            message: Some(name),
            args: Vec::new(),
        })?;
        counts.api += 1;
    }

    for a in &rows.allocs {
        w.memory_allocation(&MemoryAllocation {
            tid: tid(a.correlation, 0),
            operation: if a.release {
                "MEMORY_ALLOCATION_FREE"
            } else {
                "MEMORY_ALLOCATION_ALLOCATE"
            }
            .into(),
            correlation: Correlation {
                internal: a.correlation as i64,
                ..Default::default()
            },
            start: ts(a.timestamp),
            end: ts(a.timestamp),
            agent_id: Some(agent_of(a.device)),
            address: a.address as i64,
            size: a.bytes as i64,
            stream_id: Some(a.stream as i64),
            ..Default::default()
        })?;
        counts.allocations += 1;
    }
    w.finish()?;
    Ok(counts)
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
