//! The row streams: every fact table (dispatches, API regions and samples, copies, allocations,
//! counter values) is read in id order by one statement, and its `rocpd_event` rows by a second
//! statement that scans the event table forward alongside it (a merge scan).
//!
//! rocprofv3 (and our writer) hand out event ids in the order records are written, so within one
//! fact table the event ids ascend with the row ids and both scans only move forward: every
//! database page is read once. Joining `rocpd_event` per row instead would seek from the B-tree's
//! root for every row, and with the bundled SQLite's process-wide page cache two converter
//! threads evict each other's pages between those seeks (about one `pread` per row). Rows whose
//! event lies behind the scan (databases written in another order) fall back to a point lookup,
//! so the result never depends on the order.

use std::ops::ControlFlow;

use rusqlite::{Row, Rows, Statement};

use super::rows::{
    corr, dispatch_row, int, message, opt, text, AllocRow, ApiRow, CounterRow, Event, KERNEL_COLS,
    KERNEL_EVENT_COL,
};
use super::{IdMap, Source};
use crate::error::{Error, Result};

/// The event columns a stream reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventCols {
    /// The category alone (the light scans of `kinds`).
    Category,
    /// Category and correlation ids.
    Full,
    /// Those and the marker message from `extdata`.
    Message,
}

/// The two statements one stream uses to find its events.
struct EventStatements<'c> {
    scan: Statement<'c>,
    point: Statement<'c>,
    cols: EventCols,
}

impl<'c> EventStatements<'c> {
    /// `None` when the source has no event table (every row then has no event).
    fn prepare(src: &Source<'c>, which: EventCols) -> Result<Option<Self>> {
        let Some(t) = src.table("rocpd_event") else {
            return Ok(None);
        };
        let cols = match which {
            EventCols::Category => "id, category_id",
            EventCols::Full => "id, category_id, stack_id, parent_stack_id, correlation_id",
            EventCols::Message => {
                "id, category_id, stack_id, parent_stack_id, correlation_id, extdata"
            }
        };
        let conn = &src.input.conn;
        let e = src.err();
        Ok(Some(EventStatements {
            scan: conn
                .prepare(&format!(
                    "SELECT {cols} FROM {t} WHERE id >= ?1 ORDER BY id"
                ))
                .map_err(&e)?,
            point: conn
                .prepare(&format!("SELECT {cols} FROM {t} WHERE id = ?1"))
                .map_err(&e)?,
            cols: which,
        }))
    }
}

/// Finds events by id for a stream whose event ids (mostly) ascend.
struct EventLookup<'s, 'c> {
    /// The scan statement until the scan starts (at the first id asked for).
    scan_stmt: Option<&'s mut Statement<'c>>,
    scan: Option<Rows<'s>>,
    point: Option<&'s mut Statement<'c>>,
    cols: EventCols,
    /// Where the scan started.
    start: i64,
    /// The id of the event row the scan stands on.
    at: Option<i64>,
    /// The scan has passed the last event.
    done: bool,
    /// The decoded event at `here_id` (the scan's current row).
    here: Event,
    here_id: Option<i64>,
    /// The result of the last point lookup.
    other: Event,
}

impl<'s, 'c> EventLookup<'s, 'c> {
    fn over(stmts: Option<&'s mut EventStatements<'c>>) -> Self {
        let (scan_stmt, point, cols) = match stmts {
            Some(s) => (Some(&mut s.scan), Some(&mut s.point), s.cols),
            None => (None, None, EventCols::Full),
        };
        EventLookup {
            scan_stmt,
            scan: None,
            point,
            cols,
            start: 0,
            at: None,
            done: false,
            here: Event::default(),
            here_id: None,
            other: Event::default(),
        }
    }

    fn decode(r: &Row, cols: EventCols) -> rusqlite::Result<Event> {
        if cols == EventCols::Category {
            return Ok(Event {
                category_id: opt(r, 1)?,
                ..Event::default()
            });
        }
        let mut e = Event::read(r, 1)?;
        if cols == EventCols::Message {
            e.message = message(r, 5)?;
        }
        Ok(e)
    }

    /// The event with id `t`, if there is one.
    fn find(&mut self, t: i64) -> rusqlite::Result<Option<&Event>> {
        if self.here_id == Some(t) {
            return Ok(Some(&self.here));
        }
        if self.scan.is_none() {
            let Some(stmt) = self.scan_stmt.take() else {
                return Ok(None);
            };
            self.scan = Some(stmt.query([t])?);
            self.start = t;
        }
        if t >= self.start && self.at.is_none_or(|a| a < t) {
            // Ahead of the scan: step forward. Ids between the old position and the new one are
            // all seen, so not landing on `t` means there is no such event.
            if !self.done {
                if let Some(rows) = self.scan.as_mut() {
                    loop {
                        let Some(r) = rows.next()? else {
                            self.done = true;
                            break;
                        };
                        let id: i64 = r.get(0)?;
                        self.at = Some(id);
                        if id >= t {
                            self.here = Self::decode(r, self.cols)?;
                            self.here_id = Some(id);
                            break;
                        }
                    }
                }
            }
            return Ok((self.here_id == Some(t)).then_some(&self.here));
        }
        // Behind the scan (or before its start): look it up on its own.
        let Some(point) = self.point.as_mut() else {
            return Ok(None);
        };
        let mut rows = point.query([t])?;
        match rows.next()? {
            Some(r) => {
                self.other = Self::decode(r, self.cols)?;
                Ok(Some(&self.other))
            }
            None => Ok(None),
        }
    }
}

/// A sample track: the thread (pid, tid) and the name id.
pub(super) type Track = (i64, i64, Option<i64>);

/// Calls `f` with the rows of two streams in id order, merged in id order (the first stream's
/// row first on a tie).
fn merge_by_id(
    mut next_a: impl FnMut() -> Result<Option<ApiRow>>,
    mut next_b: impl FnMut() -> Result<Option<ApiRow>>,
    mut f: impl FnMut(&ApiRow) -> Result<()>,
) -> Result<()> {
    let mut a = next_a()?;
    let mut b = next_b()?;
    loop {
        let take_a = match (&a, &b) {
            (Some(x), Some(y)) => x.id <= y.id,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Ok(()),
        };
        if take_a {
            if let Some(x) = a.take() {
                f(&x)?;
            }
            a = next_a()?;
        } else {
            if let Some(y) = b.take() {
                f(&y)?;
            }
            b = next_b()?;
        }
    }
}

/// The next row of `rows` that `decode` keeps (`decode` returns `None` for rows outside the time
/// window).
fn next_kept<T>(
    rows: Option<&mut Rows<'_>>,
    err: &impl Fn(rusqlite::Error) -> Error,
    mut decode: impl FnMut(&Row) -> rusqlite::Result<Option<T>>,
) -> Result<Option<T>> {
    let Some(rows) = rows else {
        return Ok(None);
    };
    while let Some(r) = rows.next().map_err(err)? {
        if let Some(v) = decode(r).map_err(err)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// An API call from its row (id in column 0, event id in `event_col`) and the given cells.
fn api_row(
    r: &Row,
    lookup: &mut EventLookup<'_, '_>,
    (pid, tid, start, end, name_id): (i64, i64, i64, i64, Option<i64>),
    event_col: usize,
) -> rusqlite::Result<ApiRow> {
    let id = int(r, 0)?;
    let ev = match opt(r, event_col)? {
        Some(t) => lookup.find(t)?,
        None => None,
    };
    Ok(ApiRow {
        id,
        pid,
        tid,
        start,
        end,
        name_id,
        category_id: ev.and_then(|v| v.category_id),
        corr: corr(ev, id),
        message: ev.and_then(|v| v.message.clone()),
    })
}

impl Source<'_> {
    /// Runs `sql` (a fact table, its event id in column `event_col` and its start and end in
    /// columns `times`) and calls `f` on every row in the time window with its event. This is the
    /// one place where the time window is applied to the row streams.
    pub(super) fn stream(
        &self,
        sql: &str,
        event_col: usize,
        cols: EventCols,
        times: (usize, usize),
        mut f: impl FnMut(&Row, Option<&Event>) -> Result<()>,
    ) -> Result<()> {
        self.stream_until(sql, event_col, cols, times, |r, ev| {
            f(r, ev).map(|()| ControlFlow::Continue(()))
        })
        .map(|_| ())
    }

    /// [`Source::stream`] whose `f` may end the scan early (`Break`, returned).
    pub(super) fn stream_until(
        &self,
        sql: &str,
        event_col: usize,
        cols: EventCols,
        times: (usize, usize),
        mut f: impl FnMut(&Row, Option<&Event>) -> Result<ControlFlow<()>>,
    ) -> Result<ControlFlow<()>> {
        let _release = self.release_cache_at_end();
        let e = self.err();
        let mut events = EventStatements::prepare(self, cols)?;
        let mut lookup = EventLookup::over(events.as_mut());
        let mut stmt = self.input.conn.prepare(sql).map_err(&e)?;
        let mut rows = stmt.query([]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            if self.window.is_some()
                && !self.keeps(int(r, times.0).map_err(&e)?, int(r, times.1).map_err(&e)?)
            {
                continue;
            }
            let ev = match opt(r, event_col).map_err(&e)? {
                Some(t) => lookup.find(t).map_err(&e)?,
                None => None,
            };
            if f(r, ev)?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Every API call (regions and samples merged), in id (= internal correlation id) order.
    pub fn api_calls(&self, f: impl FnMut(&ApiRow) -> Result<()>) -> Result<()> {
        let _release = self.release_cache_at_end();
        let e = self.err();
        let (region, sample) = self.api_statements()?;
        let tracks = if sample.is_some() {
            self.tracks()?
        } else {
            IdMap::default()
        };
        let mut region_events = EventStatements::prepare(self, EventCols::Message)?;
        let mut sample_events = EventStatements::prepare(self, EventCols::Message)?;
        let mut region_lookup = EventLookup::over(region_events.as_mut());
        let mut sample_lookup = EventLookup::over(sample_events.as_mut());
        let (mut region, mut sample) = (region, sample);
        let mut region_rows = match region.as_mut() {
            Some(s) => Some(s.query([]).map_err(&e)?),
            None => None,
        };
        let mut sample_rows = match sample.as_mut() {
            Some(s) => Some(s.query([]).map_err(&e)?),
            None => None,
        };
        let mut next_region = |rows: Option<&mut Rows<'_>>| {
            next_kept(rows, &e, |r| {
                let cols = (int(r, 1)?, int(r, 2)?, int(r, 3)?, int(r, 4)?, opt(r, 5)?);
                if !self.keeps(cols.2, cols.3) {
                    return Ok(None);
                }
                api_row(r, &mut region_lookup, cols, 6).map(Some)
            })
        };
        let mut next_sample = |rows: Option<&mut Rows<'_>>| {
            next_kept(rows, &e, |r| {
                let (track, ts) = (int(r, 1)?, int(r, 2)?);
                if !self.keeps(ts, ts) {
                    return Ok(None);
                }
                let (pid, tid, name) = tracks.get(&track).copied().unwrap_or((0, 0, None));
                api_row(r, &mut sample_lookup, (pid, tid, ts, ts, name), 3).map(Some)
            })
        };
        merge_by_id(
            || next_region(region_rows.as_mut()),
            || next_sample(sample_rows.as_mut()),
            f,
        )
    }

    /// The statements over the regions and the samples (these only with their tracks), by id.
    fn api_statements(&self) -> Result<(Option<Statement<'_>>, Option<Statement<'_>>)> {
        let e = self.err();
        let conn = &self.input.conn;
        let region = match self.table("rocpd_region") {
            Some(t) => Some(
                conn.prepare(&format!(
                    "SELECT R.id, R.pid, R.tid, R.start, R.end, R.name_id, R.event_id FROM {t} R{} ORDER BY R.id",
                    self.id_filter("R")
                ))
                .map_err(&e)?,
            ),
            None => None,
        };
        let sample = match (self.table("rocpd_sample"), self.table("rocpd_track")) {
            (Some(s), Some(_)) => Some(
                conn.prepare(&format!(
                    "SELECT S.id, S.track_id, S.timestamp, S.event_id FROM {s} S{} ORDER BY S.id",
                    self.id_filter("S")
                ))
                .map_err(&e)?,
            ),
            _ => None,
        };
        Ok((region, sample))
    }

    /// The sample tracks: per id, the thread (pid, tid) and name id. Tracks (one per thread and
    /// name) are few: they are kept in memory.
    pub(super) fn tracks(&self) -> Result<IdMap<i64, Track>> {
        let e = self.err();
        let mut tracks: IdMap<i64, Track> = IdMap::default();
        if let Some(t) = self.table("rocpd_track") {
            self.each(&format!("SELECT id, pid, tid, name_id FROM {t}"), |r| {
                let row = (|| -> rusqlite::Result<_> {
                    Ok((int(r, 0)?, (int(r, 1)?, int(r, 2)?, opt(r, 3)?)))
                })()
                .map_err(&e)?;
                tracks.insert(row.0, row.1);
                Ok(())
            })?;
        }
        Ok(tracks)
    }

    /// Every memory and scratch allocation, in id order.
    pub fn memory_allocations(&self, mut f: impl FnMut(&AllocRow) -> Result<()>) -> Result<()> {
        let Some(t) = self.table("rocpd_memory_allocate") else {
            return Ok(());
        };
        let sql = format!(
            "SELECT M.id, M.pid, M.tid, M.agent_id, M.type, M.level, M.start, M.end, M.address, M.size, M.queue_id, \
             M.stream_id, JSON_EXTRACT(M.extdata, '$.flags'), M.event_id FROM {t} M{} ORDER BY M.id",
            self.id_filter("M")
        );
        let e = self.err();
        self.stream(&sql, 13, EventCols::Full, (6, 7), |r, ev| {
            let row = (|| -> rusqlite::Result<AllocRow> {
                let id = int(r, 0)?;
                let kind = text(r, 4)?;
                let level = text(r, 5)?;
                let flags = text(r, 12)?.trim().parse::<i64>().unwrap_or(0);
                Ok(AllocRow {
                    id,
                    pid: int(r, 1)?,
                    tid: int(r, 2)?,
                    agent_id: opt(r, 3)?,
                    operation: crate::model::allocation_operation(&kind, &level),
                    scratch: level == "SCRATCH",
                    start: int(r, 6)?,
                    end: int(r, 7)?,
                    address: int(r, 8)?,
                    size: int(r, 9)?,
                    queue_id: int(r, 10)?,
                    stream_id: int(r, 11)?,
                    flags,
                    category_id: ev.and_then(|v| v.category_id),
                    corr: corr(ev, id),
                })
            })()
            .map_err(&e)?;
            f(&row)
        })
    }

    /// Counter values summed per (dispatch, counter), in dispatch then counter id order.
    pub fn counters(&self, mut f: impl FnMut(&CounterRow) -> Result<()>) -> Result<()> {
        let (Some(k), Some(pe)) = (
            self.table("rocpd_kernel_dispatch"),
            self.table("rocpd_pmc_event"),
        ) else {
            return Ok(());
        };
        if !self.has_rows("rocpd_pmc_event")? {
            // Without counter values the join below would still walk every dispatch.
            return Ok(());
        }
        let sql = format!(
            "SELECT {KERNEL_COLS}, PE.pmc_id, SUM(PE.value) FROM {k} K JOIN {pe} PE ON PE.event_id = K.event_id \
             GROUP BY K.id, PE.pmc_id ORDER BY K.id, PE.pmc_id"
        );
        let e = self.err();
        let value_col = KERNEL_EVENT_COL + 2;
        self.stream(&sql, KERNEL_EVENT_COL, EventCols::Full, (8, 9), |r, ev| {
            let row = (|| -> rusqlite::Result<CounterRow> {
                Ok(CounterRow {
                    dispatch: dispatch_row(r, ev)?,
                    pmc_id: int(r, KERNEL_EVENT_COL + 1)?,
                    value: r.get::<_, Option<f64>>(value_col)?.unwrap_or(0.0),
                })
            })()
            .map_err(&e)?;
            f(&row)
        })
    }
}
