//! The light streams of a database read while it is written (`rocprof-attach top`,
//! [`crate::report::live`]): the rows of a table from an id on, with only the columns the live
//! view folds, through statements prepared once per connection (SQLite's statement cache).
//!
//! The converters' streams ([`Source::dispatches`], [`Source::api_calls`], ...) hand out every
//! column and merge each table with a scan of `rocpd_event`; the dispatch and copy rows the
//! live view folds need no event, and an API call needs only its event's category, which is
//! looked up by id (the new rows' events are the last pages of the event table, which one read
//! has just visited). The rows and their meaning are those of the full streams: same ids, same
//! decoding of every cell ([`int`], [`opt`]).

use rusqlite::Row;

use super::rows::{int, opt, text};
use super::scan::Track;
use super::{IdMap, Source};
use crate::error::Result;
use crate::report::spm::SpmRow;

/// A kernel dispatch as the live view folds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelTime {
    /// Agent id.
    pub agent_id: i64,
    /// Kernel (symbol) id.
    pub kernel_id: i64,
    /// Region name string id.
    pub region_name_id: Option<i64>,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
}

/// A memory copy as the live view folds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyTime {
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Bytes.
    pub size: i64,
}

/// An API call (region or sample) as the live view folds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallTime {
    /// Row id (regions and samples share their ids).
    pub id: i64,
    /// Thread id.
    pub tid: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Category (kind) string id, from the call's event.
    pub category_id: Option<i64>,
}

impl Source<'_> {
    /// Runs `sql` (one parameter: the first id) through the connection's statement cache and
    /// calls `f` on every row.
    fn each_from(
        &self,
        sql: &str,
        from: i64,
        mut f: impl FnMut(&Row) -> rusqlite::Result<()>,
    ) -> Result<()> {
        let e = self.err();
        let mut stmt = self.input.conn.prepare_cached(sql).map_err(&e)?;
        let mut rows = stmt.query([from]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            f(r).map_err(&e)?;
        }
        Ok(())
    }

    /// The next id to read of table `t` after reading its rows from `from` on: past its highest
    /// id. Inside the read transaction of the rows, so the rows and the id agree; SQLite finds
    /// the highest id at the end of the table's B-tree, where reading it back costs a column
    /// per row.
    fn next_id(&self, t: &str, from: i64) -> Result<i64> {
        let e = self.err();
        let max: Option<i64> = self
            .input
            .conn
            .prepare_cached(&format!("SELECT MAX(id) FROM {t}"))
            .map_err(&e)?
            .query_row([], |r| r.get(0))
            .map_err(&e)?;
        Ok(max.map_or(from, |m| from.max(m.saturating_add(1))))
    }

    /// The kernel dispatches with `id >= from`, in id order (their region name id only with
    /// `region`: without it the name is the symbol's); returns the next id to read.
    pub fn kernel_times(
        &self,
        from: i64,
        region: bool,
        mut f: impl FnMut(&KernelTime),
    ) -> Result<i64> {
        let Some(t) = self.table("rocpd_kernel_dispatch") else {
            return Ok(from);
        };
        let sql = format!(
            "SELECT agent_id, kernel_id, start, \"end\"{} FROM {t} WHERE id >= ?1 ORDER BY id",
            if region { ", region_name_id" } else { "" }
        );
        self.each_from(&sql, from, |r| {
            f(&KernelTime {
                agent_id: int(r, 0)?,
                kernel_id: int(r, 1)?,
                start: int(r, 2)?,
                end: int(r, 3)?,
                region_name_id: if region { opt(r, 4)? } else { None },
            });
            Ok(())
        })?;
        self.next_id(&t, from)
    }

    /// The memory copies with `id >= from`, in id order; returns the next id to read.
    pub fn copy_times(&self, from: i64, mut f: impl FnMut(&CopyTime)) -> Result<i64> {
        let Some(t) = self.table("rocpd_memory_copy") else {
            return Ok(from);
        };
        let sql =
            format!("SELECT name_id, start, \"end\", size FROM {t} WHERE id >= ?1 ORDER BY id");
        self.each_from(&sql, from, |r| {
            f(&CopyTime {
                name_id: opt(r, 0)?,
                start: int(r, 1)?,
                end: int(r, 2)?,
                size: int(r, 3)?,
            });
            Ok(())
        })?;
        self.next_id(&t, from)
    }

    /// The sampled counters' rows (`--spm`, table `rocpd_spm_sample`) with `id >= from`, in id
    /// order (a sample's rows together); returns the next id to read. None without the table.
    pub fn spm_rows(&self, from: i64, mut f: impl FnMut(SpmRow)) -> Result<i64> {
        if !crate::report::spm::has_table(&self.tables) {
            return Ok(from);
        }
        let sql = "SELECT agent_id, start, counter, metric, value FROM rocpd_spm_sample \
                   WHERE id >= ?1 ORDER BY id";
        self.each_from(sql, from, |r| {
            f(SpmRow {
                agent_id: opt(r, 0)?.unwrap_or(0),
                start: int(r, 1)?,
                counter: text(r, 2)?,
                metric: text(r, 3)?,
                value: r.get(4)?,
            });
            Ok(())
        })?;
        self.next_id("rocpd_spm_sample", from)
    }

    /// The API calls (regions, then samples: the order does not matter to statistics) with
    /// `id >= from`. A call whose event is missing has no category, as in
    /// [`Source::api_calls`].
    pub fn call_times(&self, from: i64, mut f: impl FnMut(&CallTime)) -> Result<()> {
        let event = self.table("rocpd_event");
        if let Some(r) = self.table("rocpd_region") {
            let sql = match &event {
                Some(ev) => format!(
                    "SELECT R.id, R.tid, R.start, R.\"end\", R.name_id, E.category_id FROM {r} R \
                     LEFT JOIN {ev} E ON E.id = R.event_id WHERE R.id >= ?1 ORDER BY R.id"
                ),
                None => format!(
                    "SELECT id, tid, start, \"end\", name_id, NULL FROM {r} WHERE id >= ?1 \
                     ORDER BY id"
                ),
            };
            self.each_from(&sql, from, |r| {
                f(&CallTime {
                    id: int(r, 0)?,
                    tid: int(r, 1)?,
                    start: int(r, 2)?,
                    end: int(r, 3)?,
                    name_id: opt(r, 4)?,
                    category_id: opt(r, 5)?,
                });
                Ok(())
            })?;
        }
        self.sample_times(from, event.as_deref(), f)
    }

    /// The samples (API calls of no duration) with `id >= from`, their thread and name from
    /// their track.
    fn sample_times(
        &self,
        from: i64,
        event: Option<&str>,
        mut f: impl FnMut(&CallTime),
    ) -> Result<()> {
        let (Some(s), Some(_)) = (self.table("rocpd_sample"), self.table("rocpd_track")) else {
            return Ok(());
        };
        let sql = match event {
            Some(ev) => format!(
                "SELECT S.id, S.track_id, S.timestamp, E.category_id FROM {s} S \
                 LEFT JOIN {ev} E ON E.id = S.event_id WHERE S.id >= ?1 ORDER BY S.id"
            ),
            None => {
                format!("SELECT id, track_id, timestamp, NULL FROM {s} WHERE id >= ?1 ORDER BY id")
            }
        };
        let mut tracks: Option<IdMap<i64, Track>> = None;
        let mut found: Vec<(i64, i64, i64, Option<i64>)> = Vec::new();
        self.each_from(&sql, from, |r| {
            found.push((int(r, 0)?, int(r, 1)?, int(r, 2)?, opt(r, 3)?));
            Ok(())
        })?;
        for (id, track, ts, category_id) in found {
            let tracks = match &mut tracks {
                Some(t) => t,
                None => tracks.insert(self.tracks()?),
            };
            let (_, tid, name_id) = tracks.get(&track).copied().unwrap_or((0, 0, None));
            f(&CallTime {
                id,
                tid,
                start: ts,
                end: ts,
                name_id,
                category_id,
            });
        }
        Ok(())
    }
}
