//! The OTF2 archive writer (output-formats spec §4.3): a system tree with one node, a PROCESS
//! location group per process and an ACCELERATOR group per agent; CPU_THREAD locations for API
//! calls and ROCTx ranges, ACCELERATOR_STREAM locations for kernels (per agent and queue),
//! copies (per destination agent) and memory operations (per agent); regions with roles
//! FUNCTION (paradigm HIP, ROCTx: USER), DATA_TRANSFER and ALLOCATE; ns clock properties.
//!
//! Rows are read in start order per table (an SQL sort, so memory stays bounded) and made to nest
//! per location like the Perfetto slices; OTF2 writes each location's events in chunks.

use std::collections::HashMap;

use std::ops::ControlFlow;

use rocprof_otf2::{Archive, EvtWriter, GroupType, LocationType, Paradigm, RegionRole};

use super::Counts;
use crate::domain::Domain;
use crate::output::OutputSet;
use crate::pftrace::nest::{Edge, Nest};
use crate::pftrace::{col, opt_col, PftraceOptions};
use crate::reader::{read_error, roctx_message, Dims, Order, Source};
use crate::window::{self, MaybeWindow};
use crate::{Error, Result};

/// Event and definition chunks: one per open location, written straight to its file when full.
const CHUNK: u64 = rocprof_otf2::FILE_BUFFER;

fn otf2_err(dest: &std::path::Path, e: rocprof_otf2::Otf2Error) -> Error {
    Error::OutputWrite {
        path: dest.to_path_buf(),
        reason: format!(
            "{e}; check free space and permissions or choose another directory with -d"
        ),
    }
}

#[derive(Default)]
struct Defs {
    strings: HashMap<String, u32>,
    regions: HashMap<(u32, u8, u8), u32>,
    region_list: Vec<(u32, u32, RegionRole, Paradigm)>,
    groups: Vec<(u32, u32, GroupType, u32)>,
    locations: Vec<(u64, u32, LocationType, u64, u32)>,
}

impl Defs {
    fn string(&mut self, s: &str) -> u32 {
        if let Some(&r) = self.strings.get(s) {
            return r;
        }
        let r = self.strings.len() as u32;
        self.strings.insert(s.to_owned(), r);
        r
    }

    fn region(&mut self, name: &str, role: RegionRole, paradigm: Paradigm) -> u32 {
        let n = self.string(name);
        let key = (n, role as u8, paradigm as u8);
        if let Some(&r) = self.regions.get(&key) {
            return r;
        }
        let r = self.region_list.len() as u32;
        self.regions.insert(key, r);
        self.region_list.push((r, n, role, paradigm));
        r
    }
}

struct Loc {
    writer: EvtWriter,
    nest: Nest,
    regions: Vec<u32>,
    name: u32,
    kind: LocationType,
    group: u32,
}

struct State<'d> {
    archive: Archive,
    defs: Defs,
    open: HashMap<(u8, i64, i64), Loc>,
    next_location: u64,
    edges: Vec<Edge>,
    min: u64,
    max: u64,
    counts: Counts,
    dest: &'d std::path::Path,
}

impl State<'_> {
    /// Enters `region` over `[start, end]` on the location `key`, leaving the slices it ends.
    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        key: (u8, i64, i64),
        loc_name: impl FnOnce(&mut Defs) -> (u32, LocationType, u32),
        region: u32,
        start: i64,
        end: i64,
    ) -> Result<()> {
        let dest = self.dest;
        if !self.open.contains_key(&key) {
            let (name, kind, group) = loc_name(&mut self.defs);
            let l = self.next_location;
            self.next_location += 1;
            let writer = self.archive.evt_writer(l).map_err(|e| otf2_err(dest, e))?;
            self.open.insert(
                key,
                Loc {
                    writer,
                    nest: Nest::default(),
                    regions: Vec::new(),
                    name,
                    kind,
                    group,
                },
            );
        }
        let loc = self.open.get_mut(&key).expect("inserted above");
        self.edges.clear();
        // Rows come sorted by start, so the nest never reports disorder.
        let _ = loc.nest.open(start, end, &mut self.edges);
        for e in &self.edges {
            match *e {
                Edge::End(t) => {
                    let r = loc.regions.pop().unwrap_or(region);
                    loc.writer
                        .leave(t.max(0) as u64, r)
                        .map_err(|e| otf2_err(dest, e))?;
                    self.max = self.max.max(t.max(0) as u64);
                }
                Edge::Begin(t) => {
                    loc.regions.push(region);
                    loc.writer
                        .enter(t.max(0) as u64, region)
                        .map_err(|e| otf2_err(dest, e))?;
                    self.min = self.min.min(t.max(0) as u64);
                }
            }
        }
        self.counts.regions += 1;
        Ok(())
    }

    /// Leaves every open region and closes every open location.
    fn close_locations(&mut self) -> Result<()> {
        let dest = self.dest;
        let mut open: Vec<((u8, i64, i64), Loc)> = self.open.drain().collect();
        open.sort_by_key(|(k, _)| *k);
        for (_, mut loc) in open {
            self.edges.clear();
            loc.nest.close_all(&mut self.edges);
            for e in &self.edges {
                if let Edge::End(t) = *e {
                    let r = loc.regions.pop().unwrap_or(0);
                    loc.writer
                        .leave(t.max(0) as u64, r)
                        .map_err(|e| otf2_err(dest, e))?;
                    self.max = self.max.max(t.max(0) as u64);
                }
            }
            let l = loc.writer.location;
            let n = self
                .archive
                .close_evt_writer(loc.writer)
                .map_err(|e| otf2_err(dest, e))?;
            self.defs
                .locations
                .push((l, loc.name, loc.kind, n, loc.group));
        }
        Ok(())
    }
}

fn paradigm(kind: &str) -> Paradigm {
    match Domain::of_api_kind(kind) {
        Some(Domain::HipApi) => Paradigm::Hip,
        Some(Domain::MarkerApi) => Paradigm::User,
        _ => Paradigm::Unknown,
    }
}

fn agent_name(dims: &Dims, id: i64) -> String {
    match dims.agents.get(&id) {
        Some(a) => format!("{} Agent-{}", a.agent_type, a.logical_index),
        None => format!("Agent-{id}"),
    }
}

/// The definitions of one process: its location group and those of its agents.
struct Process<'d> {
    /// Index of the process (in GUID order).
    index: i64,
    /// Its dimension tables.
    dims: &'d Dims,
    /// Its location group.
    group: u32,
    /// The location group of each agent met so far.
    agent_groups: HashMap<i64, u32>,
}

impl Process<'_> {
    /// The location group of agent `a`, defined on first use.
    fn agent_group(&mut self, defs: &mut Defs, a: i64) -> u32 {
        let (dims, group) = (self.dims, self.group);
        *self.agent_groups.entry(a).or_insert_with(|| {
            let g = defs.groups.len() as u32;
            let pid = dims.process.pid;
            let n = defs.string(&format!("{} (process {pid})", agent_name(dims, a)));
            defs.groups.push((g, n, GroupType::Accelerator, group));
            g
        })
    }
}

/// Writes the archive for `sources` into a temporary directory of `out`.
pub fn write(
    sources: &[Source<'_>],
    opts: PftraceOptions,
    window: MaybeWindow,
    out: &mut OutputSet,
    name: &str,
) -> Result<Counts> {
    let archive_name = format!("{name}_results");
    let dest = out.dest(&format!("{archive_name}.otf2"));
    let tmp = out.temp_dir(&archive_name)?;
    let archive = Archive::create(&tmp, &archive_name, CHUNK).map_err(|e| otf2_err(&dest, e))?;
    let mut st = State {
        archive,
        defs: Defs::default(),
        open: HashMap::new(),
        next_location: 0,
        edges: Vec::new(),
        min: u64::MAX,
        max: 0,
        counts: Counts::default(),
        dest: &dest,
    };
    let root = (st.defs.string("rocprof-attach"), st.defs.string("machine"));
    for (pi, src) in sources.iter().enumerate() {
        let dims = src.dims(opts.agent_index)?;
        let pname = st.defs.string(&format!("Process {}", dims.process.pid));
        let group = st.defs.groups.len() as u32;
        st.defs
            .groups
            .push((group, pname, GroupType::Process, u32::MAX));
        let mut p = Process {
            index: pi as i64,
            dims: &dims,
            group,
            agent_groups: HashMap::new(),
        };
        host(&mut st, &p, src, window)?;
        st.close_locations()?;
        kernels(&mut st, &mut p, src, opts)?;
        st.close_locations()?;
        copies(&mut st, &mut p, src)?;
        st.close_locations()?;
        allocations(&mut st, &mut p, src, window)?;
        st.close_locations()?;
    }
    if let Some(w) = &window {
        if st.counts.regions == 0 {
            return Err(window::empty(w));
        }
    }
    let locations: Vec<u64> = st.defs.locations.iter().map(|l| l.0).collect();
    st.counts.locations = locations.len() as u64;
    st.archive
        .finish_events(&locations)
        .map_err(|e| otf2_err(&dest, e))?;
    global_defs(&mut st, root)?;
    st.archive.close().map_err(|e| otf2_err(&dest, e))?;
    for ext in [".otf2", ".def", ""] {
        let entry = format!("{archive_name}{ext}");
        out.adopt(tmp.join(&entry), &entry);
    }
    Ok(st.counts)
}

/// API calls, ROCTx ranges and samples, per thread (read with the event table joined, sorted
/// by start).
fn host(st: &mut State<'_>, p: &Process<'_>, src: &Source<'_>, window: MaybeWindow) -> Result<()> {
    let ev = |alias: &str| match src.table("rocpd_event") {
        Some(e) => format!("LEFT JOIN {e} E ON E.id = {alias}.event_id"),
        None => {
            "LEFT JOIN (SELECT NULL AS id, NULL AS category_id, NULL AS extdata) E ON 0".to_owned()
        }
    };
    let mut parts = Vec::new();
    if let Some(r) = src.table("rocpd_region") {
        parts.push(format!(
            "SELECT R.tid AS tid, R.start AS s, R.\"end\" AS e, R.name_id AS n, E.category_id AS c, E.extdata AS x \
             FROM {r} R {} WHERE {}",
            ev("R"),
            window::sql(&window, "R.start", "R.\"end\"")
        ));
    }
    if let (Some(s), Some(t)) = (src.table("rocpd_sample"), src.table("rocpd_track")) {
        parts.push(format!(
            "SELECT T.tid, S.timestamp, S.timestamp, T.name_id, E.category_id, E.extdata FROM {s} S \
             LEFT JOIN {t} T ON T.id = S.track_id {} WHERE {}",
            ev("S"),
            window::sql(&window, "S.timestamp", "S.timestamp")
        ));
    }
    if parts.is_empty() {
        return Ok(());
    }
    let err = |e| read_error(&src.input.path, e);
    let sql = format!("{} ORDER BY 2, 3 DESC", parts.join(" UNION ALL "));
    let mut stmt = src.input.connection().prepare(&sql).map_err(err)?;
    let mut rows = stmt.query([]).map_err(err)?;
    let dims = p.dims;
    while let Some(r) = rows.next().map_err(err)? {
        let tid = col(r, 0).map_err(err)?;
        let (s, e) = (col(r, 1).map_err(err)?, col(r, 2).map_err(err)?);
        let kind = dims.string(opt_col(r, 4).map_err(err)?);
        let name = roctx_message(r.get_ref(5).map_err(err)?)
            .unwrap_or_else(|| dims.string(opt_col(r, 3).ok().flatten()).to_owned());
        let region = st.defs.region(&name, RegionRole::Function, paradigm(kind));
        let loc = |d: &mut Defs| {
            let n = d.string(&format!("Thread {tid}"));
            (n, LocationType::CpuThread, p.group)
        };
        st.slice((0, p.index, tid), loc, region, s, e)?;
    }
    Ok(())
}

/// Kernels per agent and queue, from the shared dispatch reader in start order.
fn kernels(
    st: &mut State<'_>,
    p: &mut Process<'_>,
    src: &Source<'_>,
    opts: PftraceOptions,
) -> Result<()> {
    let mut queues: HashMap<(i64, i64), i64> = HashMap::new();
    let dims = p.dims;
    src.dispatch_scan(Order::Start, false, |k, _| {
        let name = dims.trace_kernel_name(k.kernel_id, k.region_name_id, opts.kernel_rename);
        let region = st.defs.region(name, RegionRole::Function, Paradigm::Hip);
        let (a, q) = (k.agent_id, k.queue_id);
        let n = queues.len() as i64;
        let qn = *queues.entry((a, q)).or_insert(n);
        let group = p.agent_group(&mut st.defs, a);
        let an = agent_name(dims, a);
        let loc = |d: &mut Defs| {
            let n = d.string(&format!("Compute on {an}, Queue {qn}"));
            (n, LocationType::AcceleratorStream, group)
        };
        st.slice((1, p.index, (a << 32) ^ q), loc, region, k.start, k.end)?;
        Ok(ControlFlow::Continue(()))
    })
    .map(|_| ())
}

/// Copies per destination agent, from the shared copy reader in start order.
fn copies(st: &mut State<'_>, p: &mut Process<'_>, src: &Source<'_>) -> Result<()> {
    let dims = p.dims;
    src.copy_scan(Order::Start, |m| {
        let a = m.dst_agent_id.unwrap_or(-1);
        let name = dims.string(m.name_id);
        let region = st
            .defs
            .region(name, RegionRole::DataTransfer, Paradigm::Hip);
        let group = p.agent_group(&mut st.defs, a);
        let an = agent_name(dims, a);
        let loc = |d: &mut Defs| {
            let n = d.string(&format!("Copy to {an}"));
            (n, LocationType::AcceleratorStream, group)
        };
        st.slice((2, p.index, a), loc, region, m.start, m.end)?;
        Ok(ControlFlow::Continue(()))
    })
    .map(|_| ())
}

/// Memory and scratch allocations per agent, sorted by start.
fn allocations(
    st: &mut State<'_>,
    p: &mut Process<'_>,
    src: &Source<'_>,
    window: MaybeWindow,
) -> Result<()> {
    let Some(m) = src.table("rocpd_memory_allocate") else {
        return Ok(());
    };
    let sql = format!(
        "SELECT M.agent_id, M.start, M.\"end\", M.type, M.level FROM {m} M WHERE {} ORDER BY M.start, M.\"end\" DESC, M.id",
        window::sql(&window, "M.start", "M.\"end\"")
    );
    let err = |e| read_error(&src.input.path, e);
    let mut stmt = src.input.connection().prepare(&sql).map_err(err)?;
    let mut rows = stmt.query([]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let a = opt_col(r, 0).map_err(err)?.unwrap_or(-1);
        let (s, e) = (col(r, 1).map_err(err)?, col(r, 2).map_err(err)?);
        let text = |i| r.get::<_, Option<String>>(i).map(Option::unwrap_or_default);
        let (kind, level) = (text(3).map_err(err)?, text(4).map_err(err)?);
        let op = crate::model::allocation_operation(&kind, &level);
        let region = st.defs.region(op, RegionRole::Allocate, Paradigm::Hip);
        let (group, an) = if a >= 0 {
            (p.agent_group(&mut st.defs, a), agent_name(p.dims, a))
        } else {
            (p.group, "unknown agent".to_owned())
        };
        let loc = |d: &mut Defs| {
            let n = d.string(&format!("Memory Operation at {an}"));
            (n, LocationType::AcceleratorStream, group)
        };
        st.slice((3, p.index, a), loc, region, s, e)?;
    }
    Ok(())
}

/// The global definitions: clock, strings, the system tree, location groups, locations and
/// regions.
fn global_defs(st: &mut State<'_>, (root_name, root_class): (u32, u32)) -> Result<()> {
    let dest = st.dest;
    let e = |e| otf2_err(dest, e);
    let mut g = st.archive.global_defs().map_err(e)?;
    let (min, max) = if st.min == u64::MAX {
        (0, 0)
    } else {
        (st.min, st.max)
    };
    g.clock(min, max - min).map_err(e)?;
    let mut strings: Vec<(&String, &u32)> = st.defs.strings.iter().collect();
    strings.sort_by_key(|s| *s.1);
    for (s, r) in strings {
        g.string(*r, s).map_err(e)?;
    }
    g.system_tree_node(
        0,
        root_name,
        root_class,
        rocprof_otf2::UNDEFINED_SYSTEM_TREE_NODE,
    )
    .map_err(e)?;
    for &(r, n, kind, creator) in &st.defs.groups {
        g.location_group(r, n, kind, 0, creator).map_err(e)?;
    }
    for &(r, n, kind, events, group) in &st.defs.locations {
        g.location(r, n, kind, events, group).map_err(e)?;
    }
    for &(r, n, role, paradigm) in &st.defs.region_list {
        g.region(r, n, role, paradigm).map_err(e)?;
    }
    Ok(())
}
