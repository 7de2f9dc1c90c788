//! Time windows (`--start/--end`, `--start-marker/--end-marker`, `--inclusive`) for `convert`,
//! `summary` and `query`, as ROCm's `rocpd` has them.
//!
//! A [`WindowSpec`] is what the user typed; [`WindowSpec::resolve`] turns it into absolute
//! nanosecond bounds over the inputs (a [`Window`]), which every converter applies to each event's
//! `[start, end]`:
//!
//! * `N%` is a percentage of the span from the earliest start to the latest end of every region,
//!   sample, kernel dispatch, memory copy and allocation of all inputs (rocpd's `time_window.py`);
//!   a plain integer is an absolute timestamp in ns (CLOCK_BOOTTIME, as stored).
//! * `--start-marker NAME` starts the window at the start of the earliest ROCTx marker or range
//!   whose message (or operation name) is `NAME`; `--end-marker NAME` ends it at the end of the
//!   latest one. A marker that does not exist is an error naming the markers that do.
//! * Without `--inclusive` only events entirely inside the window are kept; with it, events that
//!   overlap the window at all are kept. This follows rocpd's help text; rocpd's code does the
//!   opposite (see docs/output.md).

use super::reader::{Source, TimeWindow};
use crate::{Error, Result};

/// One bound as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Percent of the trace's span (0–100).
    Percent(f64),
    /// Absolute timestamp in ns.
    Ns(i64),
}

impl std::str::FromStr for Bound {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Bound, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| {
                format!("'{s}' is not a percentage; write e.g. 25% (0% to 100% of the trace)")
            })?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("'{s}' is outside 0%..100%"));
            }
            return Ok(Bound::Percent(v));
        }
        t.parse::<i64>().map(Bound::Ns).map_err(|_| {
            format!("'{s}' is neither a percentage (25%) nor a timestamp in ns (1234567890)")
        })
    }
}

/// The window options as given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowSpec {
    /// `--start`.
    pub start: Option<Bound>,
    /// `--end`.
    pub end: Option<Bound>,
    /// `--start-marker`.
    pub start_marker: Option<String>,
    /// `--end-marker`.
    pub end_marker: Option<String>,
    /// `--inclusive`: keep events that overlap the window, not only those inside it.
    pub inclusive: bool,
}

/// Resolved window bounds in ns (both inclusive): the reader's [`TimeWindow`], which every row
/// stream applies.
pub type Window = TimeWindow;

impl TimeWindow {
    /// An SQL condition on the columns `start_col`/`end_col` equivalent to [`Window::keeps`].
    pub fn sql(&self, start_col: &str, end_col: &str) -> String {
        if self.inclusive {
            format!(
                "({end_col} >= {} AND {start_col} <= {})",
                self.start, self.end
            )
        } else {
            format!(
                "({start_col} >= {} AND {end_col} <= {})",
                self.start, self.end
            )
        }
    }

    /// Human-readable bounds, for messages.
    pub fn describe(&self) -> String {
        format!(
            "[{}, {}] ns ({})",
            self.start,
            self.end,
            if self.inclusive {
                "events overlapping it"
            } else {
                "events entirely inside it; --inclusive also keeps those overlapping its edges"
            }
        )
    }
}

/// An optional window: `None` keeps everything.
pub type MaybeWindow = Option<Window>;

/// Whether an event is kept by an optional window.
#[inline]
pub fn keeps(w: &MaybeWindow, start: i64, end: i64) -> bool {
    w.as_ref().is_none_or(|w| w.keeps(start, end))
}

/// The SQL condition for an optional window (`1` when there is none).
pub fn sql(w: &MaybeWindow, start_col: &str, end_col: &str) -> String {
    match w {
        Some(w) => w.sql(start_col, end_col),
        None => "1".to_owned(),
    }
}

/// The earliest start and latest end over every timed table of `src`.
pub fn extent(src: &Source<'_>) -> Result<Option<(i64, i64)>> {
    let conn = src.input.connection();
    let err = |e| super::reader::read_error(&src.input.path, e);
    let mut parts = Vec::new();
    for (t, s, e) in [
        ("rocpd_region", "start", "end"),
        ("rocpd_sample", "timestamp", "timestamp"),
        ("rocpd_kernel_dispatch", "start", "end"),
        ("rocpd_memory_copy", "start", "end"),
        ("rocpd_memory_allocate", "start", "end"),
    ] {
        if let Some(name) = src.table(t) {
            parts.push(format!(
                "SELECT MIN(\"{s}\") AS a, MAX(\"{e}\") AS b FROM {name}"
            ));
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let sql = format!("SELECT MIN(a), MAX(b) FROM ({})", parts.join(" UNION ALL "));
    let (a, b): (Option<i64>, Option<i64>) = conn
        .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(err)?;
    Ok(a.zip(b))
}

/// Start (earliest) or end (latest) of the markers named `name` in `src`, and the marker names
/// seen (for the error message).
fn marker(src: &Source<'_>, name: &str, first: bool) -> Result<Option<i64>> {
    let conn = src.input.connection();
    let err = |e| super::reader::read_error(&src.input.path, e);
    let (Some(strings), Some(events)) = (src.table("rocpd_string"), src.table("rocpd_event"))
    else {
        return Ok(None);
    };
    let agg = if first { "MIN" } else { "MAX" };
    let mut parts = Vec::new();
    if let Some(r) = src.table("rocpd_region") {
        parts.push(format!(
            "SELECT {agg}(R.\"{col}\") AS t FROM {r} R JOIN {events} E ON E.id = R.event_id \
             JOIN {strings} C ON C.id = E.category_id LEFT JOIN {strings} N ON N.id = R.name_id \
             WHERE C.string LIKE 'MARKER%' AND (JSON_EXTRACT(E.extdata, '$.message') = ?1 OR N.string = ?1)",
            col = if first { "start" } else { "end" }
        ));
    }
    if let (Some(s), Some(t)) = (src.table("rocpd_sample"), src.table("rocpd_track")) {
        parts.push(format!(
            "SELECT {agg}(S.timestamp) AS t FROM {s} S JOIN {events} E ON E.id = S.event_id \
             JOIN {strings} C ON C.id = E.category_id LEFT JOIN {t} T ON T.id = S.track_id \
             LEFT JOIN {strings} N ON N.id = T.name_id \
             WHERE C.string LIKE 'MARKER%' AND (JSON_EXTRACT(E.extdata, '$.message') = ?1 OR N.string = ?1)"
        ));
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let sql = format!("SELECT {agg}(t) FROM ({})", parts.join(" UNION ALL "));
    conn.query_row(&sql, [name], |r| r.get::<_, Option<i64>>(0))
        .map_err(err)
}

/// Up to `max` distinct marker messages of `src` (for "unknown marker" errors).
fn marker_names(src: &Source<'_>, max: usize) -> Vec<String> {
    let conn = src.input.connection();
    let (Some(events), Some(strings)) = (src.table("rocpd_event"), src.table("rocpd_string"))
    else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    if let Some(r) = src.table("rocpd_region") {
        parts.push(format!(
            "SELECT COALESCE(JSON_EXTRACT(E.extdata, '$.message'), N.string) AS m FROM {r} R \
             JOIN {events} E ON E.id = R.event_id JOIN {strings} C ON C.id = E.category_id \
             LEFT JOIN {strings} N ON N.id = R.name_id WHERE C.string LIKE 'MARKER%'"
        ));
    }
    if let (Some(s), Some(t)) = (src.table("rocpd_sample"), src.table("rocpd_track")) {
        parts.push(format!(
            "SELECT COALESCE(JSON_EXTRACT(E.extdata, '$.message'), N.string) AS m FROM {s} S \
             JOIN {events} E ON E.id = S.event_id JOIN {strings} C ON C.id = E.category_id \
             LEFT JOIN {t} T ON T.id = S.track_id LEFT JOIN {strings} N ON N.id = T.name_id \
             WHERE C.string LIKE 'MARKER%'"
        ));
    }
    if parts.is_empty() {
        return Vec::new();
    }
    let sql = format!(
        "SELECT DISTINCT m FROM ({}) LIMIT {max}",
        parts.join(" UNION ALL ")
    );
    let Ok(mut stmt) = conn.prepare(&sql) else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get::<_, Option<String>>(0))
        .map(|rows| rows.filter_map(|r| r.ok().flatten()).collect())
        .unwrap_or_default()
}

impl WindowSpec {
    /// Whether any window option was given.
    pub fn is_set(&self) -> bool {
        self.start.is_some()
            || self.end.is_some()
            || self.start_marker.is_some()
            || self.end_marker.is_some()
    }

    /// Resolves the bounds over `sources`; `None` when no window was asked for.
    pub fn resolve(&self, sources: &[Source<'_>]) -> Result<MaybeWindow> {
        if !self.is_set() {
            return Ok(None);
        }
        if self.start.is_some() && self.start_marker.is_some() {
            return Err(Error::usage(
                "--start and --start-marker both set the window's start; give one of them",
            ));
        }
        if self.end.is_some() && self.end_marker.is_some() {
            return Err(Error::usage(
                "--end and --end-marker both set the window's end; give one of them",
            ));
        }
        let needs_extent = matches!(self.start, Some(Bound::Percent(_)) | None)
            || matches!(self.end, Some(Bound::Percent(_)) | None);
        let (lo, hi) = if needs_extent {
            span(sources)?
        } else {
            (i64::MIN, i64::MAX)
        };
        let at = |b: Bound| match b {
            Bound::Ns(v) => v,
            Bound::Percent(p) => lo + (((hi - lo) as f64) * p / 100.0).round() as i64,
        };
        let start = match (&self.start, &self.start_marker) {
            (Some(b), _) => at(*b),
            (None, Some(m)) => find_marker(sources, m, true)?,
            (None, None) => lo,
        };
        let end = match (&self.end, &self.end_marker) {
            (Some(b), _) => at(*b),
            (None, Some(m)) => find_marker(sources, m, false)?,
            (None, None) => hi,
        };
        if start > end {
            return Err(Error::usage(format!(
                "empty time window: it starts at {start} ns, after its end at {end} ns; swap or correct --start/--end \
                 (the trace spans [{lo}, {hi}] ns)"
            )));
        }
        Ok(Some(Window {
            start,
            end,
            inclusive: self.inclusive,
        }))
    }
}

/// The time span of the events of all `sources`; an error when they hold none.
fn span(sources: &[Source<'_>]) -> Result<(i64, i64)> {
    let mut span: Option<(i64, i64)> = None;
    for s in sources {
        if let Some((a, b)) = extent(s)? {
            span = Some(match span {
                Some((x, y)) => (x.min(a), y.max(b)),
                None => (a, b),
            });
        }
    }
    span.ok_or_else(|| {
        Error::usage(
            "empty time window: the input holds no events at all, so no window can select any; drop \
             --start/--end/--start-marker/--end-marker",
        )
    })
}

/// The time of marker `name` over all `sources`: its earliest start when `first`, else its
/// latest end; an error naming the markers there are when none has that name.
fn find_marker(sources: &[Source<'_>], name: &str, first: bool) -> Result<i64> {
    let mut best: Option<i64> = None;
    for s in sources {
        if let Some(t) = marker(s, name, first)? {
            best = Some(match best {
                Some(b) if first => b.min(t),
                Some(b) => b.max(t),
                None => t,
            });
        }
    }
    best.ok_or_else(|| {
        let mut known: Vec<String> = sources.iter().flat_map(|s| marker_names(s, 10)).collect();
        known.sort();
        known.dedup();
        known.truncate(10);
        let hint = if known.is_empty() {
            "the input has no ROCTx markers at all (profile with --marker-trace)".to_owned()
        } else {
            format!("markers present: {}", known.join(", "))
        };
        Error::usage(format!("unknown marker '{name}'; {hint}"))
    })
}

/// The error for a window that selected nothing.
pub fn empty(w: &Window) -> Error {
    Error::usage(format!(
        "empty time window: {} selects no events; widen --start/--end or add --inclusive",
        w.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse() {
        assert_eq!("25%".parse::<Bound>(), Ok(Bound::Percent(25.0)));
        assert_eq!("123".parse::<Bound>(), Ok(Bound::Ns(123)));
        assert!("101%".parse::<Bound>().is_err());
        assert!("abc".parse::<Bound>().is_err());
    }

    #[test]
    fn inclusive_keeps_overlaps() {
        let w = Window {
            start: 10,
            end: 20,
            inclusive: false,
        };
        assert!(w.keeps(10, 20) && !w.keeps(5, 15) && !w.keeps(15, 25));
        let w = Window {
            inclusive: true,
            ..w
        };
        assert!(w.keeps(5, 15) && w.keeps(15, 25) && !w.keeps(0, 9) && !w.keeps(21, 30));
    }
}
