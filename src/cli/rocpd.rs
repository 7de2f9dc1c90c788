//! The `convert` and `summary` subcommands: the front end of [`crate::rocpd`].

use crate::cli::stdio::{errln, out, outln};
use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::exit::ExitCode;
use crate::format::OutputFormat;
use crate::rocpd::window::{Bound, WindowSpec};
use crate::rocpd::{convert_with, summary, AgentIndex, ConvertOptions};
use crate::rocpd::{report, Error};

/// Formats `convert` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// rocprofv3's per-domain CSV files.
    Csv,
    /// rocprofv3's `<name>_results.json`.
    Json,
    /// A Perfetto trace, `<name>_results.pftrace` (open it in ui.perfetto.dev).
    #[value(alias = "perfetto")]
    Pftrace,
    /// An OTF2 archive, `<name>_results.otf2` (Vampir, Score-P tools); needs a build with the
    /// `otf2` feature.
    Otf2,
}

/// Agent labels (`--agent-index-value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AgentIndexArg {
    /// `Agent <node id>`.
    Absolute,
    /// `Agent <logical node id>` (rocprofv3's default).
    Relative,
    /// `GPU <n>` / `CPU <n>`.
    TypeRelative,
}

#[derive(Debug, clap::Args)]
struct Common {
    /// rocpd databases (`*_results.db`), one per process; several are merged into one output.
    #[arg(short = 'i', long = "input", required = true, num_args = 1.., value_name = "DB")]
    inputs: Vec<PathBuf>,
    /// How `Agent_Id` cells are labelled.
    #[arg(long, value_enum, default_value = "relative")]
    agent_index_value: AgentIndexArg,
    /// Name kernels after their enclosing ROCTx region when there is one.
    #[arg(long)]
    kernel_rename: bool,
    #[command(flatten)]
    window: WindowArgs,
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
    fn options(&self, stats: bool) -> ConvertOptions {
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
        }
    }
}

const CONVERT_EXAMPLES: &str = "\
Examples:
  rocprof-attach convert -i results.db                      CSV files in ./rocpd-output-data
  rocprof-attach convert -i a.db b.db -f csv json -d out    merge two processes' databases
  rocprof-attach convert -i results.db --stats -o run1      also the *_stats.csv files";

const SUMMARY_EXAMPLES: &str = "\
Examples:
  rocprof-attach summary -i results.db                      the top 10 of each table
  rocprof-attach summary -i a.db b.db --top 25 > summary.txt  every column, full names
  rocprof-attach summary -i results.db --json | jq .        machine-readable (docs/json.md)
  rocprof-attach summary -i results.db -d stats             also rocprofv3's stats CSV files";

/// Convert rocpd databases to rocprofv3's CSV and JSON outputs, a Perfetto trace or an OTF2
/// archive.
#[derive(Debug, Parser)]
#[command(name = "rocprof-attach convert", disable_version_flag = true, after_help = CONVERT_EXAMPLES)]
struct ConvertCli {
    #[command(flatten)]
    common: Common,
    /// Output formats.
    #[arg(short = 'f', long = "output-format", num_args = 1.., value_enum, default_values = ["csv"])]
    formats: Vec<Format>,
    /// Output directory (created if missing).
    #[arg(
        short = 'd',
        long = "output-path",
        env = "ROCPD_OUTPUT_PATH",
        default_value = "./rocpd-output-data"
    )]
    out_dir: PathBuf,
    /// Output file prefix: files are named `<NAME>_kernel_trace.csv`, `<NAME>_results.json`, ...
    #[arg(
        short = 'o',
        long = "output-file",
        env = "ROCPD_OUTPUT_NAME",
        default_value = "out"
    )]
    out_name: String,
    /// Also write the `<NAME>_*_stats.csv` files.
    #[arg(long)]
    stats: bool,
    /// Perfetto/OTF2: one kernel track per agent and queue instead of one per stream.
    #[arg(long)]
    group_by_queue: bool,
}

/// Report formats of `summary` and `query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
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
    fn report(self) -> report::Format {
        match self {
            ReportFormat::Console => report::Format::Console,
            ReportFormat::Csv => report::Format::Csv,
            ReportFormat::Json => report::Format::Json,
            ReportFormat::Md => report::Format::Md,
            ReportFormat::Html => report::Format::Html,
        }
    }
}

/// Summarise rocpd databases: per-kernel, per-API and per-domain duration statistics, on the
/// terminal or as CSV, JSON, Markdown or a self-contained HTML report with charts.
#[derive(Debug, Parser)]
#[command(name = "rocprof-attach summary", disable_version_flag = true, after_help = SUMMARY_EXAMPLES)]
struct SummaryCli {
    #[command(flatten)]
    common: Common,
    /// Output formats; every format but console writes `<NAME>_summary.<ext>` (CSV: the stats
    /// files) into the output directory.
    #[arg(short = 'f', long = "format", num_args = 1.., value_enum, default_values = ["console"])]
    formats: Vec<ReportFormat>,
    /// Rows shown per table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Also show the time per domain (KERNEL_DISPATCH, HIP_API, ...).
    #[arg(long)]
    domain_summary: bool,
    /// One summary per process (MPI rank, from its environment; else GUID order) besides the
    /// overall one.
    #[arg(long)]
    summary_by_rank: bool,
    /// Output directory for file formats (default ./rocpd-output-data); with only `console`,
    /// giving it also writes rocprofv3's stats CSV files there.
    #[arg(short = 'd', long = "output-path")]
    out_dir: Option<PathBuf>,
    /// Prefix of the files written.
    #[arg(short = 'o', long = "output-file", default_value = "out")]
    out_name: String,
    /// Print the summary as one JSON document on standard output (every row, docs/json.md)
    /// instead of tables; `-f json` writes the tables to a file instead.
    #[arg(long)]
    json: bool,
}

/// Run SQL over the rocpd views (regions, kernels, memory_copies, top_kernels, ...) of one or
/// many databases.
#[derive(Debug, Parser)]
#[command(name = "rocprof-attach query", disable_version_flag = true)]
struct QueryCli {
    /// rocpd databases (`*_results.db`), any number; their views are unioned (past 10, through a
    /// temporary copy on disk: set TMPDIR for its location).
    #[arg(short = 'i', long = "input", required = true, num_args = 1.., value_name = "DB")]
    inputs: Vec<PathBuf>,
    /// The SQL query whose rows are printed.
    #[arg(long, value_name = "SQL", required_unless_present = "script")]
    query: Option<String>,
    /// SQL statements run first (e.g. views); without --query its last statement is the query.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "console")]
    format: ReportFormat,
    /// Write to this file instead of standard output (created complete or not at all).
    #[arg(short = 'o', long = "output-file", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    window: WindowArgs,
}

fn fail(e: &Error) -> ExitCode {
    let msg = e.to_string().replace('\n', " ");
    errln!("rocprof-attach: error: {msg}");
    e.exit_code()
}

fn clap_fail(e: clap::Error, sub: &str) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        out!("{}", e.render());
        return ExitCode::Success;
    }
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("Usage:"))
        .map(str::trim)
        .collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    errln!("rocprof-attach: error: {first}; see `rocprof-attach {sub} --help`");
    ExitCode::Usage
}

/// Runs `convert` or `summary`; `args[0]` is the subcommand name.
pub fn main(args: &[OsString]) -> ExitCode {
    let sub = args.first().and_then(|a| a.to_str()).unwrap_or("");
    // clap names the program after args[0]: make usage lines read `rocprof-attach convert`.
    let named = || {
        std::iter::once(OsString::from(format!("rocprof-attach {sub}")))
            .chain(args.iter().skip(1).cloned())
    };
    match sub {
        "convert" => match ConvertCli::try_parse_from(named()) {
            Ok(c) => run_convert(c),
            Err(e) => clap_fail(e, sub),
        },
        "summary" => match SummaryCli::try_parse_from(named()) {
            Ok(c) => run_summary(c),
            Err(e) => clap_fail(e, sub),
        },
        "query" => match QueryCli::try_parse_from(named()) {
            Ok(c) => run_query(c),
            Err(e) => clap_fail(e, sub),
        },
        other => {
            errln!("rocprof-attach: error: unknown subcommand '{other}'; expected `convert`, `summary` or `query`");
            ExitCode::Usage
        }
    }
}

fn run_convert(c: ConvertCli) -> ExitCode {
    let formats: Vec<OutputFormat> = c
        .formats
        .iter()
        .map(|f| match f {
            Format::Csv => OutputFormat::Csv,
            Format::Json => OutputFormat::Json,
            Format::Pftrace => OutputFormat::Pftrace,
            Format::Otf2 => OutputFormat::Otf2,
        })
        .collect();
    let mut opts = c.common.options(c.stats);
    opts.group_by_queue = c.group_by_queue;
    match convert_with(&c.common.inputs, &formats, &c.out_dir, &c.out_name, &opts) {
        Ok(report) => {
            if report.files.is_empty() {
                errln!("rocprof-attach: the input holds no records; no files written");
            }
            for f in &report.files {
                outln!("{}", f.display());
            }
            ExitCode::Success
        }
        Err(e) => fail(&e),
    }
}

fn stats_json(name: &str, domain: &str, s: &summary::Stats, total: u64) -> serde_json::Value {
    serde_json::json!({
        "name": name,
        "domain": domain,
        "calls": s.count,
        "total_ns": s.sum,
        "average_ns": s.mean(),
        "percent": if total == 0 { 0.0 } else { s.sum as f64 / total as f64 * 100.0 },
        "min_ns": s.min,
        "max_ns": s.max,
        "stddev_ns": s.stddev(),
    })
}

/// `summary --json`: every row of every domain, then the per-domain totals.
fn summary_json(s: &summary::Summary) -> serde_json::Value {
    let domains: Vec<serde_json::Value> = s
        .present()
        .into_iter()
        .map(|d| {
            let rows = s.sorted(d);
            let total: u64 = rows.iter().map(|r| r.1.sum).sum();
            serde_json::json!({
                "domain": d.label(),
                "total_ns": total,
                "rows": rows.iter().map(|(n, st)| stats_json(n, d.label(), st, total)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let totals = s.domain_totals();
    let all: u64 = totals.iter().map(|t| t.1.sum).sum();
    serde_json::json!({
        "domains": domains,
        "domain_totals": totals.iter().map(|(d, st)| stats_json(d.label(), d.label(), st, all)).collect::<Vec<_>>(),
    })
}

fn run_summary(c: SummaryCli) -> ExitCode {
    let run = || -> crate::rocpd::Result<()> {
        let opts = c.common.options(true);
        let dbs = crate::rocpd::reader::open_all(&c.common.inputs)?;
        let sources = crate::rocpd::reader::all_sources(&dbs)?;
        let window = opts.time_window.resolve(&sources)?;
        let top = c.top.max(1);
        let formats: Vec<report::Format> = c.formats.iter().map(|f| f.report()).collect();
        let files_wanted = formats.iter().any(|f| *f != report::Format::Console);
        // One pass over the rows: statistics per process and overall, and the HTML timeline.
        let pass = report::pass::run(
            &sources,
            &opts,
            &window,
            formats.contains(&report::Format::Html),
        )?;
        let overall = pass.overall;
        if let (Some(w), true) = (&window, overall.domains.is_empty()) {
            return Err(crate::rocpd::window::empty(w));
        }
        let mut sections = vec![report::summary::Section {
            title: "All processes".to_owned(),
            summary: overall,
        }];
        if c.summary_by_rank {
            for (i, (src, s)) in sources.iter().zip(pass.per_source).enumerate() {
                let pid = src.dims(opts.agent_index)?.process.pid;
                let rank = report::summary::rank_of(src).unwrap_or(i as i64);
                sections.push(report::summary::Section {
                    title: format!("Rank {rank} (pid {pid})"),
                    summary: s,
                });
            }
        }
        let timeline = pass.timeline.unwrap_or(report::pass::Timeline {
            start: 0,
            end: 0,
            lanes: Vec::new(),
        });
        let stats_csv =
            formats.contains(&report::Format::Csv) || (!files_wanted && c.out_dir.is_some());
        if files_wanted || c.out_dir.is_some() {
            let dir = c
                .out_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("./rocpd-output-data"));
            let mut names: Vec<String> = Vec::new();
            if stats_csv {
                names.extend(
                    crate::rocpd::domain::Domain::ALL
                        .iter()
                        .map(|d| format!("{}_{}.csv", c.out_name, d.stats_name()))
                        .chain([format!("{}_domain_stats.csv", c.out_name)]),
                );
            }
            for f in &formats {
                if !matches!(f, report::Format::Console | report::Format::Csv) {
                    names.push(format!("{}_summary.{}", c.out_name, f.ext()));
                }
            }
            crate::rocpd::check_not_overwriting(&c.common.inputs, &dir, &names)?;
            let mut out = crate::rocpd::output::OutputSet::new(&dir)?;
            if stats_csv {
                sections[0].summary.write_csv(&mut out, &c.out_name)?;
            }
            for f in &formats {
                let text = match f {
                    report::Format::Console | report::Format::Csv => continue,
                    report::Format::Json | report::Format::Md => {
                        let mut tables = Vec::new();
                        for sec in &sections {
                            let prefix = if sections.len() > 1 {
                                format!("{}: ", sec.title)
                            } else {
                                String::new()
                            };
                            tables.extend(report::summary::tables(
                                &sec.summary,
                                top,
                                c.domain_summary,
                                &prefix,
                            ));
                        }
                        if *f == report::Format::Json {
                            report::json(&tables)
                        } else {
                            report::markdown(&tables)
                        }
                    }
                    report::Format::Html => report::summary::page(
                        &sources,
                        &sections,
                        &timeline,
                        &window,
                        top,
                        c.domain_summary,
                        &c.common.inputs,
                    )?,
                };
                let mut file = out.create(&format!("{}_summary.{}", c.out_name, f.ext()))?;
                file.write_all(text.as_bytes())?;
                file.finish()?;
            }
            for f in out.commit()? {
                errln!("rocprof-attach: wrote {}", f.display());
            }
        }
        if c.json {
            crate::cli::json::print(
                "summary",
                ExitCode::Success,
                summary_json(&sections[0].summary),
            );
        } else if formats.contains(&report::Format::Console) {
            for (i, sec) in sections.iter().enumerate() {
                if sections.len() > 1 {
                    outln!("\n=== {} ===", sec.title);
                }
                let s = &sec.summary;
                if s.domains.is_empty() {
                    outln!("no kernels, API calls, copies or allocations recorded");
                    continue;
                }
                if c.domain_summary {
                    let t = report::summary::tables(s, top, true, "ROCPROFV3 ");
                    out!("{}", report::console(&t[..1], 60));
                }
                out!("{}", s.render(top, summary::terminal_width()));
                let _ = i;
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::Success,
        Err(e) => fail(&e),
    }
}

fn run_query(c: QueryCli) -> ExitCode {
    let run = || -> crate::rocpd::Result<()> {
        let table = crate::rocpd::query::run(
            &c.inputs,
            c.query.as_deref(),
            c.script.as_deref(),
            &c.window.spec(),
        )?;
        let tables = std::slice::from_ref(&table);
        let text = match c.format.report() {
            report::Format::Console => report::console(tables, 80),
            report::Format::Csv => report::csv(&table),
            report::Format::Json => report::json(tables),
            report::Format::Md => report::markdown(tables),
            report::Format::Html => report::html_page("rocprof-attach query", tables),
        };
        match &c.output {
            None => {
                use std::io::Write;
                let mut o = crate::cli::stdio::stdout();
                let _ = o.write_all(text.as_bytes());
            }
            Some(path) => {
                let dir = path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(std::path::Path::new("."));
                let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
                    Error::usage(format!("{} is not a file name", path.display()))
                })?;
                crate::rocpd::check_not_overwriting(&c.inputs, dir, &[name.to_owned()])?;
                let mut out = crate::rocpd::output::OutputSet::new(dir)?;
                let mut f = out.create(name)?;
                f.write_all(text.as_bytes())?;
                f.finish()?;
                for p in out.commit()? {
                    errln!("rocprof-attach: wrote {}", p.display());
                }
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::Success,
        Err(e) => fail(&e),
    }
}
