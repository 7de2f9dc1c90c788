//! The rocprofv3 options as clap arguments: the options with values ([`ValueOptions`], derived)
//! and the tri-state switches (generated from their rows, [`Switch::arg`]), placed together in
//! `--help` order by [`ProfilerOptions`]'s `clap::Args`. The mapping to variables is in
//! `apply`/`hardware`.

use super::switches::{Switch, Switches};
use super::*;
use clap::builder::PossibleValuesParser;
use clap::{ArgMatches, Args, Command, FromArgMatches};

/// Every rocprofv3 tracing, counter, filter, summary and output option that makes sense when
/// attaching, flattened into a front end's command line (`#[command(flatten)]`).
#[derive(Debug, Clone, Default)]
pub struct ProfilerOptions {
    /// The tri-state switches as given (`None`: not on the command line).
    pub switches: Switches,
    /// `--ompt-trace [CATEGORY...]` as given (`None`: not on the command line).
    pub ompt_trace: Option<Vec<String>>,
    /// Counter groups, one per `--pmc` flag (clap's derive cannot keep occurrences apart). This is
    /// what [`ProfilerOptions::apply`] reads.
    pub pmc: Vec<Vec<String>>,
    /// The options that take values.
    pub values: ValueOptions,
}

impl Args for ProfilerOptions {
    fn augment_args(cmd: Command) -> Command {
        place_args(cmd)
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        place_args(cmd)
    }
}

impl FromArgMatches for ProfilerOptions {
    fn from_arg_matches(matches: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        Ok(ProfilerOptions {
            switches: Switches::from_matches(matches),
            ompt_trace: matches
                .get_many::<String>(Switch::OmptTrace.def().long)
                .map(|v| v.cloned().collect()),
            pmc: pmc_groups(matches),
            values: ValueOptions::from_arg_matches(matches)?,
        })
    }
    fn update_from_arg_matches(
        &mut self,
        matches: &ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Whether the argument `id` is on the command line.
fn given(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
}

/// The `--pmc` values, one group per `--pmc` flag (an empty group for a bare `--pmc`).
fn pmc_groups(matches: &ArgMatches) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = match matches.get_occurrences::<String>("pmc") {
        Some(occ) => occ.map(|o| o.cloned().collect()).collect(),
        None => Vec::new(),
    };
    if groups.is_empty() && given(matches, "pmc") {
        groups.push(Vec::new());
    }
    groups
}

/// Add the options to `cmd` in `--help` order: the value options in their declared order, each
/// switch after the option its row names ([`switches::SwitchDef::after`]) or after the switch
/// before it. The order of insertion is the order of `--help`, the manual page and the
/// completions.
fn place_args(cmd: Command) -> Command {
    let values = ValueOptions::augment_args(Command::new("values"));
    // Reset the display order the scratch command gave, so `cmd` numbers them in its own order.
    let mut value_args: Vec<Option<clap::Arg>> = values
        .get_arguments()
        .map(|a| Some(a.clone().display_order(None)))
        .collect();
    // The order is worked out on small keys (a value option by index, a switch), then each
    // argument is moved once: inserting the arguments themselves moved ~40 of them per switch.
    #[derive(Clone, Copy)]
    enum Key {
        Value(usize),
        Switch(Switch),
    }
    let long = |k: &Key| match *k {
        Key::Value(i) => value_args[i].as_ref().and_then(|a| a.get_long()),
        Key::Switch(s) => Some(s.def().long),
    };
    let mut order: Vec<Key> = (0..value_args.len()).map(Key::Value).collect();
    order.reserve(Switch::ALL.len());
    let mut at = 0;
    for s in Switch::ALL {
        if let Some(after) = s.def().after {
            at = 1 + order
                .iter()
                .position(|k| long(k) == Some(after))
                .unwrap_or_else(|| {
                    panic!(
                        "--{} is placed after --{after}, which does not exist",
                        s.def().long
                    )
                });
        }
        order.insert(at, Key::Switch(s));
        at += 1;
    }
    order.into_iter().fold(cmd, |cmd, k| match k {
        Key::Value(i) => match value_args[i].take() {
            Some(a) => cmd.arg(a),
            None => cmd,
        },
        Key::Switch(s) => cmd.arg(s.arg()),
    })
}

/// The rocprofv3 options that take values (the switches are [`Switch`]es).
#[derive(Debug, Clone, Default, Args)]
#[group(skip)]
pub struct ValueOptions {
    // ------------------------------------------------------------------ counters
    /// Hardware counters to collect, space-separated (one group only when attaching; CUDA
    /// processes: NVIDIA metric names as ncu takes them, or rocprofv3 names with an NVIDIA
    /// equivalent such as SQ_WAVES; docs/cuda.md)
    #[arg(id = "pmc", long = "pmc", help_heading = H_COUNTERS, value_name = "COUNTER", num_args = 0..)]
    pub pmc_values: Vec<String>,
    /// YAML file with extra counter definitions (its contents are sent to the target)
    #[arg(short = 'E', long, help_heading = H_COUNTERS, value_name = "FILE")]
    pub extra_counters: Option<String>,
    /// Counter replay strategy; 'kernel' (beta) replays each dispatch once per --pmc group (CUDA:
    /// CUPTI kernel replay, about 20-33 ms per counted kernel on an H200); 'iteration' (CUDA
    /// only) counts one pass per window on later launches, each value from one launch
    #[arg(long, help_heading = H_COUNTERS, value_name = "MODE", ignore_case = true,
          value_parser = PossibleValuesParser::new(["kernel", "application", "iteration"]))]
    pub replay_mode: Option<String>,
    /// SPM counters to sample; none named on a CUDA process samples SM and graphics-engine
    /// activity against elapsed cycles (ROCm needs names)
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
    /// Kernel iteration range(s), e.g. "[1-5]" (CUDA --pmc: launches of each kernel counted per
    /// window; default [1-5])
    #[arg(long, help_heading = H_FILTER, value_name = "RANGE", num_args = 1..)]
    pub kernel_iteration_range: Vec<String>,
    /// Not available when attaching (bound the session with --attach-duration-msec instead)
    #[arg(short = 'P', long, help_heading = H_FILTER, value_name = "DELAY:TIME:REPEAT", num_args = 1..)]
    pub collection_period: Vec<String>,
    /// Unit of --collection-period
    #[arg(long, help_heading = H_FILTER, value_name = "UNIT", ignore_case = true,
          value_parser = PossibleValuesParser::new(["hour", "min", "sec", "msec", "usec", "nsec"]))]
    pub collection_period_unit: Option<String>,
    /// Environment variable the tool reads the MPI rank from (with --mpi-world-size-variable)
    #[arg(long, help_heading = H_FILTER, value_name = "VARIABLE")]
    pub mpi_world_rank_variable: Option<String>,
    /// Environment variable the tool reads the MPI world size from (with --mpi-world-rank-variable)
    #[arg(long, help_heading = H_FILTER, value_name = "VARIABLE")]
    pub mpi_world_size_variable: Option<String>,
    // ------------------------------------------------------------------ summary
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
    /// Log level of the tool inside the target (not of rocprof-attach: see -v)
    #[arg(long, help_heading = H_OUTPUT, value_name = "LEVEL", ignore_case = true,
          value_parser = PossibleValuesParser::new(["fatal", "error", "warning", "info", "trace", "env", "config"]))]
    pub log_level: Option<String>,
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
    /// (gfx9) ATT hardware activity counters with this period in 1..=16 (8 recommended)
    #[arg(long, help_heading = H_ADVANCED, value_name = "N")]
    pub att_activity: Option<u32>,
    /// Agent numbering in the output
    #[arg(short = 'A', long, help_heading = H_ADVANCED, value_name = "MODE",
          value_parser = PossibleValuesParser::new(["absolute", "relative", "type-relative"]))]
    pub agent_index: Option<String>,
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
