//! The rocprofv3 options as clap arguments; the mapping to variables is in `apply`/`hardware`.

use super::*;
use clap::builder::PossibleValuesParser;
use clap::Args;

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
    /// Output formats, space- or comma-separated: csv json pftrace otf2 rocpd (default rocpd;
    /// appended to $ROCPROF_OUTPUT_FORMAT)
    #[arg(short = 'f', long, help_heading = H_OUTPUT, value_name = "FORMAT", num_args = 1..,
          value_delimiter = ',', value_parser = FormatNames, hide_possible_values = true)]
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

/// `-f` values: any text (checked with rocprofv3's separators and message by
/// [`parse_formats`]), with the format names as possible values for the completion scripts.
#[derive(Debug, Clone, Copy)]
struct FormatNames;

impl clap::builder::TypedValueParser for FormatNames {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            rocprof_rocpd::format::OutputFormat::ALL
                .iter()
                .map(|f| clap::builder::PossibleValue::new(f.name())),
        ))
    }
}
