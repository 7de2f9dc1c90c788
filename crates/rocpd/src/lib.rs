//! rocpd databases handled natively: the schema, a writer, a reader, and converters to
//! rocprofv3's CSV and JSON layouts plus duration statistics — what ROCm's Python `rocpd convert`
//! and `rocpd summary` do, without Python.
//!
//! * [`schema`], [`guid`], [`model`], [`writer`]: the rocpd model and a writer producing databases
//!   in ROCm 7.0's layout (used by tests and the benchmark);
//! * [`reader`]: opens and validates one or several databases and streams their rows;
//! * [`csv`], [`json`], [`summary`]: the converters; [`output`] makes their files appear
//!   atomically;
//! * [`error`]: this layer's error type.
//!
//! The `convert` and `summary` subcommands live in the front end (rocprof-attach's CLI); nothing here
//! prints: summaries are written to a given [`std::io::Write`].

//!
//! * **Is:** a library of its own, useful without the rest of rocprof-attach: no Rust library
//!   reads, writes and converts rocpd otherwise.
//! * **May use:** rusqlite (bundled SQLite), serde, csv, prost, tracing and `rocprof-otf2`
//!   (the OTF2 writer's FFI); no other crate of this workspace.
//! * **Must never:** print (summaries go to a given writer), exit, or know exit codes (a front
//!   end maps [`ErrorClass`] to its own); its `unsafe` code lives in `sys`.

#![deny(missing_docs)]

pub mod agent_info;
pub mod agent_json;
pub mod csv;
pub mod domain;
pub mod error;
pub mod format;
pub mod guid;
pub mod json;
pub mod model;
pub mod numfmt;
pub mod otf2;
pub mod output;
pub mod par;
pub mod pftrace;
pub mod query;
pub mod reader;
pub mod report;
pub mod schema;
pub mod summary;
mod sys;
pub mod window;
pub mod writer;

use std::path::{Path, PathBuf};

use crate::format::OutputFormat;

pub use error::{Error, ErrorClass, Result};
pub use reader::{AgentIndex, TimeWindow};
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
    /// The time window (`--start/--end`, markers, `--inclusive`); unset keeps everything.
    pub time_window: window::WindowSpec,
    /// Perfetto/OTF2: kernel tracks per agent and queue instead of per stream.
    pub group_by_queue: bool,
    /// Convert only the records inside this time range (`None`: all). `convert_with` sets it from
    /// `time_window`.
    pub window: Option<TimeWindow>,
    /// Replace files of the output's names that already exist (`convert --force`); otherwise
    /// their presence is an error, so a conversion never overwrites the profiler's own output.
    pub replace: bool,
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
    /// What the Perfetto trace holds, when one was written.
    pub pftrace: Option<pftrace::Counts>,
    /// What the OTF2 archive holds, when one was written.
    pub otf2: Option<otf2::Counts>,
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
    if formats.contains(&OutputFormat::Pftrace) {
        names.push(pftrace::file_name(out_name));
    }
    if formats.contains(&OutputFormat::Otf2) {
        names.extend(otf2::file_names(out_name));
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
pub fn check_not_overwriting(inputs: &[PathBuf], out_dir: &Path, names: &[String]) -> Result<()> {
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

/// Refuses output names that already exist in `out_dir` (files written earlier, for example by
/// the profiler itself beside its database).
pub fn check_not_existing(out_dir: &Path, names: &[String]) -> Result<()> {
    let existing: Vec<String> = names
        .iter()
        .filter(|n| out_dir.join(n).symlink_metadata().is_ok())
        .cloned()
        .collect();
    let Some(first) = existing.first() else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "{} already exists{} (written earlier, perhaps by the profiler itself); pass --force to replace \
         {}, or write elsewhere with -d or another name with -o",
        out_dir.join(first).display(),
        match existing.len() {
            1 => String::new(),
            n => format!(", and {} more of this conversion's file names", n - 1),
        },
        if existing.len() == 1 { "it" } else { "them" }
    )))
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
    let want_pftrace = formats.contains(&OutputFormat::Pftrace);
    let want_otf2 = formats.contains(&OutputFormat::Otf2);
    if !want_csv && !want_json && !want_pftrace && !want_otf2 && !opts.stats {
        return Ok(ConvertReport::default());
    }
    if want_otf2 {
        otf2::check_available()?;
    }
    let names = candidate_names(formats, out_name, opts.stats);
    check_not_overwriting(inputs, out_dir, &names)?;
    if !opts.replace {
        check_not_existing(out_dir, &names)?;
    }
    let dbs = reader::open_all(inputs)?;
    let sources = reader::all_sources(&dbs)?;
    let window = opts.time_window.resolve(&sources)?;
    let window = window.or(opts.window);
    let sources = reader::all_sources_in(&dbs, window)?;
    let mut out = output::OutputSet::new(out_dir)?;
    let mut report = ConvertReport::default();
    let trace_opts = pftrace::PftraceOptions {
        agent_index: opts.agent_index,
        kernel_rename: opts.kernel_rename,
        group_by_queue: opts.group_by_queue,
    };
    if want_pftrace {
        report.pftrace = Some(pftrace::write(
            &dbs, trace_opts, window, &mut out, out_name,
        )?);
    }
    if want_otf2 {
        report.otf2 = Some(otf2::write(
            &sources, trace_opts, window, &mut out, out_name,
        )?);
    }
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

/// Converts `inputs` to `formats` (CSV, JSON, Perfetto, OTF2; rocpd is skipped) in `out_dir`
/// with file names starting `out_name_`, replacing files of those names (a session converts what
/// its own tool did not write). Returns the files written (an OTF2 archive as its anchor file,
/// its `.def` file and its event directory).
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
        &ConvertOptions {
            replace: true,
            ..ConvertOptions::default()
        },
    )?
    .files)
}

/// Writes per-domain and overall duration tables (top `top` rows each) for `inputs` to `out`,
/// fitted to `width` columns.
pub fn write_summary(
    out: &mut dyn std::io::Write,
    inputs: &[PathBuf],
    top: usize,
    width: usize,
) -> Result<()> {
    let dbs = reader::open_all(inputs)?;
    let sources = reader::all_sources(&dbs)?;
    let s = summary::Summary::collect(&sources, &ConvertOptions::default())?;
    out.write_all(s.render(top, width).as_bytes())
        .map_err(|e| Error::io("writing the summary", e))
}
