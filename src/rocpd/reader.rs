//! Opens rocpd databases (one per process, as ROCm 7.0+ writes them, or merged ones holding several
//! processes), validates them, and streams their rows.
//!
//! A database holds one *source* per `rocpd_metadata<suffix>` table; each source is one process
//! whose physical tables carry that suffix. Small dimension tables (strings, agents, kernel
//! symbols, counters) are loaded into memory; the large ones (dispatches, API calls, copies,
//! allocations, counter values) are iterated in id order straight from SQLite, so memory does not
//! grow with the number of rows. Columns are selected by name, so extra columns and tables of
//! later schema revisions are ignored.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, Row};

use super::model::Correlation;
use super::schema::SCHEMA_VERSION;
use crate::{Error, Result};

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
}

/// One process of one input: the unit the converters iterate over.
pub struct Source<'a> {
    /// The database it lives in.
    pub input: &'a Input,
    /// Its identity.
    pub info: &'a SourceInfo,
    tables: Vec<String>,
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
        conn.execute_batch("PRAGMA cache_size = -8192; PRAGMA temp_store = FILE;")
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
            sources.push(SourceInfo {
                suffix,
                guid,
                schema_version: version,
            });
        }
        if sources.is_empty() {
            return Err(bad(
                path,
                "a SQLite database but not a rocpd one (no rocpd_metadata table); pass the `*_results.db` files rocprofv3 writes \
                 with --output-format rocpd",
            ));
        }
        sources.sort_by(|a, b| a.guid.cmp(&b.guid));
        Ok(Input {
            path: path.to_path_buf(),
            conn,
            sources,
        })
    }

    /// A second read-only connection to the same file (for converting tables in parallel).
    pub fn reopen(&self) -> Result<Input> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| read_error(&self.path, e))?;
        conn.execute_batch("PRAGMA cache_size = -8192; PRAGMA temp_store = FILE;")
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
        })
    }

    /// The processes of this database as iterable sources.
    pub fn sources(&self) -> Result<Vec<Source<'_>>> {
        let tables = table_names(&self.conn).map_err(|e| read_error(&self.path, e))?;
        Ok(self
            .sources
            .iter()
            .map(|info| Source {
                input: self,
                info,
                tables: tables.clone(),
            })
            .collect())
    }
}

fn table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

/// Opens several databases; rejects a process given twice. Sources come out sorted by GUID.
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
    let mut seen: HashMap<&str, &Path> = HashMap::new();
    for input in &inputs {
        for s in &input.sources {
            if let Some(prev) = seen.insert(&s.guid, &input.path) {
                return Err(Error::usage(format!(
                    "{} and {} both contain process {} (the same database given twice?); pass each database once",
                    prev.display(),
                    input.path.display(),
                    s.guid
                )));
            }
        }
    }
    Ok(inputs)
}

/// Every source of every input, sorted by GUID (the order `rocpd convert` uses).
pub fn all_sources(inputs: &[Input]) -> Result<Vec<Source<'_>>> {
    let mut all = Vec::new();
    for i in inputs {
        all.extend(i.sources()?);
    }
    all.sort_by(|a, b| a.info.guid.cmp(&b.info.guid));
    Ok(all)
}

/// An agent, with its `Agent_Id` label precomputed.
#[derive(Debug, Clone, Default)]
pub struct AgentInfo {
    /// Absolute index.
    pub absolute_index: i64,
    /// Logical index.
    pub logical_index: i64,
    /// Index within its type.
    pub type_index: i64,
    /// `CPU` / `GPU`.
    pub agent_type: String,
    /// Agent name.
    pub name: String,
    /// rocprofiler agent handle (from the stored agent JSON; the row id if absent).
    pub handle: u64,
    /// The stored agent JSON.
    pub extdata: String,
    /// Label for CSV cells, e.g. `Agent 1`.
    pub label: String,
}

/// A kernel symbol as the converters need it.
#[derive(Debug, Clone, Default)]
pub struct SymbolInfo {
    /// Code object id.
    pub code_object_id: i64,
    /// Raw name.
    pub kernel_name: String,
    /// Formatted name.
    pub display_name: String,
    /// Static LDS bytes.
    pub group_segment_size: i64,
    /// Static scratch bytes.
    pub private_segment_size: i64,
    /// SGPRs.
    pub sgpr_count: i64,
    /// Architected VGPRs.
    pub arch_vgpr_count: i64,
    /// Accumulation VGPRs.
    pub accum_vgpr_count: i64,
    /// Other columns as stored.
    pub kernel_object: i64,
    /// Kernel argument segment size.
    pub kernarg_segment_size: i64,
    /// Kernel argument alignment.
    pub kernarg_segment_alignment: i64,
}

/// A counter description.
#[derive(Debug, Clone, Default)]
pub struct PmcInfo {
    /// Counter name.
    pub name: String,
    /// Agent id.
    pub agent_id: i64,
    /// Description.
    pub description: String,
    /// Block.
    pub block: String,
    /// Expression.
    pub expression: String,
    /// Constant counter.
    pub is_constant: bool,
    /// Derived counter.
    pub is_derived: bool,
}

/// The process row and its node.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    /// pid.
    pub pid: i64,
    /// ppid.
    pub ppid: i64,
    /// Profiler init timestamp.
    pub init: i64,
    /// Profiler fini timestamp.
    pub fini: i64,
    /// Command line.
    pub command: String,
    /// Tool configuration JSON.
    pub extdata: String,
    /// Node columns: id, hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name.
    pub node: Vec<(String, NodeValue)>,
}

/// A node column value.
#[derive(Debug, Clone)]
pub enum NodeValue {
    /// Integer column.
    Int(i64),
    /// Text column.
    Text(String),
}

/// The in-memory dimension tables of one source.
#[derive(Debug, Default)]
pub struct Dims {
    /// String table.
    pub strings: IdMap<i64, String>,
    /// Agents by id.
    pub agents: IdMap<i64, AgentInfo>,
    /// Kernel symbols by id.
    pub symbols: IdMap<i64, SymbolInfo>,
    /// Counters by id, plus their ids in ascending order.
    pub pmcs: Vec<(i64, PmcInfo)>,
    /// Code objects: id, agent id, uri, load base/size/delta.
    pub code_objects: Vec<(i64, i64, String, i64, i64, i64)>,
    /// The process.
    pub process: ProcessInfo,
}

impl Dims {
    /// The string for `id`, or `""`.
    pub fn string(&self, id: Option<i64>) -> &str {
        id.and_then(|i| self.strings.get(&i))
            .map(String::as_str)
            .unwrap_or("")
    }

    /// The agent label for `id`, or `""` when there is no agent.
    pub fn agent_label(&self, id: Option<i64>) -> &str {
        id.and_then(|i| self.agents.get(&i))
            .map(|a| a.label.as_str())
            .unwrap_or("")
    }

    /// The rocprofiler handle of an agent id.
    pub fn agent_handle(&self, id: Option<i64>) -> u64 {
        match id {
            Some(i) => self.agents.get(&i).map(|a| a.handle).unwrap_or(i as u64),
            None => 0,
        }
    }
}

/// A kernel dispatch row.
#[derive(Debug, Clone, Default)]
pub struct DispatchRow {
    /// Row id (= dispatch id in rocprofv3 output).
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Agent id.
    pub agent_id: i64,
    /// Kernel id.
    pub kernel_id: i64,
    /// Dispatch id.
    pub dispatch_id: i64,
    /// Queue handle.
    pub queue_id: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Dynamic scratch.
    pub private_segment_size: i64,
    /// Dynamic LDS.
    pub group_segment_size: i64,
    /// Workgroup size.
    pub workgroup: [i64; 3],
    /// Grid size.
    pub grid: [i64; 3],
    /// Region name string id.
    pub region_name_id: Option<i64>,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// An API call (region or sample).
#[derive(Debug, Clone, Default)]
pub struct ApiRow {
    /// Row id (internal correlation id).
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Category (kind) string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
    /// Marker message from the event's extdata, if any.
    pub message: Option<String>,
}

/// A memory copy row.
#[derive(Debug, Clone, Default)]
pub struct CopyRow {
    /// Row id.
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Destination agent.
    pub dst_agent_id: Option<i64>,
    /// Destination address.
    pub dst_address: i64,
    /// Source agent.
    pub src_agent_id: Option<i64>,
    /// Source address.
    pub src_address: i64,
    /// Bytes.
    pub size: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// A memory allocation row.
#[derive(Debug, Clone, Default)]
pub struct AllocRow {
    /// Row id.
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Agent (allocations only).
    pub agent_id: Option<i64>,
    /// rocprofv3 operation name derived from type and level.
    pub operation: &'static str,
    /// Whether this is scratch memory.
    pub scratch: bool,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Address.
    pub address: i64,
    /// Bytes.
    pub size: i64,
    /// Queue handle.
    pub queue_id: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Scratch flags.
    pub flags: i64,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// One counter value of one dispatch, summed over instances.
#[derive(Debug, Clone, Default)]
pub struct CounterRow {
    /// The dispatch.
    pub dispatch: DispatchRow,
    /// Counter id.
    pub pmc_id: i64,
    /// Summed value.
    pub value: f64,
}

fn opt(r: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    use rusqlite::types::ValueRef;
    match r.get_ref(i)? {
        ValueRef::Integer(v) => Ok(Some(v)),
        ValueRef::Null => Ok(None),
        ValueRef::Real(v) => Ok(Some(v as i64)),
        ValueRef::Text(t) => Ok(std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse().ok())),
        ValueRef::Blob(_) => Ok(None),
    }
}

fn int(r: &Row, i: usize) -> rusqlite::Result<i64> {
    Ok(opt(r, i)?.unwrap_or(0))
}

fn text(r: &Row, i: usize) -> rusqlite::Result<String> {
    Ok(match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        rusqlite::types::ValueRef::Integer(v) => v.to_string(),
        rusqlite::types::ValueRef::Real(v) => v.to_string(),
        _ => String::new(),
    })
}

fn corr(r: &Row, i: usize, fallback: i64) -> rusqlite::Result<Correlation> {
    Ok(Correlation {
        internal: opt(r, i)?.unwrap_or(fallback),
        ancestor: int(r, i + 1)?,
        external: int(r, i + 2)?,
    })
}

fn message(r: &Row, i: usize) -> rusqlite::Result<Option<String>> {
    let raw = match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(t) => t,
        _ => return Ok(None),
    };
    if raw.len() <= 2 || !raw.windows(9).any(|w| w == b"\"message\"") {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Ext {
        message: Option<serde_json::Value>,
    }
    Ok(serde_json::from_slice::<Ext>(raw)
        .ok()
        .and_then(|e| e.message)
        .map(|m| match m {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        }))
}

const DISPATCH_COLS: &str = "K.id, K.pid, K.tid, K.agent_id, K.kernel_id, K.dispatch_id, K.queue_id, K.stream_id, K.start, \
    K.end, K.private_segment_size, K.group_segment_size, K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z, \
    K.grid_size_x, K.grid_size_y, K.grid_size_z, K.region_name_id, E.category_id, E.stack_id, E.parent_stack_id, \
    E.correlation_id";

fn dispatch_row(r: &Row) -> rusqlite::Result<DispatchRow> {
    let id = int(r, 0)?;
    Ok(DispatchRow {
        id,
        pid: int(r, 1)?,
        tid: int(r, 2)?,
        agent_id: int(r, 3)?,
        kernel_id: int(r, 4)?,
        dispatch_id: int(r, 5)?,
        queue_id: int(r, 6)?,
        stream_id: int(r, 7)?,
        start: int(r, 8)?,
        end: int(r, 9)?,
        private_segment_size: int(r, 10)?,
        group_segment_size: int(r, 11)?,
        workgroup: [int(r, 12)?, int(r, 13)?, int(r, 14)?],
        grid: [int(r, 15)?, int(r, 16)?, int(r, 17)?],
        region_name_id: opt(r, 18)?,
        category_id: opt(r, 19)?,
        corr: corr(r, 20, id)?,
    })
}

impl<'a> Source<'a> {
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
        let mut stmt = self.input.conn.prepare(sql).map_err(self.err())?;
        let mut rows = stmt.query([]).map_err(self.err())?;
        while let Some(r) = rows.next().map_err(self.err())? {
            f(r)?;
        }
        Ok(())
    }

    fn event_join(&self, alias: &str) -> String {
        match self.table("rocpd_event") {
            Some(e) => format!("LEFT JOIN {e} E ON E.id = {alias}.event_id"),
            None => "LEFT JOIN (SELECT NULL AS id, NULL AS category_id, NULL AS stack_id, NULL AS parent_stack_id, \
                     NULL AS correlation_id, NULL AS extdata) E ON 0"
                .to_owned(),
        }
    }

    /// Loads the dimension tables.
    pub fn dims(&self, agent_index: AgentIndex) -> Result<Dims> {
        let mut d = Dims::default();
        let e = self.err();
        if let Some(t) = self.table("rocpd_string") {
            self.each(&format!("SELECT id, string FROM {t}"), |r| {
                d.strings
                    .insert(int(r, 0).map_err(&e)?, text(r, 1).map_err(&e)?);
                Ok(())
            })?;
        }
        if let Some(t) = self.table("rocpd_info_agent") {
            self.each(
                &format!("SELECT id, absolute_index, logical_index, type_index, type, name, extdata FROM {t} ORDER BY id"),
                |r| {
                    let id = int(r, 0).map_err(&e)?;
                    let mut a = AgentInfo {
                        absolute_index: opt(r, 1).map_err(&e)?.unwrap_or(id),
                        logical_index: int(r, 2).map_err(&e)?,
                        type_index: int(r, 3).map_err(&e)?,
                        agent_type: text(r, 4).map_err(&e)?,
                        name: text(r, 5).map_err(&e)?,
                        handle: id as u64,
                        extdata: text(r, 6).map_err(&e)?,
                        label: String::new(),
                    };
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&a.extdata) {
                        if let Some(h) = v.pointer("/id/handle").and_then(|h| h.as_u64()) {
                            a.handle = h;
                        }
                    }
                    a.label = match agent_index {
                        AgentIndex::Relative => format!("Agent {}", a.logical_index),
                        AgentIndex::Absolute => format!("Agent {}", a.absolute_index),
                        AgentIndex::TypeRelative => format!("{} {}", a.agent_type, a.type_index),
                    };
                    d.agents.insert(id, a);
                    Ok(())
                },
            )?;
        }
        if let Some(t) = self.table("rocpd_info_kernel_symbol") {
            self.each(
                &format!(
                    "SELECT id, code_object_id, kernel_name, display_name, group_segment_size, private_segment_size, \
                     sgpr_count, arch_vgpr_count, accum_vgpr_count, kernel_object, kernarg_segment_size, \
                     kernarg_segment_alignment FROM {t}"
                ),
                |r| {
                    let s = SymbolInfo {
                        code_object_id: int(r, 1).map_err(&e)?,
                        kernel_name: text(r, 2).map_err(&e)?,
                        display_name: text(r, 3).map_err(&e)?,
                        group_segment_size: int(r, 4).map_err(&e)?,
                        private_segment_size: int(r, 5).map_err(&e)?,
                        sgpr_count: int(r, 6).map_err(&e)?,
                        arch_vgpr_count: int(r, 7).map_err(&e)?,
                        accum_vgpr_count: int(r, 8).map_err(&e)?,
                        kernel_object: int(r, 9).map_err(&e)?,
                        kernarg_segment_size: int(r, 10).map_err(&e)?,
                        kernarg_segment_alignment: int(r, 11).map_err(&e)?,
                    };
                    d.symbols.insert(int(r, 0).map_err(&e)?, s);
                    Ok(())
                },
            )?;
        }
        if let Some(t) = self.table("rocpd_info_pmc") {
            self.each(
                &format!("SELECT id, name, agent_id, description, block, expression, is_constant, is_derived FROM {t} ORDER BY id"),
                |r| {
                    let p = PmcInfo {
                        name: text(r, 1).map_err(&e)?,
                        agent_id: int(r, 2).map_err(&e)?,
                        description: text(r, 3).map_err(&e)?,
                        block: text(r, 4).map_err(&e)?,
                        expression: text(r, 5).map_err(&e)?,
                        is_constant: int(r, 6).map_err(&e)? != 0,
                        is_derived: int(r, 7).map_err(&e)? != 0,
                    };
                    d.pmcs.push((int(r, 0).map_err(&e)?, p));
                    Ok(())
                },
            )?;
        }
        if let Some(t) = self.table("rocpd_info_code_object") {
            self.each(&format!("SELECT id, agent_id, uri, load_base, load_size, load_delta FROM {t} ORDER BY id"), |r| {
                d.code_objects.push((
                    int(r, 0).map_err(&e)?,
                    int(r, 1).map_err(&e)?,
                    text(r, 2).map_err(&e)?,
                    int(r, 3).map_err(&e)?,
                    int(r, 4).map_err(&e)?,
                    int(r, 5).map_err(&e)?,
                ));
                Ok(())
            })?;
        }
        if let Some(t) = self.table("rocpd_info_process") {
            self.each(
                &format!("SELECT pid, ppid, init, fini, command, extdata, nid FROM {t} LIMIT 1"),
                |r| {
                    d.process = ProcessInfo {
                        pid: int(r, 0).map_err(&e)?,
                        ppid: int(r, 1).map_err(&e)?,
                        init: int(r, 2).map_err(&e)?,
                        fini: int(r, 3).map_err(&e)?,
                        command: text(r, 4).map_err(&e)?,
                        extdata: text(r, 5).map_err(&e)?,
                        node: Vec::new(),
                    };
                    Ok(())
                },
            )?;
        }
        if let Some(t) = self.table("rocpd_info_node") {
            self.each(
                &format!(
                    "SELECT id, hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name FROM {t} LIMIT 1"
                ),
                |r| {
                    let names = ["id", "hash", "machine_id", "system_name", "hostname", "release", "version", "hardware_name", "domain_name"];
                    for (i, n) in names.iter().enumerate() {
                        let v = if i < 2 { NodeValue::Int(int(r, i).map_err(&e)?) } else { NodeValue::Text(text(r, i).map_err(&e)?) };
                        d.process.node.push(((*n).to_owned(), v));
                    }
                    Ok(())
                },
            )?;
        }
        Ok(d)
    }

    /// Every kernel dispatch, in id order.
    pub fn dispatches(&self, mut f: impl FnMut(&DispatchRow) -> Result<()>) -> Result<()> {
        let Some(k) = self.table("rocpd_kernel_dispatch") else {
            return Ok(());
        };
        let sql = format!(
            "SELECT {DISPATCH_COLS} FROM {k} K {} ORDER BY K.id",
            self.event_join("K")
        );
        let e = self.err();
        self.each(&sql, |r| f(&dispatch_row(r).map_err(&e)?))
    }

    /// Every API call (regions and samples merged), in id (= internal correlation id) order.
    pub fn api_calls(&self, mut f: impl FnMut(&ApiRow) -> Result<()>) -> Result<()> {
        let e = self.err();
        let conn = &self.input.conn;
        let region_sql = self.table("rocpd_region").map(|t| {
            format!(
                "SELECT R.id, R.pid, R.tid, R.start, R.end, R.name_id, E.category_id, E.stack_id, E.parent_stack_id, \
                 E.correlation_id, E.extdata FROM {t} R {} ORDER BY R.id",
                self.event_join("R")
            )
        });
        let sample_sql = match (self.table("rocpd_sample"), self.table("rocpd_track")) {
            (Some(s), Some(t)) => Some(format!(
                "SELECT S.id, T.pid, T.tid, S.timestamp, S.timestamp, T.name_id, E.category_id, E.stack_id, \
                 E.parent_stack_id, E.correlation_id, E.extdata FROM {s} S LEFT JOIN {t} T ON T.id = S.track_id {} ORDER BY S.id",
                self.event_join("S")
            )),
            _ => None,
        };
        let decode = |r: &Row| -> rusqlite::Result<ApiRow> {
            let id = int(r, 0)?;
            Ok(ApiRow {
                id,
                pid: int(r, 1)?,
                tid: int(r, 2)?,
                start: int(r, 3)?,
                end: int(r, 4)?,
                name_id: opt(r, 5)?,
                category_id: opt(r, 6)?,
                corr: corr(r, 7, id)?,
                message: message(r, 10)?,
            })
        };
        let mut rs = match &region_sql {
            Some(sql) => Some(conn.prepare(sql).map_err(&e)?),
            None => None,
        };
        let mut ss = match &sample_sql {
            Some(sql) => Some(conn.prepare(sql).map_err(&e)?),
            None => None,
        };
        let mut r_rows = match rs.as_mut() {
            Some(s) => Some(s.query([]).map_err(&e)?),
            None => None,
        };
        let mut s_rows = match ss.as_mut() {
            Some(s) => Some(s.query([]).map_err(&e)?),
            None => None,
        };
        let next = |rows: &mut Option<rusqlite::Rows<'_>>| -> Result<Option<ApiRow>> {
            match rows {
                Some(rows) => match rows.next().map_err(&e)? {
                    Some(r) => Ok(Some(decode(r).map_err(&e)?)),
                    None => Ok(None),
                },
                None => Ok(None),
            }
        };
        let mut a = next(&mut r_rows)?;
        let mut b = next(&mut s_rows)?;
        loop {
            let take_a = match (&a, &b) {
                (Some(x), Some(y)) => x.id <= y.id,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_a {
                if let Some(x) = a.take() {
                    f(&x)?;
                }
                a = next(&mut r_rows)?;
            } else {
                if let Some(y) = b.take() {
                    f(&y)?;
                }
                b = next(&mut s_rows)?;
            }
        }
        Ok(())
    }

    /// Every memory copy, in id order.
    pub fn memory_copies(&self, mut f: impl FnMut(&CopyRow) -> Result<()>) -> Result<()> {
        let Some(t) = self.table("rocpd_memory_copy") else {
            return Ok(());
        };
        let sql = format!(
            "SELECT M.id, M.pid, M.tid, M.start, M.end, M.name_id, M.dst_agent_id, M.dst_address, M.src_agent_id, \
             M.src_address, M.size, M.stream_id, E.category_id, E.stack_id, E.parent_stack_id, E.correlation_id \
             FROM {t} M {} ORDER BY M.id",
            self.event_join("M")
        );
        let e = self.err();
        self.each(&sql, |r| {
            let row = (|| -> rusqlite::Result<CopyRow> {
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
                    category_id: opt(r, 12)?,
                    corr: corr(r, 13, id)?,
                })
            })()
            .map_err(&e)?;
            f(&row)
        })
    }

    /// Every memory and scratch allocation, in id order.
    pub fn memory_allocations(&self, mut f: impl FnMut(&AllocRow) -> Result<()>) -> Result<()> {
        let Some(t) = self.table("rocpd_memory_allocate") else {
            return Ok(());
        };
        let sql = format!(
            "SELECT M.id, M.pid, M.tid, M.agent_id, M.type, M.level, M.start, M.end, M.address, M.size, M.queue_id, \
             M.stream_id, JSON_EXTRACT(M.extdata, '$.flags'), E.category_id, E.stack_id, E.parent_stack_id, E.correlation_id \
             FROM {t} M {} ORDER BY M.id",
            self.event_join("M")
        );
        let e = self.err();
        self.each(&sql, |r| {
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
                    operation: super::model::allocation_operation(&kind, &level),
                    scratch: level == "SCRATCH",
                    start: int(r, 6)?,
                    end: int(r, 7)?,
                    address: int(r, 8)?,
                    size: int(r, 9)?,
                    queue_id: int(r, 10)?,
                    stream_id: int(r, 11)?,
                    flags,
                    category_id: opt(r, 13)?,
                    corr: corr(r, 14, id)?,
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
        let sql = format!(
            "SELECT {DISPATCH_COLS}, PE.pmc_id, SUM(PE.value) FROM {k} K JOIN {pe} PE ON PE.event_id = K.event_id {} \
             GROUP BY K.id, PE.pmc_id ORDER BY K.id, PE.pmc_id",
            self.event_join("K")
        );
        let e = self.err();
        self.each(&sql, |r| {
            let row = (|| -> rusqlite::Result<CounterRow> {
                Ok(CounterRow {
                    dispatch: dispatch_row(r)?,
                    pmc_id: int(r, 23)?,
                    value: r.get::<_, Option<f64>>(24)?.unwrap_or(0.0),
                })
            })()
            .map_err(&e)?;
            f(&row)
        })
    }
}

/// A fast hasher for integer ids (multiplicative, like rustc's FxHash); ids are not
/// attacker-chosen keys, so SipHash's DoS resistance buys nothing on the per-row lookups.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_isize(&mut self, v: isize) {
        self.write_u64(v as u64);
    }
}

/// A map keyed by database ids.
pub type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Turns off SQLite's global memory statistics before the first connection of the process is
/// opened: they put every SQLite allocation behind one process-wide mutex, which the two
/// converter threads would otherwise fight over. Later calls (or calls after SQLite was
/// initialised elsewhere) are no-ops.
pub fn tune_sqlite() {
    crate::ptrace::sys::sqlite_disable_memstatus();
}
