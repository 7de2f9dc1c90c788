//! Streaming the collected rows into the database while the session runs, so that detach writes
//! only the tail of the window (docs/cuda.md, "Writing while attached").
//!
//! Rows come out of CUPTI's completed buffers in no particular order. Each is held until no
//! earlier row of its kind is expected any more ([`crate::order`]: [`LAG_NS`] behind the newest
//! start seen so far, the frontier, and once the session's delivery order is learnt, less for a
//! kind CUPTI delivers in order, down to [`MIN_LAG_NS`]), then written with the other ready rows
//! of its kind in start order. Rows of one kind thus reach the database in start order (what
//! rocprofv3's databases look like, and what the Perfetto converter's single pass reads fastest)
//! unless CUPTI delivers one later than its kind's lag; such rows are counted (`late_records` in
//! the process's JSON) and the readers sort them. What is still held at detach is written by
//! [`Sink::finish`].
//!
//! The database is committed as the session runs ([`Sink::commit`], every tick that wrote rows),
//! with a rollback journal: whenever the process ends, even by SIGKILL, the file is a valid rocpd
//! database with every committed row (all but the rows of about the last lag and tick).
//!
//! Kernels, copies and allocations take the thread id of the API call with the same correlation
//! id, looked up among the API rows of the last [`TID_GENERATION_NS`] or more, or the process id
//! when API tracing is off.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::path::Path;

use rocprof_rocpd::model::*;
use rocprof_rocpd::Result;

use crate::cuda::CudaInfo;
use crate::db::{copy_operation, Counts, Header, SessionInfo, DRIVER_KIND, RUNTIME_KIND};
use crate::host::demangle;
use crate::metrics::Counter;
use crate::order::Order;
use crate::pmc::KernelValues;
use crate::records::{Collected, MARKER_END, MARKER_INSTANTANEOUS, MARKER_START};

/// How far behind the frontier a row must start before it is written (CUPTI time, ns): the
/// most a kind's lag ever is, and its lag while the session's delivery order is still learnt.
pub const LAG_NS: u64 = 250_000_000;

/// The least a kind's lag becomes once its delivery order is known (ns): what a SIGKILLed
/// process loses to ordering when CUPTI hands its rows over in order.
pub const MIN_LAG_NS: u64 = 50_000_000;

/// How long (CUPTI time from the first row, ns) every kind waits the full [`LAG_NS`] while the
/// order CUPTI delivers it in is watched; afterwards a kind waits twice the most one of its rows
/// came behind a newer one of its kind (at least [`MIN_LAG_NS`], at most [`LAG_NS`]).
pub const LEARN_NS: u64 = 2_000_000_000;

/// How long a correlation id's thread and a region id are remembered at least (ns): kernels
/// and copies arrive within milliseconds of their API call, and correlation ids only repeat
/// when CUPTI's 32-bit counter wraps.
pub const TID_GENERATION_NS: u64 = 10_000_000_000;

/// A map that forgets entries older than two generations of [`TID_GENERATION_NS`], so a long
/// session's memory stays flat.
struct Generations<K, V> {
    current: HashMap<K, V>,
    previous: HashMap<K, V>,
    since: u64,
}

impl<K: Eq + Hash, V: Copy> Generations<K, V> {
    fn new() -> Self {
        Generations {
            current: HashMap::new(),
            previous: HashMap::new(),
            since: 0,
        }
    }

    fn get(&self, k: &K) -> Option<V> {
        self.current
            .get(k)
            .or_else(|| self.previous.get(k))
            .copied()
    }

    /// Inserts `k` unless it is present; true if it was inserted.
    fn insert_new(&mut self, k: K, v: V) -> bool {
        if self.get(&k).is_some() {
            return false;
        }
        self.current.insert(k, v);
        true
    }

    fn advance(&mut self, now: u64) {
        if now >= self.since.saturating_add(TID_GENERATION_NS) {
            self.previous = std::mem::take(&mut self.current);
            self.since = now;
        }
    }
}

/// A database being written while its session runs.
pub struct Sink {
    h: Header,
    offset: i64,
    demangle: bool,
    held: Collected,
    frontier: u64,
    /// The delivery order seen so far: how long each kind is held.
    order: Order,
    symbols: HashMap<String, i64>,
    code_object: bool,
    tids: Generations<u32, i64>,
    regions: Generations<i64, ()>,
    spare: i64,
    names: HashMap<(bool, u32), String>,
    open_markers: HashMap<u32, (u64, Option<u32>, String)>,
    /// The last runtime call written per thread (start, end, region id): the parent of the
    /// driver calls inside it.
    open_runtime: HashMap<u32, (u64, u64, i64)>,
    markers: i64,
    /// Newest start written per kind: kernels, copies, API calls.
    last: [u64; 3],
    counts: Counts,
    /// Per-kernel counters (`--pmc`): what they are, their `rocpd_info_pmc` ids per device,
    /// the values of counted launches by correlation id, the counted launches still waiting for
    /// theirs (their kernel rows are held), and whether only counted kernels are written (no
    /// `--kernel-trace`).
    counters: Vec<Counter>,
    pmc_ids: HashMap<u32, Vec<i64>>,
    values: HashMap<u32, KernelValues>,
    waiting: HashSet<u32>,
    /// A counting window is open: a kernel record without a start (a counted kernel's, as on
    /// the H200) waits for its values even if its launch was recorded after the last
    /// [`Sink::wait_for`].
    hold_unstarted: bool,
    counted_only: bool,
    /// `rocpd_spm_sample` exists (created at the first samples written).
    spm_table: bool,
    /// Samples written to it.
    spm_samples: usize,
}

/// Splits off the rows of `v` that start before `limit`, in arrival order.
fn before<T>(v: &mut Vec<T>, limit: u64, start: impl Fn(&T) -> u64) -> Vec<T> {
    let (out, keep): (Vec<T>, Vec<T>) = std::mem::take(v)
        .into_iter()
        .partition(|r| start(r) < limit);
    *v = keep;
    out
}

/// [`before`], in start order (a stable sort: equal starts keep CUPTI's order).
fn ready<T>(v: &mut Vec<T>, limit: u64, start: impl Fn(&T) -> u64) -> Vec<T> {
    let mut out = before(v, limit, &start);
    out.sort_by_key(|r| start(r));
    out
}

impl Sink {
    /// Creates the database at `path` with its header (node, process, agents); the process's
    /// end and JSON come at [`Sink::finish`].
    pub fn create(path: &Path, cuda: &CudaInfo, session: &SessionInfo) -> Result<Sink> {
        Ok(Sink {
            h: Header::write(path, cuda, session)?,
            offset: session.offset,
            demangle: session.demangle,
            held: Collected::default(),
            frontier: 0,
            order: Order::default(),
            symbols: HashMap::new(),
            code_object: false,
            tids: Generations::new(),
            regions: Generations::new(),
            spare: 1 << 40,
            names: HashMap::new(),
            open_markers: HashMap::new(),
            open_runtime: HashMap::new(),
            markers: 0,
            last: [0; 3],
            counts: Counts::default(),
            counters: Vec::new(),
            pmc_ids: HashMap::new(),
            values: HashMap::new(),
            waiting: HashSet::new(),
            hold_unstarted: false,
            counted_only: false,
            spm_table: false,
            spm_samples: 0,
        })
    }

    /// Kernel rows will carry these counters; with `counted_only`, kernels without values are
    /// not written (`--pmc` without `--kernel-trace`, as rocprofv3 writes only counted ones).
    pub fn set_counters(&mut self, counters: &[Counter], counted_only: bool) {
        self.counters = counters.to_vec();
        self.counted_only = counted_only;
    }

    /// The kernels with these correlation ids are counted and wait for their values: their
    /// rows are held until [`Sink::add_values`] or [`Sink::finish`].
    pub fn wait_for(&mut self, correlations: impl IntoIterator<Item = u32>) {
        self.waiting = correlations.into_iter().collect();
    }

    /// Whether a counting window is open (see `hold_unstarted`).
    pub fn set_counting(&mut self, counting: bool) {
        self.hold_unstarted = counting;
    }

    /// Counter values of counted launches (by correlation id); nothing waits any more.
    pub fn add_values(&mut self, values: HashMap<u32, KernelValues>) {
        self.values.extend(values);
        self.waiting.clear();
    }

    /// The `rocpd_info_pmc` ids of the counters on device `ordinal` (written at first use).
    fn pmc_ids(&mut self, ordinal: u32) -> Result<Vec<i64>> {
        if let Some(ids) = self.pmc_ids.get(&ordinal) {
            return Ok(ids.clone());
        }
        let base = self.pmc_ids.len() * self.counters.len();
        let mut ids = Vec::new();
        for (i, c) in self.counters.iter().enumerate() {
            let id = (base + i + 1) as i64;
            self.h.writer.pmc(&Pmc {
                id,
                agent_id: ordinal as i64 + 1,
                name: c.name.clone(),
                description: c.description.clone(),
                block: c.metric.split("__").next().unwrap_or("").to_owned(),
                expression: if c.scale == 1.0 {
                    c.metric.clone()
                } else {
                    format!("{} * {}", c.metric, c.scale)
                },
                is_constant: false,
                is_derived: c.metric != c.name,
            })?;
            ids.push(id);
        }
        self.pmc_ids.insert(ordinal, ids.clone());
        Ok(ids)
    }

    /// Writes `--spm` samples to `rocpd_spm_sample` (docs/output.md, "Sampled counters"): one
    /// row per sample and counter, moved to the database's clock by `offset`
    /// ([`crate::spm::Sampler::take`]), agent = the first GPU. Called at every tick with the
    /// samples decoded since the last (the next commit makes them readable) and at detach with
    /// the rest; each sample is handed over once.
    pub fn write_spm(
        &mut self,
        counters: &[Counter],
        samples: &[crate::spm::Sample],
        offset: i64,
    ) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let conn = self.h.writer.connection();
        if !self.spm_table {
            conn.execute_batch(crate::spm::TABLE_SQL)?;
            self.spm_table = true;
        }
        let mut st = conn.prepare_cached(
            "INSERT INTO rocpd_spm_sample (agent_id, start, end, counter, metric, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for s in samples {
            for (c, v) in counters.iter().zip(&s.values) {
                st.execute(rusqlite::params![
                    self.h.first_gpu,
                    (s.start as i64).saturating_add(offset),
                    (s.end as i64).saturating_add(offset),
                    c.name,
                    c.metric,
                    v
                ])?;
            }
        }
        self.spm_samples += samples.len();
        Ok(())
    }

    /// `--spm` samples written so far.
    pub fn spm_samples(&self) -> usize {
        self.spm_samples
    }

    /// The offset from CUPTI's timestamp clock to the database's (`CLOCK_BOOTTIME`).
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Rows written so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Commits what was written so far, with the process's end set to `now` and its JSON
    /// (`extdata` plus the counts and `"finished": false`): a process that dies after this
    /// leaves a valid database that says how far it got.
    /// `Ok(false)`: a reader held the file, nothing was committed (the next commit takes the
    /// rows).
    pub fn commit(&mut self, now: i64, extdata: &serde_json::Value) -> Result<bool> {
        let json = self.process_json(extdata, false);
        self.h.writer.finish_process(now, &json)?;
        self.h.writer.commit()
    }

    /// `extdata` with the record counts and whether the database was finished.
    fn process_json(&self, extdata: &serde_json::Value, finished: bool) -> String {
        let mut json = extdata.clone();
        if let Some(o) = json.as_object_mut() {
            o.insert("dropped_records".into(), self.counts.dropped.into());
            o.insert("ignored_records".into(), self.counts.ignored.into());
            o.insert("late_records".into(), self.counts.late.into());
            o.insert("finished".into(), finished.into());
            // How far the delivered rows reach (the newest start CUPTI has handed over, on the
            // database's clock): with the process's end (the commit's time) it tells how much
            // of a SIGKILLed process's last moments CUPTI had not delivered yet.
            if self.frontier > 0 {
                o.insert("delivered_through_ns".into(), self.ts(self.frontier).into());
                // How long each kind is held now (ns): with the last commit and the delivered
                // rows, what a SIGKILL loses to ordering.
                let [k, c, a] = self.order.lags(self.frontier);
                o.insert(
                    "lag_ns".into(),
                    serde_json::json!({"kernels": k, "copies": c, "api": a}),
                );
            }
        }
        json.to_string()
    }

    /// Takes `rows` in and writes every row now [`LAG_NS`] behind the frontier.
    pub fn add(&mut self, rows: Collected, api_name: &dyn Fn(bool, u32) -> String) -> Result<()> {
        let newest = rows
            .kernels
            .iter()
            .map(|k| k.start)
            .chain(rows.copies.iter().map(|c| c.start))
            .chain(rows.apis.iter().map(|a| a.start))
            .chain(rows.allocs.iter().map(|a| a.timestamp))
            .chain(rows.markers.iter().map(|m| m.timestamp))
            .max()
            .unwrap_or(0);
        self.frontier = self.frontier.max(newest);
        for k in &rows.kernels {
            self.order.observe(0, k.start);
        }
        for c in &rows.copies {
            self.order.observe(1, c.start);
        }
        for a in &rows.apis {
            self.order.observe(2, a.start);
        }
        self.tids.advance(self.frontier);
        self.regions.advance(self.frontier);
        for a in &rows.apis {
            self.tids.insert_new(a.correlation, a.tid as i64);
        }
        self.counts.dropped += rows.dropped;
        self.counts.ignored += rows.other;
        let held = &mut self.held;
        held.kernels.extend(rows.kernels);
        held.copies.extend(rows.copies);
        held.apis.extend(rows.apis);
        held.allocs.extend(rows.allocs);
        held.markers.extend(rows.markers);
        let f = self.frontier;
        let limits = [0, 1, 2].map(|i| self.order.limit(i, f));
        self.write_ready(limits, f.saturating_sub(LAG_NS), api_name)?;
        Ok(())
    }

    /// Writes every held row, sets the process's end time and JSON (with the record counts and
    /// `"finished": true` added) and commits the database.
    pub fn finish(
        mut self,
        fini: i64,
        extdata: &serde_json::Value,
        api_name: &dyn Fn(bool, u32) -> String,
    ) -> Result<Counts> {
        self.write_ready([u64::MAX; 3], u64::MAX, api_name)?;
        let json = self.process_json(extdata, true);
        self.h.writer.finish_process(fini, &json)?;
        self.h.writer.finish()?;
        Ok(self.counts)
    }

    /// Writes the held kernels, copies and API calls that start before their kind's limit
    /// (`limits`, in [`crate::order`]'s order), and the markers and allocations before `limit`.
    fn write_ready(
        &mut self,
        limits: [u64; 3],
        limit: u64,
        api_name: &dyn Fn(bool, u32) -> String,
    ) -> Result<()> {
        let (waiting, values, unstarted) = (&self.waiting, &self.values, self.hold_unstarted);
        let (wait, now): (Vec<_>, Vec<_>) = ready(&mut self.held.kernels, limits[0], |k| k.start)
            .into_iter()
            .partition(|k| {
                (waiting.contains(&k.correlation) || unstarted && k.start == 0)
                    && !values.contains_key(&k.correlation)
            });
        self.held.kernels.extend(wait);
        for k in now {
            self.kernel(&k)?;
        }
        for c in ready(&mut self.held.copies, limits[1], |c| c.start) {
            self.copy(&c)?;
        }
        for a in ready(&mut self.held.apis, limits[2], |a| a.start) {
            self.api(&a, api_name)?;
        }
        let markers = before(&mut self.held.markers, limit, |m| m.timestamp);
        self.markers(markers)?;
        for a in before(&mut self.held.allocs, limit, |a| a.timestamp) {
            self.allocation(&a)?;
        }
        Ok(())
    }

    fn tid(&self, correlation: u32, alt: u32) -> i64 {
        self.tids
            .get(&correlation)
            .or_else(|| self.tids.get(&alt))
            .unwrap_or(self.h.pid)
    }

    fn ts(&self, t: u64) -> i64 {
        (t as i64).saturating_add(self.offset)
    }

    /// Counts a row of kind `i` that starts before one already written.
    fn order(&mut self, i: usize, start: u64) {
        if start < self.last[i] {
            self.counts.late += 1;
        }
        self.last[i] = self.last[i].max(start);
    }

    /// A region id: `want` unless taken, else a fresh one above 2^40.
    fn region_id(&mut self, want: i64) -> i64 {
        if self.regions.insert_new(want, ()) {
            return want;
        }
        loop {
            self.spare += 1;
            if self.regions.insert_new(self.spare, ()) {
                return self.spare;
            }
        }
    }

    fn kernel_id(&mut self, k: &crate::records::KernelRow) -> Result<i64> {
        if let Some(&id) = self.symbols.get(&k.name) {
            return Ok(id);
        }
        if !self.code_object {
            self.h.writer.code_object(&CodeObject {
                id: 1,
                agent_id: if self.h.first_gpu > 0 {
                    self.h.first_gpu
                } else {
                    k.device as i64 + 1
                },
                uri: "memory://cuda".into(),
                ..Default::default()
            })?;
            self.code_object = true;
        }
        let id = self.symbols.len() as i64 + 1;
        self.h.writer.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: k.name.clone(),
            display_name: if self.demangle {
                demangle(&k.name)
            } else {
                k.name.clone()
            },
            group_segment_size: k.static_shared as i64,
            private_segment_size: k.local_per_thread as i64,
            arch_vgpr_count: k.registers as i64,
            ..Default::default()
        })?;
        self.symbols.insert(k.name.clone(), id);
        Ok(id)
    }

    fn kernel(&mut self, k: &crate::records::KernelRow) -> Result<()> {
        let values = self.values.remove(&k.correlation);
        // A value is NaN where the launch's pass did not count that metric (iteration
        // multiplexing): it is not written.
        let counted = values
            .as_ref()
            .is_some_and(|v| v.values.iter().any(|x| !x.is_nan()));
        if self.counted_only && !counted {
            return Ok(());
        }
        // A counted kernel's record may lack its start (seen on the H200): the launch call's
        // entry and exit stand in for it, or its end when the launch was not recorded.
        let (start, end) = match &values {
            _ if k.start != 0 && k.end >= k.start => (k.start, k.end),
            Some(v) => (v.enter, v.exit.max(v.enter + 1)),
            None => (k.end, k.end.saturating_add(1)),
        };
        let counters = match values {
            Some(v) if counted => self
                .pmc_ids(k.device)?
                .into_iter()
                .zip(v.values)
                .filter(|(_, x)| !x.is_nan())
                .collect(),
            _ => Vec::new(),
        };
        self.order(0, start);
        self.h.device_seen(k.device)?;
        let kernel_id = self.kernel_id(k)?;
        let g = |n: usize| k.grid[n] as i64 * k.block[n] as i64;
        self.counts.kernels += 1;
        let dispatch = KernelDispatch {
            dispatch_id: self.counts.kernels as i64,
            tid: self.tid(k.correlation, 0),
            agent_id: k.device as i64 + 1,
            kernel_id,
            queue_id: k.stream as i64,
            stream_id: k.stream as i64,
            // As rocprofv3 writes a dispatch's event: stack and parent stack = its own id.
            correlation: Correlation {
                internal: k.correlation as i64,
                ancestor: k.correlation as i64,
                ..Default::default()
            },
            start: self.ts(start),
            end: self.ts(end),
            private_segment_size: k.local_per_thread as i64,
            group_segment_size: k.dynamic_shared as i64,
            workgroup: [k.block[0] as i64, k.block[1] as i64, k.block[2] as i64],
            grid: [g(0), g(1), g(2)],
            counters,
            ..Default::default()
        };
        self.h.writer.kernel_dispatch(&dispatch)
    }

    fn copy(&mut self, c: &crate::records::CopyRow) -> Result<()> {
        self.order(1, c.start);
        self.h.device_seen(c.device)?;
        let gpu = c.device as i64 + 1;
        let (op, src_host, dst_host) = if c.memset {
            ("MEMORY_SET", false, false)
        } else {
            copy_operation(c.copy_kind)
        };
        self.counts.copies += 1;
        let copy = MemoryCopy {
            tid: self.tid(c.correlation, c.runtime_correlation),
            operation: op.into(),
            correlation: Correlation {
                internal: c.correlation as i64,
                ..Default::default()
            },
            start: self.ts(c.start),
            end: self.ts(c.end),
            src_agent_id: if src_host { 0 } else { gpu },
            dst_agent_id: if dst_host { 0 } else { gpu },
            size: c.bytes as i64,
            stream_id: c.stream as i64,
            ..Default::default()
        };
        self.h.writer.memory_copy(&copy)
    }

    /// An API call: a region whose id is the correlation id (a repeated one gets a fresh id).
    fn api(
        &mut self,
        a: &crate::records::ApiRow,
        api_name: &dyn Fn(bool, u32) -> String,
    ) -> Result<()> {
        self.order(2, a.start);
        let name = self
            .names
            .entry((a.driver, a.cbid))
            .or_insert_with(|| api_name(a.driver, a.cbid))
            .clone();
        let id = self.region_id(a.correlation as i64);
        let ancestor = self.ancestor(a, id);
        let (start, mut end) = (self.ts(a.start), self.ts(a.end));
        if end == start {
            end += 1; // a zero-length call would become a sample
        }
        self.counts.api += 1;
        self.h.writer.api_call(&ApiCall {
            kind: if a.driver { DRIVER_KIND } else { RUNTIME_KIND }.into(),
            operation: name,
            tid: a.tid as i64,
            correlation: Correlation {
                internal: id,
                ancestor,
                ..Default::default()
            },
            start,
            end,
            ..Default::default()
        })
    }

    /// The parent stack id of API call `a` (region `id`), as rocprofv3 nests an HSA call in the
    /// HIP call that made it: a driver call inside the last runtime call of its thread (API rows
    /// are written in start order) has that call's id; any other call has 0 (top level).
    fn ancestor(&mut self, a: &crate::records::ApiRow, id: i64) -> i64 {
        if !a.driver {
            self.open_runtime.insert(a.tid, (a.start, a.end, id));
            return 0;
        }
        match self.open_runtime.get(&a.tid) {
            Some(&(start, end, parent)) if a.start >= start && a.end <= end => parent,
            _ => 0,
        }
    }

    /// NVTX markers: start and end records paired by id (across calls), instantaneous ones
    /// as they come.
    fn markers(&mut self, rows: Vec<crate::records::MarkerRow>) -> Result<()> {
        for m in rows {
            let name = m.name.unwrap_or_default();
            let (start, end, tid, name) = if m.flags & MARKER_INSTANTANEOUS != 0 {
                (m.timestamp, m.timestamp, m.tid, name)
            } else if m.flags & MARKER_START != 0 {
                self.open_markers.insert(m.id, (m.timestamp, m.tid, name));
                continue;
            } else if m.flags & MARKER_END != 0 {
                let Some((s, t, n)) = self.open_markers.remove(&m.id) else {
                    continue;
                };
                (s, m.timestamp.max(s + 1), t.or(m.tid), n)
            } else {
                continue;
            };
            let id = self.region_id((1 << 41) + self.markers);
            self.markers += 1;
            self.counts.api += 1;
            let call = ApiCall {
                kind: "MARKER_CORE_API".into(),
                operation: name.clone(),
                tid: tid.map(|t| t as i64).unwrap_or(self.h.pid),
                correlation: Correlation {
                    internal: id,
                    ..Default::default()
                },
                start: self.ts(start),
                end: self.ts(end),
                message: Some(name),
                args: Vec::new(),
            };
            self.h.writer.api_call(&call)?;
        }
        Ok(())
    }

    fn allocation(&mut self, a: &crate::records::AllocRow) -> Result<()> {
        self.h.device_seen(a.device)?;
        self.counts.allocations += 1;
        let row = MemoryAllocation {
            tid: self.tid(a.correlation, 0),
            operation: if a.release {
                "MEMORY_ALLOCATION_FREE"
            } else {
                "MEMORY_ALLOCATION_ALLOCATE"
            }
            .into(),
            correlation: Correlation {
                internal: a.correlation as i64,
                ..Default::default()
            },
            start: self.ts(a.timestamp),
            end: self.ts(a.timestamp),
            agent_id: Some(a.device as i64 + 1),
            address: a.address as i64,
            size: a.bytes as i64,
            stream_id: Some(a.stream as i64),
            ..Default::default()
        };
        self.h.writer.memory_allocation(&row)
    }
}
