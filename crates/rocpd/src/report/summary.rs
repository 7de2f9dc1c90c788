//! The `summary` report in every format: per-domain statistics as tables, and the HTML page with
//! bar charts of the top kernels and APIs, time per domain, and a timeline overview per process
//! and agent (inline SVG).

use std::fmt::Write as _;

use super::html;
use super::pass::Timeline;
use super::{esc, html_table, Cell, Table};
use crate::domain::Domain;
use crate::reader::Source;
use crate::summary::{Stats, Summary};
use crate::window::MaybeWindow;
use crate::Result;

/// One summarised group of processes (all of them, or one rank).
pub struct Section {
    /// Heading (`all processes`, `rank 0 (pid 1234)`).
    pub title: String,
    /// The statistics.
    pub summary: Summary,
}

fn stats_row(name: &str, s: &Stats, total: u64) -> Vec<Cell> {
    let pct = if total == 0 {
        0.0
    } else {
        s.sum as f64 / total as f64 * 100.0
    };
    vec![
        Cell::Text(name.to_owned()),
        Cell::Int(s.count as i64),
        Cell::Int(s.sum as i64),
        Cell::Real((s.mean() * 1000.0).round() / 1000.0),
        Cell::Real((pct * 10000.0).round() / 10000.0),
        Cell::Int(s.min as i64),
        Cell::Int(s.max as i64),
        Cell::Real((s.stddev() * 1000.0).round() / 1000.0),
    ]
}

const COLUMNS: [&str; 8] = [
    "Name",
    "Calls",
    "TotalDurationNs",
    "AverageNs",
    "Percentage",
    "MinNs",
    "MaxNs",
    "StdDev",
];

/// The tables of one summary: per domain (top `top` rows), and per domain totals when
/// `domain_summary`.
pub fn tables(s: &Summary, top: usize, domain_summary: bool, prefix: &str) -> Vec<Table> {
    let mut out = Vec::new();
    let cols: Vec<String> = COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    if domain_summary {
        let totals = s.domain_totals();
        let all: u64 = totals.iter().map(|t| t.1.sum).sum();
        out.push(Table {
            title: format!("{prefix}DOMAIN SUMMARY"),
            columns: cols.clone(),
            rows: totals
                .iter()
                .map(|(d, st)| stats_row(d.label(), st, all))
                .collect(),
        });
    }
    for d in s.present() {
        let rows = s.sorted(d);
        let total: u64 = rows.iter().map(|r| r.1.sum).sum();
        out.push(Table {
            title: format!("{prefix}{} SUMMARY", d.label()),
            columns: cols.clone(),
            rows: rows
                .iter()
                .take(top)
                .map(|(n, st)| stats_row(n, st, total))
                .collect(),
        });
    }
    out.extend(super::counters::table(&s.counters, prefix));
    out
}

fn charts(s: &Summary, top: usize) -> String {
    let kernels: Vec<(String, f64, u64)> = s
        .sorted(Domain::KernelDispatch)
        .into_iter()
        .take(top)
        .map(|(n, st)| (n.to_owned(), st.sum as f64, st.count))
        .collect();
    let mut apis: Vec<(String, f64, u64)> = Domain::API
        .iter()
        .flat_map(|d| {
            s.sorted(*d)
                .into_iter()
                .map(|(n, st)| (n.to_owned(), st.sum as f64, st.count))
        })
        .collect();
    apis.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    apis.truncate(top);
    let domains: Vec<(String, f64, u64)> = s
        .domain_totals()
        .into_iter()
        .map(|(d, st)| (d.label().to_owned(), st.sum as f64, st.count))
        .collect();
    format!(
        "<div class=\"grid\">{}{}{}</div>",
        html::bar_chart("Top kernels by total time", &kernels),
        html::bar_chart("Top API calls by total time", &apis),
        html::bar_chart("Time per domain", &domains)
    )
}

/// The self-contained HTML report.
#[allow(clippy::too_many_arguments)]
pub fn page(
    sources: &[Source<'_>],
    sections: &[Section],
    timeline: &Timeline,
    window: &MaybeWindow,
    top: usize,
    domain_summary: bool,
    inputs: &[std::path::PathBuf],
) -> Result<String> {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>rocprof-attach summary</h1><div class=\"meta\">{} database{}, {} process{}{}</div>",
        inputs.len(),
        if inputs.len() == 1 { "" } else { "s" },
        sources.len(),
        if sources.len() == 1 { "" } else { "es" },
        match window {
            Some(w) => format!(", window {}", esc(&w.describe())),
            None => String::new(),
        }
    );
    let _ = write!(
        body,
        "<div class=\"meta\">Inputs: {}</div>",
        esc(&inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "))
    );
    body.push_str("<h2>Timeline overview</h2>");
    body.push_str(&html::timeline(
        timeline.start,
        timeline.end,
        &timeline.lanes,
    ));
    let sampled = spm_series(sources, window);
    if !sampled.is_empty() {
        body.push_str("<h2>Sampled counters (--spm)</h2>");
        body.push_str(&html::series_chart(timeline.start, timeline.end, &sampled));
        for src in sources {
            let label = if sources.len() > 1 {
                format!(" of {}", src.input.path.display())
            } else {
                String::new()
            };
            if let Some(t) = super::spm::figures_table(src, window, &label) {
                body.push_str(&html_table(&t));
            }
        }
    }
    for sec in sections {
        let _ = write!(body, "<h2>{}</h2>", esc(&sec.title));
        if sec.summary.domains.is_empty() {
            body.push_str("<p>No kernels, API calls, copies or allocations recorded.</p>");
            continue;
        }
        body.push_str(&charts(&sec.summary, top));
        for t in tables(&sec.summary, top, domain_summary, "") {
            body.push_str(&html_table(&t));
        }
    }
    Ok(html::page("rocprof-attach summary", &body))
}

/// The most points a sampled counter's line gets (samples are averaged into as many bins).
const SPM_BINS: i64 = 900;

/// The `--spm` samples of every source (table `rocpd_spm_sample`, docs/output.md), one series
/// per source and counter, averaged into at most [`SPM_BINS`] bins each; none without the table.
fn spm_series(sources: &[Source<'_>], window: &MaybeWindow) -> Vec<html::Series> {
    let mut out = Vec::new();
    for src in sources {
        let conn = src.input.connection();
        let sql = format!(
            "SELECT counter, MIN(start), MAX(\"end\") FROM rocpd_spm_sample S WHERE {} GROUP BY counter ORDER BY counter",
            crate::window::sql(window, "S.start", "S.\"end\"")
        );
        let Ok(mut st) = conn.prepare(&sql) else {
            continue; // no table: no samples in this database
        };
        let spans: Vec<(String, i64, i64)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map(|rows| rows.filter_map(|r| r.ok()).collect())
            .unwrap_or_default();
        for (counter, lo, hi) in spans {
            let bin = ((hi - lo) / SPM_BINS).max(1);
            let q = format!(
                "SELECT (start - ?2) / ?3, AVG(start), AVG(value) FROM rocpd_spm_sample S WHERE counter = ?1 AND {} GROUP BY 1 ORDER BY 1",
                crate::window::sql(window, "S.start", "S.\"end\"")
            );
            let points: Vec<(i64, f64)> = conn
                .prepare(&q)
                .and_then(|mut st| {
                    st.query_map(rusqlite::params![counter, lo, bin], |r| {
                        Ok((
                            r.get::<_, f64>(1)? as i64,
                            r.get::<_, Option<f64>>(2)?.unwrap_or(0.0),
                        ))
                    })
                    .map(|rows| rows.filter_map(|r| r.ok()).collect())
                })
                .unwrap_or_default();
            let name = if sources.len() > 1 {
                format!("{counter} ({})", src.input.path.display())
            } else {
                counter
            };
            out.push(html::Series { name, points });
        }
    }
    out
}

/// The MPI rank of a process, from its environment as stored in the database (Open MPI,
/// MPICH/PMI, PMIx, MVAPICH, Slurm, rocprofv3's `MPI_RANK`, or torchrun's `RANK`).
pub fn rank_of(src: &Source<'_>) -> Option<i64> {
    let t = src.table("rocpd_info_process")?;
    let env: String = src
        .input
        .connection()
        .query_row(&format!("SELECT environment FROM {t} LIMIT 1"), [], |r| {
            r.get::<_, Option<String>>(0)
        })
        .ok()
        .flatten()?;
    let v: serde_json::Value = serde_json::from_str(&env).ok()?;
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "MV2_COMM_WORLD_RANK",
        "SLURM_PROCID",
        "MPI_RANK",
        "MPI_RANKID",
        "RANK", // torchrun (torch.distributed)
    ]
    .iter()
    .find_map(|k| {
        v.get(*k).and_then(|x| match x {
            serde_json::Value::String(s) => s.trim().parse().ok(),
            serde_json::Value::Number(n) => n.as_i64(),
            _ => None,
        })
    })
}
