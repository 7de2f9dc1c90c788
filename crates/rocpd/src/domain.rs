//! rocprofv3's output domains: which tracing kinds go to which trace/stats file.

/// A domain with its own trace and stats files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Domain {
    /// Kernel dispatches.
    KernelDispatch,
    /// HIP runtime and compiler API.
    HipApi,
    /// HSA API.
    HsaApi,
    /// ROCTx markers.
    MarkerApi,
    /// RCCL API.
    RcclApi,
    /// rocDecode API.
    RocDecodeApi,
    /// rocJPEG API.
    RocJpegApi,
    /// Memory copies.
    MemoryCopy,
    /// Memory allocations.
    MemoryAllocation,
    /// Scratch memory.
    ScratchMemory,
    /// Counter collection.
    CounterCollection,
}

impl Domain {
    /// The API domains, in file-writing order.
    pub const API: [Domain; 6] = [
        Domain::HipApi,
        Domain::HsaApi,
        Domain::MarkerApi,
        Domain::RcclApi,
        Domain::RocDecodeApi,
        Domain::RocJpegApi,
    ];

    /// Every domain.
    pub const ALL: [Domain; 11] = [
        Domain::KernelDispatch,
        Domain::HipApi,
        Domain::HsaApi,
        Domain::MarkerApi,
        Domain::RcclApi,
        Domain::RocDecodeApi,
        Domain::RocJpegApi,
        Domain::MemoryCopy,
        Domain::MemoryAllocation,
        Domain::ScratchMemory,
        Domain::CounterCollection,
    ];

    /// The API domain of a tracing kind name (`HIP_RUNTIME_API_EXT` → HIP), if it is one.
    pub fn of_api_kind(kind: &str) -> Option<Domain> {
        Some(
            if kind.starts_with("HIP_RUNTIME_API") || kind.starts_with("HIP_COMPILER_API") {
                Domain::HipApi
            } else if kind.starts_with("HSA_") {
                Domain::HsaApi
            } else if kind.starts_with("MARKER_") {
                Domain::MarkerApi
            } else if kind.starts_with("RCCL_") {
                Domain::RcclApi
            } else if kind.starts_with("ROCDECODE_") {
                Domain::RocDecodeApi
            } else if kind.starts_with("ROCJPEG_") {
                Domain::RocJpegApi
            } else {
                return None;
            },
        )
    }

    /// Trace file name part (`<name>_<trace>.csv`).
    pub fn trace_name(self) -> &'static str {
        match self {
            Domain::KernelDispatch => "kernel_trace",
            Domain::HipApi => "hip_api_trace",
            Domain::HsaApi => "hsa_api_trace",
            Domain::MarkerApi => "marker_api_trace",
            Domain::RcclApi => "rccl_api_trace",
            Domain::RocDecodeApi => "rocdecode_api_trace",
            Domain::RocJpegApi => "rocjpeg_api_trace",
            Domain::MemoryCopy => "memory_copy_trace",
            Domain::MemoryAllocation => "memory_allocation_trace",
            Domain::ScratchMemory => "scratch_memory_trace",
            Domain::CounterCollection => "counter_collection",
        }
    }

    /// Stats file name part (`<name>_<stats>.csv`).
    pub fn stats_name(self) -> &'static str {
        match self {
            Domain::KernelDispatch => "kernel_stats",
            Domain::HipApi => "hip_api_stats",
            Domain::HsaApi => "hsa_api_stats",
            Domain::MarkerApi => "marker_api_stats",
            Domain::RcclApi => "rccl_api_stats",
            Domain::RocDecodeApi => "rocdecode_api_stats",
            Domain::RocJpegApi => "rocjpeg_api_stats",
            Domain::MemoryCopy => "memory_copy_stats",
            Domain::MemoryAllocation => "memory_allocation_stats",
            Domain::ScratchMemory => "scratch_memory_stats",
            Domain::CounterCollection => "counter_collection_stats",
        }
    }

    /// The domain's name in stats and summaries (`HIP_API`).
    pub fn label(self) -> &'static str {
        match self {
            Domain::KernelDispatch => "KERNEL_DISPATCH",
            Domain::HipApi => "HIP_API",
            Domain::HsaApi => "HSA_API",
            Domain::MarkerApi => "MARKER_API",
            Domain::RcclApi => "RCCL_API",
            Domain::RocDecodeApi => "ROCDECODE_API",
            Domain::RocJpegApi => "ROCJPEG_API",
            Domain::MemoryCopy => "MEMORY_COPY",
            Domain::MemoryAllocation => "MEMORY_ALLOCATION",
            Domain::ScratchMemory => "SCRATCH_MEMORY",
            Domain::CounterCollection => "COUNTER_COLLECTION",
        }
    }

    /// The key of this domain in the JSON `buffer_records` object.
    pub fn json_key(self) -> &'static str {
        match self {
            Domain::KernelDispatch => "kernel_dispatch",
            Domain::HipApi => "hip_api",
            Domain::HsaApi => "hsa_api",
            Domain::MarkerApi => "marker_api",
            Domain::RcclApi => "rccl_api",
            Domain::RocDecodeApi => "rocdecode_api",
            Domain::RocJpegApi => "rocjpeg_api",
            Domain::MemoryCopy => "memory_copy",
            Domain::MemoryAllocation => "memory_allocation",
            Domain::ScratchMemory => "scratch_memory",
            Domain::CounterCollection => "counter_collection",
        }
    }

    /// The CSV header line of the trace file, as rocprofv3 (ROCm 7.0) writes it.
    pub fn csv_header(self) -> &'static str {
        match self {
            Domain::KernelDispatch => {
                "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Thread_Id\",\"Dispatch_Id\",\"Kernel_Id\",\"Kernel_Name\",\
                 \"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\
                 \"Accum_VGPR_Count\",\"SGPR_Count\",\"Workgroup_Size_X\",\"Workgroup_Size_Y\",\"Workgroup_Size_Z\",\
                 \"Grid_Size_X\",\"Grid_Size_Y\",\"Grid_Size_Z\"\n"
            }
            Domain::HipApi
            | Domain::HsaApi
            | Domain::MarkerApi
            | Domain::RcclApi
            | Domain::RocDecodeApi
            | Domain::RocJpegApi => {
                "\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n"
            }
            Domain::MemoryCopy => {
                "\"Kind\",\"Direction\",\"Stream_Id\",\"Source_Agent_Id\",\"Destination_Agent_Id\",\"Correlation_Id\",\
                 \"Start_Timestamp\",\"End_Timestamp\"\n"
            }
            Domain::MemoryAllocation => {
                "\"Kind\",\"Operation\",\"Agent_Id\",\"Allocation_Size\",\"Address\",\"Correlation_Id\",\"Start_Timestamp\",\
                 \"End_Timestamp\"\n"
            }
            Domain::ScratchMemory => {
                "\"Kind\",\"Operation\",\"Agent_Id\",\"Queue_Id\",\"Thread_Id\",\"Alloc_Flags\",\"Start_Timestamp\",\
                 \"End_Timestamp\",\"Allocation_Size\"\n"
            }
            Domain::CounterCollection => {
                "\"Correlation_Id\",\"Dispatch_Id\",\"Agent_Id\",\"Queue_Id\",\"Process_Id\",\"Thread_Id\",\"Grid_Size\",\
                 \"Kernel_Id\",\"Kernel_Name\",\"Workgroup_Size\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\
                 \"Accum_VGPR_Count\",\"SGPR_Count\",\"Counter_Name\",\"Counter_Value\",\"Start_Timestamp\",\"End_Timestamp\"\n"
            }
        }
    }
}

/// The stats CSV header (all `*_stats.csv` and `domain_stats.csv`).
pub const STATS_HEADER: &str =
    "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\",\"StdDev\"\n";

/// rocprofv3's LDS allocation granularity: `LDS_Block_Size` is the static LDS rounded up to it.
pub const LDS_BLOCK: i64 = 512;

/// `LDS_Block_Size` for a kernel's static group segment size.
pub fn lds_block_size(group_segment_size: i64) -> i64 {
    // Saturating: a corrupt database may hold any size.
    group_segment_size.saturating_add(LDS_BLOCK - 1) & !(LDS_BLOCK - 1)
}
