//! The definition of every tri-state switch: one row per [`Switch`], in `--help` order. Everything
//! else about a switch (its clap argument, its `ROCPROF_*` variable, its implications, the
//! environment variable named in `--help`, its row in docs/options.md) comes from its row.

use super::switches::{Effect, Kind, Switch, SwitchDef, COUNT};
use super::{H_ADVANCED, H_BASIC, H_COUNTERS, H_EXTENDED, H_FILTER, H_OUTPUT, H_SUMMARY};
use Effect::{Bool, Negated, Set, Trace, Umbrella};
use Switch::*;

/// A row with the common settings: a boolean, no short name, no implication.
const fn row(
    switch: Switch,
    heading: &'static str,
    long: &'static str,
    help: &'static str,
    effect: Effect,
) -> SwitchDef {
    SwitchDef {
        switch,
        heading,
        long,
        short: None,
        alias: None,
        help,
        kind: Kind::Bool,
        effect,
        implies: &[],
        needs: None,
        env: None,
        after: None,
        note: "",
    }
}

/// Everything `--sys-trace` turns on (unless given explicitly).
const SYSTEM: [Switch; 15] = [
    HipTrace,
    HsaTrace,
    MarkerTrace,
    KernelTrace,
    KfdTrace,
    MemoryCopyTrace,
    MemoryAllocationTrace,
    ScratchMemoryTrace,
    RcclTrace,
    OmptTrace,
    RocdecodeTrace,
    RocjpegTrace,
    RocshmemTrace,
    HipfileTrace,
    HipEventTrace,
];

/// Everything `--runtime-trace` turns on (unless given explicitly).
const RUNTIME: [Switch; 14] = [
    HipRuntimeTrace,
    MarkerTrace,
    KernelTrace,
    KfdTrace,
    MemoryCopyTrace,
    MemoryAllocationTrace,
    ScratchMemoryTrace,
    RcclTrace,
    OmptTrace,
    RocdecodeTrace,
    RocjpegTrace,
    RocshmemTrace,
    HipfileTrace,
    HipEventTrace,
];

/// The rows, indexed by [`Switch`] (checked when compiling, below).
#[rustfmt::skip]
pub(super) const TABLE: [SwitchDef; COUNT] = [
    // ------------------------------------------------------------------ basic tracing
    row(SysTrace, H_BASIC, "sys-trace",
        "HIP, HSA, marker, RCCL, rocDecode, rocJPEG, rocSHMEM, hipFILE, HIP event, memory copy/allocation/scratch, KFD, OMPT and kernel dispatch tracing",
        Umbrella).short('s').implies(&SYSTEM),
    row(RuntimeTrace, H_BASIC, "runtime-trace",
        "Like --sys-trace but HIP runtime API only (no HIP compiler API) and no HSA API",
        Umbrella).short('r').implies(&RUNTIME),
    row(HipTrace, H_BASIC, "hip-trace",
        "HIP runtime and compiler API (implies --hip-graph-trace and --hip-event-trace)",
        Umbrella).implies(&[HipCompilerTrace, HipRuntimeTrace]),
    row(HsaTrace, H_BASIC, "hsa-trace", "HSA core, AMD-extension, image and finalizer API", Umbrella)
        .implies(&[HsaCoreTrace, HsaAmdTrace, HsaImageTrace, HsaFinalizerTrace]),
    row(KernelTrace, H_BASIC, "kernel-trace", "Kernel dispatches", Trace("ROCPROF_KERNEL_TRACE")),
    row(MemoryCopyTrace, H_BASIC, "memory-copy-trace", "Memory copies", Trace("ROCPROF_MEMORY_COPY_TRACE")),
    row(MemoryAllocationTrace, H_BASIC, "memory-allocation-trace", "Memory allocations",
        Trace("ROCPROF_MEMORY_ALLOCATION_TRACE")),
    row(ScratchMemoryTrace, H_BASIC, "scratch-memory-trace", "Scratch memory operations",
        Trace("ROCPROF_SCRATCH_MEMORY_TRACE")),
    row(MarkerTrace, H_BASIC, "marker-trace", "Marker (ROCTx) API", Trace("ROCPROF_MARKER_API_TRACE"))
        .note("no LD_PRELOAD in attach mode"),
    row(RcclTrace, H_BASIC, "rccl-trace", "RCCL API", Trace("ROCPROF_RCCL_API_TRACE")),
    row(KfdTrace, H_BASIC, "kfd-trace", "KFD page migration, page mapping, queue and dropped-event traces", Umbrella)
        .implies(&[KfdPageMigrationTrace, KfdPageMappingTrace, KfdQueueTrace, KfdDroppedEventsTrace]),
    row(HipGraphTrace, H_BASIC, "hip-graph-trace", "One record per hipGraphLaunch", Trace("ROCPROF_HIP_GRAPH_TRACE")),
    row(HipEventTrace, H_BASIC, "hip-event-trace",
        "GPU-side HIP event barriers (hipEventRecord, hipStreamWaitEvent)", Trace("ROCPROF_HIP_EVENT_TRACE")),
    row(OmptTrace, H_BASIC, "ompt-trace",
        "OpenMP (OMPT) tracing; optionally only these space-separated categories",
        Trace("ROCPROF_OMPT_TRACE")).categories()
        .note("`ROCPROF_OMPT_TRACE_OPERATIONS` = the categories joined with `,` (none or `all`: not set; one boolean word: a boolean)"),
    row(KokkosTrace, H_BASIC, "kokkos-trace", "Kokkos Tools support (implies --marker-trace and --kernel-rename)", Umbrella)
        .implies(&[MarkerTrace, KernelRename])
        .note("`KOKKOS_TOOLS_LIBS` cannot reach a running process (warning)"),
    row(RocdecodeTrace, H_BASIC, "rocdecode-trace", "rocDecode API", Trace("ROCPROF_ROCDECODE_API_TRACE")),
    row(RocjpegTrace, H_BASIC, "rocjpeg-trace", "rocJPEG API", Trace("ROCPROF_ROCJPEG_API_TRACE")),
    row(RocshmemTrace, H_BASIC, "rocshmem-trace", "rocSHMEM host-stream API", Trace("ROCPROF_ROCSHMEM_API_TRACE")),
    row(HipfileTrace, H_BASIC, "hipfile-trace", "hipFILE API", Trace("ROCPROF_HIPFILE_API_TRACE")),
    // ------------------------------------------------------------------ extended tracing
    row(HipRuntimeTrace, H_EXTENDED, "hip-runtime-trace",
        "HIP runtime API (hip* functions; implies --hip-graph-trace and --hip-event-trace)",
        Trace("ROCPROF_HIP_RUNTIME_API_TRACE")).implies(&[HipGraphTrace, HipEventTrace]),
    row(HipCompilerTrace, H_EXTENDED, "hip-compiler-trace", "HIP compiler-generated API (__hip* functions)",
        Trace("ROCPROF_HIP_COMPILER_API_TRACE")),
    row(HsaCoreTrace, H_EXTENDED, "hsa-core-trace", "HSA core API (hsa_*)", Trace("ROCPROF_HSA_CORE_API_TRACE")),
    row(HsaAmdTrace, H_EXTENDED, "hsa-amd-trace", "HSA AMD-extension API (hsa_amd_*)",
        Trace("ROCPROF_HSA_AMD_EXT_API_TRACE")),
    row(HsaImageTrace, H_EXTENDED, "hsa-image-trace", "HSA image-extension API (hsa_ext_image_*)",
        Trace("ROCPROF_HSA_IMAGE_EXT_API_TRACE")),
    row(HsaFinalizerTrace, H_EXTENDED, "hsa-finalizer-trace", "HSA finalizer-extension API (hsa_ext_program_*)",
        Trace("ROCPROF_HSA_FINALIZER_EXT_API_TRACE")),
    row(KfdPageMigrationTrace, H_EXTENDED, "kfd-page-migration-trace", "KFD page migrations between memory devices",
        Trace("ROCPROF_KFD_PAGE_MIGRATION_TRACE")),
    row(KfdPageMappingTrace, H_EXTENDED, "kfd-page-mapping-trace", "KFD page faults, mappings and invalidations",
        Trace("ROCPROF_KFD_PAGE_MAPPING_TRACE")),
    row(KfdQueueTrace, H_EXTENDED, "kfd-queue-trace", "KFD queue evictions and restores",
        Trace("ROCPROF_KFD_QUEUE_TRACE")),
    row(KfdDroppedEventsTrace, H_EXTENDED, "kfd-dropped-events-trace", "Events dropped by KFD",
        Trace("ROCPROF_KFD_DROPPED_EVENTS_TRACE")),
    // ------------------------------------------------------------------ counters
    row(KernelReplayBetaEnabled, H_COUNTERS, "kernel-replay-beta-enabled",
        "Acknowledge that --replay-mode kernel is a beta feature", Effect::Beta).after("replay-mode"),
    row(SpmBetaEnabled, H_COUNTERS, "spm-beta-enabled",
        "Enable streaming performance monitor (SPM) collection (beta)", Effect::Beta)
        .env("ROCPROFILER_SPM_BETA_ENABLED"),
    // ------------------------------------------------------------------ filtering
    row(SelectedRegions, H_FILTER, "selected-regions",
        "Only profile code between roctxProfilerResume(0) and roctxProfilerPause(0)",
        Set("ROCPROF_SELECTED_REGIONS", "1")).after("collection-period-unit"),
    row(SelectedRegionsRefCount, H_FILTER, "selected-regions-ref-count",
        "Reference-count nested roctxProfilerResume/Pause pairs", Set("ROCPROF_SELECTED_REGIONS_REF_COUNT", "1")),
    // ------------------------------------------------------------------ summary
    row(Stats, H_SUMMARY, "stats", "Statistics of the enabled tracing types (csv and json output)",
        Set("ROCPROF_STATS", "1")).after("mpi-world-size-variable"),
    row(Summary, H_SUMMARY, "summary", "One summary of the tracing data when the session ends",
        Set("ROCPROF_STATS_SUMMARY", "1")).short('S'),
    row(SummaryPerDomain, H_SUMMARY, "summary-per-domain", "A summary per tracing domain when the session ends",
        Set("ROCPROF_STATS_SUMMARY_PER_DOMAIN", "1")).short('D'),
    // ------------------------------------------------------------------ output
    row(OutputConfig, H_OUTPUT, "output-config", "Also write the tool configuration (e.g. out_config.json)",
        Set("ROCPROF_OUTPUT_CONFIG_FILE", "1")).after("output-format"),
    row(GroupByQueue, H_OUTPUT, "group-by-queue", "Show HIP streams instead of HSA queues",
        Trace("ROCPROF_GROUP_BY_QUEUE")).after("log-level"),
    row(MangledKernels, H_OUTPUT, "mangled-kernels", "Do not demangle kernel names",
        Set("ROCPROF_DEMANGLE_KERNELS", "0")).short('M'),
    row(TruncateKernels, H_OUTPUT, "truncate-kernels", "Truncate demangled kernel names",
        Set("ROCPROF_TRUNCATE_KERNELS", "1")).short('T'),
    row(KernelRename, H_OUTPUT, "kernel-rename", "Rename kernels after the enclosing roctxRangePush/Pop region",
        Set("ROCPROF_KERNEL_RENAME", "1")),
    // ------------------------------------------------------------------ advanced
    row(PcSamplingBetaEnabled, H_ADVANCED, "pc-sampling-beta-enabled", "Enable PC sampling (beta)", Effect::Beta)
        .env("ROCPROFILER_PC_SAMPLING_BETA_ENABLED").after("perfetto-shmem-size-hint"),
    row(AdvancedThreadTrace, H_ADVANCED, "advanced-thread-trace", "Advanced thread trace (ATT)",
        Set("ROCPROF_ADVANCED_THREAD_TRACE", "1")).alias("att").after("pc-sampling-interval"),
    row(AttNoIntercept, H_ADVANCED, "att-no-intercept",
        "ATT quick-scan mode without kernel-dispatch interception (implies --att)",
        Bool("ROCPROF_ATT_NO_INTERCEPT")).needs(AdvancedThreadTrace),
    row(AttPerfcounterTargetOnly, H_ADVANCED, "att-perfcounter-target-only",
        "(gfx9) ATT performance counters for the target CU only", Set("ROCPROF_ATT_PARAM_TARGET_ONLY", "1"))
        .needs(AdvancedThreadTrace).after("att-perfcounter-ctrl"),
    row(AttSerializeAll, H_ADVANCED, "att-serialize-all", "ATT: serialize all kernels, not only traced ones",
        Set("ROCPROF_ATT_PARAM_SERIALIZE_ALL", "1")).needs(AdvancedThreadTrace).after("att-activity"),
    row(AttNoDetail, H_ADVANCED, "att-no-detail", "ATT: occupancy only, no instruction-level detail",
        Set("ROCPROF_ATT_PARAM_NO_DETAIL", "1")).needs(AdvancedThreadTrace),
    row(DisableSignalHandlers, H_ADVANCED, "disable-signal-handlers",
        "Keep the application's own SIGSEGV (etc.) handlers instead of the tool's",
        Negated("ROCPROF_SIGNAL_HANDLERS")).after("agent-index"),
    row(ProcessSync, H_ADVANCED, "process-sync", "Make processes wait for their peers to finish writing at finalization",
        Bool("ROCPROF_PROCESS_SYNC")),
];

// Row `i` defines the switch whose index is `i`.
const _: () = {
    let mut i = 0;
    while i < COUNT {
        assert!(
            TABLE[i].switch as usize == i,
            "switch_table::TABLE is out of Switch order"
        );
        i += 1;
    }
};
