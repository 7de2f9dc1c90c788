//! `top --spm`: GPU counters sampled over time (CUDA: CUPTI's PM sampling, docs/cuda.md
//! "Sampled counters"). The CUDA tool commits the samples at every tick with the other rows;
//! each refresh reads the new ones by id ([`crate::rocpd::report::live`]) and folds them with
//! the code `summary -f html` uses ([`crate::rocpd::report::spm`]): per counter the mean, min,
//! max and last value of the interval's samples, and SM (GR) activity in % from
//! `sm__cycles_active.avg` (`gr__cycles_active.avg`) over `gpc__cycles_elapsed.max` of the
//! same sample.

use super::model::Model;
use crate::attach::envbuf::EnvList;
use crate::rocpd::report::spm::{figures_rows, Series, SeriesStats, COLUMNS};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The variables a session's `--spm` sets (crates/attach/src/options/hardware.rs).
const VARS: [&str; 3] = [
    "ROCPROF_SPM_COUNTER_COLLECTION",
    "ROCPROF_SPM_COUNTERS",
    "ROCPROFILER_SPM_BETA_ENABLED",
];

/// Sets `env` up for `--spm NAMES` (none: the tool's default set), as a session's `--spm`
/// with `--spm-beta-enabled` does.
pub fn request(env: &mut EnvList, names: &[String]) {
    env.set(VARS[2], "1");
    env.set(VARS[0], "1");
    let names: Vec<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if !names.is_empty() {
        env.set(VARS[1], &format!("spm: {}", names.join(" ")));
    }
}

/// Whether `env` asks for sampled counters.
pub fn asked(env: &EnvList) -> bool {
    env.get(VARS[0]).is_some_and(|v| v == "1")
}

/// `env` without `--spm` (the ROCm sessions of `top`).
pub fn without(env: &EnvList) -> EnvList {
    let mut e = env.clone();
    for v in VARS {
        e.remove(v);
    }
    e
}

/// The sampled counters of one process, per agent name: the last interval's and since the start.
#[derive(Debug, Default)]
pub struct Sampled {
    /// The last interval's samples.
    pub interval: BTreeMap<String, Series>,
    /// Every sample since the view started.
    pub total: BTreeMap<String, Series>,
}

impl Sampled {
    /// Adds one read's samples.
    pub fn add(&mut self, read: &BTreeMap<String, Series>) {
        for (agent, series) in read {
            for into in [&mut self.interval, &mut self.total] {
                let a = into.entry(agent.clone()).or_default();
                for (name, st) in series {
                    a.entry(name.clone()).or_default().merge(st);
                }
            }
        }
    }
}

/// One series of one agent of one process.
#[derive(Debug, Clone)]
pub struct Line {
    /// The process id.
    pub pid: i32,
    /// The agent (`AGENT [1] (GPU)`).
    pub agent: String,
    /// Who it is in a table: the agent, with the process's label when several are watched.
    pub who: String,
    /// The series (`SM active %`, `sm__cycles_active.avg`).
    pub series: String,
    /// The last interval's figures.
    pub interval: SeriesStats,
    /// Since the start.
    pub total: SeriesStats,
}

impl Model {
    /// Every sampled series, in process order, then agent, then series (derived percentages
    /// first).
    pub fn spm_lines(&self) -> Vec<Line> {
        let several = self.procs.len() > 1;
        let mut out = Vec::new();
        for p in &self.procs {
            for (agent, series) in &p.spm.total {
                let who = if several {
                    format!("{}, {agent}", p.label())
                } else {
                    agent.clone()
                };
                for (name, total) in series {
                    let interval = p
                        .spm
                        .interval
                        .get(agent)
                        .and_then(|s| s.get(name))
                        .copied()
                        .unwrap_or_default();
                    out.push(Line {
                        pid: p.pid,
                        agent: agent.clone(),
                        who: who.clone(),
                        series: name.clone(),
                        interval,
                        total: *total,
                    });
                }
            }
        }
        out
    }
}

/// The figures of `l` as a table row (`summary -f html`'s columns: samples, mean, min, max,
/// last, the series and who).
pub fn cells(l: &Line, since_start: bool) -> Vec<String> {
    let mut one = Series::new();
    one.insert(
        l.series.clone(),
        if since_start { l.total } else { l.interval },
    );
    figures_rows(&l.who, &one).pop().unwrap_or_default()
}

/// The batch table of the sampled counters (the last interval's, or with `since_start` every
/// sample's); nothing without `--spm`.
pub fn table(o: &mut String, m: &Model, since_start: bool) {
    if !m.spm {
        return;
    }
    let lines = m.spm_lines();
    let _ = writeln!(
        o,
        "{:>8} {:>12} {:>12} {:>12} {:>12}  {}",
        COLUMNS[0], COLUMNS[1], COLUMNS[2], COLUMNS[3], COLUMNS[4], COLUMNS[5]
    );
    if lines.is_empty() {
        let _ = writeln!(o, "(no sampled counters read yet)");
    }
    for l in &lines {
        let c = cells(l, since_start);
        let _ = writeln!(
            o,
            "{:>8} {:>12} {:>12} {:>12} {:>12}  {}",
            c[0], c[1], c[2], c[3], c[4], c[5]
        );
    }
}

/// The JSON of the sampled counters of process `pid` (docs/json.md): one object per agent and
/// series.
pub fn json(m: &Model, pid: i32, since_start: bool) -> Vec<serde_json::Value> {
    let num = |v: f64| v.is_finite().then_some(v);
    m.spm_lines()
        .into_iter()
        .filter(|l| l.pid == pid)
        .map(|l| {
            let s = if since_start { l.total } else { l.interval };
            let some = s.samples > 0;
            serde_json::json!({
                "agent": l.agent, "series": l.series, "samples": s.samples,
                "mean": s.mean(), "min": num(s.min).filter(|_| some),
                "max": num(s.max).filter(|_| some), "last": num(s.last).filter(|_| some),
            })
        })
        .collect()
}
