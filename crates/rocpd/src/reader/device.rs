//! The one reader of kernel dispatches and memory copies, shared by every converter (CSV, JSON,
//! summaries, Perfetto, OTF2): one SQL text per record kind, one row-to-struct mapping
//! ([`dispatch_row`], [`copy_row`]), one streaming callback API, and the time window and id range
//! applied where every stream applies them ([`Source::stream_until`], [`Source::with_ids`]).
//!
//! A converter chooses the order ([`Order`]): id order (the order rocprofv3 writes, and start
//! order per stream in its databases), or start order (an SQL sort, for databases written in
//! another order and for writers that need every location's events sorted). Dispatches may come
//! with their own PMC values, summed per counter.

use std::ops::ControlFlow;

use rusqlite::Row;

use super::rows::KERNEL_EVENT_COL;
use super::rows::{corr, dispatch_row, int, opt, CopyRow, DispatchRow, Event, KERNEL_COLS};
use super::scan::EventCols;
use super::Source;
use crate::error::Result;

/// The order a dispatch or copy stream hands out its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Row id order (= start order per stream in the databases rocprofv3 writes).
    #[default]
    Id,
    /// Start time, then longest first, then id: what slices that must nest need.
    Start,
}

impl Order {
    /// The `ORDER BY` terms for a table aliased `alias`.
    fn sql(self, alias: &str) -> String {
        match self {
            Order::Id => format!("{alias}.id"),
            Order::Start => format!("{alias}.start, {alias}.\"end\" DESC, {alias}.id"),
        }
    }
}

/// The memory-copy columns [`copy_row`] reads, the event id last (column 12).
const COPY_COLS: &str =
    "M.id, M.pid, M.tid, M.start, M.end, M.name_id, M.dst_agent_id, M.dst_address, \
    M.src_agent_id, M.src_address, M.size, M.stream_id, M.event_id";

/// Column of the event id in [`COPY_COLS`].
const COPY_EVENT_COL: usize = 12;

/// A memory copy from the [`COPY_COLS`] columns and its event.
fn copy_row(r: &Row, e: Option<&Event>) -> rusqlite::Result<CopyRow> {
    let id = int(r, 0)?;
    Ok(CopyRow {
        id,
        pid: int(r, 1)?,
        tid: int(r, 2)?,
        start: int(r, 3)?,
        end: int(r, 4)?,
        name_id: opt(r, 5)?,
        dst_agent_id: opt(r, 6)?,
        dst_address: int(r, 7)?,
        src_agent_id: opt(r, 8)?,
        src_address: int(r, 9)?,
        size: int(r, 10)?,
        stream_id: int(r, 11)?,
        category_id: e.and_then(|v| v.category_id),
        corr: corr(e, id),
    })
}

impl Source<'_> {
    /// Every kernel dispatch, in id order.
    pub fn dispatches(&self, mut f: impl FnMut(&DispatchRow) -> Result<()>) -> Result<()> {
        self.dispatch_scan(Order::Id, false, |k, _| f(k).map(ControlFlow::Continue))
            .map(|_| ())
    }

    /// Every kernel dispatch in `order`, each with its PMC values (counter id and value summed
    /// over instances, in counter id order) when `counters` is set, else none. `f` may end the
    /// scan early by returning `Break`, which this returns.
    pub fn dispatch_scan(
        &self,
        order: Order,
        counters: bool,
        mut f: impl FnMut(&DispatchRow, &[(i64, f64)]) -> Result<ControlFlow<()>>,
    ) -> Result<ControlFlow<()>> {
        let Some(k) = self.table("rocpd_kernel_dispatch") else {
            return Ok(ControlFlow::Continue(()));
        };
        let e = self.err();
        let pmc = counters.then(|| self.table("rocpd_pmc_event")).flatten();
        let Some(pe) = pmc else {
            let sql = format!(
                "SELECT {KERNEL_COLS} FROM {k} K{} ORDER BY {}",
                self.id_filter("K"),
                order.sql("K")
            );
            return self.stream_until(&sql, KERNEL_EVENT_COL, EventCols::Full, (8, 9), |r, ev| {
                f(&dispatch_row(r, ev).map_err(&e)?, &[])
            });
        };
        // One row per dispatch and counter; the rows of one dispatch are gathered.
        let sql = format!(
            "SELECT {KERNEL_COLS}, C.pmc_id, C.v FROM {k} K LEFT JOIN (SELECT event_id, pmc_id, \
             SUM(value) AS v FROM {pe} GROUP BY event_id, pmc_id) C ON C.event_id = K.event_id{} \
             ORDER BY {}, C.pmc_id",
            self.id_filter("K"),
            order.sql("K")
        );
        let (pmc_col, value_col) = (KERNEL_EVENT_COL + 1, KERNEL_EVENT_COL + 2);
        let mut cur: Option<DispatchRow> = None;
        let mut values: Vec<(i64, f64)> = Vec::new();
        let flow =
            self.stream_until(&sql, KERNEL_EVENT_COL, EventCols::Full, (8, 9), |r, ev| {
                let id = int(r, 0).map_err(&e)?;
                if let Some(done) = cur.take_if(|c| c.id != id) {
                    let flow = f(&done, &values)?;
                    values.clear();
                    if flow.is_break() {
                        return Ok(flow);
                    }
                }
                if cur.is_none() {
                    cur = Some(dispatch_row(r, ev).map_err(&e)?);
                }
                if let Some(p) = opt(r, pmc_col).map_err(&e)? {
                    let v = r.get::<_, Option<f64>>(value_col).map_err(&e)?;
                    values.push((p, v.unwrap_or(0.0)));
                }
                Ok(ControlFlow::Continue(()))
            })?;
        match cur {
            Some(last) if flow.is_continue() => f(&last, &values),
            _ => Ok(flow),
        }
    }

    /// Every memory copy, in id order.
    pub fn memory_copies(&self, mut f: impl FnMut(&CopyRow) -> Result<()>) -> Result<()> {
        self.copy_scan(Order::Id, |m| f(m).map(ControlFlow::Continue))
            .map(|_| ())
    }

    /// Every memory copy in `order`; `f` may end the scan early by returning `Break`, which this
    /// returns.
    pub fn copy_scan(
        &self,
        order: Order,
        mut f: impl FnMut(&CopyRow) -> Result<ControlFlow<()>>,
    ) -> Result<ControlFlow<()>> {
        let Some(t) = self.table("rocpd_memory_copy") else {
            return Ok(ControlFlow::Continue(()));
        };
        let sql = format!(
            "SELECT {COPY_COLS} FROM {t} M{} ORDER BY {}",
            self.id_filter("M"),
            order.sql("M")
        );
        let e = self.err();
        self.stream_until(&sql, COPY_EVENT_COL, EventCols::Full, (3, 4), |r, ev| {
            f(&copy_row(r, ev).map_err(&e)?)
        })
    }
}
