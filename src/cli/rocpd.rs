//! Runs the `convert`, `summary` and `query` subcommands (their command lines are in
//! [`crate::cli::rocpd_args`]): the front end of [`crate::rocpd`].

use crate::cli::rocpd_args::{ConvertArgs, Format, QueryArgs, SummaryArgs};
use crate::cli::stdio::{errln, out, outln};
use std::path::PathBuf;

use crate::exit::ExitCode;
use crate::format::OutputFormat;
use crate::rocpd::reader::Source;
use crate::rocpd::window::MaybeWindow;
use crate::rocpd::{convert_with, summary};
use crate::rocpd::{report, Error};

fn fail(e: &Error) -> ExitCode {
    let msg = e.to_string().replace('\n', " ");
    errln!("rocprof-attach: error: {msg}");
    crate::rocpd_exit_code(e)
}

/// Runs `convert`.
pub fn run_convert(c: ConvertArgs) -> ExitCode {
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
    opts.replace = c.force;
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

/// Runs `summary`.
pub fn run_summary(c: SummaryArgs) -> ExitCode {
    match summarise(&c) {
        Ok(()) => ExitCode::Success,
        Err(e) => {
            let code = fail(&e);
            if c.json {
                // One document whatever happens (docs/json.md), with the error in it.
                crate::cli::json::print(
                    "summary",
                    code,
                    serde_json::json!({"error": e.to_string(), "domains": [], "domain_totals": []}),
                );
            }
            code
        }
    }
}

/// What `summary` found in its inputs: the sections to show and the HTML timeline.
struct Summarised<'a> {
    sources: Vec<Source<'a>>,
    window: MaybeWindow,
    /// All processes, then (with `--summary-by-rank`) one per input.
    sections: Vec<report::summary::Section>,
    timeline: report::pass::Timeline,
}

/// `summary`'s work: summarise the inputs, write the files asked for, print the rest.
fn summarise(c: &SummaryArgs) -> crate::rocpd::Result<()> {
    let opts = c.common.options(true);
    let dbs = crate::rocpd::reader::open_all(&c.common.inputs)?;
    let sources = crate::rocpd::reader::all_sources(&dbs)?;
    let window = opts.time_window.resolve(&sources)?;
    let formats: Vec<report::Format> = c.formats.iter().map(|f| f.report()).collect();
    // One pass over the rows: statistics per process and overall, and the HTML timeline.
    let pass = report::pass::run(
        &sources,
        &opts,
        &window,
        formats.contains(&report::Format::Html),
    )?;
    if let (Some(w), true) = (&window, pass.overall.domains.is_empty()) {
        return Err(crate::rocpd::window::empty(w));
    }
    let mut sections = vec![report::summary::Section {
        title: "All processes".to_owned(),
        summary: pass.overall,
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
    let s = Summarised {
        sources,
        window,
        sections,
        timeline,
    };
    let files_wanted = formats.iter().any(|f| *f != report::Format::Console);
    if files_wanted || c.out_dir.is_some() {
        write_summary_files(c, &s, &formats)?;
    }
    if c.json {
        crate::cli::json::print(
            "summary",
            ExitCode::Success,
            summary_json(&s.sections[0].summary),
        );
    } else if formats.contains(&report::Format::Console) {
        print_summary(c, &s.sections);
    }
    Ok(())
}

/// Write the summary's files (under `--output-directory`, by default `./rocpd-output-data`):
/// the statistics as CSV, and one file for each other format but the console.
fn write_summary_files(
    c: &SummaryArgs,
    s: &Summarised<'_>,
    formats: &[report::Format],
) -> crate::rocpd::Result<()> {
    let files_wanted = formats.iter().any(|f| *f != report::Format::Console);
    let stats_csv =
        formats.contains(&report::Format::Csv) || (!files_wanted && c.out_dir.is_some());
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
    for f in formats {
        if !matches!(f, report::Format::Console | report::Format::Csv) {
            names.push(format!("{}_summary.{}", c.out_name, f.ext()));
        }
    }
    crate::rocpd::check_not_overwriting(&c.common.inputs, &dir, &names)?;
    let mut out = crate::rocpd::output::OutputSet::new(&dir)?;
    if stats_csv {
        s.sections[0].summary.write_csv(&mut out, &c.out_name)?;
    }
    for f in formats {
        let Some(text) = summary_document(c, s, *f)? else {
            continue;
        };
        let mut file = out.create(&format!("{}_summary.{}", c.out_name, f.ext()))?;
        file.write_all(text.as_bytes())?;
        file.finish()?;
    }
    for f in out.commit()? {
        errln!("rocprof-attach: wrote {}", f.display());
    }
    Ok(())
}

/// The summary as a JSON, Markdown or HTML document; `None` for the console and CSV.
fn summary_document(
    c: &SummaryArgs,
    s: &Summarised<'_>,
    format: report::Format,
) -> crate::rocpd::Result<Option<String>> {
    let top = c.top.max(1);
    Ok(Some(match format {
        report::Format::Console | report::Format::Csv => return Ok(None),
        report::Format::Json | report::Format::Md => {
            let mut tables = Vec::new();
            for sec in &s.sections {
                let prefix = if s.sections.len() > 1 {
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
            if format == report::Format::Json {
                report::json(&tables)
            } else {
                report::markdown(&tables)
            }
        }
        report::Format::Html => report::summary::page(
            &s.sources,
            &s.sections,
            &s.timeline,
            &s.window,
            top,
            c.domain_summary,
            &c.common.inputs,
        )?,
    }))
}

/// Print the summary's sections on the console.
fn print_summary(c: &SummaryArgs, sections: &[report::summary::Section]) {
    let top = c.top.max(1);
    for sec in sections {
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
        if let Some(t) = report::counters::table(&s.counters, "ROCPROFV3 ") {
            out!("{}", counter_console(t, summary::terminal_width()));
        }
    }
}

/// The counter table for a terminal `width` columns wide: as a table when it fits, else one
/// line per kernel and counter, cut at the width.
fn counter_console(t: report::Table, width: usize) -> String {
    let text = report::console(
        std::slice::from_ref(&t),
        (width.saturating_sub(45) / 2).max(8),
    );
    if text.lines().all(|l| l.chars().count() <= width) {
        return text;
    }
    let mut out = format!("\n{}:\n\n", t.title);
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(report::Cell::text).collect();
        let line = format!(
            "{}: {} launches={} mean={} min={} max={}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        );
        out.push_str(&line.chars().take(width).collect::<String>());
        out.push('\n');
    }
    out
}

/// Runs `query`.
pub fn run_query(c: QueryArgs) -> ExitCode {
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
