//! rocprofv3's tracing, counter, filter, summary and output options, and the `ROCPROF_*` variables
//! they set (protocol section 7.2).
//!
//! [`ProfilerOptions`] is flattened into the command line by [`crate::cli`]. [`ProfilerOptions::apply`]
//! writes exactly the variables `rocprofv3 --attach` would write into its environment (which then
//! travels to the target in the environment buffer, see [`crate::envbuf`]), with these deliberate
//! differences:
//!
//! * `--perfetto-buffer-fill-policy` is exported as `ROCPROF_PERFETTO_BUFFER_FILL_POLICY`
//!   (rocprofv3 reads it under a wrong attribute name and silently drops it, protocol 11 item 24);
//! * a relative `-d/--output-directory` is made absolute against our working directory, because the
//!   target would otherwise resolve it against *its* working directory (values starting with `%cwd%`
//!   or an environment placeholder are kept verbatim);
//! * options rocprofv3 refuses later (or silently ignores) are refused up front with a message that
//!   says how to fix the command line: several `--pmc` groups, `--collection-period`, an empty
//!   `--pmc`, unknown output formats (also in a pre-existing `ROCPROF_OUTPUT_FORMAT`).
//!
//! Trace booleans are written only when true, so a `ROCPROF_*_TRACE=1` already exported by the user
//! is never cleared; implications (`--sys-trace`, `--runtime-trace`, `--hip-trace`,
//! `--hip-runtime-trace`, `--hsa-trace`, `--kfd-trace`, `--kokkos-trace`) only affect options that
//! were not given explicitly.

use crate::envbuf::EnvList;
use crate::error::{Error, Result};
use crate::format::OutputFormat;
use clap::builder::PossibleValuesParser;
use clap::Args;
use std::path::Path;

/// Help heading for aggregate and basic tracing options.
pub const H_BASIC: &str = "Basic tracing";
/// Help heading for granular tracing options.
pub const H_EXTENDED: &str = "Extended tracing";
/// Help heading for counter collection options.
pub const H_COUNTERS: &str = "Counter collection";
/// Help heading for filtering options.
pub const H_FILTER: &str = "Filtering";
/// Help heading for statistics and summary options.
pub const H_SUMMARY: &str = "Summary";
/// Help heading for output options.
pub const H_OUTPUT: &str = "Output";
/// Help heading for advanced options (PC sampling, thread trace, tool internals).
pub const H_ADVANCED: &str = "Advanced";

/// The default output file name template of rocprofv3's tool (protocol 8.1).
pub const DEFAULT_OUTPUT_FILE: &str = "%hostname%/%pid%";

/// Counters `--att-activity` collects (same list as rocprofv3).
const ATT_ACTIVITY_COUNTERS: &str =
    "SQ_BUSY_CU_CYCLES SQ_VALU_MFMA_BUSY_CYCLES SQ_ACTIVE_INST_VALU \
SQ_ACTIVE_INST_LDS SQ_ACTIVE_INST_VMEM SQ_ACTIVE_INST_FLAT SQ_ACTIVE_INST_SCA SQ_ACTIVE_INST_MISC";

/// OpenMP (OMPT) categories `--ompt-trace` accepts.
pub const OMPT_TRACE_CATEGORIES: [&str; 9] = [
    "all", "thread", "parallel", "task", "sync", "mutex", "target", "device", "error",
];

/// Parse a rocprofv3 boolean: y/yes/t/true/on/1 or n/no/f/false/off/0, case-insensitive.
pub fn parse_bool(s: &str) -> std::result::Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
        _ => Err(format!(
            "'{s}' is not a boolean: use one of y, yes, t, true, on, 1 or n, no, f, false, off, 0"
        )),
    }
}

fn b01(v: bool) -> &'static str {
    if v {
        "1"
    } else {
        "0"
    }
}

/// Every rocprofv3 tracing, counter, filter, summary and output option that makes sense when
/// attaching. Booleans are `None` when not given on the command line.
#[derive(Debug, Clone, Default, Args)]
pub struct ProfilerOptions {
    // ------------------------------------------------------------------ basic tracing
    /// HIP, HSA, marker, RCCL, rocDecode, rocJPEG, rocSHMEM, hipFILE, HIP event, memory
    /// copy/allocation/scratch, KFD, OMPT and kernel dispatch tracing
    #[arg(short = 's', long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub sys_trace: Option<bool>,
    /// Like --sys-trace but HIP runtime API only (no HIP compiler API) and no HSA API
    #[arg(short = 'r', long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub runtime_trace: Option<bool>,
    /// HIP runtime and compiler API (implies --hip-graph-trace and --hip-event-trace)
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hip_trace: Option<bool>,
    /// HSA core, AMD-extension, image and finalizer API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hsa_trace: Option<bool>,
    /// Kernel dispatches
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kernel_trace: Option<bool>,
    /// Memory copies
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub memory_copy_trace: Option<bool>,
    /// Memory allocations
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub memory_allocation_trace: Option<bool>,
    /// Scratch memory operations
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub scratch_memory_trace: Option<bool>,
    /// Marker (ROCTx) API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub marker_trace: Option<bool>,
    /// RCCL API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub rccl_trace: Option<bool>,
    /// KFD page migration, page mapping, queue and dropped-event traces
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kfd_trace: Option<bool>,
    /// One record per hipGraphLaunch
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hip_graph_trace: Option<bool>,
    /// GPU-side HIP event barriers (hipEventRecord, hipStreamWaitEvent)
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hip_event_trace: Option<bool>,
    /// OpenMP (OMPT) tracing; optionally only these space-separated categories: all thread
    /// parallel task sync mutex target device error
    #[arg(long, help_heading = H_BASIC, value_name = "CATEGORY", num_args = 0..)]
    pub ompt_trace: Option<Vec<String>>,
    /// Kokkos Tools support (implies --marker-trace and --kernel-rename)
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kokkos_trace: Option<bool>,
    /// rocDecode API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub rocdecode_trace: Option<bool>,
    /// rocJPEG API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub rocjpeg_trace: Option<bool>,
    /// rocSHMEM host-stream API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub rocshmem_trace: Option<bool>,
    /// hipFILE API
    #[arg(long, help_heading = H_BASIC, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hipfile_trace: Option<bool>,

    // ------------------------------------------------------------------ extended tracing
    /// HIP runtime API (hip* functions; implies --hip-graph-trace and --hip-event-trace)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hip_runtime_trace: Option<bool>,
    /// HIP compiler-generated API (__hip* functions)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hip_compiler_trace: Option<bool>,
    /// HSA core API (hsa_*)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hsa_core_trace: Option<bool>,
    /// HSA AMD-extension API (hsa_amd_*)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hsa_amd_trace: Option<bool>,
    /// HSA image-extension API (hsa_ext_image_*)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hsa_image_trace: Option<bool>,
    /// HSA finalizer-extension API (hsa_ext_program_*)
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub hsa_finalizer_trace: Option<bool>,
    /// KFD page migrations between memory devices
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kfd_page_migration_trace: Option<bool>,
    /// KFD page faults, mappings and invalidations
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kfd_page_mapping_trace: Option<bool>,
    /// KFD queue evictions and restores
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kfd_queue_trace: Option<bool>,
    /// Events dropped by KFD
    #[arg(long, help_heading = H_EXTENDED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kfd_dropped_events_trace: Option<bool>,

    // ------------------------------------------------------------------ counters
    /// Hardware counters to collect, space-separated (one group only when attaching)
    #[arg(id = "pmc", long = "pmc", help_heading = H_COUNTERS, value_name = "COUNTER", num_args = 0..)]
    pub pmc_values: Vec<String>,
    /// Counter groups, one per `--pmc` flag; filled by [`ProfilerOptions::fill_pmc_groups`] (clap's
    /// derive cannot keep occurrences apart). This is what [`ProfilerOptions::apply`] reads.
    #[arg(skip)]
    pub pmc: Vec<Vec<String>>,
    /// YAML file with extra counter definitions (its contents are sent to the target)
    #[arg(short = 'E', long, help_heading = H_COUNTERS, value_name = "FILE")]
    pub extra_counters: Option<String>,
    /// Counter replay strategy; 'kernel' (beta) replays each dispatch once per --pmc group
    #[arg(long, help_heading = H_COUNTERS, value_name = "MODE", ignore_case = true,
          value_parser = PossibleValuesParser::new(["kernel", "application"]))]
    pub replay_mode: Option<String>,
    /// Acknowledge that --replay-mode kernel is a beta feature
    #[arg(long, help_heading = H_COUNTERS, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kernel_replay_beta_enabled: Option<bool>,
    /// Enable streaming performance monitor (SPM) collection (beta)
    #[arg(long, help_heading = H_COUNTERS, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub spm_beta_enabled: Option<bool>,
    /// SPM counters to sample
    #[arg(long, help_heading = H_COUNTERS, value_name = "COUNTER", num_args = 0..)]
    pub spm: Option<Vec<String>>,
    /// SPM sampling interval (see --spm-sample-interval-unit)
    #[arg(long, help_heading = H_COUNTERS, value_name = "N")]
    pub spm_sample_interval: Option<i64>,
    /// SPM sampling interval unit
    #[arg(long, help_heading = H_COUNTERS, value_name = "UNIT", ignore_case = true,
          value_parser = PossibleValuesParser::new(["sclk_cycles"]))]
    pub spm_sample_interval_unit: Option<String>,

    // ------------------------------------------------------------------ filtering
    /// Only kernels matching this regular expression get counters and thread traces
    #[arg(long, help_heading = H_FILTER, value_name = "REGEX")]
    pub kernel_include_regex: Option<String>,
    /// Exclude kernels matching this regular expression (applied after the include filter)
    #[arg(long, help_heading = H_FILTER, value_name = "REGEX")]
    pub kernel_exclude_regex: Option<String>,
    /// Kernel iteration range(s), e.g. "[1-5]"
    #[arg(long, help_heading = H_FILTER, value_name = "RANGE", num_args = 1..)]
    pub kernel_iteration_range: Vec<String>,
    /// Not available when attaching (bound the session with --attach-duration-msec instead)
    #[arg(short = 'P', long, help_heading = H_FILTER, value_name = "DELAY:TIME:REPEAT", num_args = 1..)]
    pub collection_period: Vec<String>,
    /// Unit of --collection-period
    #[arg(long, help_heading = H_FILTER, value_name = "UNIT", ignore_case = true,
          value_parser = PossibleValuesParser::new(["hour", "min", "sec", "msec", "usec", "nsec"]))]
    pub collection_period_unit: Option<String>,
    /// Only profile code between roctxProfilerResume(0) and roctxProfilerPause(0)
    #[arg(long, help_heading = H_FILTER, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub selected_regions: Option<bool>,
    /// Reference-count nested roctxProfilerResume/Pause pairs
    #[arg(long, help_heading = H_FILTER, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub selected_regions_ref_count: Option<bool>,
    /// Environment variable the tool reads the MPI rank from (with --mpi-world-size-variable)
    #[arg(long, help_heading = H_FILTER, value_name = "VARIABLE")]
    pub mpi_world_rank_variable: Option<String>,
    /// Environment variable the tool reads the MPI world size from (with --mpi-world-rank-variable)
    #[arg(long, help_heading = H_FILTER, value_name = "VARIABLE")]
    pub mpi_world_size_variable: Option<String>,

    // ------------------------------------------------------------------ summary
    /// Statistics of the enabled tracing types (csv and json output)
    #[arg(long, help_heading = H_SUMMARY, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub stats: Option<bool>,
    /// One summary of the tracing data when the session ends
    #[arg(short = 'S', long, help_heading = H_SUMMARY, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub summary: Option<bool>,
    /// A summary per tracing domain when the session ends
    #[arg(short = 'D', long, help_heading = H_SUMMARY, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub summary_per_domain: Option<bool>,
    /// A summary for each set of domains matching these regular expressions
    #[arg(long, help_heading = H_SUMMARY, value_name = "REGEX", num_args = 1..)]
    pub summary_groups: Vec<String>,
    /// Write the summary to this file, stdout or stderr (default with -S: stderr of the target)
    #[arg(long, help_heading = H_SUMMARY, value_name = "FILE")]
    pub summary_output_file: Option<String>,
    /// Time unit of the summary
    #[arg(short = 'u', long, help_heading = H_SUMMARY, value_name = "UNIT", ignore_case = true,
          value_parser = PossibleValuesParser::new(["sec", "msec", "usec", "nsec"]))]
    pub summary_units: Option<String>,

    // ------------------------------------------------------------------ output
    /// Output file name template (default: $ROCPROF_OUTPUT_FILE_NAME, else %hostname%/%pid%);
    /// placeholders such as %pid%, %hostname%, %rank%, %job%, %env{NAME}% are expanded in the target
    #[arg(short = 'o', long, help_heading = H_OUTPUT, value_name = "NAME")]
    pub output_file: Option<String>,
    /// Output directory (default: $ROCPROF_OUTPUT_PATH, else the current directory); a relative
    /// path is made absolute here, the target creates missing directories
    #[arg(short = 'd', long, help_heading = H_OUTPUT, value_name = "DIR")]
    pub output_directory: Option<String>,
    /// Output formats: csv json pftrace otf2 rocpd (default rocpd; appended to
    /// $ROCPROF_OUTPUT_FORMAT)
    #[arg(short = 'f', long, help_heading = H_OUTPUT, value_name = "FORMAT", num_args = 1..)]
    pub output_format: Vec<String>,
    /// Also write the tool configuration (e.g. out_config.json)
    #[arg(long, help_heading = H_OUTPUT, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub output_config: Option<bool>,
    /// Log level of the tool inside the target (not of rocprof-attach: see -v)
    #[arg(long, help_heading = H_OUTPUT, value_name = "LEVEL", ignore_case = true,
          value_parser = PossibleValuesParser::new(["fatal", "error", "warning", "info", "trace", "env", "config"]))]
    pub log_level: Option<String>,
    /// Show HIP streams instead of HSA queues
    #[arg(long, help_heading = H_OUTPUT, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub group_by_queue: Option<bool>,
    /// Do not demangle kernel names
    #[arg(short = 'M', long, help_heading = H_OUTPUT, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub mangled_kernels: Option<bool>,
    /// Truncate demangled kernel names
    #[arg(short = 'T', long, help_heading = H_OUTPUT, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub truncate_kernels: Option<bool>,
    /// Rename kernels after the enclosing roctxRangePush/Pop region
    #[arg(long, help_heading = H_OUTPUT, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub kernel_rename: Option<bool>,
    /// Perfetto backend ('system' needs the traced and perfetto daemons)
    #[arg(long, help_heading = H_OUTPUT, value_name = "BACKEND", ignore_case = true,
          value_parser = PossibleValuesParser::new(["inprocess", "system"]))]
    pub perfetto_backend: Option<String>,
    /// Perfetto buffer size in KB (1-4194303; default 1 GB)
    #[arg(long, help_heading = H_OUTPUT, value_name = "KB",
          value_parser = clap::value_parser!(u32).range(1..=4_194_303))]
    pub perfetto_buffer_size: Option<u32>,
    /// What perfetto does with new records when its buffer is full
    #[arg(long, help_heading = H_OUTPUT, value_name = "POLICY", ignore_case = true,
          value_parser = PossibleValuesParser::new(["discard", "ring_buffer"]))]
    pub perfetto_buffer_fill_policy: Option<String>,
    /// Perfetto shared memory size hint in KB (default 64)
    #[arg(long, help_heading = H_OUTPUT, value_name = "KB")]
    pub perfetto_shmem_size_hint: Option<u64>,

    // ------------------------------------------------------------------ advanced
    /// Enable PC sampling (beta)
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub pc_sampling_beta_enabled: Option<bool>,
    /// PC sampling unit
    #[arg(long, help_heading = H_ADVANCED, value_name = "UNIT", ignore_case = true,
          value_parser = PossibleValuesParser::new(["instructions", "cycles", "time"]))]
    pub pc_sampling_unit: Option<String>,
    /// PC sampling method
    #[arg(long, help_heading = H_ADVANCED, value_name = "METHOD", ignore_case = true,
          value_parser = PossibleValuesParser::new(["stochastic", "host_trap"]))]
    pub pc_sampling_method: Option<String>,
    /// PC sampling interval (positive, in --pc-sampling-unit)
    #[arg(long, help_heading = H_ADVANCED, value_name = "N", allow_negative_numbers = true)]
    pub pc_sampling_interval: Option<i64>,
    /// Advanced thread trace (ATT)
    #[arg(long = "advanced-thread-trace", visible_alias = "att", help_heading = H_ADVANCED,
          value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub advanced_thread_trace: Option<bool>,
    /// ATT quick-scan mode without kernel-dispatch interception (implies --att)
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub att_no_intercept: Option<bool>,
    /// Directories searched for the thread trace decoder library (as seen by the target)
    #[arg(long, help_heading = H_ADVANCED, value_name = "DIR", num_args = 1..)]
    pub att_library_path: Vec<String>,
    /// ATT target compute unit (or WGP); default 1
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_target_cu: Option<String>,
    /// ATT SIMD mask (gfx9) or SIMD id (gfx10+); default 0xF
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_simd_select: Option<String>,
    /// Number of consecutive kernels to thread-trace; default 0
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_consecutive_kernels: Option<String>,
    /// ATT buffer size in bytes; default 0x18000000 (384 MB)
    #[arg(long, help_heading = H_ADVANCED, value_name = "BYTES")]
    pub att_buffer_size: Option<String>,
    /// When ATT allocates its resources
    #[arg(long, help_heading = H_ADVANCED, value_name = "MODE", ignore_case = true,
          value_parser = PossibleValuesParser::new(["default", "hsa", "code-object"]))]
    pub att_resource_mode: Option<String>,
    /// ATT shader engine mask; default 0x1
    #[arg(long, help_heading = H_ADVANCED, value_name = "MASK")]
    pub att_shader_engine_mask: Option<String>,
    /// Comma-separated GPU indices to thread-trace; default all
    #[arg(long, help_heading = H_ADVANCED, value_name = "LIST")]
    pub att_gpu_index: Option<String>,
    /// (gfx9) ATT performance counters, optionally with SIMD masks
    #[arg(long, help_heading = H_ADVANCED, value_name = "COUNTERS")]
    pub att_perfcounters: Option<String>,
    /// (gfx9) ATT performance counter period in 1..=32; 0 disables
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_perfcounter_ctrl: Option<u32>,
    /// (gfx9) ATT performance counters for the target CU only
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub att_perfcounter_target_only: Option<bool>,
    /// (gfx9) ATT hardware activity counters with this period in 1..=16 (8 recommended)
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_activity: Option<u32>,
    /// ATT: serialize all kernels, not only traced ones
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub att_serialize_all: Option<bool>,
    /// ATT: occupancy only, no instruction-level detail
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub att_no_detail: Option<bool>,
    /// Agent numbering in the output
    #[arg(short = 'A', long, help_heading = H_ADVANCED, value_name = "MODE",
          value_parser = PossibleValuesParser::new(["absolute", "relative", "type-relative"]))]
    pub agent_index: Option<String>,
    /// Keep the application's own SIGSEGV (etc.) handlers instead of the tool's
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub disable_signal_handlers: Option<bool>,
    /// Make processes wait for their peers to finish writing at finalization
    #[arg(long, help_heading = H_ADVANCED, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub process_sync: Option<bool>,
    /// Only write output files larger than this many KB
    #[arg(long, help_heading = H_ADVANCED, value_name = "KB")]
    pub minimum_output_data: Option<u64>,
    /// Tool benchmarking mode (developer option)
    #[arg(long, hide = true, ignore_case = true,
          value_parser = PossibleValuesParser::new(["disabled-sdk-contexts", "sdk-buffer-overhead",
              "sdk-callback-overhead", "tool-runtime-overhead", "execution-profile"]))]
    pub benchmark_mode: Option<String>,
}

/// Names of rocprofv3's trace switches in the order it writes them, with their variable suffix.
const TRACE_VARS: [(&str, &str); 24] = [
    ("hip_compiler_trace", "HIP_COMPILER_API_TRACE"),
    ("hip_runtime_trace", "HIP_RUNTIME_API_TRACE"),
    ("hsa_core_trace", "HSA_CORE_API_TRACE"),
    ("hsa_amd_trace", "HSA_AMD_EXT_API_TRACE"),
    ("hsa_image_trace", "HSA_IMAGE_EXT_API_TRACE"),
    ("hsa_finalizer_trace", "HSA_FINALIZER_EXT_API_TRACE"),
    ("marker_trace", "MARKER_API_TRACE"),
    ("rccl_trace", "RCCL_API_TRACE"),
    ("ompt_trace", "OMPT_TRACE"),
    ("rocdecode_trace", "ROCDECODE_API_TRACE"),
    ("rocjpeg_trace", "ROCJPEG_API_TRACE"),
    ("rocshmem_trace", "ROCSHMEM_API_TRACE"),
    ("hipfile_trace", "HIPFILE_API_TRACE"),
    ("kernel_trace", "KERNEL_TRACE"),
    ("hip_graph_trace", "HIP_GRAPH_TRACE"),
    ("memory_copy_trace", "MEMORY_COPY_TRACE"),
    ("memory_allocation_trace", "MEMORY_ALLOCATION_TRACE"),
    ("kfd_page_migration_trace", "KFD_PAGE_MIGRATION_TRACE"),
    ("kfd_page_mapping_trace", "KFD_PAGE_MAPPING_TRACE"),
    ("kfd_queue_trace", "KFD_QUEUE_TRACE"),
    ("kfd_dropped_events_trace", "KFD_DROPPED_EVENTS_TRACE"),
    ("scratch_memory_trace", "SCRATCH_MEMORY_TRACE"),
    ("hip_event_trace", "HIP_EVENT_TRACE"),
    ("group_by_queue", "GROUP_BY_QUEUE"),
];

/// What `--sys-trace` turns on (unless given explicitly).
const SYS_TRACE_IMPLIES: [&str; 15] = [
    "hip_trace",
    "hsa_trace",
    "marker_trace",
    "kernel_trace",
    "kfd_trace",
    "memory_copy_trace",
    "memory_allocation_trace",
    "scratch_memory_trace",
    "rccl_trace",
    "ompt_trace",
    "rocdecode_trace",
    "rocjpeg_trace",
    "rocshmem_trace",
    "hipfile_trace",
    "hip_event_trace",
];

/// What `--runtime-trace` turns on (unless given explicitly).
const RUNTIME_TRACE_IMPLIES: [&str; 14] = [
    "hip_runtime_trace",
    "marker_trace",
    "kernel_trace",
    "kfd_trace",
    "memory_copy_trace",
    "memory_allocation_trace",
    "scratch_memory_trace",
    "rccl_trace",
    "ompt_trace",
    "rocdecode_trace",
    "rocjpeg_trace",
    "rocshmem_trace",
    "hipfile_trace",
    "hip_event_trace",
];

/// The tri-state trace switches, by rocprofv3 attribute name, so implications can be applied the
/// way rocprofv3's `setattrifnone` does.
struct Switches(Vec<(&'static str, Option<bool>)>);

impl Switches {
    fn get(&self, name: &str) -> Option<bool> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| *v)
    }
    fn on(&self, name: &str) -> bool {
        self.get(name) == Some(true)
    }
    fn set_if_none(&mut self, name: &str) {
        if let Some(slot) = self.0.iter_mut().find(|(n, _)| *n == name) {
            if slot.1.is_none() {
                slot.1 = Some(true);
            }
        }
    }
}

/// Split a format list the way the tool does (space, tab, `,`, `;`, `:`), dropping empty tokens.
fn format_tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split([' ', '\t', ',', ';', ':'])
        .filter(|t| !t.is_empty())
}

/// rocprofv3's `int_auto`: hexadecimal when the text contains `0x`, else decimal; returned in
/// decimal.
fn int_auto(option: &str, text: &str) -> Result<String> {
    let t = text.trim();
    let parsed = if t.contains("0x") {
        let (neg, digits) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let digits = digits.strip_prefix("0x").unwrap_or(digits);
        i128::from_str_radix(digits, 16).map(|v| if neg { -v } else { v })
    } else {
        t.parse::<i128>()
    };
    parsed.map(|v| v.to_string()).map_err(|_| {
        Error::usage(format!(
            "{option} '{text}' is not an integer: give a decimal number or a hexadecimal one starting with 0x"
        ))
    })
}

/// Placeholder prefixes that may expand to an absolute path inside the target, so a `-d` value
/// starting with one of them is not made absolute here.
const ABSOLUTE_PLACEHOLDERS: [&str; 7] =
    ["%cwd%", "{cwd}", "%env{", "$env{", "%ENV{", "$ENV{", "%q{"];

/// Make an output directory absolute against `cwd` unless it already is, or starts with a
/// placeholder that the target expands to an absolute path (`%cwd%`, `%env{NAME}%`, ...).
pub fn absolute_output_dir(dir: &str, cwd: &Path) -> String {
    if Path::new(dir).is_absolute() || ABSOLUTE_PLACEHOLDERS.iter().any(|p| dir.starts_with(p)) {
        dir.to_string()
    } else {
        let d = dir.strip_prefix("./").unwrap_or(dir);
        if d.is_empty() || d == "." {
            cwd.to_string_lossy().into_owned()
        } else {
            cwd.join(d).to_string_lossy().into_owned()
        }
    }
}

/// Whether a path contains a placeholder the tool expands (`%...%`, `{...}`, `$env{...}`).
pub fn has_placeholder(path: &str) -> bool {
    path.contains('%') || path.contains('{') || path.contains('$')
}

/// Refuse an output directory that we can see is unusable: it exists but is not a directory, or it
/// is a directory we cannot write to (or on a read-only file system). A missing directory is fine
/// (the tool in the target creates it); paths with placeholders are not checked.
pub fn check_output_dir(dir: &str) -> Result<()> {
    if has_placeholder(dir) {
        return Ok(());
    }
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if !meta.is_dir() {
        return Err(Error::usage(format!(
            "output directory {dir} exists but is not a directory: pass -d/--output-directory with a directory path (it is created if missing)"
        )));
    }
    let flags = nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK;
    let read_only_fs = nix::sys::statvfs::statvfs(dir)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false);
    if read_only_fs || nix::unistd::access(dir, flags).is_err() {
        return Err(Error::usage(format!(
            "output directory {dir} is not writable: pass -d/--output-directory with a directory the profiled process can write to"
        )));
    }
    Ok(())
}

/// Validate `--output-format` values and return them lower-cased (commas inside a value are
/// accepted as separators).
pub fn parse_formats(values: &[String]) -> Result<Vec<OutputFormat>> {
    let mut out = Vec::new();
    for v in values {
        for tok in format_tokens(v) {
            let f: OutputFormat = tok
                .parse()
                .map_err(|e: String| Error::usage(format!("-f/--output-format: {e}")))?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The formats a `ROCPROF_OUTPUT_FORMAT` value selects (rocpd when empty), deduplicated.
pub fn formats_of(value: &str) -> std::result::Result<Vec<OutputFormat>, String> {
    let mut out = Vec::new();
    for tok in format_tokens(value) {
        let f: OutputFormat = tok.parse()?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        out.push(OutputFormat::Rocpd);
    }
    Ok(out)
}

/// Directories rocprofv3 searches for the thread trace decoder when `--att-library-path` is not
/// given: `LD_LIBRARY_PATH`, then `/opt/rocm/lib` (not recursively).
fn find_att_decoder(env: &EnvList) -> Option<String> {
    let mut dirs: Vec<String> = env
        .get("LD_LIBRARY_PATH")
        .unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    dirs.push("/opt/rocm/lib".to_string());
    dirs.into_iter().find(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains("librocprof-trace-decoder.so")
            })
        })
    })
}

/// Parse `--ompt-trace [CATEGORY...]` like rocprofv3: no value means every category; a single
/// boolean-looking value is a boolean; otherwise categories (comma-free), 'all' meaning no filter.
/// Returns the switch and the comma-joined category filter.
fn parse_ompt(
    values: &Option<Vec<String>>,
    warnings: &mut Vec<String>,
) -> Result<(Option<bool>, String)> {
    let Some(values) = values else {
        return Ok((None, String::new()));
    };
    let tokens: Vec<String> = values
        .iter()
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .collect();
    if tokens.is_empty() {
        return Ok((Some(true), String::new()));
    }
    if let Some(bad) = tokens.iter().find(|t| t.contains(',')) {
        return Err(Error::usage(format!(
            "--ompt-trace: categories are space-separated, not comma-separated (got '{bad}'): use e.g. '--ompt-trace parallel task target'"
        )));
    }
    if tokens.len() == 1 {
        if let Ok(b) = parse_bool(&tokens[0]) {
            return Ok((Some(b), String::new()));
        }
    }
    let unknown: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .filter(|t| !OMPT_TRACE_CATEGORIES.contains(t))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::usage(format!(
            "--ompt-trace: unknown categor{} '{}': choose from {}",
            if unknown.len() > 1 { "ies" } else { "y" },
            unknown.join(" "),
            OMPT_TRACE_CATEGORIES.join(" ")
        )));
    }
    if tokens.iter().any(|t| t == "all") {
        let extra: Vec<&str> = tokens
            .iter()
            .map(String::as_str)
            .filter(|t| *t != "all")
            .collect();
        if !extra.is_empty() {
            warnings.push(format!(
                "--ompt-trace: 'all' already selects every category; ignoring {}",
                extra.join(" ")
            ));
        }
        return Ok((Some(true), String::new()));
    }
    Ok((Some(true), tokens.join(",")))
}

/// Variables that mean "the tool will record something" when set to a true value.
fn records_something(env: &EnvList) -> bool {
    env.iter().any(|(n, v)| {
        n.starts_with("ROCPROF_")
            && (n.ends_with("_TRACE") && n != "ROCPROF_GROUP_BY_QUEUE"
                || n == "ROCPROF_COUNTER_COLLECTION"
                || n == "ROCPROF_SPM_COUNTER_COLLECTION"
                || n == "ROCPROF_PC_SAMPLING_METHOD")
            && parse_bool(v).unwrap_or(true)
    })
}

impl ProfilerOptions {
    /// Split the `--pmc` values into one group per `--pmc` flag, from the matches clap produced for
    /// the command these options are flattened into. Call once after `from_arg_matches`.
    pub fn fill_pmc_groups(&mut self, matches: &clap::ArgMatches) {
        self.pmc = match matches.get_occurrences::<String>("pmc") {
            Some(occ) => occ.map(|o| o.cloned().collect()).collect(),
            None => Vec::new(),
        };
        if self.pmc.is_empty()
            && matches.value_source("pmc") == Some(clap::parser::ValueSource::CommandLine)
        {
            self.pmc.push(Vec::new());
        }
    }

    /// Apply the options to `env` the way rocprofv3 prepares its environment in attach mode, using
    /// the current directory as the default output directory. Returns warnings for the user.
    pub fn apply(&self, env: &mut EnvList) -> Result<Vec<String>> {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::io(
                "cannot determine the current directory for the default output directory (pass -d DIR)",
                e,
            )
        })?;
        self.apply_in(env, &cwd)
    }

    /// [`ProfilerOptions::apply`] with an explicit working directory (for tests and callers that
    /// already know it). On error `env` may be partly modified; discard it.
    pub fn apply_in(&self, env: &mut EnvList, cwd: &Path) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        let (ompt, ompt_ops) = parse_ompt(&self.ompt_trace, &mut warnings)?;
        self.refuse_attach_incompatible()?;

        // MPI rank/size variable names (read by the tool from the target's own environment).
        match (&self.mpi_world_rank_variable, &self.mpi_world_size_variable) {
            (Some(r), Some(s)) => {
                env.set("ROCPROF_MPI_RANK_VAR", r);
                env.set("ROCPROF_MPI_SIZE_VAR", s);
            }
            (None, None) => {
                const PAIRS: [(&str, &str); 8] = [
                    ("PBS_NODENUM", "PBS_O_TASKNUM"),
                    ("SLURM_PROCID", "SLURM_NTASKS"),
                    ("PMI_RANK", "PMI_SIZE"),
                    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                    ("MPI_RANKID", "MPI_NRANKS"),
                    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                    ("MPI_RANK", "MPI_SIZE"),
                ];
                if let Some((r, s)) = PAIRS
                    .iter()
                    .find(|(r, s)| env.contains(r) && env.contains(s))
                {
                    env.set("ROCPROF_MPI_RANK_VAR", r);
                    env.set("ROCPROF_MPI_SIZE_VAR", s);
                }
            }
            _ => return Err(Error::usage(
                "--mpi-world-rank-variable and --mpi-world-size-variable must be given together",
            )),
        }

        env.set("ROCPROFILER_LIBRARY_CTOR", "1");

        // ---------------------------------------------------------------- output
        if let Some(name) = &self.output_file {
            if name.is_empty() {
                return Err(Error::usage(
                    "-o/--output-file is empty: give a file name template such as %hostname%/%pid% or leave the option out",
                ));
            }
            env.set("ROCPROF_OUTPUT_FILE_NAME", name);
        }
        let dir = match &self.output_directory {
            Some(d) if d.is_empty() => {
                return Err(Error::usage(
                    "-d/--output-directory is empty: give a directory or leave the option out to use the current directory",
                ))
            }
            Some(d) => d.clone(),
            None => match env.get("ROCPROF_OUTPUT_PATH") {
                Some(d) if !d.is_empty() => d.to_string(),
                _ => cwd.to_string_lossy().into_owned(),
            },
        };
        env.set("ROCPROF_OUTPUT_PATH", &absolute_output_dir(&dir, cwd));
        if self.output_config == Some(true) {
            env.set("ROCPROF_OUTPUT_CONFIG_FILE", "1");
        }

        let mut formats = parse_formats(&self.output_format)?;
        if formats.is_empty() {
            formats.push(OutputFormat::Rocpd);
        }
        let existing = env.get("ROCPROF_OUTPUT_FORMAT").unwrap_or("").to_string();
        let existing_formats = formats_of(&existing).map_err(|e| {
            Error::usage(format!(
                "ROCPROF_OUTPUT_FORMAT={existing} in your environment: {e}; fix or unset it (-f adds formats to it)"
            ))
        })?;
        let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
        env.append("ROCPROF_OUTPUT_FORMAT", &names.join(","), ",");
        let mut effective = formats.clone();
        if format_tokens(&existing).next().is_some() {
            effective.extend(existing_formats);
        }
        if self.stats == Some(true)
            && !effective
                .iter()
                .any(|f| matches!(f, OutputFormat::Csv | OutputFormat::Json))
        {
            warnings.push(
                "--stats has no effect for the requested output formats; add `-f csv` or `-f json`, or run `rocprof-attach summary` on the rocpd database afterwards".to_string(),
            );
        }
        if (self.hipfile_trace == Some(true) || self.rocshmem_trace == Some(true))
            && effective.iter().any(|f| {
                matches!(
                    f,
                    OutputFormat::Csv | OutputFormat::Pftrace | OutputFormat::Otf2
                )
            })
        {
            warnings.push(
                "direct csv, pftrace and otf2 output is deprecated and may miss hipFILE and rocSHMEM records; use rocpd (the default) and `rocprof-attach convert`".to_string(),
            );
        }

        // ---------------------------------------------------------------- tracing switches
        let mut sw = Switches(vec![
            ("sys_trace", self.sys_trace),
            ("runtime_trace", self.runtime_trace),
            ("hip_trace", self.hip_trace),
            ("hsa_trace", self.hsa_trace),
            ("kfd_trace", self.kfd_trace),
            ("hip_compiler_trace", self.hip_compiler_trace),
            ("hip_runtime_trace", self.hip_runtime_trace),
            ("hsa_core_trace", self.hsa_core_trace),
            ("hsa_amd_trace", self.hsa_amd_trace),
            ("hsa_image_trace", self.hsa_image_trace),
            ("hsa_finalizer_trace", self.hsa_finalizer_trace),
            ("marker_trace", self.marker_trace),
            ("rccl_trace", self.rccl_trace),
            ("ompt_trace", ompt),
            ("rocdecode_trace", self.rocdecode_trace),
            ("rocjpeg_trace", self.rocjpeg_trace),
            ("rocshmem_trace", self.rocshmem_trace),
            ("hipfile_trace", self.hipfile_trace),
            ("kernel_trace", self.kernel_trace),
            ("hip_graph_trace", self.hip_graph_trace),
            ("memory_copy_trace", self.memory_copy_trace),
            ("memory_allocation_trace", self.memory_allocation_trace),
            ("kfd_page_migration_trace", self.kfd_page_migration_trace),
            ("kfd_page_mapping_trace", self.kfd_page_mapping_trace),
            ("kfd_queue_trace", self.kfd_queue_trace),
            ("kfd_dropped_events_trace", self.kfd_dropped_events_trace),
            ("scratch_memory_trace", self.scratch_memory_trace),
            ("hip_event_trace", self.hip_event_trace),
            ("group_by_queue", self.group_by_queue),
            ("kernel_rename", self.kernel_rename),
        ]);
        if self.kokkos_trace == Some(true) {
            sw.set_if_none("marker_trace");
            sw.set_if_none("kernel_rename");
            warnings.push(
                "--kokkos-trace: the Kokkos Tools library cannot be added to a running process (KOKKOS_TOOLS_LIBS is read at start-up); only --marker-trace and --kernel-rename are applied".to_string(),
            );
        }
        if sw.on("sys_trace") {
            SYS_TRACE_IMPLIES.iter().for_each(|n| sw.set_if_none(n));
        }
        if sw.on("runtime_trace") {
            RUNTIME_TRACE_IMPLIES.iter().for_each(|n| sw.set_if_none(n));
        }
        if sw.on("hip_trace") {
            sw.set_if_none("hip_compiler_trace");
            sw.set_if_none("hip_runtime_trace");
        }
        if sw.on("hip_runtime_trace") {
            sw.set_if_none("hip_graph_trace");
            sw.set_if_none("hip_event_trace");
        }
        if sw.on("hsa_trace") {
            for n in [
                "hsa_core_trace",
                "hsa_amd_trace",
                "hsa_image_trace",
                "hsa_finalizer_trace",
            ] {
                sw.set_if_none(n);
            }
        }
        if sw.on("kfd_trace") {
            for n in [
                "kfd_page_migration_trace",
                "kfd_page_mapping_trace",
                "kfd_queue_trace",
                "kfd_dropped_events_trace",
            ] {
                sw.set_if_none(n);
            }
        }
        // Written only when true: a ROCPROF_*_TRACE=1 the user exported is never cleared.
        for (opt, var) in TRACE_VARS {
            if sw.on(opt) {
                env.set(&format!("ROCPROF_{var}"), "1");
            }
        }
        if !ompt_ops.is_empty() {
            env.set("ROCPROF_OMPT_TRACE_OPERATIONS", &ompt_ops);
        }

        // ---------------------------------------------------------------- summary, naming
        let summary = self.summary == Some(true);
        let summary_output = match &self.summary_output_file {
            None if summary => Some("stderr".to_string()),
            Some(f)
                if summary && matches!(f.to_ascii_lowercase().as_str(), "stdout" | "stderr") =>
            {
                Some(f.to_ascii_lowercase())
            }
            other => other.clone(),
        };
        if self.stats == Some(true) {
            env.set("ROCPROF_STATS", "1");
        }
        if summary {
            env.set("ROCPROF_STATS_SUMMARY", "1");
        }
        if let Some(u) = &self.summary_units {
            env.set("ROCPROF_STATS_SUMMARY_UNITS", &u.to_ascii_lowercase());
        }
        if let Some(o) = &summary_output {
            env.set("ROCPROF_STATS_SUMMARY_OUTPUT", o);
        }
        if !self.summary_groups.is_empty() {
            env.set(
                "ROCPROF_STATS_SUMMARY_GROUPS",
                &self.summary_groups.join("##@@##"),
            );
        }
        if self.summary_per_domain == Some(true) {
            env.set("ROCPROF_STATS_SUMMARY_PER_DOMAIN", "1");
        }
        if self.mangled_kernels == Some(true) {
            env.set("ROCPROF_DEMANGLE_KERNELS", "0");
        }
        if self.truncate_kernels == Some(true) {
            env.set("ROCPROF_TRUNCATE_KERNELS", "1");
        }
        if self.selected_regions == Some(true) {
            env.set("ROCPROF_SELECTED_REGIONS", "1");
        }
        if self.selected_regions_ref_count == Some(true) {
            env.set("ROCPROF_SELECTED_REGIONS_REF_COUNT", "1");
        }

        if let Some(level) = &self.log_level {
            let level = level.to_ascii_lowercase();
            if level != "env" && level != "config" {
                for p in ["ROCPROF", "ROCPROFILER", "ROCTX"] {
                    env.set(&format!("{p}_LOG_LEVEL"), &level);
                }
            }
        }

        if let Some(mode) = &self.benchmark_mode {
            let mode = mode.to_ascii_lowercase();
            if mode == "execution-profile" {
                match self.group_by_queue {
                    None => env.set("ROCPROF_GROUP_BY_QUEUE", "0"),
                    Some(true) => {
                        return Err(Error::usage(
                            "--benchmark-mode=execution-profile requires --group-by-queue=false",
                        ))
                    }
                    Some(false) => {}
                }
            }
            env.set("ROCPROF_BENCHMARK_MODE", &mode);
        }
        if sw.on("kernel_rename") {
            env.set("ROCPROF_KERNEL_RENAME", "1");
        }

        // ---------------------------------------------------------------- perfetto
        if let Some(kb) = self.perfetto_buffer_size {
            env.set("ROCPROF_PERFETTO_BUFFER_SIZE_KB", &kb.to_string());
        }
        if let Some(kb) = self.perfetto_shmem_size_hint {
            env.set("ROCPROF_PERFETTO_SHMEM_SIZE_HINT_KB", &kb.to_string());
        }
        if let Some(p) = &self.perfetto_buffer_fill_policy {
            env.set(
                "ROCPROF_PERFETTO_BUFFER_FILL_POLICY",
                &p.to_ascii_lowercase(),
            );
        }
        if let Some(b) = &self.perfetto_backend {
            env.set("ROCPROF_PERFETTO_BACKEND", &b.to_ascii_lowercase());
        }

        // ---------------------------------------------------------------- filters
        if let Some(r) = self
            .kernel_include_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            env.set("ROCPROF_KERNEL_FILTER_INCLUDE_REGEX", r);
        }
        if let Some(r) = self
            .kernel_exclude_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            env.set("ROCPROF_KERNEL_FILTER_EXCLUDE_REGEX", r);
        }
        if !self.kernel_iteration_range.is_empty() {
            env.set(
                "ROCPROF_KERNEL_FILTER_RANGE",
                &self.kernel_iteration_range.join(", "),
            );
        }
        if let Some(a) = &self.agent_index {
            env.set("ROCPROF_AGENT_INDEX", a);
        }
        if let Some(path) = &self.extra_counters {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!(
                    "-E/--extra-counters: cannot read {path}: {e}; give a readable YAML file of counter definitions"
                ))
            })?;
            if text.trim().is_empty() {
                warnings.push(format!("extra counter file '{path}' is empty"));
            }
            env.set("ROCPROF_EXTRA_COUNTERS_CONTENTS", &text);
        }

        // ---------------------------------------------------------------- counters
        self.apply_counters(env)?;
        self.apply_pc_sampling(env)?;
        self.apply_spm(env)?;

        if let Some(v) = self.disable_signal_handlers {
            env.set("ROCPROF_SIGNAL_HANDLERS", b01(!v));
        }
        if let Some(v) = self.process_sync {
            env.set("ROCPROF_PROCESS_SYNC", b01(v));
        }
        if let Some(kb) = self.minimum_output_data.filter(|kb| *kb != 0) {
            let bytes = kb.checked_mul(1024).ok_or_else(|| {
                Error::usage(format!(
                    "--minimum-output-data {kb} KB is too large: give a size in KB below 2^54"
                ))
            })?;
            env.set("ROCPROF_MINIMUM_OUTPUT_BYTES", &bytes.to_string());
        }

        self.apply_att(env, &mut warnings)?;

        if !records_something(env) {
            warnings.push(
                "no tracing or counter option was given: the tool will be loaded but record nothing (add e.g. --kernel-trace, --sys-trace or --pmc COUNTER)".to_string(),
            );
        }
        Ok(warnings)
    }

    /// Refusals that depend only on the options: things rocprofv3 itself refuses in attach mode.
    fn refuse_attach_incompatible(&self) -> Result<()> {
        if !self.collection_period.is_empty() {
            return Err(Error::usage(
                "--collection-period is not compatible with attach mode: remove -P/--collection-period and bound the profiling window with --attach-duration-msec",
            ));
        }
        let kernel_replay = self
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("kernel"));
        if let Some(idx) = self.pmc.iter().position(|g| g.is_empty()) {
            return Err(Error::usage(if self.pmc.len() > 1 {
                format!("empty counter group in --pmc flag {}: each --pmc needs at least one counter name", idx + 1)
            } else {
                "--pmc needs at least one counter name, e.g. --pmc SQ_WAVES GRBM_COUNT".to_string()
            }));
        }
        if self.pmc.len() > 1 && !kernel_replay {
            return Err(Error::usage(
                "multi-pass counter collection (multiple --pmc flags) is not compatible with attach mode: it needs the application to rerun its kernels from the start; pass a single --pmc group (or --replay-mode kernel --kernel-replay-beta-enabled)",
            ));
        }
        if self.selected_regions == Some(true)
            && self
                .att_consecutive_kernels
                .as_deref()
                .is_some_and(|s| !s.is_empty())
        {
            return Err(Error::usage(
                "--selected-regions and --att-consecutive-kernels are mutually exclusive: drop one of them",
            ));
        }
        Ok(())
    }

    fn apply_counters(&self, env: &mut EnvList) -> Result<()> {
        let kernel_replay = self
            .replay_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("kernel"));
        if kernel_replay {
            if self.kernel_replay_beta_enabled != Some(true) {
                return Err(Error::usage(
                    "--replay-mode kernel is a beta feature: add --kernel-replay-beta-enabled to acknowledge it",
                ));
            }
            if self.pmc.is_empty() {
                return Err(Error::usage(
                    "--replay-mode kernel requires counter collection: add --pmc COUNTER ...",
                ));
            }
            let mut conflicts = Vec::new();
            if self.advanced_thread_trace == Some(true) || self.att_no_intercept == Some(true) {
                conflicts.push("--att");
            }
            if self.pc_sampling_beta_enabled == Some(true)
                || env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED")
            {
                conflicts.push("PC sampling");
            }
            if self.spm.as_ref().is_some_and(|s| !s.is_empty()) {
                conflicts.push("--spm");
            }
            if !conflicts.is_empty() {
                return Err(Error::usage(format!(
                    "--replay-mode kernel cannot be combined with {}: every other service would report each kernel once per pass; collect them in a separate session",
                    conflicts.join(" or ")
                )));
            }
            env.set("ROCPROF_KERNEL_REPLAY", "1");
            env.set("ROCPROF_COUNTER_COLLECTION", "1");
            let groups: Vec<String> = self
                .pmc
                .iter()
                .map(|g| format!("pmc: {}", g.join(" ")))
                .collect();
            env.set("ROCPROF_COUNTER_GROUPS", &groups.join("\n"));
        } else if let Some(group) = self.pmc.first() {
            env.set("ROCPROF_COUNTER_COLLECTION", "1");
            env.set("ROCPROF_COUNTERS", &format!("pmc: {}", group.join(" ")));
        }
        Ok(())
    }

    fn apply_pc_sampling(&self, env: &mut EnvList) -> Result<()> {
        let interval = self.pc_sampling_interval.filter(|i| *i != 0);
        if self.pc_sampling_unit.is_none()
            && self.pc_sampling_method.is_none()
            && interval.is_none()
        {
            return Ok(());
        }
        let beta = self.pc_sampling_beta_enabled == Some(true);
        if !beta && !env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED") {
            return Err(Error::usage(
                "PC sampling is a beta feature and disabled: add --pc-sampling-beta-enabled (or set ROCPROFILER_PC_SAMPLING_BETA_ENABLED=ON)",
            ));
        }
        if beta {
            env.set("ROCPROFILER_PC_SAMPLING_BETA_ENABLED", "1");
        }
        let (Some(unit), Some(method), Some(interval)) =
            (&self.pc_sampling_unit, &self.pc_sampling_method, interval)
        else {
            return Err(Error::usage(
                "PC sampling needs all three of --pc-sampling-unit, --pc-sampling-method and --pc-sampling-interval",
            ));
        };
        if interval <= 0 {
            return Err(Error::usage(
                "--pc-sampling-interval must be a positive number",
            ));
        }
        env.set("ROCPROF_PC_SAMPLING_UNIT", &unit.to_ascii_lowercase());
        env.set("ROCPROF_PC_SAMPLING_METHOD", &method.to_ascii_lowercase());
        env.set("ROCPROF_PC_SAMPLING_INTERVAL", &interval.to_string());
        Ok(())
    }

    fn apply_spm(&self, env: &mut EnvList) -> Result<()> {
        let counters = self.spm.as_ref().filter(|s| !s.is_empty());
        let interval = self.spm_sample_interval.filter(|i| *i != 0);
        if counters.is_none() && interval.is_none() && self.spm_sample_interval_unit.is_none() {
            return Ok(());
        }
        if self.spm_beta_enabled != Some(true) && !env.contains("ROCPROFILER_SPM_BETA_ENABLED") {
            return Err(Error::usage(
                "SPM is a beta feature and disabled: add --spm-beta-enabled",
            ));
        }
        if !self.pmc.is_empty()
            || self.pc_sampling_beta_enabled == Some(true)
            || env.contains("ROCPROFILER_PC_SAMPLING_BETA_ENABLED")
        {
            return Err(Error::usage(
                "SPM cannot be enabled together with PC sampling or --pmc counter collection: drop one of them",
            ));
        }
        let Some(counters) = counters else {
            return Err(Error::usage(
                "SPM needs the counters to sample: add --spm COUNTER ...",
            ));
        };
        env.set("ROCPROFILER_SPM_BETA_ENABLED", "1");
        env.set("ROCPROF_SPM_COUNTER_COLLECTION", "1");
        env.set(
            "ROCPROF_SPM_COUNTERS",
            &format!("spm: {}", counters.join(" ")),
        );
        if let Some(i) = interval {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL", &i.to_string());
        }
        if let Some(u) = &self.spm_sample_interval_unit {
            env.set("ROCPROF_SPM_SAMPLE_INTERVAL_UNIT", &u.to_ascii_lowercase());
        }
        Ok(())
    }

    fn apply_att(&self, env: &mut EnvList, warnings: &mut Vec<String>) -> Result<()> {
        let att = self.advanced_thread_trace == Some(true) || self.att_no_intercept == Some(true);
        let nonempty = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
        if self.selected_regions == Some(true) && self.att_no_intercept == Some(true) {
            warnings.push(
                "--selected-regions does not control --att-no-intercept captures; ATT no-intercept quick-scans after each GPU's first code-object upload".to_string(),
            );
        }
        if !att {
            let any_att = nonempty(&self.att_target_cu)
                || nonempty(&self.att_simd_select)
                || nonempty(&self.att_consecutive_kernels)
                || nonempty(&self.att_buffer_size)
                || self.att_resource_mode.is_some()
                || nonempty(&self.att_shader_engine_mask)
                || nonempty(&self.att_gpu_index)
                || nonempty(&self.att_perfcounters)
                || self.att_perfcounter_ctrl.is_some()
                || self.att_activity.is_some()
                || self.att_serialize_all.is_some()
                || self.att_no_detail.is_some()
                || self.att_perfcounter_target_only.is_some()
                || !self.att_library_path.is_empty();
            if any_att {
                warnings.push(
                    "--att-* options have no effect without --att (advanced thread trace)"
                        .to_string(),
                );
            }
            return Ok(());
        }
        env.set("ROCPROF_ADVANCED_THREAD_TRACE", "1");
        if let Some(v) = self.att_no_intercept {
            env.set("ROCPROF_ATT_NO_INTERCEPT", b01(v));
        }
        if let Some(m) = &self.att_resource_mode {
            env.set("ROCPROF_ATT_PARAM_RESOURCE_MODE", &m.to_ascii_lowercase());
        }
        if let Some(cu) = &self.att_target_cu {
            env.set(
                "ROCPROF_ATT_PARAM_TARGET_CU",
                &int_auto("--att-target-cu", cu)?,
            );
        }
        for (opt, value, var) in [
            (
                "--att-shader-engine-mask",
                &self.att_shader_engine_mask,
                "ROCPROF_ATT_PARAM_SHADER_ENGINE_MASK",
            ),
            (
                "--att-buffer-size",
                &self.att_buffer_size,
                "ROCPROF_ATT_PARAM_BUFFER_SIZE",
            ),
            (
                "--att-simd-select",
                &self.att_simd_select,
                "ROCPROF_ATT_PARAM_SIMD_SELECT",
            ),
            (
                "--att-consecutive-kernels",
                &self.att_consecutive_kernels,
                "ROCPROF_ATT_CONSECUTIVE_KERNELS",
            ),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                env.set(var, &int_auto(opt, v)?);
            }
        }
        if self.att_serialize_all == Some(true) {
            env.set("ROCPROF_ATT_PARAM_SERIALIZE_ALL", "1");
        }
        if self.att_no_detail == Some(true) {
            env.set("ROCPROF_ATT_PARAM_NO_DETAIL", "1");
        }
        if let Some(g) = self.att_gpu_index.as_deref().filter(|g| !g.is_empty()) {
            env.set("ROCPROF_ATT_PARAM_GPU_INDEX", g);
        }
        if !self.att_library_path.is_empty() {
            env.set("ROCPROF_ATT_LIBRARY_PATH", &self.att_library_path.join(":"));
        } else if env
            .get("ROCPROF_ATT_LIBRARY_PATH")
            .is_some_and(|p| !p.is_empty())
        {
            // Already exported by the user: it travels as is.
        } else if let Some(dir) = find_att_decoder(env) {
            env.set("ROCPROF_ATT_LIBRARY_PATH", &dir);
        } else if self.att_no_intercept != Some(true) {
            warnings.push(
                "librocprof-trace-decoder.so was not found in LD_LIBRARY_PATH or /opt/rocm/lib; pass --att-library-path DIR (a directory as seen by the target) if thread trace decoding fails".to_string(),
            );
        }
        let has_pmc = !self.pmc.is_empty();
        if let Some(pc) = self.att_perfcounters.as_deref().filter(|s| !s.is_empty()) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-perfcounters cannot be combined with --pmc: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTERS", &pc.to_ascii_uppercase());
        }
        if let Some(ctrl) = self.att_perfcounter_ctrl.filter(|c| *c != 0) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-perfcounter-ctrl cannot be combined with --pmc: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", &ctrl.to_string());
        }
        if self.att_perfcounter_target_only == Some(true) {
            env.set("ROCPROF_ATT_PARAM_TARGET_ONLY", "1");
        }
        if let Some(act) = self.att_activity.filter(|a| *a != 0) {
            if has_pmc {
                return Err(Error::usage(
                    "--att-activity cannot be combined with --pmc: drop one of them",
                ));
            }
            if self
                .att_perfcounters
                .as_deref()
                .is_some_and(|s| !s.is_empty())
                || self.att_perfcounter_ctrl.is_some_and(|c| c != 0)
            {
                return Err(Error::usage(
                    "--att-activity cannot be combined with --att-perfcounters or --att-perfcounter-ctrl: drop one of them",
                ));
            }
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTER_CTRL", &act.to_string());
            env.set("ROCPROF_ATT_PARAM_PERFCOUNTERS", ATT_ACTIVITY_COUNTERS);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for t in ["y", "YES", "t", "True", "on", "1"] {
            assert_eq!(parse_bool(t), Ok(true), "{t}");
        }
        for f in ["n", "No", "f", "FALSE", "off", "0"] {
            assert_eq!(parse_bool(f), Ok(false), "{f}");
        }
        assert!(parse_bool("maybe").is_err());
        assert!(parse_bool("").is_err());
    }

    #[test]
    fn int_auto_like_rocprofv3() {
        assert_eq!(int_auto("x", "0xF").unwrap(), "15");
        assert_eq!(int_auto("x", "0x18000000").unwrap(), "402653184");
        assert_eq!(int_auto("x", "12").unwrap(), "12");
        assert!(int_auto("x", "0xZZ").is_err());
        assert!(int_auto("x", "twelve").is_err());
    }

    #[test]
    fn absolute_dirs() {
        let cwd = Path::new("/home/u/w");
        assert_eq!(absolute_output_dir("/o", cwd), "/o");
        assert_eq!(absolute_output_dir("out", cwd), "/home/u/w/out");
        assert_eq!(absolute_output_dir("./out", cwd), "/home/u/w/out");
        assert_eq!(absolute_output_dir(".", cwd), "/home/u/w");
        assert_eq!(
            absolute_output_dir("%hostname%/x", cwd),
            "/home/u/w/%hostname%/x"
        );
        assert_eq!(absolute_output_dir("%cwd%/x", cwd), "%cwd%/x");
        assert_eq!(
            absolute_output_dir("%env{SCRATCH}%/x", cwd),
            "%env{SCRATCH}%/x"
        );
    }

    #[test]
    fn format_lists() {
        assert_eq!(formats_of("").unwrap(), vec![OutputFormat::Rocpd]);
        assert_eq!(
            formats_of("CSV; json:csv").unwrap(),
            vec![OutputFormat::Csv, OutputFormat::Json]
        );
        assert!(formats_of("xml").is_err());
        assert!(parse_formats(&["csv,json".into(), "ROCPD".into()]).is_ok());
        assert!(parse_formats(&["parquet".into()]).is_err());
    }
}
