//! Writes one process's rocpd database the way rocprofv3 does: suffixed tables, `rocpd_*` and data
//! views, metadata rows, natural-key ids, string table, lazily created thread rows.
//!
//! Everything is written inside one transaction with cached prepared statements; call
//! [`Writer::finish`] to commit. Dropping a writer without finishing rolls back and leaves an
//! empty-schema file behind only if the schema had been committed (it never is before `finish`).
//!
//! A writer that fills its database while a process runs ([`Writer::create_journaled`]) commits
//! every so often ([`Writer::commit`]) with a rollback journal, so that the file is a valid
//! database holding every committed row whenever the process stops, even by SIGKILL, and
//! readers (`rocprof-attach top`) see the rows while the database is still being written.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::guid::Guid;
use super::model::*;
use super::schema;
use crate::error::{Error, Result};

/// A rocpd database being written for one process.
pub struct Writer {
    conn: Connection,
    path: PathBuf,
    uuid: String,
    strings: HashMap<String, i64>,
    next_string: i64,
    threads: HashSet<i64>,
    queues: HashSet<i64>,
    streams: HashSet<i64>,
    tracks: HashMap<(i64, i64), i64>,
    next_event: i64,
    next_copy: i64,
    nid: i64,
    pid: i64,
    ppid: i64,
    /// The statements written once per record, built once ([`Hot`]).
    hot: Hot,
    /// Kernel dispatches not written yet: their event's 5 values, then the dispatch's 21.
    pending: Vec<[i64; 26]>,
}

/// Kernel dispatches written by one statement (with their events): a window of a million
/// kernels is a million rows, and one statement per row was most of the time spent.
const BATCH: usize = 64;

/// The SQL of the statements run once per record: formatting it for each row cost a tenth of
/// the write.
struct Hot {
    event: String,
    dispatch: String,
    /// [`BATCH`] events (without extdata: `'{}'`) in one statement.
    event_batch: String,
    /// [`BATCH`] dispatches in one statement.
    dispatch_batch: String,
}

impl Hot {
    fn new(uuid: &str) -> Hot {
        Hot {
            event: format!(
                "INSERT INTO `rocpd_event{uuid}` (id, category_id, stack_id, parent_stack_id, correlation_id, extdata) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ),
            dispatch: format!(
                "INSERT INTO `rocpd_kernel_dispatch{uuid}` (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, \
                 stream_id, start, end, private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, \
                 workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?1, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"
            ),
            event_batch: format!(
                "INSERT INTO `rocpd_event{uuid}` (id, category_id, stack_id, parent_stack_id, correlation_id, extdata) \
                 VALUES {}",
                vec!["(?, ?, ?, ?, ?, '{}')"; BATCH].join(", ")
            ),
            dispatch_batch: format!(
                "INSERT INTO `rocpd_kernel_dispatch{uuid}` (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, \
                 stream_id, start, end, private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, \
                 workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id) VALUES {}",
                vec![format!("({})", vec!["?"; 21].join(", ")); BATCH].join(", ")
            ),
        }
    }
}

/// Deletes `; \n \r \t \b \f \v` like rocprofv3's `sanitize_sql_string` (so stored bytes match).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ';' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' | '\u{b}'))
        .collect()
}

fn null_if_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

impl Writer {
    /// Creates `path` (replacing any existing file, as rocprofv3 does), loads the schema for
    /// `guid` and opens the write transaction.
    pub fn create(path: &Path, guid: &Guid) -> Result<Writer> {
        Self::create_with(path, guid, "OFF")
    }

    /// Like [`Writer::create`], for a database written while its process runs: a rollback
    /// journal (`journal_mode = DELETE`, no fsync) keeps the file valid across a process killed
    /// mid-commit, and the schema is committed at once, so the file is a rocpd database from
    /// the start. Call [`Writer::commit`] to make the rows written so far durable.
    pub fn create_journaled(path: &Path, guid: &Guid) -> Result<Writer> {
        let mut w = Self::create_with(path, guid, "DELETE")?;
        w.commit()?;
        Ok(w)
    }

    /// Commits the rows written so far (a process killed after this keeps them, a reader sees
    /// them) and opens the next transaction. Only for a writer made by
    /// [`Writer::create_journaled`]: without a journal, a commit interrupted by a kill can leave
    /// a damaged file. When a reader holds the file past the busy timeout, nothing is committed
    /// and `Ok(false)` comes back: the rows go with the next commit.
    pub fn commit(&mut self) -> Result<bool> {
        self.flush_dispatches()?;
        match self.conn.execute_batch("COMMIT") {
            Ok(()) => {
                self.conn.execute_batch("BEGIN")?;
                Ok(true)
            }
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn create_with(path: &Path, guid: &Guid, journal: &str) -> Result<Writer> {
        let werr = |reason: String| Error::OutputWrite {
            path: path.to_path_buf(),
            reason,
        };
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(werr(format!("cannot replace the existing file: {e}"))),
        }
        let conn = Connection::open(path).map_err(|e| {
            werr(format!(
                "{e}; check that the directory exists and is writable"
            ))
        })?;
        conn.execute_batch(
            &format!("PRAGMA journal_mode = {journal}; PRAGMA synchronous = OFF; PRAGMA cache_size = -16384;"),
        )?;
        // Every row is checked against the tables it refers to in debug builds (the tests), not
        // in release builds: the checks cost a fifth of the write time (docs/performance.md,
        // "The CUDA tool's write").
        if !cfg!(debug_assertions) {
            conn.execute_batch("PRAGMA foreign_keys = OFF;")?;
        }
        conn.set_prepared_statement_cache_capacity(64);
        // A reader of the rows committed so far (`rocprof-attach top`) holds the file for a few
        // milliseconds; a commit waits at most this long for it, then tries again later.
        conn.busy_timeout(std::time::Duration::from_millis(250))?;
        conn.execute_batch("BEGIN")?;
        schema::load(&conn, guid.as_str())?;
        let mut w = Writer {
            conn,
            path: path.to_path_buf(),
            hot: Hot::new(&guid.uuid()),
            pending: Vec::with_capacity(BATCH),
            uuid: guid.uuid(),
            strings: HashMap::new(),
            next_string: 1,
            threads: HashSet::new(),
            queues: HashSet::new(),
            streams: HashSet::new(),
            tracks: HashMap::new(),
            next_event: 1,
            next_copy: 1,
            nid: 0,
            pid: 0,
            ppid: 0,
        };
        w.string("")?;
        Ok(w)
    }

    /// The database path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection (inside the open transaction), e.g. for extra rows in tests.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn t(&self, base: &str) -> String {
        format!("`{base}{}`", self.uuid)
    }

    /// Adds strings up front, sorted byte-wise, as rocprofv3 numbers its string table.
    pub fn preload_strings<'a>(
        &mut self,
        strings: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let mut all: Vec<&str> = strings.into_iter().collect();
        all.sort_unstable();
        all.dedup();
        for s in all {
            self.string(s)?;
        }
        Ok(())
    }

    /// The id of `s` in the string table, inserting it if new.
    pub fn string(&mut self, s: &str) -> Result<i64> {
        if let Some(&id) = self.strings.get(s) {
            return Ok(id);
        }
        let id = self.next_string;
        let sql = format!(
            "INSERT INTO {} (id, string) VALUES (?1, ?2)",
            self.t("rocpd_string")
        );
        self.conn.prepare_cached(&sql)?.execute(params![id, s])?;
        self.next_string += 1;
        self.strings.insert(s.to_owned(), id);
        Ok(id)
    }

    /// Writes the node row; must come before [`Writer::process`].
    pub fn node(&mut self, n: &Node) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            self.t("rocpd_info_node")
        );
        self.conn.execute(
            &sql,
            params![
                n.id,
                n.hash,
                n.machine_id,
                null_if_empty(&n.system_name),
                null_if_empty(&n.hostname),
                null_if_empty(&n.release),
                null_if_empty(&n.version),
                null_if_empty(&n.hardware_name),
                null_if_empty(&n.domain_name)
            ],
        )?;
        self.nid = n.id;
        Ok(())
    }

    /// Writes the process row plus the default queue and stream (id 0).
    pub fn process(&mut self, p: &Process) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, nid, ppid, pid, init, fini, start, end, command, environment, extdata) \
             VALUES (?1, ?2, ?3, ?1, ?4, ?5, ?4, ?5, ?6, ?7, ?8)",
            self.t("rocpd_info_process")
        );
        let json = |s: &str| {
            if s.is_empty() {
                "{}".to_owned()
            } else {
                sanitize(s)
            }
        };
        self.conn.execute(
            &sql,
            params![
                p.pid,
                self.nid,
                p.ppid,
                p.init,
                p.fini,
                sanitize(&p.command),
                json(&p.environment),
                json(&p.extdata)
            ],
        )?;
        self.pid = p.pid;
        self.ppid = p.ppid;
        self.stream(0, "Default Stream")?;
        self.queue(0, "Default Queue")?;
        Ok(())
    }

    /// Sets the end time and the JSON of the process row [`Writer::process`] wrote: for a
    /// writer that opens the database as its session starts and fills it while it runs.
    pub fn finish_process(&mut self, fini: i64, extdata: &str) -> Result<()> {
        let sql = format!(
            "UPDATE {} SET fini = ?1, \"end\" = ?1, extdata = ?2 WHERE id = ?3",
            self.t("rocpd_info_process")
        );
        let extdata = if extdata.is_empty() {
            "{}".to_owned()
        } else {
            sanitize(extdata)
        };
        self.conn.execute(&sql, params![fini, extdata, self.pid])?;
        Ok(())
    }

    /// Writes a queue row (rocprofv3 names them `Queue N`).
    pub fn queue(&mut self, id: i64, name: &str) -> Result<()> {
        if self.queues.insert(id) {
            let sql = format!(
                "INSERT INTO {} (id, nid, pid, name) VALUES (?1, ?2, ?3, ?4)",
                self.t("rocpd_info_queue")
            );
            self.conn
                .execute(&sql, params![id, self.nid, self.pid, name])?;
        }
        Ok(())
    }

    /// Writes a stream row (rocprofv3 names them `Stream N`).
    pub fn stream(&mut self, id: i64, name: &str) -> Result<()> {
        if self.streams.insert(id) {
            let sql = format!(
                "INSERT INTO {} (id, nid, pid, name) VALUES (?1, ?2, ?3, ?4)",
                self.t("rocpd_info_stream")
            );
            self.conn
                .execute(&sql, params![id, self.nid, self.pid, name])?;
        }
        Ok(())
    }

    fn ensure_queue(&mut self, id: i64) -> Result<()> {
        if !self.queues.contains(&id) {
            let n = self.queues.len().saturating_sub(1);
            self.queue(id, &format!("Queue {n}"))?;
        }
        Ok(())
    }

    fn ensure_stream(&mut self, id: i64) -> Result<()> {
        if !self.streams.contains(&id) {
            let n = self.streams.len().saturating_sub(1);
            self.stream(id, &format!("Stream {n}"))?;
        }
        Ok(())
    }

    /// Writes an agent row.
    pub fn agent(&mut self, a: &Agent) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, nid, pid, type, absolute_index, logical_index, type_index, uuid, name, model_name, \
             vendor_name, product_name, user_name, extdata) VALUES (?1, ?2, ?3, ?4, ?1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)",
            self.t("rocpd_info_agent")
        );
        // Every key rocprofiler-sdk writes for an agent, so that ROCm's own readers decode it.
        let facts = crate::agent_json::RowFacts {
            id: a.id,
            agent_type: &a.agent_type,
            logical_index: a.logical_index,
            type_index: a.type_index,
            name: &a.name,
            model_name: &a.model_name,
            vendor_name: &a.vendor_name,
            product_name: &a.product_name,
        };
        let extdata = sanitize(&crate::agent_json::complete(&a.extdata, &facts));
        self.conn.execute(
            &sql,
            params![
                a.id,
                self.nid,
                self.pid,
                a.agent_type,
                a.logical_index,
                a.type_index,
                a.uuid,
                null_if_empty(&a.name),
                null_if_empty(&a.model_name),
                null_if_empty(&a.vendor_name),
                null_if_empty(&a.product_name),
                extdata
            ],
        )?;
        Ok(())
    }

    /// Writes a counter description.
    pub fn pmc(&mut self, p: &Pmc) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, nid, pid, agent_id, target_arch, name, symbol, description, component, value_type, \
             block, expression, is_constant, is_derived) VALUES (?1, ?2, ?3, ?4, 'GPU', ?5, ?5, ?6, 'rocm', 'ABS', ?7, ?8, ?9, ?10)",
            self.t("rocpd_info_pmc")
        );
        self.conn.execute(
            &sql,
            params![
                p.id,
                self.nid,
                self.pid,
                p.agent_id,
                sanitize(&p.name),
                sanitize(&p.description),
                sanitize(&p.block),
                sanitize(&p.expression),
                p.is_constant as i64,
                p.is_derived as i64
            ],
        )?;
        Ok(())
    }

    /// Writes a code object row.
    pub fn code_object(&mut self, c: &CodeObject) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, nid, pid, agent_id, uri, load_base, load_size, load_delta, extdata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            self.t("rocpd_info_code_object")
        );
        let extdata = serde_json::json!({
            "size": 0, "code_object_id": c.id, "agent_id": {"handle": c.agent_id}, "uri": c.uri,
            "load_base": c.load_base, "load_size": c.load_size, "load_delta": c.load_delta,
        })
        .to_string();
        self.conn.execute(
            &sql,
            params![
                c.id,
                self.nid,
                self.pid,
                c.agent_id,
                c.uri,
                c.load_base,
                c.load_size,
                c.load_delta,
                extdata
            ],
        )?;
        Ok(())
    }

    /// Writes a kernel symbol row.
    pub fn kernel_symbol(&mut self, k: &KernelSymbol) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (id, nid, pid, code_object_id, kernel_name, display_name, kernel_object, kernarg_segment_size, \
             kernarg_segment_alignment, group_segment_size, private_segment_size, sgpr_count, arch_vgpr_count, \
             accum_vgpr_count, extdata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            self.t("rocpd_info_kernel_symbol")
        );
        let extdata = serde_json::json!({
            "kernel_id": k.id, "code_object_id": k.code_object_id, "kernel_name": k.kernel_name,
            "formatted_kernel_name": k.display_name, "demangled_kernel_name": k.display_name,
            "truncated_kernel_name": k.display_name,
        })
        .to_string();
        self.conn.execute(
            &sql,
            params![
                k.id,
                self.nid,
                self.pid,
                k.code_object_id,
                k.kernel_name,
                k.display_name,
                k.kernel_object,
                k.kernarg_segment_size,
                k.kernarg_segment_alignment,
                k.group_segment_size,
                k.private_segment_size,
                k.sgpr_count,
                k.arch_vgpr_count,
                k.accum_vgpr_count,
                extdata
            ],
        )?;
        Ok(())
    }

    fn thread(&mut self, tid: i64) -> Result<()> {
        if self.threads.insert(tid) {
            let sql = format!(
                "INSERT INTO {} (id, nid, ppid, pid, tid) VALUES (?1, ?2, ?3, ?4, ?1)",
                self.t("rocpd_info_thread")
            );
            self.conn
                .prepare_cached(&sql)?
                .execute(params![tid, self.nid, self.ppid, self.pid])?;
        }
        Ok(())
    }

    fn event(
        &mut self,
        kind: &str,
        c: &Correlation,
        stack: i64,
        extdata: Option<&str>,
    ) -> Result<i64> {
        let category = self.string(kind)?;
        let id = self.next_event;
        self.conn.prepare_cached(&self.hot.event)?.execute(params![
            id,
            category,
            stack,
            c.ancestor,
            c.external,
            extdata.unwrap_or("{}")
        ])?;
        self.next_event += 1;
        Ok(id)
    }

    /// Writes an API call: event, arguments, and a region (or a sample if `start == end`).
    pub fn api_call(&mut self, a: &ApiCall) -> Result<()> {
        self.thread(a.tid)?;
        let name_id = self.string(&a.operation)?;
        let extdata = a
            .message
            .as_ref()
            .map(|m| serde_json::json!({ "message": sanitize(m) }).to_string());
        let event = self.event(
            &a.kind,
            &a.correlation,
            a.correlation.internal,
            extdata.as_deref(),
        )?;
        for (pos, arg) in a.args.iter().enumerate() {
            let sql = format!("INSERT INTO {} (event_id, position, type, name, value) VALUES (?1, ?2, ?3, ?4, ?5)", self.t("rocpd_arg"));
            self.conn.prepare_cached(&sql)?.execute(params![
                event,
                pos as i64,
                arg.arg_type,
                arg.name,
                arg.value
            ])?;
        }
        if a.start != a.end {
            let sql = format!(
                "INSERT INTO {} (id, nid, pid, tid, start, end, name_id, event_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                self.t("rocpd_region")
            );
            self.conn.prepare_cached(&sql)?.execute(params![
                a.correlation.internal,
                self.nid,
                self.pid,
                a.tid,
                a.start,
                a.end,
                name_id,
                event
            ])?;
        } else {
            let track = match self.tracks.get(&(a.tid, name_id)) {
                Some(&t) => t,
                None => {
                    let t = self.tracks.len() as i64 + 1;
                    let sql = format!(
                        "INSERT INTO {} (id, nid, pid, tid, name_id) VALUES (?1, ?2, ?3, ?4, ?5)",
                        self.t("rocpd_track")
                    );
                    self.conn
                        .execute(&sql, params![t, self.nid, self.pid, a.tid, name_id])?;
                    self.tracks.insert((a.tid, name_id), t);
                    t
                }
            };
            let sql = format!(
                "INSERT INTO {} (id, track_id, timestamp, event_id) VALUES (?1, ?2, ?3, ?4)",
                self.t("rocpd_sample")
            );
            self.conn.prepare_cached(&sql)?.execute(params![
                a.correlation.internal,
                track,
                a.start,
                event
            ])?;
        }
        Ok(())
    }

    /// Writes a kernel dispatch with its event and counter values. Dispatches are written
    /// `BATCH` at a time (ids are given now, so nothing else sees the delay); one with counters
    /// is written at once, with the batch before it.
    pub fn kernel_dispatch(&mut self, k: &KernelDispatch) -> Result<()> {
        self.thread(k.tid)?;
        self.ensure_queue(k.queue_id)?;
        self.ensure_stream(k.stream_id)?;
        let region = self.string(&k.region_name)?;
        let category = self.string("KERNEL_DISPATCH")?;
        let event = self.next_event;
        self.next_event += 1;
        let c = &k.correlation;
        self.pending.push([
            event,
            category,
            c.internal,
            c.ancestor,
            c.external,
            k.dispatch_id,
            self.nid,
            self.pid,
            k.tid,
            k.agent_id,
            k.kernel_id,
            k.dispatch_id,
            k.queue_id,
            k.stream_id,
            k.start,
            k.end,
            k.private_segment_size,
            k.group_segment_size,
            k.workgroup[0],
            k.workgroup[1],
            k.workgroup[2],
            k.grid[0],
            k.grid[1],
            k.grid[2],
            region,
            event,
        ]);
        // Counter values refer to the dispatch's event: it is written first.
        if self.pending.len() == BATCH || !k.counters.is_empty() {
            self.flush_dispatches()?;
        }
        for &(pmc, value) in &k.counters {
            let sql = format!(
                "INSERT INTO {} (event_id, pmc_id, value) VALUES (?1, ?2, ?3)",
                self.t("rocpd_pmc_event")
            );
            self.conn
                .prepare_cached(&sql)?
                .execute(params![event, pmc, value])?;
        }
        Ok(())
    }

    /// Writes the pending dispatches: a full batch with one statement per table, a partial one
    /// row by row.
    fn flush_dispatches(&mut self) -> Result<()> {
        if self.pending.len() == BATCH {
            let events = self.pending.iter().flat_map(|r| r[..5].iter().copied());
            self.conn
                .prepare_cached(&self.hot.event_batch)?
                .execute(rusqlite::params_from_iter(events))?;
            let rows = self.pending.iter().flat_map(|r| r[5..].iter().copied());
            self.conn
                .prepare_cached(&self.hot.dispatch_batch)?
                .execute(rusqlite::params_from_iter(rows))?;
        } else {
            for r in &self.pending {
                self.conn
                    .prepare_cached(&self.hot.event)?
                    .execute(params![r[0], r[1], r[2], r[3], r[4], "{}"])?;
                // The single-row statement gives the dispatch id once (?1 twice).
                let mut row: Vec<i64> = r[5..].to_vec();
                row.remove(6);
                self.conn
                    .prepare_cached(&self.hot.dispatch)?
                    .execute(rusqlite::params_from_iter(row))?;
            }
        }
        self.pending.clear();
        Ok(())
    }

    /// Writes a memory copy (ids count from 1).
    pub fn memory_copy(&mut self, m: &MemoryCopy) -> Result<()> {
        self.thread(m.tid)?;
        self.ensure_stream(m.stream_id)?;
        let name = self.string(&m.operation)?;
        let event = self.event("MEMORY_COPY", &m.correlation, m.correlation.internal, None)?;
        let sql = format!(
            "INSERT INTO {} (id, nid, pid, tid, start, end, name_id, dst_agent_id, dst_address, src_agent_id, src_address, \
             size, stream_id, event_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            self.t("rocpd_memory_copy")
        );
        self.conn.prepare_cached(&sql)?.execute(params![
            self.next_copy,
            self.nid,
            self.pid,
            m.tid,
            m.start,
            m.end,
            name,
            m.dst_agent_id,
            m.dst_address,
            m.src_agent_id,
            m.src_address,
            m.size,
            m.stream_id,
            event
        ])?;
        self.next_copy += 1;
        Ok(())
    }

    /// Writes a memory or scratch allocation event.
    pub fn memory_allocation(&mut self, m: &MemoryAllocation) -> Result<()> {
        let (kind, level) = allocation_type_level(&m.operation).ok_or_else(|| {
            Error::usage(format!(
                "unknown memory allocation operation '{}'",
                m.operation
            ))
        })?;
        self.thread(m.tid)?;
        if let Some(q) = m.queue_id {
            self.ensure_queue(q)?;
        }
        if let Some(s) = m.stream_id {
            self.ensure_stream(s)?;
        }
        let category = if level == "SCRATCH" {
            "SCRATCH_MEMORY"
        } else {
            "MEMORY_ALLOCATION"
        };
        let event = self.event(category, &m.correlation, m.correlation.internal, None)?;
        let extdata = match m.flags {
            Some(f) => serde_json::json!({ "flags": f.to_string() }).to_string(),
            None => "{}".to_owned(),
        };
        let agent = if kind == "ALLOC" { m.agent_id } else { None };
        let sql = format!(
            "INSERT INTO {} (nid, pid, tid, agent_id, type, level, start, end, address, size, queue_id, stream_id, event_id, extdata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            self.t("rocpd_memory_allocate")
        );
        self.conn.prepare_cached(&sql)?.execute(params![
            self.nid,
            self.pid,
            m.tid,
            agent,
            kind,
            level,
            m.start,
            m.end,
            m.address,
            m.size,
            m.queue_id,
            m.stream_id,
            event,
            extdata
        ])?;
        Ok(())
    }

    /// Commits the transaction and closes the database.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.flush_dispatches()?;
        self.conn.execute_batch("COMMIT")?;
        let path = self.path.clone();
        self.conn.close().map_err(|(_, e)| Error::Sqlite(e))?;
        Ok(path)
    }

    /// Looks up an existing string id without inserting.
    pub fn string_id(&self, s: &str) -> Result<Option<i64>> {
        let sql = format!(
            "SELECT id FROM {} WHERE string = ?1",
            self.t("rocpd_string")
        );
        Ok(self.conn.query_row(&sql, [s], |r| r.get(0)).optional()?)
    }
}
