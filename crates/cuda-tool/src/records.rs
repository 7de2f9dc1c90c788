//! CUPTI activity records: hand-written `#[repr(C)]` prefixes of the CUDA 13 record structs
//! (only the fields the tool reads, up to the last one; every later version keeps these
//! offsets, and `tests/layout.rs` checks them against the real headers), and their parsing into
//! owned rows.

use std::ffi::{c_char, CStr};

/// `CUPTI_ACTIVITY_KIND_MEMCPY`.
pub const KIND_MEMCPY: u32 = 1;
/// `CUPTI_ACTIVITY_KIND_MEMSET`.
pub const KIND_MEMSET: u32 = 2;
/// `CUPTI_ACTIVITY_KIND_DRIVER`.
pub const KIND_DRIVER: u32 = 4;
/// `CUPTI_ACTIVITY_KIND_RUNTIME`.
pub const KIND_RUNTIME: u32 = 5;
/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`.
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
/// `CUPTI_ACTIVITY_KIND_MARKER`.
pub const KIND_MARKER: u32 = 12;
/// `CUPTI_ACTIVITY_KIND_MEMORY2`.
pub const KIND_MEMORY2: u32 = 49;

/// Prefix of `CUpti_ActivityKernel13` (kind `CONCURRENT_KERNEL`).
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    pub kind: u32,
    pub cache_config: u8,
    pub shared_memory_config: u8,
    pub registers_per_thread: u16,
    pub partitioned_global_cache_requested: u32,
    pub partitioned_global_cache_executed: u32,
    pub start: u64,
    pub end: u64,
    pub completed: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub grid_x: i32,
    pub grid_y: i32,
    pub grid_z: i32,
    pub block_x: i32,
    pub block_y: i32,
    pub block_z: i32,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub local_memory_total: u32,
    pub correlation_id: u32,
    pub grid_id: i64,
    pub name: *const c_char,
}

/// Prefix of `CUpti_ActivityMemcpy7`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memcpy {
    pub kind: u32,
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub runtime_correlation_id: u32,
}

/// Prefix of `CUpti_ActivityMemset5`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memset {
    pub kind: u32,
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub flags: u16,
    pub memory_kind: u16,
}

/// Prefix of `CUpti_ActivityMemory4` (kind `MEMORY2`).
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub kind: u32,
    pub memory_operation_type: u32,
    pub memory_kind: u32,
    pub correlation_id: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub pc: u64,
    pub process_id: u32,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
}

/// `CUpti_ActivityAPI` (kinds `RUNTIME` and `DRIVER`).
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Api {
    pub kind: u32,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// `CUpti_ActivityMarker2` (the `objectId` union as its `pt` member plus the third word).
#[allow(missing_docs)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Marker {
    pub kind: u32,
    pub flags: u32,
    pub timestamp: u64,
    pub id: u32,
    pub object_kind: u32,
    pub object_process_id: u32,
    pub object_thread_id: u32,
    pub object_stream_id: u32,
    pub pad: u32,
    pub name: *const c_char,
    pub domain: *const c_char,
}

/// `CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS`.
pub const MARKER_INSTANTANEOUS: u32 = 1;
/// `CUPTI_ACTIVITY_FLAG_MARKER_START`.
pub const MARKER_START: u32 = 2;
/// `CUPTI_ACTIVITY_FLAG_MARKER_END`.
pub const MARKER_END: u32 = 4;
/// `CUPTI_ACTIVITY_OBJECT_THREAD`.
pub const OBJECT_THREAD: u32 = 2;

/// A kernel execution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelRow {
    /// Device ordinal.
    pub device: u32,
    /// Stream id.
    pub stream: u32,
    /// Start (CUPTI clock, ns).
    pub start: u64,
    /// End.
    pub end: u64,
    /// Grid in blocks.
    pub grid: [i32; 3],
    /// Block in threads.
    pub block: [i32; 3],
    /// Static shared memory (bytes).
    pub static_shared: i32,
    /// Dynamic shared memory (bytes).
    pub dynamic_shared: i32,
    /// Registers per thread.
    pub registers: u16,
    /// Local memory per thread (bytes).
    pub local_per_thread: u32,
    /// Correlation id.
    pub correlation: u32,
    /// Kernel (mangled) name, copied during the callback.
    pub name: String,
}

/// A memory copy or memset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyRow {
    /// True for a memset.
    pub memset: bool,
    /// `CUpti_ActivityMemcpyKind` (0 for memsets).
    pub copy_kind: u8,
    /// Bytes.
    pub bytes: u64,
    /// Start.
    pub start: u64,
    /// End.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id (driver API).
    pub correlation: u32,
    /// Runtime API correlation id (0 for memsets).
    pub runtime_correlation: u32,
}

/// A runtime or driver API call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiRow {
    /// Driver API (else runtime).
    pub driver: bool,
    /// Callback id.
    pub cbid: u32,
    /// Start.
    pub start: u64,
    /// End.
    pub end: u64,
    /// Thread id (system tid with `CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM`).
    pub tid: u32,
    /// Correlation id.
    pub correlation: u32,
}

/// A memory allocation or release.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocRow {
    /// Release (else allocation).
    pub release: bool,
    /// Address.
    pub address: u64,
    /// Bytes.
    pub bytes: u64,
    /// Timestamp.
    pub timestamp: u64,
    /// Device ordinal.
    pub device: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id.
    pub correlation: u32,
}

/// An NVTX marker record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkerRow {
    /// CUPTI marker flags.
    pub flags: u32,
    /// Timestamp.
    pub timestamp: u64,
    /// Marker id (pairs start and end).
    pub id: u32,
    /// Thread id if the marker is thread-scoped.
    pub tid: Option<u32>,
    /// Name (present on start and instantaneous records).
    pub name: Option<String>,
}

/// Everything collected from CUPTI buffers.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// Kernels.
    pub kernels: Vec<KernelRow>,
    /// Copies and memsets.
    pub copies: Vec<CopyRow>,
    /// API calls.
    pub apis: Vec<ApiRow>,
    /// Allocations.
    pub allocs: Vec<AllocRow>,
    /// Markers.
    pub markers: Vec<MarkerRow>,
    /// Records CUPTI dropped.
    pub dropped: u64,
    /// Records of other kinds (ignored).
    pub other: u64,
}

fn owned(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: CUPTI strings are NUL-terminated and valid during the callback.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// Parses one record into `out`.
///
/// # Safety
/// `rec` must point to a complete CUPTI activity record valid for the duration of the call.
// Long because: one flat match, each arm copying one record kind's fields into its row.
pub unsafe fn parse(rec: *const u8, out: &mut Collected) {
    let kind = std::ptr::read_unaligned(rec as *const u32);
    match kind {
        KIND_CONCURRENT_KERNEL => {
            let k = std::ptr::read_unaligned(rec as *const Kernel);
            out.kernels.push(KernelRow {
                device: k.device_id,
                stream: k.stream_id,
                start: k.start,
                end: k.end,
                grid: [k.grid_x, k.grid_y, k.grid_z],
                block: [k.block_x, k.block_y, k.block_z],
                static_shared: k.static_shared_memory,
                dynamic_shared: k.dynamic_shared_memory,
                registers: k.registers_per_thread,
                local_per_thread: k.local_memory_per_thread,
                correlation: k.correlation_id,
                name: owned(k.name).unwrap_or_default(),
            });
        }
        KIND_MEMCPY => {
            let m = std::ptr::read_unaligned(rec as *const Memcpy);
            out.copies.push(CopyRow {
                memset: false,
                copy_kind: m.copy_kind,
                bytes: m.bytes,
                start: m.start,
                end: m.end,
                device: m.device_id,
                stream: m.stream_id,
                correlation: m.correlation_id,
                runtime_correlation: m.runtime_correlation_id,
            });
        }
        KIND_MEMSET => {
            let m = std::ptr::read_unaligned(rec as *const Memset);
            out.copies.push(CopyRow {
                memset: true,
                copy_kind: 0,
                bytes: m.bytes,
                start: m.start,
                end: m.end,
                device: m.device_id,
                stream: m.stream_id,
                correlation: m.correlation_id,
                runtime_correlation: 0,
            });
        }
        KIND_RUNTIME | KIND_DRIVER => {
            let a = std::ptr::read_unaligned(rec as *const Api);
            out.apis.push(ApiRow {
                driver: kind == KIND_DRIVER,
                cbid: a.cbid,
                start: a.start,
                end: a.end,
                tid: a.thread_id,
                correlation: a.correlation_id,
            });
        }
        KIND_MEMORY2 => {
            let m = std::ptr::read_unaligned(rec as *const Memory);
            out.allocs.push(AllocRow {
                release: m.memory_operation_type == 2,
                address: m.address,
                bytes: m.bytes,
                timestamp: m.timestamp,
                device: m.device_id,
                stream: m.stream_id,
                correlation: m.correlation_id,
            });
        }
        KIND_MARKER => {
            let m = std::ptr::read_unaligned(rec as *const Marker);
            out.markers.push(MarkerRow {
                flags: m.flags,
                timestamp: m.timestamp,
                id: m.id,
                tid: (m.object_kind == OBJECT_THREAD).then_some(m.object_thread_id),
                name: owned(m.name),
            });
        }
        _ => out.other += 1,
    }
}
