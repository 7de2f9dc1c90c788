//! Opens rocpd databases (one per process, as ROCm 7.0+ writes them, or merged ones holding several
//! processes), validates them, and streams their rows.
//!
//! A database holds one *source* per `rocpd_metadata<suffix>` table; each source is one process
//! whose physical tables carry that suffix. Small dimension tables (strings, agents, kernel
//! symbols, counters) are loaded into memory; the large ones (dispatches, API calls, copies,
//! allocations, counter values) are iterated in id order straight from SQLite, so memory does not
//! grow with the number of rows. Columns are selected by name, so extra columns and tables of
//! later schema revisions are ignored.
//!
//! * this module: opening and validating databases, [`Source`] and its [`TimeWindow`];
//! * `dims`: the in-memory dimension tables ([`Dims`]);
//! * `rows`: the row types the streams hand out ([`DispatchRow`], [`ApiRow`], ...);
//! * `scan`: the streams themselves, each a scan of one fact table merged with a scan of
//!   `rocpd_event`, with the time window applied;
//! * `tail`: the light streams of a database read while it is written (`top`): a few columns
//!   from an id on ([`KernelTime`], [`CopyTime`], [`CallTime`]);
//! * `device`: the one reader of kernel dispatches and memory copies every converter uses
//!   ([`Source::dispatch_scan`], [`Source::copy_scan`]).

mod device;
mod dims;
mod kinds;
mod rows;
mod scan;
mod tail;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, Row};

use super::schema::SCHEMA_VERSION;
use crate::error::{Error, Result};

pub use device::Order;
pub use dims::{AgentInfo, Dims, IdHasher, IdMap, NodeValue, PmcInfo, ProcessInfo, SymbolInfo};
pub(crate) use rows::roctx_message;
pub use rows::{AllocRow, ApiRow, CopyRow, CounterRow, DispatchRow};
pub use tail::{CallTime, CopyTime, KernelTime};

/// How `Agent_Id` cells are labelled (rocprofv3 `--agent-index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentIndex {
    /// `Agent <logical index>` (rocprofv3's default).
    #[default]
    Relative,
    /// `Agent <absolute node index>`.
    Absolute,
    /// `GPU <n>` / `CPU <n>`, counted per agent type.
    TypeRelative,
}

/// One validated input database.
pub struct Input {
    /// Path as given.
    pub path: PathBuf,
    conn: Connection,
    /// The processes stored in it.
    pub sources: Vec<SourceInfo>,
}

/// Identity of one process stored in a database.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// Physical table-name suffix (`_<uuid>`, or empty).
    pub suffix: String,
    /// The process GUID.
    pub guid: String,
    /// The `schema_version` metadata value.
    pub schema_version: String,
    /// When the process's session began (`rocpd_info_process.start`; 0 if unknown): orders two
    /// sessions of one process (same GUID) in time.
    pub start: i64,
}

/// One process of one input: the unit the converters iterate over.
#[derive(Clone)]
pub struct Source<'a> {
    /// The database it lives in.
    pub input: &'a Input,
    /// Its identity.
    pub info: &'a SourceInfo,
    tables: Vec<String>,
    window: Option<TimeWindow>,
    /// Only rows with `lo <= id < hi` (see [`Source::with_ids`]).
    ids: Option<(i64, i64)>,
}

/// A time range in nanoseconds (the database's clock, `CLOCK_BOOTTIME` as rocprofv3 stores it),
/// both ends inclusive. A [`Source`] with a window hands out only the rows that lie entirely
/// inside it (`start >= self.start && end <= self.end`), or with `inclusive` the rows that
/// overlap it; counter rows follow their dispatch. `--start/--end/...` are resolved to one by
/// [`crate::window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// First nanosecond kept.
    pub start: i64,
    /// Last nanosecond kept.
    pub end: i64,
    /// Keep rows that overlap the window, not only those inside it (`--inclusive`).
    pub inclusive: bool,
}

impl TimeWindow {
    /// Whether a record spanning `[start, end]` is kept.
    pub fn keeps(&self, start: i64, end: i64) -> bool {
        if self.inclusive {
            end >= self.start && start <= self.end
        } else {
            start >= self.start && end <= self.end
        }
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::BadInput {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Maps an SQLite error met while reading `path` to a user-facing error.
pub fn read_error(path: &Path, e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode::*;
    match e.sqlite_error_code() {
        Some(DatabaseCorrupt) | Some(NotADatabase) => bad(
            path,
            "the database is corrupt or truncated (SQLite: database disk image is malformed); copy it again from the \
             profiled machine or re-run the profiling session",
        ),
        Some(CannotOpen) | Some(PermissionDenied) | Some(ReadOnly) => {
            bad(path, format!("cannot open the database ({e}); check the path and its permissions"))
        }
        _ => Error::Sqlite(e),
    }
}

/// Checks the SQLite header: magic string, and that the file holds as many pages as it claims.
fn check_header(path: &Path) -> Result<()> {
    let mut f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            bad(path, "no such file; check the path of the rocpd database")
        }
        _ => bad(
            path,
            format!("cannot open: {e}; check the file's permissions"),
        ),
    })?;
    let meta = f
        .metadata()
        .map_err(|e| bad(path, format!("cannot stat: {e}")))?;
    if meta.is_dir() {
        return Err(bad(
            path,
            "is a directory; pass the rocpd `*_results.db` files inside it",
        ));
    }
    let mut hdr = [0u8; 100];
    let mut n = 0;
    while n < hdr.len() {
        match f.read(&mut hdr[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(bad(path, format!("cannot read: {e}"))),
        }
    }
    if n < 16 || &hdr[..16] != b"SQLite format 3\0" {
        return Err(bad(
            path,
            "not a SQLite database; pass the rocpd `*_results.db` file(s) that rocprofv3 (ROCm 7.0 or later) writes",
        ));
    }
    if n < 100 {
        return Err(bad(
            path,
            "truncated SQLite header; copy the database again or re-run the profiling session",
        ));
    }
    let page_size = match u16::from_be_bytes([hdr[16], hdr[17]]) {
        1 => 65536u64,
        p => u64::from(p),
    };
    let pages = u64::from(u32::from_be_bytes([hdr[28], hdr[29], hdr[30], hdr[31]]));
    let header_size_valid = hdr[24..28] == hdr[92..96] && pages > 0;
    if header_size_valid && meta.len() < page_size * pages {
        return Err(bad(
            path,
            format!(
                "truncated: the SQLite header announces {} bytes but the file has {}; the copy or the profiling run was \
                 interrupted — copy the database again or re-run the session",
                page_size * pages,
                meta.len()
            ),
        ));
    }
    Ok(())
}

/// The settings of every read-only connection: an 8 MiB page cache, temporary tables on disk.
/// (Memory-mapped reads would save the `pread` copies, about a fifth of a conversion's CPU, but
/// the mapped pages count in the resident size, which then grows with the database.)
const PRAGMAS: &str = "PRAGMA cache_size = -8192; PRAGMA temp_store = FILE;";

impl Input {
    /// Opens and validates one database (read-only).
    pub fn open(path: &Path) -> Result<Input> {
        tune_sqlite();
        check_header(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| read_error(path, e))?;
        conn.execute_batch(PRAGMAS)
            .map_err(|e| read_error(path, e))?;
        let tables = table_names(&conn).map_err(|e| read_error(path, e))?;
        let mut sources = Vec::new();
        for t in tables.iter().filter(|t| t.starts_with("rocpd_metadata")) {
            let suffix = t["rocpd_metadata".len()..].to_owned();
            let mut stmt = conn
                .prepare(&format!("SELECT tag, value FROM \"{t}\""))
                .map_err(|e| read_error(path, e))?;
            let mut rows = stmt.query([]).map_err(|e| read_error(path, e))?;
            let (mut version, mut guid) = (None, None);
            while let Some(r) = rows.next().map_err(|e| read_error(path, e))? {
                let tag: String = r.get(0).map_err(|e| read_error(path, e))?;
                let value: String = r.get(1).map_err(|e| read_error(path, e))?;
                match tag.as_str() {
                    "schema_version" => version = Some(value),
                    "guid" => guid = Some(value),
                    _ => {}
                }
            }
            let version = version.ok_or_else(|| {
                bad(
                    path,
                    format!("table {t} has no schema_version row; the database is incomplete"),
                )
            })?;
            if version.split('.').next() != Some(SCHEMA_VERSION) {
                return Err(bad(
                    path,
                    format!(
                        "unsupported rocpd schema version '{version}': this build reads version {SCHEMA_VERSION} (ROCm 7.0 and \
                         later); convert it with the `rocpd` tool of the ROCm release that wrote it"
                    ),
                ));
            }
            let guid = guid.unwrap_or_else(|| suffix.trim_start_matches('_').replace('_', "-"));
            let start = conn
                .query_row(
                    &format!("SELECT min(start) FROM \"rocpd_info_process{suffix}\""),
                    [],
                    |r| r.get::<_, Option<i64>>(0),
                )
                .ok()
                .flatten()
                .unwrap_or(0);
            sources.push(SourceInfo {
                suffix,
                guid,
                schema_version: version,
                start,
            });
        }
        if sources.is_empty() {
            return Err(bad(
                path,
                "a SQLite database but not a rocpd one (no rocpd_metadata table); pass the `*_results.db` files rocprofv3 writes \
                 with --output-format rocpd",
            ));
        }
        sources.sort_by(|a, b| (&a.guid, a.start).cmp(&(&b.guid, b.start)));
        Ok(Input {
            path: path.to_path_buf(),
            conn,
            sources,
        })
    }

    /// A second read-only connection to the same file (for converting tables in parallel).
    pub fn reopen(&self) -> Result<Input> {
        self.reopen_with(PRAGMAS)
    }

    /// A read-only connection for one of several threads reading a table in id ranges
    /// ([`crate::par`]): its scans move forward, so a 1 MiB page cache does (memory then
    /// stays flat in the number of threads).
    pub fn reopen_for_ranges(&self) -> Result<Input> {
        self.reopen_with("PRAGMA cache_size = -1024; PRAGMA temp_store = FILE;")
    }

    fn reopen_with(&self, pragmas: &str) -> Result<Input> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| read_error(&self.path, e))?;
        conn.execute_batch(pragmas)
            .map_err(|e| read_error(&self.path, e))?;
        Ok(Input {
            path: self.path.clone(),
            conn,
            sources: self.sources.clone(),
        })
    }

    /// The read-only connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The source for one process of this database.
    pub fn source_for<'s>(&'s self, info: &'s SourceInfo) -> Result<Source<'s>> {
        let tables = table_names(&self.conn).map_err(|e| read_error(&self.path, e))?;
        Ok(Source {
            input: self,
            info,
            tables,
            window: None,
            ids: None,
        })
    }

    /// The processes of this database as iterable sources.
    pub fn sources(&self) -> Result<Vec<Source<'_>>> {
        Ok(self.sources_in(&self.table_names()?))
    }

    /// The names of the database's tables (what [`Input::sources_in`] takes).
    pub fn table_names(&self) -> Result<Vec<String>> {
        table_names(&self.conn).map_err(|e| read_error(&self.path, e))
    }

    /// The processes of this database as iterable sources, given its tables (read before with
    /// [`Input::table_names`]: a reader of a file being written reads them again only when its
    /// schema changes).
    pub fn sources_in(&self, tables: &[String]) -> Vec<Source<'_>> {
        self.sources
            .iter()
            .map(|info| Source {
                input: self,
                info,
                tables: tables.to_vec(),
                window: None,
                ids: None,
            })
            .collect()
    }
}

fn table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

/// Opens several databases; rejects a database given twice (the same file by two paths, or two
/// identical copies). Two databases that hold the same process (its GUID) but are different
/// files are two sessions of that process (a reattach): both are read, in time order.
pub fn open_all(paths: &[PathBuf]) -> Result<Vec<Input>> {
    if paths.is_empty() {
        return Err(Error::usage(
            "no input database given; pass one or more rocpd `*_results.db` files with -i",
        ));
    }
    let inputs = paths
        .iter()
        .map(|p| Input::open(p))
        .collect::<Result<Vec<_>>>()?;
    let mut seen: HashMap<&str, Vec<&Path>> = HashMap::new();
    for input in &inputs {
        for s in &input.sources {
            let earlier = seen.entry(&s.guid).or_default();
            if let Some(prev) = earlier.iter().find(|prev| same_database(prev, &input.path)) {
                return Err(Error::usage(format!(
                    "{} and {} are the same database (process {}, {}); pass each database once",
                    prev.display(),
                    input.path.display(),
                    s.guid,
                    if same_file(prev, &input.path) {
                        "one file by two paths"
                    } else {
                        "identical contents"
                    }
                )));
            }
            earlier.push(&input.path);
        }
    }
    Ok(inputs)
}

/// Whether `a` and `b` name one file (same device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Whether `a` and `b` are one file or byte-identical copies (compared in 1 MiB blocks, up to
/// the first difference: two sessions of a process differ in their first page).
fn same_database(a: &Path, b: &Path) -> bool {
    if same_file(a, b) {
        return true;
    }
    let (Ok(fa), Ok(fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    match (fa.metadata(), fb.metadata()) {
        (Ok(x), Ok(y)) if x.len() == y.len() => {}
        _ => return false,
    }
    let (mut ra, mut rb) = (std::io::BufReader::new(fa), std::io::BufReader::new(fb));
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let (Ok(na), Ok(nb)) = (read_full(&mut ra, &mut ba), read_full(&mut rb, &mut bb)) else {
            return false;
        };
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

/// Reads until `buf` is full or the end: the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Every source of every input, sorted by GUID (the order `rocpd convert` uses), then by start.
pub fn all_sources(inputs: &[Input]) -> Result<Vec<Source<'_>>> {
    all_sources_in(inputs, None)
}

/// Like [`all_sources`], each source limited to `window` (see [`Source::with_window`]).
pub fn all_sources_in(inputs: &[Input], window: Option<TimeWindow>) -> Result<Vec<Source<'_>>> {
    let mut all = Vec::new();
    for i in inputs {
        all.extend(i.sources()?.into_iter().map(|s| s.with_window(window)));
    }
    // Two sessions of one process (same GUID): the earlier first.
    all.sort_by(|a, b| (&a.info.guid, a.info.start).cmp(&(&b.info.guid, b.info.start)));
    Ok(all)
}

impl<'a> Source<'a> {
    /// The same source limited to `window` (`None`: every row). Applies to the row streams
    /// ([`Source::dispatches`], [`Source::api_calls`], [`Source::memory_copies`],
    /// [`Source::memory_allocations`], [`Source::counters`]), not to the dimension tables.
    pub fn with_window(mut self, window: Option<TimeWindow>) -> Self {
        self.window = window;
        self
    }

    /// The time window rows are limited to, if any.
    pub fn window(&self) -> Option<TimeWindow> {
        self.window
    }

    /// The same source limited to the rows with `lo <= id < hi` of every row stream (`None`:
    /// every id). Ids are per table (API regions and samples share theirs), so a converter can
    /// split a table into ranges read on several threads ([`crate::par`]).
    pub fn with_ids(mut self, ids: Option<(i64, i64)>) -> Self {
        self.ids = ids;
        self
    }

    /// The lowest and highest id of the rows of the tables `bases` (ignoring the time window and
    /// the id range); `None` when they are empty or missing.
    pub fn id_span(&self, bases: &[&str]) -> Result<Option<(i64, i64)>> {
        let mut span: Option<(i64, i64)> = None;
        for base in bases {
            let Some(t) = self.table(base) else {
                continue;
            };
            // Two queries: SQLite answers a lone MIN or MAX of the rowid from the B-tree's ends,
            // but scans the table for both at once.
            let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
            self.each(&format!("SELECT MIN(id) FROM {t}"), |r| {
                lo = r.get(0).map_err(self.err())?;
                Ok(())
            })?;
            self.each(&format!("SELECT MAX(id) FROM {t}"), |r| {
                hi = r.get(0).map_err(self.err())?;
                Ok(())
            })?;
            {
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    span = Some(match span {
                        Some((a, b)) => (a.min(lo), b.max(hi)),
                        None => (lo, hi),
                    });
                }
            }
        }
        Ok(span)
    }

    /// ` WHERE <alias>.id >= lo AND <alias>.id < hi` for the id range, or nothing.
    fn id_filter(&self, alias: &str) -> String {
        match self.ids {
            Some((lo, hi)) => format!(" WHERE {alias}.id >= {lo} AND {alias}.id < {hi}"),
            None => String::new(),
        }
    }

    /// The quoted physical table name for a base name, if the table exists.
    pub fn table(&self, base: &str) -> Option<String> {
        let name = format!("{base}{}", self.info.suffix);
        self.tables.contains(&name).then(|| format!("\"{name}\""))
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |e| read_error(&self.input.path, e)
    }

    /// Runs `sql` and calls `f` on every row.
    fn each(&self, sql: &str, mut f: impl FnMut(&Row) -> Result<()>) -> Result<()> {
        let _release = self.release_cache_at_end();
        let mut stmt = self.input.conn.prepare(sql).map_err(self.err())?;
        let mut rows = stmt.query([]).map_err(self.err())?;
        while let Some(r) = rows.next().map_err(self.err())? {
            f(r)?;
        }
        Ok(())
    }

    /// Whether the table `base` exists and holds at least one row (ignoring the time window).
    pub fn has_rows(&self, base: &str) -> Result<bool> {
        let Some(t) = self.table(base) else {
            return Ok(false);
        };
        let mut any = false;
        self.each(&format!("SELECT 1 FROM {t} LIMIT 1"), |_| {
            any = true;
            Ok(())
        })?;
        Ok(any)
    }

    /// A guard that hands this source's cached database pages back when dropped (declare it
    /// before the statements of a scan, so that it drops after them); see [`ReleaseCache`].
    /// A scan of one id range keeps them: the next range reads the pages that follow, and whoever
    /// splits the table calls [`Source::release_cache`] once at the end.
    fn release_cache_at_end(&self) -> ReleaseCache<'_> {
        ReleaseCache(&self.input.conn, self.ids.is_none())
    }

    /// Hands this connection's cached database pages back now (after reading a table in id
    /// ranges, see [`Source::with_ids`]).
    pub fn release_cache(&self) {
        let _ = self.input.conn.release_memory();
    }

    /// Whether a row spanning `[start, end]` passes the time window.
    fn keeps(&self, start: i64, end: i64) -> bool {
        self.window.is_none_or(|w| w.keeps(start, end))
    }
}

/// Frees the unused page cache of a connection when dropped.
///
/// The bundled SQLite is built with `SQLITE_ENABLE_MEMORY_MANAGEMENT`, so every connection's pages
/// live in one process-wide cache whose capacity is the sum of the connections' (8 MiB each, see
/// [`Input::open`]): a conversion or summary of N databases would keep up to N × 8 MiB of pages it
/// has finished with (`summary` of 64 ranks of 5.5 MiB peaked at 403 MiB). Releasing them after
/// each scan keeps memory flat in the number of databases; a scan that follows re-reads its pages
/// from the operating system's cache.
struct ReleaseCache<'c>(&'c Connection, bool);

impl Drop for ReleaseCache<'_> {
    fn drop(&mut self) {
        if self.1 {
            let _ = self.0.release_memory();
        }
    }
}

/// Turns off SQLite's global memory statistics before the first connection of the process is
/// opened: they put every SQLite allocation behind one process-wide mutex, which the two
/// converter threads would otherwise fight over. Later calls (or calls after SQLite was
/// initialised elsewhere) are no-ops.
pub fn tune_sqlite() {
    crate::sys::sqlite_disable_memstatus();
}
