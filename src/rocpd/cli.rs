//! The `convert` and `summary` subcommands.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use super::{convert_with, summary, AgentIndex, ConvertOptions};
use crate::format::OutputFormat;
use crate::{Error, ExitCode};

/// Formats `convert` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// rocprofv3's per-domain CSV files.
    Csv,
    /// rocprofv3's `<name>_results.json`.
    Json,
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
        }
    }
}

/// Convert rocpd databases to rocprofv3's CSV and JSON outputs.
#[derive(Debug, Parser)]
#[command(name = "rocprof-attach convert", disable_version_flag = true)]
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
}

/// Summarise rocpd databases: per-kernel, per-API and per-domain duration statistics.
#[derive(Debug, Parser)]
#[command(name = "rocprof-attach summary", disable_version_flag = true)]
struct SummaryCli {
    #[command(flatten)]
    common: Common,
    /// Rows shown per table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Also write rocprofv3's stats CSV files (`<NAME>_kernel_stats.csv`, ...) into this directory.
    #[arg(short = 'd', long = "output-path")]
    out_dir: Option<PathBuf>,
    /// Prefix of the stats CSV files.
    #[arg(short = 'o', long = "output-file", default_value = "out")]
    out_name: String,
}

fn fail(e: &Error) -> ExitCode {
    let msg = e.to_string().replace('\n', " ");
    eprintln!("rocprof-attach: error: {msg}");
    e.exit_code()
}

fn clap_fail(e: clap::Error, sub: &str) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        print!("{}", e.render());
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
    eprintln!("rocprof-attach: error: {first}; see `rocprof-attach {sub} --help`");
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
        other => {
            eprintln!("rocprof-attach: error: unknown subcommand '{other}'; expected `convert` or `summary`");
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
        })
        .collect();
    match convert_with(
        &c.common.inputs,
        &formats,
        &c.out_dir,
        &c.out_name,
        &c.common.options(c.stats),
    ) {
        Ok(report) => {
            if report.files.is_empty() {
                eprintln!("rocprof-attach: the input holds no records; no files written");
            }
            for f in &report.files {
                println!("{}", f.display());
            }
            ExitCode::Success
        }
        Err(e) => fail(&e),
    }
}

fn run_summary(c: SummaryCli) -> ExitCode {
    let run = || -> crate::Result<()> {
        let opts = c.common.options(true);
        let dbs = super::reader::open_all(&c.common.inputs)?;
        let sources = super::reader::all_sources(&dbs)?;
        let s = summary::Summary::collect(&sources, &opts)?;
        if let Some(dir) = &c.out_dir {
            let names: Vec<String> = super::domain::Domain::ALL
                .iter()
                .map(|d| format!("{}_{}.csv", c.out_name, d.stats_name()))
                .chain([format!("{}_domain_stats.csv", c.out_name)])
                .collect();
            super::check_not_overwriting(&c.common.inputs, dir, &names)?;
            let mut out = super::output::OutputSet::new(dir)?;
            s.write_csv(&mut out, &c.out_name)?;
            for f in out.commit()? {
                eprintln!("rocprof-attach: wrote {}", f.display());
            }
        }
        if s.domains.is_empty() {
            println!("no kernels, API calls, copies or allocations recorded");
        } else {
            print!("{}", s.render(c.top.max(1), summary::terminal_width()));
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::Success,
        Err(e) => fail(&e),
    }
}
