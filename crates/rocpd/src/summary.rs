//! Per-kernel, per-API and per-domain statistics in rocprofv3's stats layout, and a terminal table.
//!
//! The arithmetic follows rocprofv3's `statistics<uint64_t, double>`: integer sums, sample
//! variance `(Σx² − (Σx)²/n) / (n − 1)` (0 for fewer than two calls), rows sorted by total
//! duration, descending.

use std::collections::HashMap;

use super::domain::{Domain, STATS_HEADER};
use super::numfmt::{c_fixed, c_scientific, stats_double, stats_percent, Line};
use super::output::OutputSet;
use super::reader::Source;
use super::window::MaybeWindow;
use super::ConvertOptions;
use crate::error::Result;

/// Accumulated durations of one name.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Number of calls.
    pub count: u64,
    /// Sum of durations (ns).
    pub sum: u64,
    /// Sum of squared durations.
    pub sqr: u128,
    /// Shortest duration.
    pub min: u64,
    /// Longest duration.
    pub max: u64,
}

impl Stats {
    /// Adds one duration.
    pub fn add(&mut self, v: u64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        // Five durations near i64::MAX (a corrupt database) would overflow even a u128.
        self.sqr = self.sqr.saturating_add(u128::from(v) * u128::from(v));
    }

    /// Merges another accumulator.
    pub fn merge(&mut self, o: &Stats) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *o;
            return;
        }
        self.count += o.count;
        self.sum = self.sum.saturating_add(o.sum);
        self.sqr = self.sqr.saturating_add(o.sqr);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Mean duration.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Sample standard deviation (rocprofv3's formula).
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let s = u128::from(self.sum);
        let var = (self.sqr as f64 - (s * s) as f64 / self.count as f64) / (self.count - 1) as f64;
        var.abs().sqrt()
    }
}

/// Statistics of every domain.
#[derive(Debug, Default)]
pub struct Summary {
    /// Per domain: name → stats.
    pub domains: HashMap<Domain, HashMap<String, Stats>>,
    /// Hardware counters per kernel name and counter.
    pub counters: crate::report::counters::Counters,
}

impl Summary {
    /// Accumulates every kernel, API call, copy and allocation of `sources`.
    pub fn collect(sources: &[Source<'_>], opts: &ConvertOptions) -> Result<Summary> {
        Summary::collect_in(sources, opts, &None)
    }

    /// Accumulates the kernels, API calls, copies and allocations of `sources` that `window`
    /// keeps (one pass over each source, see [`crate::report::pass`]).
    pub fn collect_in(
        sources: &[Source<'_>],
        opts: &ConvertOptions,
        window: &MaybeWindow,
    ) -> Result<Summary> {
        Ok(crate::report::pass::run(sources, opts, window, false)?.overall)
    }

    /// Adds the statistics of `other` (statistics merge exactly: integer sums, min, max).
    pub fn merge(&mut self, other: &Summary) {
        for (k, s) in &other.counters {
            match self.counters.get_mut(k) {
                Some(t) => t.merge(s),
                None => {
                    self.counters.insert(k.clone(), *s);
                }
            }
        }
        for (d, names) in &other.domains {
            let mine = self.domains.entry(*d).or_default();
            for (n, s) in names {
                match mine.get_mut(n) {
                    Some(t) => t.merge(s),
                    None => {
                        mine.insert(n.clone(), *s);
                    }
                }
            }
        }
    }

    /// Rows of one domain, sorted by total duration (descending, then by name).
    pub fn sorted(&self, d: Domain) -> Vec<(&str, Stats)> {
        let mut v: Vec<(&str, Stats)> = self
            .domains
            .get(&d)
            .map(|m| m.iter().map(|(k, s)| (k.as_str(), *s)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| b.1.sum.cmp(&a.1.sum).then_with(|| a.0.cmp(b.0)));
        v
    }

    /// Domains with data, in rocprofv3's file order.
    pub fn present(&self) -> Vec<Domain> {
        Domain::ALL
            .iter()
            .copied()
            .filter(|d| self.domains.contains_key(d))
            .collect()
    }

    /// Totals per domain, sorted by total duration (descending).
    pub fn domain_totals(&self) -> Vec<(Domain, Stats)> {
        let mut v: Vec<(Domain, Stats)> = self
            .present()
            .into_iter()
            .map(|d| {
                let mut t = Stats::default();
                for s in self.domains[&d].values() {
                    t.merge(s);
                }
                (d, t)
            })
            .collect();
        v.sort_by(|a, b| b.1.sum.cmp(&a.1.sum).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Writes `<name>_<domain>_stats.csv` for every domain with data and `<name>_domain_stats.csv`.
    pub fn write_csv(&self, out: &mut OutputSet, name: &str) -> Result<()> {
        let mut line = Line::default();
        for d in self.present() {
            let rows = self.sorted(d);
            let total = saturating_total(rows.iter().map(|r| r.1.sum));
            let mut f = out.create(&format!("{name}_{}.csv", d.stats_name()))?;
            f.write_all(STATS_HEADER.as_bytes())?;
            for (n, s) in rows {
                f.write_all(stats_line(&mut line, n, &s, total))?;
            }
            f.finish()?;
        }
        let totals = self.domain_totals();
        if !totals.is_empty() {
            let all = saturating_total(totals.iter().map(|t| t.1.sum));
            let mut f = out.create(&format!("{name}_domain_stats.csv"))?;
            f.write_all(STATS_HEADER.as_bytes())?;
            for (d, s) in totals {
                f.write_all(stats_line(&mut line, d.label(), &s, all))?;
            }
            f.finish()?;
        }
        Ok(())
    }

    /// The terminal report: one table per domain and an overall one, `top` rows each, fitted to
    /// `width` columns.
    pub fn render(&self, top: usize, width: usize) -> String {
        let mut out = String::new();
        let mut overall: Vec<(String, &'static str, Stats)> = Vec::new();
        let mut grand = 0u64;
        for d in self.present() {
            let rows = self.sorted(d);
            let total = saturating_total(rows.iter().map(|r| r.1.sum));
            grand = grand.saturating_add(total);
            let shown: Vec<(String, &'static str, Stats)> = rows
                .iter()
                .take(top)
                .map(|(n, s)| ((*n).to_owned(), d.label(), *s))
                .collect();
            overall.extend(rows.iter().map(|(n, s)| ((*n).to_owned(), d.label(), *s)));
            out.push_str(&format!("\nROCPROFV3 {} SUMMARY:\n\n", d.label()));
            out.push_str(&table(&shown, total, width, rows.len()));
        }
        if !overall.is_empty() {
            overall.sort_by(|a, b| b.2.sum.cmp(&a.2.sum).then_with(|| a.0.cmp(&b.0)));
            let n = overall.len();
            overall.truncate(top);
            out.push_str("\nROCPROFV3 SUMMARY:\n\n");
            out.push_str(&table(&overall, grand, width, n));
        }
        out
    }
}

/// Sum of durations that saturates instead of overflowing (corrupt databases can hold any value).
fn saturating_total(sums: impl Iterator<Item = u64>) -> u64 {
    sums.fold(0, u64::saturating_add)
}

fn stats_line<'l>(line: &'l mut Line, name: &str, s: &Stats, total: u64) -> &'l [u8] {
    let pct = if total == 0 {
        0.0
    } else {
        s.sum as f64 / total as f64 * 100.0
    };
    line.start()
        .s(name)
        .i(s.count as i64)
        .i(s.sum as i64)
        .raw(&stats_double(s.mean()))
        .raw(&stats_percent(pct))
        .i(s.min as i64)
        .i(s.max as i64)
        .raw(&stats_double(s.stddev()))
        .end()
}

/// Columns in the order rocprofv3 prints them; `drop` ranks the ones removed on narrow terminals.
const HEADERS: [(&str, u8); 9] = [
    ("NAME", 0),
    ("DOMAIN", 4),
    ("CALLS", 0),
    ("DURATION (nsec)", 0),
    ("AVERAGE (nsec)", 5),
    ("PERCENT (INC)", 0),
    ("MIN (nsec)", 3),
    ("MAX (nsec)", 2),
    ("STDDEV", 1),
];

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    let keep = width.saturating_sub(1);
    let mut t: String = s.chars().take(keep).collect();
    t.push('…');
    t
}

fn table(
    rows: &[(String, &'static str, Stats)],
    total: u64,
    width: usize,
    all_rows: usize,
) -> String {
    let cells = cells(rows, total);
    let (w, shown) = columns(&cells, width);
    let mut out = String::new();
    let headers: Vec<String> = HEADERS.iter().map(|h| h.0.to_owned()).collect();
    push_row(&mut out, &headers, &shown, &w, true);
    out.push('|');
    for &i in &shown {
        out.push_str(&"-".repeat(w[i]));
        out.push('|');
    }
    out.push('\n');
    for c in &cells {
        push_row(&mut out, c, &shown, &w, false);
    }
    if all_rows > rows.len() {
        out.push_str(&format!(
            "({} more not shown; use --top to see more)\n",
            all_rows - rows.len()
        ));
    }
    out
}

/// The text of each row's cells, in the order of [`HEADERS`].
fn cells(rows: &[(String, &'static str, Stats)], total: u64) -> Vec<[String; 9]> {
    rows.iter()
        .map(|(n, d, s)| {
            let pct = if total == 0 {
                0.0
            } else {
                s.sum as f64 / total as f64 * 100.0
            };
            [
                n.clone(),
                (*d).to_owned(),
                s.count.to_string(),
                s.sum.to_string(),
                c_scientific(s.mean(), 3),
                c_fixed(pct, 6),
                s.min.to_string(),
                s.max.to_string(),
                c_scientific(s.stddev(), 3),
            ]
        })
        .collect()
}

/// The width of every column and the columns shown within `width`: columns are dropped in the
/// order of their priority until the name gets 32 characters (or all it needs), or none is left
/// to drop.
fn columns(cells: &[[String; 9]], width: usize) -> (Vec<usize>, Vec<usize>) {
    let mut w: Vec<usize> = HEADERS
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(h.len())
                + 2
        })
        .collect();
    let mut shown: Vec<usize> = (0..9).collect();
    let name_wanted = w[0];
    loop {
        let fixed: usize = shown.iter().skip(1).map(|&i| w[i]).sum::<usize>() + shown.len() + 1;
        let avail = width.saturating_sub(fixed);
        if avail >= name_wanted.min(32) {
            w[0] = name_wanted.min(avail);
            break;
        }
        let next = shown
            .iter()
            .copied()
            .filter(|&i| HEADERS[i].1 > 0)
            .min_by_key(|&i| HEADERS[i].1);
        match next {
            Some(i) => shown.retain(|&c| c != i),
            None => {
                w[0] = avail.max(10);
                break;
            }
        }
    }
    (w, shown)
}

/// One row of the table: the `shown` columns of `vals`, each `w` wide, centred (the header) or
/// aligned (names left, numbers right).
fn push_row(out: &mut String, vals: &[String], shown: &[usize], w: &[usize], center: bool) {
    out.push('|');
    for &i in shown {
        let cw = w[i];
        let v = truncate(&vals[i], cw.saturating_sub(2));
        let len = v.chars().count();
        let pad = cw.saturating_sub(len);
        if center {
            let left = pad / 2;
            out.push_str(&" ".repeat(left));
            out.push_str(&v);
            out.push_str(&" ".repeat(pad - left));
        } else if i < 2 {
            out.push(' ');
            out.push_str(&v);
            out.push_str(&" ".repeat(pad.saturating_sub(1)));
        } else {
            out.push_str(&" ".repeat(pad.saturating_sub(1)));
            out.push_str(&v);
            out.push(' ');
        }
        out.push('|');
    }
    out.push('\n');
}

/// The width to fit tables to: `$COLUMNS`, else the size of the terminal on stdout, else
/// unlimited (a file or a pipe gets every column and full names).
pub fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return c;
    }
    crate::sys::terminal_columns().unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_follow_rocprofv3_formulas() {
        let mut s = Stats::default();
        for v in [10u64, 20, 30, 40] {
            s.add(v);
        }
        assert_eq!((s.count, s.sum, s.min, s.max), (4, 100, 10, 40));
        assert!((s.stddev() - 12.909944487358056).abs() < 1e-9);
        let mut one = Stats::default();
        one.add(32505687);
        assert_eq!(one.stddev(), 0.0);
        assert_eq!(stats_double(one.mean()), "32505687.000000");
    }

    #[test]
    fn table_fits_the_width() {
        let mut s = Stats::default();
        s.add(5);
        let rows = vec![("a_very_long_kernel_name_".repeat(10), "KERNEL_DISPATCH", s)];
        for width in [60usize, 100, 200] {
            let t = table(&rows, 5, width, 1);
            for l in t.lines() {
                assert!(l.chars().count() <= width, "{width}: {l}");
            }
        }
    }
}
