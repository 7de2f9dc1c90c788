//! Hardware counters in `summary`: per kernel name and counter, the launches counted and the
//! mean, minimum and maximum value (rocpd's `rocpd_pmc_event` rows on kernel dispatches).

use std::collections::BTreeMap;

use super::{Cell, Table};
use crate::csv::kernel_name;
use crate::reader::{Dims, Source};
use crate::window::{self, MaybeWindow};
use crate::{ConvertOptions, Result};

/// One counter's values over the launches of one kernel name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterStats {
    /// Launches with a value.
    pub count: u64,
    /// Sum of the values.
    pub sum: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl CounterStats {
    /// Adds `other`'s values.
    pub fn merge(&mut self, other: &CounterStats) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// `(kernel name, counter name) -> statistics`.
pub type Counters = BTreeMap<(String, String), CounterStats>;

/// The counter statistics of `src`'s dispatches that `w` keeps (none when it has no counters).
pub fn collect(
    src: &Source<'_>,
    dims: &Dims,
    opts: &ConvertOptions,
    w: &MaybeWindow,
) -> Result<Counters> {
    let mut out = Counters::new();
    let (Some(pe), Some(pi), Some(kd)) = (
        src.table("rocpd_pmc_event"),
        src.table("rocpd_info_pmc"),
        src.table("rocpd_kernel_dispatch"),
    ) else {
        return Ok(out);
    };
    let sql = format!(
        "SELECT K.kernel_id, K.region_name_id, PI.name, COUNT(*), SUM(PE.value), MIN(PE.value), MAX(PE.value) \
         FROM {pe} PE JOIN {pi} PI ON PI.id = PE.pmc_id JOIN {kd} K ON K.event_id = PE.event_id \
         WHERE K.pid = ?1 AND {} GROUP BY K.kernel_id, K.region_name_id, PI.name",
        window::sql(w, "K.start", "K.end")
    );
    let conn = src.input.connection();
    let err = |e| crate::reader::read_error(&src.input.path, e);
    let mut st = conn.prepare(&sql).map_err(err)?;
    let rows = st
        .query_map([dims.process.pid], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, String>(2)?,
                CounterStats {
                    count: r.get::<_, i64>(3)? as u64,
                    sum: r.get(4)?,
                    min: r.get(5)?,
                    max: r.get(6)?,
                },
            ))
        })
        .map_err(err)?;
    for row in rows {
        let (kernel, region, counter, s) = row.map_err(err)?;
        let name = kernel_name(dims, kernel, region, opts.kernel_rename).to_owned();
        match out.get_mut(&(name.clone(), counter.clone())) {
            Some(t) => t.merge(&s),
            None => {
                out.insert((name, counter), s);
            }
        }
    }
    Ok(out)
}

/// The `COUNTER SUMMARY` table: kernel, counter, launches, mean, min, max; `None` without
/// counters.
pub fn table(c: &Counters, prefix: &str) -> Option<Table> {
    if c.is_empty() {
        return None;
    }
    let columns = ["Name", "Counter", "Launches", "Mean", "Min", "Max"];
    Some(Table {
        title: format!("{prefix}COUNTER SUMMARY"),
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        rows: c
            .iter()
            .map(|((k, n), s)| {
                vec![
                    Cell::Text(k.clone()),
                    Cell::Text(n.clone()),
                    Cell::Int(s.count as i64),
                    Cell::Real(s.sum / s.count.max(1) as f64),
                    Cell::Real(s.min),
                    Cell::Real(s.max),
                ]
            })
            .collect(),
    })
}
