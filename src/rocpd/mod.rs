//! rocpd databases handled natively: the schema, a writer, a reader, and converters to
//! rocprofv3's CSV and JSON layouts plus duration statistics — what ROCm's Python `rocpd convert`
//! and `rocpd summary` do, without Python.
//!
//! * [`schema`], [`guid`], [`model`], [`writer`]: the rocpd model and a writer producing databases
//!   in ROCm 7.0's layout (used by tests and the benchmark);
//! * [`reader`]: opens and validates one or several databases and streams their rows;
//! * [`csv`], [`json`], [`summary`]: the converters; [`output`] makes their files appear
//!   atomically;
//! * [`cli`]: the `convert` and `summary` subcommands.

pub mod cli;
pub mod csv;
pub mod domain;
pub mod guid;
pub mod json;
pub mod model;
pub mod numfmt;
pub mod output;
pub mod reader;
pub mod schema;
pub mod summary;
pub mod writer;

use std::path::{Path, PathBuf};

use crate::format::OutputFormat;
use crate::{Error, Result};

pub use reader::AgentIndex;
pub use writer::Writer;

/// Options shared by the converters.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// How agents are labelled in `Agent_Id` cells.
    pub agent_index: AgentIndex,
    /// Use the ROCTx region name as the kernel name when there is one (`--kernel-rename`).
    pub kernel_rename: bool,
    /// Also write the `*_stats.csv` files.
    pub stats: bool,
}

/// What a conversion produced.
#[derive(Debug, Clone, Default)]
pub struct ConvertReport {
    /// Files written (final paths).
    pub files: Vec<PathBuf>,
    /// Rows written to CSV (all files).
    pub csv_rows: u64,
    /// Records written to JSON.
    pub json_rows: u64,
}

/// Output file names `formats` may produce for `out_name`.
fn candidate_names(formats: &[OutputFormat], out_name: &str, stats: bool) -> Vec<String> {
    let mut names = Vec::new();
    if formats.contains(&OutputFormat::Csv) {
        names.extend(csv::file_names(out_name));
    }
    if formats.contains(&OutputFormat::Json) {
        names.push(json::file_name(out_name));
    }
    if stats {
        names.extend(
            domain::Domain::ALL
                .iter()
                .map(|d| format!("{out_name}_{}.csv", d.stats_name())),
        );
        names.push(format!("{out_name}_domain_stats.csv"));
    }
    names
}

/// Refuses output names that would replace one of the inputs.
fn check_not_overwriting(inputs: &[PathBuf], out_dir: &Path, names: &[String]) -> Result<()> {
    if out_name_invalid(names) {
        return Err(Error::usage(
            "the output name must not contain '/' or be empty; use -d for the directory",
        ));
    }
    let Ok(dir) = out_dir.canonicalize() else {
        return Ok(());
    };
    for input in inputs {
        let Ok(canon) = input.canonicalize() else {
            continue;
        };
        for n in names {
            if dir.join(n) == canon {
                return Err(Error::usage(format!(
                    "writing {} would overwrite the input {}; choose another name with -o or another directory with -d",
                    dir.join(n).display(),
                    input.display()
                )));
            }
        }
    }
    Ok(())
}

fn out_name_invalid(names: &[String]) -> bool {
    names.iter().any(|n| n.contains('/') || n.starts_with('_'))
}

/// Converts `inputs` (one or more rocpd databases, merged into one output) to the requested
/// formats with explicit options.
pub fn convert_with(
    inputs: &[PathBuf],
    formats: &[OutputFormat],
    out_dir: &Path,
    out_name: &str,
    opts: &ConvertOptions,
) -> Result<ConvertReport> {
    let want_csv = formats.contains(&OutputFormat::Csv);
    let want_json = formats.contains(&OutputFormat::Json);
    if !want_csv && !want_json && !opts.stats {
        return Ok(ConvertReport::default());
    }
    check_not_overwriting(
        inputs,
        out_dir,
        &candidate_names(formats, out_name, opts.stats),
    )?;
    let dbs = reader::open_all(inputs)?;
    let sources = reader::all_sources(&dbs)?;
    let mut out = output::OutputSet::new(out_dir)?;
    let mut report = ConvertReport::default();
    if want_csv {
        report.csv_rows = csv::write(&sources, opts, &mut out, out_name)?;
    }
    if want_json {
        report.json_rows = json::write(&sources, opts, &mut out, out_name)?;
    }
    if opts.stats {
        summary::Summary::collect(&sources, opts)?.write_csv(&mut out, out_name)?;
    }
    report.files = out.commit()?;
    Ok(report)
}

/// Converts `inputs` to `formats` in `out_dir` with file names starting `out_name_`. Formats the
/// profiler writes itself (rocpd, pftrace, otf2) are skipped. Returns the files written.
pub fn convert_outputs(
    inputs: &[PathBuf],
    formats: &[OutputFormat],
    out_dir: &Path,
    out_name: &str,
) -> Result<Vec<PathBuf>> {
    Ok(convert_with(
        inputs,
        formats,
        out_dir,
        out_name,
        &ConvertOptions::default(),
    )?
    .files)
}

/// Prints per-domain and overall duration tables (top `top` rows each) for `inputs` to stdout,
/// fitted to the terminal width.
pub fn print_summary(inputs: &[PathBuf], top: usize) -> Result<()> {
    let dbs = reader::open_all(inputs)?;
    let sources = reader::all_sources(&dbs)?;
    let s = summary::Summary::collect(&sources, &ConvertOptions::default())?;
    print!("{}", s.render(top, summary::terminal_width()));
    Ok(())
}

/// Entry point of the `convert` and `summary` subcommands. `args[0]` is the subcommand name.
pub fn cli_main(args: &[std::ffi::OsString]) -> crate::ExitCode {
    cli::main(args)
}
