//! The command lines of `convert`, `summary` and `query` (subcommands of [`crate::cli::Cli`]);
//! [`crate::cli::rocpd`] runs them.

use std::path::PathBuf;

use clap::ValueEnum;

use crate::rocpd::report;
use crate::rocpd::window::{Bound, WindowSpec};
use crate::rocpd::{AgentIndex, ConvertOptions};

/// Formats `convert` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rocprofv3's per-domain CSV files.
    Csv,
    /// rocprofv3's `<name>_results.json`.
    Json,
    /// A Perfetto trace, `<name>_results.pftrace` (open it in ui.perfetto.dev).
    #[value(alias = "perfetto")]
    Pftrace,
    /// An OTF2 archive, `<name>_results.otf2` (Vampir, Score-P tools); needs a build with the
    /// OTF2 library (built in wherever it was installed).
    Otf2,
}

/// Agent labels (`--agent-index-value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentIndexArg {
    /// `Agent <node id>`.
    Absolute,
    /// `Agent <logical node id>` (rocprofv3's default).
    Relative,
    /// `GPU <n>` / `CPU <n>`.
    TypeRelative,
}

/// The inputs of `convert` and `summary` and how they are read.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// rocpd databases (`*_results.db`), one per process; several are merged into one output.
    #[arg(short = 'i', long = "input", required = true, num_args = 1.., value_name = "DB",
          value_hint = clap::ValueHint::FilePath)]
    pub inputs: Vec<PathBuf>,
    /// How `Agent_Id` cells are labelled.
    #[arg(long, value_enum, default_value = "relative")]
    pub agent_index_value: AgentIndexArg,
    /// Name kernels after their enclosing ROCTx region when there is one.
    #[arg(long)]
    pub kernel_rename: bool,
    /// The time window.
    #[command(flatten)]
    pub window: WindowArgs,
}

/// Time window options (shared by convert, summary and query).
#[derive(Debug, Clone, clap::Args)]
pub struct WindowArgs {
    /// Window start: a percentage of the trace (`25%`) or an absolute timestamp in ns.
    #[arg(long, value_name = "N%|NS", allow_hyphen_values = true)]
    start: Option<Bound>,
    /// Window end: a percentage of the trace (`75%`) or an absolute timestamp in ns.
    #[arg(long, value_name = "N%|NS", allow_hyphen_values = true)]
    end: Option<Bound>,
    /// Start the window at the first ROCTx marker or range with this message.
    #[arg(long, value_name = "NAME")]
    start_marker: Option<String>,
    /// End the window at the end of the last ROCTx marker or range with this message.
    #[arg(long, value_name = "NAME")]
    end_marker: Option<String>,
    /// Also keep events that overlap the window's edges (default: only events entirely inside).
    #[arg(long)]
    inclusive: bool,
}

impl WindowArgs {
    /// The window as the converters take it.
    pub fn spec(&self) -> WindowSpec {
        WindowSpec {
            start: self.start,
            end: self.end,
            start_marker: self.start_marker.clone(),
            end_marker: self.end_marker.clone(),
            inclusive: self.inclusive,
        }
    }
}

impl Common {
    /// The converters' options.
    pub fn options(&self, stats: bool) -> ConvertOptions {
        ConvertOptions {
            agent_index: match self.agent_index_value {
                AgentIndexArg::Absolute => AgentIndex::Absolute,
                AgentIndexArg::Relative => AgentIndex::Relative,
                AgentIndexArg::TypeRelative => AgentIndex::TypeRelative,
            },
            kernel_rename: self.kernel_rename,
            stats,
            time_window: self.window.spec(),
            group_by_queue: false,
            window: None,
            replace: false,
        }
    }
}

/// Examples of `convert`.
pub const CONVERT_EXAMPLES: &str = "\
Examples:
  rocprof-attach convert -i results.db                      CSV files in ./rocpd-output-data
  rocprof-attach convert -i a.db b.db -f csv,json -d out    merge two processes' databases
  rocprof-attach convert -i results.db --stats -o run1      also the *_stats.csv files";

/// Examples of `summary`.
pub const SUMMARY_EXAMPLES: &str = "\
Examples:
  rocprof-attach summary -i results.db                      the top 10 of each table
  rocprof-attach summary -i a.db b.db --top 25 > summary.txt  every column, full names
  rocprof-attach summary -i results.db --json | jq .        machine-readable (docs/json.md)
  rocprof-attach summary -i results.db -f md,html -d out    a Markdown and an HTML report
  rocprof-attach summary -i results.db -d stats             also rocprofv3's stats CSV files";

/// Examples of `query`.
pub const QUERY_EXAMPLES: &str = "\
Examples:
  rocprof-attach query -i results.db --query 'SELECT * FROM top_kernels'
  rocprof-attach query -i a.db b.db --query 'SELECT * FROM kernels' -f csv -o kernels.csv";

/// The command line of `convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// Inputs and what is read from them.
    #[command(flatten)]
    pub common: Common,
    /// Output formats, space- or comma-separated.
    #[arg(short = 'f', long = "output-format", value_name = "FORMAT", num_args = 1..,
          value_delimiter = ',', value_enum, default_values = ["csv"])]
    pub formats: Vec<Format>,
    /// Output directory (created if missing).
    #[arg(
        short = 'd',
        long = "output-directory",
        alias = "output-path",
        value_name = "DIR",
        value_hint = clap::ValueHint::DirPath,
        env = "ROCPD_OUTPUT_PATH",
        default_value = "./rocpd-output-data"
    )]
    pub out_dir: PathBuf,
    /// Output file prefix: files are named `<NAME>_kernel_trace.csv`, `<NAME>_results.json`, ...
    #[arg(
        short = 'o',
        long = "output-file",
        value_name = "NAME",
        env = "ROCPD_OUTPUT_NAME",
        default_value = "out"
    )]
    pub out_name: String,
    /// Also write the `<NAME>_*_stats.csv` files.
    #[arg(long)]
    pub stats: bool,
    /// Perfetto/OTF2: one kernel track per agent and queue instead of one per stream.
    #[arg(long)]
    pub group_by_queue: bool,
    /// Replace output files that already exist (without it, an existing file of this
    /// conversion's names is an error: nothing of the profiler's own output is overwritten).
    #[arg(long)]
    pub force: bool,
}

/// Report formats of `summary` and `query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Aligned tables on the terminal.
    Console,
    /// CSV (`summary`: rocprofv3's `<NAME>_*_stats.csv` files).
    Csv,
    /// JSON.
    Json,
    /// Markdown tables.
    Md,
    /// One self-contained HTML page (`summary`: with bar charts and a timeline overview).
    Html,
}

impl ReportFormat {
    /// The report layer's format.
    pub fn report(self) -> report::Format {
        match self {
            ReportFormat::Console => report::Format::Console,
            ReportFormat::Csv => report::Format::Csv,
            ReportFormat::Json => report::Format::Json,
            ReportFormat::Md => report::Format::Md,
            ReportFormat::Html => report::Format::Html,
        }
    }
}

/// The command line of `summary`.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// Inputs and what is read from them.
    #[command(flatten)]
    pub common: Common,
    /// Output formats, space- or comma-separated; every format but console writes
    /// `<NAME>_summary.<ext>` (CSV: the stats files) into the output directory.
    #[arg(short = 'f', long = "output-format", alias = "format", value_name = "FORMAT",
          num_args = 1.., value_delimiter = ',', value_enum, default_values = ["console"])]
    pub formats: Vec<ReportFormat>,
    /// Rows shown per table.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Also show the time per domain (KERNEL_DISPATCH, HIP_API, ...).
    #[arg(long)]
    pub domain_summary: bool,
    /// One summary per process (MPI rank, from its environment; else GUID order) besides the
    /// overall one.
    #[arg(long)]
    pub summary_by_rank: bool,
    /// Output directory for file formats (default ./rocpd-output-data); with only `console`,
    /// giving it also writes rocprofv3's stats CSV files there.
    #[arg(short = 'd', long = "output-directory", alias = "output-path", value_name = "DIR",
          value_hint = clap::ValueHint::DirPath)]
    pub out_dir: Option<PathBuf>,
    /// Prefix of the files written.
    #[arg(
        short = 'o',
        long = "output-file",
        value_name = "NAME",
        default_value = "out"
    )]
    pub out_name: String,
    /// Print the summary as one JSON document on standard output (every row, docs/json.md)
    /// instead of tables; `-f json` writes the tables to a file instead.
    #[arg(long)]
    pub json: bool,
}

/// The command line of `query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// rocpd databases (`*_results.db`), any number; their views are unioned (past 10, through a
    /// temporary copy on disk: set TMPDIR for its location).
    #[arg(short = 'i', long = "input", required = true, num_args = 1.., value_name = "DB",
          value_hint = clap::ValueHint::FilePath)]
    pub inputs: Vec<PathBuf>,
    /// The SQL query whose rows are printed.
    #[arg(long, value_name = "SQL", required_unless_present = "script")]
    pub query: Option<String>,
    /// SQL statements run first (e.g. views); without --query its last statement is the query.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub script: Option<PathBuf>,
    /// Output format.
    #[arg(
        short = 'f',
        long = "output-format",
        alias = "format",
        value_name = "FORMAT",
        value_enum,
        default_value = "console"
    )]
    pub format: ReportFormat,
    /// Write to this file instead of standard output (created complete or not at all).
    #[arg(short = 'o', long = "output-file", value_name = "FILE",
          value_hint = clap::ValueHint::FilePath)]
    pub output: Option<PathBuf>,
    /// The time window.
    #[command(flatten)]
    pub window: WindowArgs,
}
