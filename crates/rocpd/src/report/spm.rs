//! The figures of sampled counters (`--spm`, table `rocpd_spm_sample`, docs/output.md): per
//! counter the mean, min, max and last value over some samples, and the activity percentages
//! derived from a pair of counters of the same sample (`sm__cycles_active.avg /
//! gpc__cycles_elapsed.max`: SM activity). `summary -f html` (over the whole window) and
//! `rocprof-attach top --spm` (over each interval's new rows, [`crate::report::live`]) compute
//! them here, so the two never disagree.

use std::collections::BTreeMap;

/// The derived series: name, numerator metric, denominator metric (per sample, in %).
pub const DERIVED: [(&str, &str, &str); 2] = [
    (
        "SM active %",
        "sm__cycles_active.avg",
        "gpc__cycles_elapsed.max",
    ),
    (
        "GR active %",
        "gr__cycles_active.avg",
        "gpc__cycles_elapsed.max",
    ),
];

/// One sampled value, as the table holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpmRow {
    /// Agent id (the first GPU).
    pub agent_id: i64,
    /// Start of the sample (ns).
    pub start: i64,
    /// The counter's name (as asked: a rocprofv3 name or an NVIDIA metric).
    pub counter: String,
    /// The NVIDIA metric it was sampled as.
    pub metric: String,
    /// The value (None: CUPTI could not evaluate it).
    pub value: Option<f64>,
}

/// One series over some samples: a counter's values, or a derived percentage. Mergeable: the
/// figures of two stretches merged are those of both read at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesStats {
    /// Samples.
    pub samples: u64,
    /// Sum of the numerators (a counter: its values; a derived series: its numerator
    /// counter's values).
    pub num: f64,
    /// Sum of the denominators (a counter: 1 per sample; a derived series: its denominator
    /// counter's values / 100).
    pub den: f64,
    /// Smallest and largest value of one sample.
    pub min: f64,
    /// Largest value of one sample.
    pub max: f64,
    /// The latest sample's value, and its start (ns).
    pub last: f64,
    /// Start of the latest sample (ns).
    pub last_start: i64,
}

impl Default for SeriesStats {
    fn default() -> Self {
        SeriesStats {
            samples: 0,
            num: 0.0,
            den: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: f64::NAN,
            last_start: i64::MIN,
        }
    }
}

impl SeriesStats {
    /// Adds one sample of value `num / den` starting at `start`.
    fn add(&mut self, start: i64, num: f64, den: f64) {
        let v = num / den;
        self.samples += 1;
        self.num += num;
        self.den += den;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if start >= self.last_start {
            self.last = v;
            self.last_start = start;
        }
    }

    /// The mean: of a counter, its values' mean; of a derived percentage, the sums' ratio (the
    /// activity over all the samples' cycles, not a mean of ratios).
    pub fn mean(&self) -> Option<f64> {
        (self.samples > 0 && self.den != 0.0).then(|| self.num / self.den)
    }

    /// Adds `o`'s samples.
    pub fn merge(&mut self, o: &SeriesStats) {
        if o.samples == 0 {
            return;
        }
        self.samples += o.samples;
        self.num += o.num;
        self.den += o.den;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        if o.last_start >= self.last_start {
            self.last = o.last;
            self.last_start = o.last_start;
        }
    }
}

/// The series of one agent, by name: the counters as named in the table, then the derived
/// percentages ([`DERIVED`]) whose two metrics were sampled.
pub type Series = BTreeMap<String, SeriesStats>;

/// Folds rows into series per agent id. A sample's rows (one per counter, same agent and
/// start) are written together, so every read holds a sample's rows whole.
#[derive(Debug, Default)]
pub struct SpmFold {
    /// The series per agent id.
    pub agents: BTreeMap<i64, Series>,
    /// The sample being gathered: agent, start, metric → value.
    pending: Option<(i64, i64)>,
    metrics: Vec<(String, f64)>,
}

impl SpmFold {
    /// Adds one row (rows of a sample one after the other, as the table holds them).
    pub fn add(&mut self, r: SpmRow) {
        if self.pending != Some((r.agent_id, r.start)) {
            self.close();
            self.pending = Some((r.agent_id, r.start));
        }
        let Some(v) = r.value.filter(|v| v.is_finite()) else {
            return;
        };
        self.agents
            .entry(r.agent_id)
            .or_default()
            .entry(r.counter)
            .or_default()
            .add(r.start, v, 1.0);
        self.metrics.push((r.metric, v));
    }

    /// The derived series of the sample gathered so far.
    fn close(&mut self) {
        let Some((agent, start)) = self.pending.take() else {
            return;
        };
        let metrics = std::mem::take(&mut self.metrics);
        let of = |m: &str| metrics.iter().find(|x| x.0 == m).map(|x| x.1);
        for (name, num, den) in DERIVED {
            if let (Some(n), Some(d)) = (of(num), of(den)) {
                if d > 0.0 {
                    self.agents
                        .entry(agent)
                        .or_default()
                        .entry(name.to_owned())
                        .or_default()
                        .add(start, n, d / 100.0);
                }
            }
        }
    }

    /// The series per agent id, every sample counted.
    pub fn finish(mut self) -> BTreeMap<i64, Series> {
        self.close();
        self.agents
    }
}

/// Whether `tables` (a database's table names) hold the samples' table.
pub fn has_table(tables: &[String]) -> bool {
    tables.iter().any(|t| t == "rocpd_spm_sample")
}

/// A value as the views print it: percentages with 1 decimal, counts with 4 significant
/// digits (`1.98e6` as `1980000`, small ones with decimals).
pub fn value_text(series: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if !v.is_finite() => "-".into(),
        Some(v) if series.ends_with('%') => format!("{v:.1}"),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The columns of [`figures_table`] (and of `top --spm`'s batch table).
pub const COLUMNS: [&str; 6] = ["SAMPLES", "MEAN", "MIN", "MAX", "LAST", "SERIES"];

/// The figures of every series, one row per agent and series: samples, mean, min, max, last
/// (as [`value_text`] prints them), the series' name (with the agent's or process's `who` when
/// it is not the only one).
pub fn figures_rows(who: &str, series: &Series) -> Vec<Vec<String>> {
    series
        .iter()
        .map(|(name, st)| {
            let v = |x: f64| value_text(name, (st.samples > 0).then_some(x));
            vec![
                st.samples.to_string(),
                value_text(name, st.mean()),
                v(st.min),
                v(st.max),
                v(st.last),
                if who.is_empty() {
                    name.clone()
                } else {
                    format!("{name} ({who})")
                },
            ]
        })
        .collect()
}

/// `summary -f html`'s table of the sampled counters of `src` (over `window`): the figures of
/// [`figures_rows`] for every agent; None without samples.
pub fn figures_table(
    src: &crate::reader::Source<'_>,
    window: &crate::window::MaybeWindow,
    label: &str,
) -> Option<crate::report::Table> {
    use crate::report::{Cell, Table};
    let conn = src.input.connection();
    let sql = format!(
        "SELECT agent_id, start, counter, metric, value FROM rocpd_spm_sample S WHERE {} ORDER BY id",
        crate::window::sql(window, "S.start", "S.\"end\"")
    );
    let mut st = conn.prepare(&sql).ok()?;
    let mut fold = SpmFold::default();
    let rows = st
        .query_map([], |r| {
            Ok(SpmRow {
                agent_id: r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                start: r.get(1)?,
                counter: r.get(2)?,
                metric: r.get(3)?,
                value: r.get(4)?,
            })
        })
        .ok()?;
    for r in rows.flatten() {
        fold.add(r);
    }
    let agents = fold.finish();
    if agents.is_empty() {
        return None;
    }
    let dims = src.dims(Default::default()).ok();
    let mut t = Table {
        title: format!("Sampled counters{label}: mean, min, max and last of the samples"),
        columns: COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows: Vec::new(),
    };
    for (a, series) in &agents {
        let who = match &dims {
            Some(d) => crate::pftrace::tracks::agent_name(d, *a, Default::default()),
            None => format!("AGENT [{a}]"),
        };
        for row in figures_rows(&who, series) {
            t.rows.push(row.into_iter().map(Cell::Text).collect());
        }
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(start: i64, metric: &str, value: f64) -> SpmRow {
        SpmRow {
            agent_id: 1,
            start,
            counter: metric.into(),
            metric: metric.into(),
            value: Some(value),
        }
    }

    #[test]
    fn derives_activity_from_the_same_sample_and_merges() {
        let mut f = SpmFold::default();
        for (t, busy) in [(0, 0.0), (10, 990.0), (20, 1980.0)] {
            f.add(row(t, "gpc__cycles_elapsed.max", 1980.0));
            f.add(row(t, "sm__cycles_active.avg", busy));
        }
        let a = f.finish();
        let sm = a[&1]["SM active %"];
        assert_eq!(sm.samples, 3);
        assert!((sm.mean().unwrap() - 50.0).abs() < 1e-9);
        assert_eq!((sm.min, sm.max, sm.last), (0.0, 100.0, 100.0));
        let el = a[&1]["gpc__cycles_elapsed.max"];
        assert_eq!(el.mean(), Some(1980.0));
        // Two stretches merged: the figures of both read at once.
        let mut g = SpmFold::default();
        g.add(row(30, "gpc__cycles_elapsed.max", 3960.0));
        g.add(row(30, "sm__cycles_active.avg", 0.0));
        let mut m = sm;
        m.merge(&g.finish()[&1]["SM active %"]);
        assert!((m.mean().unwrap() - 2970.0 / 9900.0 * 100.0).abs() < 1e-9);
        assert_eq!((m.min, m.max, m.last, m.samples), (0.0, 100.0, 0.0, 4));
        assert!(!a[&1].contains_key("GR active %"), "gr was not sampled");
    }
}
