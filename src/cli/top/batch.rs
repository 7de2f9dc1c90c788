//! `top` outside a terminal: a plain table each interval, as `top -b` prints (`--batch`, or no
//! terminal on stdout), or one JSON object per interval (`--json`, docs/json.md). The names come
//! last on each line, so a line splits into its numbers and the name.

use super::model::{percent, short_name, Model, Proc};
use std::fmt::Write as _;

/// What a batch table shows.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Kernel rows shown per interval.
    pub top: usize,
    /// Full kernel names instead of shortened ones.
    pub full_names: bool,
    /// Cut lines to this many characters (a terminal's width; `usize::MAX`: never).
    pub width: usize,
}

/// Milliseconds with 3 decimals.
pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Microseconds with 3 decimals.
pub fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1e3)
}

/// Bytes with a binary unit (`12.0 MiB`).
pub fn bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A bandwidth in GB/s.
pub fn gbps(bps: Option<f64>) -> String {
    bps.map_or_else(|| "-".into(), |b| format!("{:.2}", b / 1e9))
}

/// The name a table shows.
pub fn shown_name(name: &str, full: bool) -> String {
    if full {
        name.to_string()
    } else {
        short_name(name)
    }
}

/// A busy fraction as a percentage, or `-` (no kernel in the interval).
pub fn busy(f: Option<f64>) -> String {
    f.map_or_else(|| "-".into(), |b| format!("{:.1}", b * 100.0))
}

/// `; rows of 1.18 s of GPU time`: what the last interval's rows cover, when they cover any.
pub fn span(m: &Model) -> String {
    m.gpu_span_s()
        .map_or_else(String::new, |s| format!("; rows of {s:.2} s of GPU time"))
}

/// The header line: what is watched and how it is sampled.
pub fn header(m: &Model, interval_s: f64) -> String {
    format!(
        "rocprof-attach top - interval {} ({:.2} s{}), {} process{}; sampling: {}",
        m.iteration,
        interval_s,
        span(m),
        m.procs.len(),
        if m.procs.len() == 1 { "" } else { "es" },
        m.sampling
    )
}

/// The table of one interval (with `final_totals`: the totals since the start, every kernel).
pub fn text(m: &Model, interval_s: f64, l: Layout, final_totals: bool) -> String {
    let mut o = String::new();
    if final_totals {
        let _ = writeln!(
            o,
            "rocprof-attach top - totals since the start, {} interval{}, {} process{}",
            m.iteration,
            if m.iteration == 1 { "" } else { "s" },
            m.procs.len(),
            if m.procs.len() == 1 { "" } else { "es" }
        );
    } else {
        let _ = writeln!(o, "{}", header(m, interval_s));
    }
    processes(&mut o, m, final_totals);
    super::spm::table(&mut o, m, final_totals);
    kernels(&mut o, m, l, final_totals);
    copies(&mut o, m);
    if !final_totals {
        apis(&mut o, m, l);
    }
    for msg in &m.messages {
        let _ = writeln!(o, "note: {msg}");
    }
    o.push('\n');
    if l.width == usize::MAX {
        return o;
    }
    o.lines()
        .map(|line| line.chars().take(l.width).collect::<String>() + "\n")
        .collect()
}

/// One line per process: GPU busy per agent, kernel and collective time; the one that stands
/// out is marked.
fn processes(o: &mut String, m: &Model, final_totals: bool) {
    let straggler = m.straggler();
    let _ = writeln!(
        o,
        "{:>8} {:>6} {:>7} {:>11} {:>13} {:>8}  GPUS",
        "PID", "RANK", "BUSY%", "KERNEL_MS", "COLLECTIVE_MS", "STATE"
    );
    for (i, p) in m.procs.iter().enumerate() {
        let mark = match straggler {
            Some((s, why)) if s == i => format!("  <- {why}"),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "{:>8} {:>6} {:>7} {:>11} {:>13} {:>8}  {}{mark}",
            p.pid,
            p.rank.map_or_else(|| "-".into(), |r| r.to_string()),
            busy(if final_totals {
                p.busy_overall()
            } else {
                p.busy_last()
            }),
            ms(if final_totals {
                p.kernel_ns_total()
            } else {
                p.kernel_ns()
            }),
            ms(p.collective_ns()),
            if p.exited { "exited" } else { "watched" },
            agents(p, final_totals)
        );
    }
}

/// `AGENT [0] (GPU) 87.5%, ...`: each agent's busy percentage over the last interval.
pub fn agents(p: &Proc, overall: bool) -> String {
    if p.busy.is_empty() {
        return "-".into();
    }
    p.busy
        .iter()
        .map(|(a, b)| format!("{a} {}%", busy(if overall { b.overall() } else { b.last })))
        .collect::<Vec<_>>()
        .join(", ")
}

fn kernels(o: &mut String, m: &Model, l: Layout, final_totals: bool) {
    let rows = m.kernels();
    let (all_i, all_t) = (m.interval_kernel_ns(), m.total_kernel_ns());
    let per_proc = m.procs.len() > 1 && !final_totals;
    let mut head = String::new();
    if !final_totals {
        head += &format!(
            "{:>9} {:>11} {:>10} {:>6} ",
            "LAUNCHES", "TOTAL_MS", "MEAN_US", "%GPU"
        );
    }
    // The final table gives exact nanoseconds, as `summary` does.
    let total_head = if final_totals {
        "ALL_TOTAL_NS"
    } else {
        "ALL_TOTAL_MS"
    };
    head += &format!(
        "{:>12} {:>13} {:>10} {:>6}",
        "ALL_LAUNCHES", total_head, "ALL_MEAN_US", "ALL_%"
    );
    if per_proc {
        for p in &m.procs {
            head += &format!(
                " {:>10}",
                format!("{}_MS", p.label().replace(' ', "_").to_uppercase())
            );
        }
    }
    let _ = writeln!(o, "{head}  KERNEL");
    let n = if final_totals { rows.len() } else { l.top };
    for r in rows.iter().take(n) {
        let mut line = String::new();
        if !final_totals {
            line += &format!(
                "{:>9} {:>11} {:>10} {:>6.1} ",
                r.interval.count,
                ms(r.interval.sum),
                us(r.interval.mean()),
                percent(r.interval.sum, all_i)
            );
        }
        line += &format!(
            "{:>12} {:>13} {:>10} {:>6.1}",
            r.total.count,
            if final_totals {
                r.total.sum.to_string()
            } else {
                ms(r.total.sum)
            },
            us(r.total.mean()),
            percent(r.total.sum, all_t)
        );
        if per_proc {
            for v in &r.per_proc {
                line += &format!(" {:>10}", ms(*v));
            }
        }
        let _ = writeln!(o, "{line}  {}", shown_name(&r.name, l.full_names));
    }
    if rows.len() > n {
        let _ = writeln!(o, "({} more kernels)", rows.len() - n);
    }
}

fn copies(o: &mut String, m: &Model) {
    let rows = m.copies();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{:>9} {:>12} {:>11} {:>8} {:>10} {:>12}  COPY",
        "COUNT", "BYTES", "TOTAL_MS", "GB/S", "ALL_COUNT", "ALL_BYTES"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:>9} {:>12} {:>11} {:>8} {:>10} {:>12}  {}",
            r.interval.count,
            r.bytes,
            ms(r.interval.sum),
            gbps(r.bandwidth()),
            r.total.count,
            r.bytes_total,
            r.name
        );
    }
}

fn apis(o: &mut String, m: &Model, l: Layout) {
    let rows = m.slowest();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{:>8} {:>8} {:>11}  SLOWEST API CALL",
        "PID", "TID", "DURATION_US"
    );
    for (pid, c) in rows.into_iter().take(l.top) {
        let _ = writeln!(
            o,
            "{:>8} {:>8} {:>11}  {}",
            pid,
            c.tid,
            us(c.duration as f64),
            c.name
        );
    }
}

/// The JSON object of one interval (`kind`: "interval", or "final" for the totals at the end).
pub fn json(m: &Model, interval_s: f64, kind: &str) -> serde_json::Value {
    use serde_json::json;
    let stats = |s: &crate::rocpd::summary::Stats, all: u64| {
        json!({
            "launches": s.count, "total_ns": s.sum, "mean_ns": s.mean(),
            "min_ns": s.min, "max_ns": s.max, "percent": percent(s.sum, all),
        })
    };
    let (all_i, all_t) = (m.interval_kernel_ns(), m.total_kernel_ns());
    let straggler = m.straggler();
    let kernels: Vec<_> = m
        .kernels()
        .iter()
        .filter(|r| kind == "final" || r.interval.count > 0)
        .map(|r| {
            json!({
                "name": r.name, "short_name": short_name(&r.name),
                "interval": stats(&r.interval, all_i), "since_start": stats(&r.total, all_t),
                "per_process_ns": r.per_proc,
            })
        })
        .collect();
    let procs: Vec<_> = m
        .procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut o = json!({
                "pid": p.pid, "rank": p.rank, "exited": p.exited,
                "busy_percent": p.busy_last().map(|b| b * 100.0),
                "kernel_ns": p.kernel_ns(), "collective_ns": p.collective_ns(),
                "agents": p.busy.iter().map(|(a, b)| json!({
                    "agent": a, "busy_percent": b.last.map(|x| x * 100.0),
                    "busy_percent_since_start": b.overall().map(|x| x * 100.0),
                })).collect::<Vec<_>>(),
                "stands_out": straggler.filter(|s| s.0 == i).map(|s| s.1),
            });
            if m.spm {
                o["spm"] = super::spm::json(m, p.pid, false).into();
                o["spm_since_start"] = super::spm::json(m, p.pid, true).into();
            }
            o
        })
        .collect();
    let copies: Vec<_> = m
        .copies()
        .iter()
        .map(|r| {
            json!({
                "name": r.name, "count": r.interval.count, "bytes": r.bytes,
                "total_ns": r.interval.sum, "bytes_per_second": r.bandwidth(),
                "since_start": {"count": r.total.count, "bytes": r.bytes_total, "total_ns": r.total.sum},
            })
        })
        .collect();
    let api: Vec<_> = m
        .slowest()
        .iter()
        .map(|(pid, c)| {
            json!({"pid": pid, "tid": c.tid, "name": c.name, "domain": c.domain.label(), "duration_ns": c.duration})
        })
        .collect();
    json!({
        "type": kind, "iteration": m.iteration, "interval_s": interval_s, "sampling": m.sampling,
        "gpu_span_s": m.gpu_span_s(),
        "kernel_ns": all_i, "kernel_ns_since_start": all_t,
        "processes": procs, "kernels": kernels, "copies": copies, "slowest_api_calls": api,
        "messages": m.messages,
    })
}
