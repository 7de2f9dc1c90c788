//! Plain records accepted by the [`Writer`](super::writer::Writer): one struct per kind of row
//! rocprofv3 stores. Ids are natural keys, as in rocprofv3: process id = pid, thread id = tid,
//! agent id = absolute (node) index, dispatch id = `dispatch_id`, API call id = internal
//! correlation id.

/// The machine (`rocpd_info_node`).
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Node id (rocprofv3 derives it from a hash of the machine id).
    pub id: i64,
    /// Hash of the machine id (must be unique in the database).
    pub hash: i64,
    /// Contents of `/etc/machine-id`.
    pub machine_id: String,
    /// `uname` sysname.
    pub system_name: String,
    /// `uname` nodename.
    pub hostname: String,
    /// `uname` release.
    pub release: String,
    /// `uname` version.
    pub version: String,
    /// `uname` machine.
    pub hardware_name: String,
    /// `uname` domainname.
    pub domain_name: String,
}

/// The profiled process (`rocpd_info_process`).
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// OS process id (also the row id).
    pub pid: i64,
    /// Parent process id.
    pub ppid: i64,
    /// Profiler initialisation timestamp (ns, CLOCK_BOOTTIME); also stored as `start`.
    pub init: i64,
    /// Profiler finalisation timestamp (ns); also stored as `end`.
    pub fini: i64,
    /// Command line, arguments joined by spaces.
    pub command: String,
    /// Environment as a JSON object text (`{}` if unknown).
    pub environment: String,
    /// Tool configuration as a JSON object text (`{}` if unknown).
    pub extdata: String,
}

/// A CPU or GPU agent (`rocpd_info_agent`).
#[derive(Debug, Clone, Default)]
pub struct Agent {
    /// Absolute index (node id); also the row id.
    pub id: i64,
    /// `"CPU"` or `"GPU"`.
    pub agent_type: String,
    /// Logical node id (what `Agent N` shows by default).
    pub logical_index: i64,
    /// Index among agents of the same type.
    pub type_index: i64,
    /// Device uuid as an integer.
    pub uuid: i64,
    /// Agent name, e.g. `gfx90a`.
    pub name: String,
    /// Model name.
    pub model_name: String,
    /// Vendor name.
    pub vendor_name: String,
    /// Product name (also stored as `user_name`).
    pub product_name: String,
    /// Full agent JSON (rocprofv3's `agents[]` entry), `{}` if unknown.
    pub extdata: String,
}

/// A hardware counter description (`rocpd_info_pmc`).
#[derive(Debug, Clone, Default)]
pub struct Pmc {
    /// Counter id (rocprofiler counter handle).
    pub id: i64,
    /// Agent the counter belongs to.
    pub agent_id: i64,
    /// Counter name, e.g. `SQ_WAVES` (also stored as `symbol`).
    pub name: String,
    /// Description.
    pub description: String,
    /// Hardware block.
    pub block: String,
    /// Derived-counter expression.
    pub expression: String,
    /// Whether the counter is a constant.
    pub is_constant: bool,
    /// Whether the counter is derived.
    pub is_derived: bool,
}

/// A loaded code object (`rocpd_info_code_object`).
#[derive(Debug, Clone, Default)]
pub struct CodeObject {
    /// Code object id.
    pub id: i64,
    /// Agent it was loaded on.
    pub agent_id: i64,
    /// URI (`file://...#offset=...` or `memory://...`).
    pub uri: String,
    /// Load base address.
    pub load_base: i64,
    /// Load size in bytes.
    pub load_size: i64,
    /// Load delta.
    pub load_delta: i64,
}

/// A kernel symbol (`rocpd_info_kernel_symbol`).
#[derive(Debug, Clone, Default)]
pub struct KernelSymbol {
    /// Kernel id.
    pub id: i64,
    /// Code object that contains it.
    pub code_object_id: i64,
    /// Raw (mangled) symbol name.
    pub kernel_name: String,
    /// Formatted name shown in traces (demangled/truncated per the tool options).
    pub display_name: String,
    /// Kernel object address.
    pub kernel_object: i64,
    /// Kernel argument segment size.
    pub kernarg_segment_size: i64,
    /// Kernel argument segment alignment.
    pub kernarg_segment_alignment: i64,
    /// Static LDS size in bytes.
    pub group_segment_size: i64,
    /// Static scratch size per work-item.
    pub private_segment_size: i64,
    /// SGPR count.
    pub sgpr_count: i64,
    /// Architected VGPR count.
    pub arch_vgpr_count: i64,
    /// Accumulation VGPR count.
    pub accum_vgpr_count: i64,
}

/// The three correlation ids rocprofv3 keeps for every record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Correlation {
    /// Internal correlation id (the `Correlation_Id` column of rocprofv3's CSV).
    pub internal: i64,
    /// External correlation id (user supplied, 0 if none).
    pub external: i64,
    /// Internal id of the enclosing API call (0 if none).
    pub ancestor: i64,
}

/// One argument of an API call (`rocpd_arg`).
#[derive(Debug, Clone, Default)]
pub struct Arg {
    /// C++ type.
    pub arg_type: String,
    /// Parameter name.
    pub name: String,
    /// Value as text.
    pub value: String,
}

/// A host API call (HIP, HSA, marker, RCCL, rocDecode, ...): a `rocpd_region` if it has a
/// duration, otherwise a `rocpd_sample`.
#[derive(Debug, Clone, Default)]
pub struct ApiCall {
    /// Tracing kind name, e.g. `HIP_RUNTIME_API_EXT`, `HSA_CORE_API`, `MARKER_CORE_API`.
    pub kind: String,
    /// Operation name, e.g. `hipLaunchKernel`.
    pub operation: String,
    /// Thread id.
    pub tid: i64,
    /// Correlation ids; `internal` becomes the row id.
    pub correlation: Correlation,
    /// Start timestamp (ns).
    pub start: i64,
    /// End timestamp (ns).
    pub end: i64,
    /// ROCTx message of marker records (`{"message": ...}` in the event's extdata).
    pub message: Option<String>,
    /// Arguments.
    pub args: Vec<Arg>,
}

/// A kernel dispatch (`rocpd_kernel_dispatch`), with its counter values if collected.
#[derive(Debug, Clone, Default)]
pub struct KernelDispatch {
    /// Dispatch id (also the row id).
    pub dispatch_id: i64,
    /// Thread that enqueued it.
    pub tid: i64,
    /// Agent it ran on.
    pub agent_id: i64,
    /// Kernel symbol id.
    pub kernel_id: i64,
    /// Queue handle (a queue row is created if missing).
    pub queue_id: i64,
    /// Stream handle, 0 for the default stream (a stream row is created if missing).
    pub stream_id: i64,
    /// Correlation ids.
    pub correlation: Correlation,
    /// Start timestamp (ns).
    pub start: i64,
    /// End timestamp (ns).
    pub end: i64,
    /// Dynamic scratch size.
    pub private_segment_size: i64,
    /// Dynamic LDS size.
    pub group_segment_size: i64,
    /// Workgroup size x, y, z.
    pub workgroup: [i64; 3],
    /// Grid size x, y, z.
    pub grid: [i64; 3],
    /// ROCTx region name for kernel renaming (empty if none).
    pub region_name: String,
    /// Counter values `(pmc id, value)`, one entry per counter instance.
    pub counters: Vec<(i64, f64)>,
}

/// An asynchronous memory copy (`rocpd_memory_copy`).
#[derive(Debug, Clone, Default)]
pub struct MemoryCopy {
    /// Thread that requested it.
    pub tid: i64,
    /// Operation name, e.g. `MEMORY_COPY_HOST_TO_DEVICE`.
    pub operation: String,
    /// Correlation ids.
    pub correlation: Correlation,
    /// Start timestamp (ns).
    pub start: i64,
    /// End timestamp (ns).
    pub end: i64,
    /// Source agent.
    pub src_agent_id: i64,
    /// Destination agent.
    pub dst_agent_id: i64,
    /// Source address.
    pub src_address: i64,
    /// Destination address.
    pub dst_address: i64,
    /// Bytes copied.
    pub size: i64,
    /// Stream handle (0 = default stream).
    pub stream_id: i64,
}

/// A memory or scratch allocation event (`rocpd_memory_allocate`).
#[derive(Debug, Clone, Default)]
pub struct MemoryAllocation {
    /// Thread.
    pub tid: i64,
    /// Operation name: `MEMORY_ALLOCATION_ALLOCATE`, `MEMORY_ALLOCATION_FREE`,
    /// `MEMORY_ALLOCATION_VMEM_ALLOCATE`, `MEMORY_ALLOCATION_VMEM_FREE`, `SCRATCH_MEMORY_ALLOC`,
    /// `SCRATCH_MEMORY_FREE` or `SCRATCH_MEMORY_ASYNC_RECLAIM`.
    pub operation: String,
    /// Correlation ids.
    pub correlation: Correlation,
    /// Start timestamp (ns).
    pub start: i64,
    /// End timestamp (ns).
    pub end: i64,
    /// Agent (stored for allocations only, as rocprofv3 does).
    pub agent_id: Option<i64>,
    /// Address.
    pub address: i64,
    /// Size in bytes.
    pub size: i64,
    /// Queue handle (scratch memory).
    pub queue_id: Option<i64>,
    /// Stream handle.
    pub stream_id: Option<i64>,
    /// Scratch allocation flags.
    pub flags: Option<i64>,
}

/// Maps an allocation operation name to rocpd's `(type, level)`.
pub fn allocation_type_level(operation: &str) -> Option<(&'static str, &'static str)> {
    Some(match operation {
        "MEMORY_ALLOCATION_ALLOCATE" => ("ALLOC", "REAL"),
        "MEMORY_ALLOCATION_FREE" => ("FREE", "REAL"),
        "MEMORY_ALLOCATION_VMEM_ALLOCATE" => ("ALLOC", "VIRTUAL"),
        "MEMORY_ALLOCATION_VMEM_FREE" => ("FREE", "VIRTUAL"),
        "SCRATCH_MEMORY_ALLOC" => ("ALLOC", "SCRATCH"),
        "SCRATCH_MEMORY_FREE" => ("FREE", "SCRATCH"),
        "SCRATCH_MEMORY_ASYNC_RECLAIM" => ("RECLAIM", "SCRATCH"),
        _ => return None,
    })
}

/// The inverse of [`allocation_type_level`]: the operation name for a stored `(type, level)`.
pub fn allocation_operation(kind: &str, level: &str) -> &'static str {
    match (kind, level) {
        ("ALLOC", "VIRTUAL") => "MEMORY_ALLOCATION_VMEM_ALLOCATE",
        ("FREE", "VIRTUAL") => "MEMORY_ALLOCATION_VMEM_FREE",
        ("ALLOC", "SCRATCH") => "SCRATCH_MEMORY_ALLOC",
        ("FREE", "SCRATCH") => "SCRATCH_MEMORY_FREE",
        (_, "SCRATCH") => "SCRATCH_MEMORY_ASYNC_RECLAIM",
        ("FREE", _) => "MEMORY_ALLOCATION_FREE",
        _ => "MEMORY_ALLOCATION_ALLOCATE",
    }
}
