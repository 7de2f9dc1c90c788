//! Host-side events: API calls and ROCTx ranges (slices on thread tracks, with their arguments),
//! instant samples and markers, memory copies (slices plus a bytes counter) and memory and
//! scratch allocations (counter tracks).

use rusqlite::types::ValueRef;

use super::encoder::{Arg, Kind};
use super::events::{Lookup, Statements};
use super::nest::Nest;
use super::tracks::TrackKey;
use super::{col, opt_col, Ctx, Out, Pass};
use crate::domain::Domain;
use crate::reader::{CopyRow, IdMap, Order};
use crate::window;
use crate::Result;

/// The Perfetto category of a tracing kind (`HIP_RUNTIME_API_EXT` → `hip_api`).
fn category(kind: &str) -> &'static str {
    match Domain::of_api_kind(kind) {
        Some(d) => d.json_key(),
        None if kind.starts_with("KERNEL") => "kernel_dispatch",
        None if kind.starts_with("MEMORY_COPY") => "memory_copy",
        None if kind.starts_with("MEMORY_ALLOC") => "memory_allocation",
        None if kind.starts_with("SCRATCH") => "scratch_memory",
        None => "none",
    }
}

fn has_rows(cx: &Ctx<'_, '_>, table: &str) -> Result<bool> {
    let Some(t) = cx.src.table(table) else {
        return Ok(false);
    };
    cx.src
        .input
        .connection()
        .query_row(&format!("SELECT EXISTS (SELECT 1 FROM {t})"), [], |r| {
            r.get::<_, bool>(0)
        })
        .map_err(cx.err())
}

struct Call {
    id: i64,
    tid: i64,
    start: i64,
    end: i64,
    name_id: Option<i64>,
    category_id: Option<i64>,
    stack: i64,
    parent: i64,
    external: i64,
    message: Option<String>,
    args: Vec<(String, String)>,
}

/// API calls and ROCTx ranges: slices on their thread's track.
pub fn regions(out: &mut Out, cx: &Ctx<'_, '_>, sorted: bool) -> Result<Pass> {
    let Some(rt) = cx.src.table("rocpd_region") else {
        return Ok(Pass::Done);
    };
    let with_args = has_rows(cx, "rocpd_arg")?;
    let sql = regions_sql(cx, &rt, with_args, sorted);
    let conn = cx.src.input.connection();
    let err = cx.err();
    let mut events = match cx.src.table("rocpd_event") {
        Some(t) => Some(Statements::prepare(conn, &t, true).map_err(&err)?),
        None => None,
    };
    let mut lookup = events.as_mut().map(Lookup::new);
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    let mut nests: IdMap<u64, Nest> = IdMap::default();
    let mut cats: IdMap<i64, &'static str> = IdMap::default();
    let mut cur: Option<Call> = None;
    while let Some(r) = rows.next().map_err(&err)? {
        let id = col(r, 0).map_err(&err)?;
        if cur.as_ref().is_some_and(|c| c.id != id) {
            let c = cur.take();
            if let Some(c) = c {
                if call(out, cx, &mut nests, &mut cats, &c)? == Pass::OutOfOrder {
                    return Ok(Pass::OutOfOrder);
                }
            }
        }
        if cur.is_none() {
            cur = Some(new_call(r, id, lookup.as_mut()).map_err(&err)?);
        }
        if with_args {
            if let (Some(c), Some(a)) = (cur.as_mut(), arg(r).map_err(&err)?) {
                c.args.push(a);
            }
        }
    }
    if let Some(c) = cur.take() {
        if call(out, cx, &mut nests, &mut cats, &c)? == Pass::OutOfOrder {
            return Ok(Pass::OutOfOrder);
        }
    }
    out.close(nests)?;
    Ok(Pass::Done)
}

/// The query of [`regions`] over table `rt`: each region (with its arguments, one row each, when
/// `with_args`) inside the window, in time order when `sorted`, else by id.
fn regions_sql(cx: &Ctx<'_, '_>, rt: &str, with_args: bool, sorted: bool) -> String {
    let (arg_cols, arg_join, arg_order) = match cx.src.table("rocpd_arg") {
        Some(a) if with_args => (
            ", A.name, A.value",
            format!("LEFT JOIN {a} A ON A.event_id = R.event_id"),
            ", A.position",
        ),
        _ => ("", String::new(), ""),
    };
    let order = if sorted {
        "R.start, R.\"end\" DESC, R.id"
    } else {
        "R.id"
    };
    format!(
        "SELECT R.id, R.tid, R.start, R.\"end\", R.name_id, R.event_id{arg_cols} FROM {rt} R {arg_join} \
         WHERE {} ORDER BY {order}{arg_order}",
        window::sql(&cx.window, "R.start", "R.\"end\"")
    )
}

/// The call `id` from the first row of its query, with what its event says (category, stack,
/// correlation, message) when there is an event table.
fn new_call(
    r: &rusqlite::Row<'_>,
    id: i64,
    lookup: Option<&mut Lookup<'_, '_>>,
) -> rusqlite::Result<Call> {
    let mut c = Call {
        id,
        tid: col(r, 1)?,
        start: col(r, 2)?,
        end: col(r, 3)?,
        name_id: opt_col(r, 4)?,
        category_id: None,
        stack: id,
        parent: 0,
        external: 0,
        message: None,
        args: Vec::new(),
    };
    if let (Some(l), Some(e)) = (lookup, opt_col(r, 5)?) {
        if let Some(ev) = l.find(e)? {
            c.category_id = ev.category_id;
            c.stack = ev.stack_id.unwrap_or(id);
            c.parent = ev.parent_stack_id;
            c.external = ev.correlation_id;
            c.message = ev.message;
        }
    }
    Ok(c)
}

/// The argument (name, value) on a row of the query with arguments; None on a row without one.
fn arg(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<(String, String)>> {
    let ValueRef::Text(n) = r.get_ref(6)? else {
        return Ok(None);
    };
    let v = match r.get_ref(7)? {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        _ => String::new(),
    };
    Ok(Some((String::from_utf8_lossy(n).into_owned(), v)))
}

fn call(
    out: &mut Out,
    cx: &Ctx<'_, '_>,
    nests: &mut IdMap<u64, Nest>,
    cats: &mut IdMap<i64, &'static str>,
    c: &Call,
) -> Result<Pass> {
    let track = out.track(cx, TrackKey::Thread(c.tid))?;
    let nest = nests.entry(track).or_default();
    out.edges.clear();
    if nest.open(c.start, c.end, &mut out.edges).is_err() {
        return Ok(Pass::OutOfOrder);
    }
    let dims = &cx.dims;
    let cat = *cats
        .entry(c.category_id.unwrap_or(-1))
        .or_insert_with(|| category(dims.string(c.category_id)));
    let name_iid = match &c.message {
        Some(m) => out.seq.name_iid(m),
        None => {
            let id = c.name_id.unwrap_or(-1);
            out.seq
                .keyed_name_iid(cx.key(2, id), || dims.string(c.name_id))
        }
    };
    let mut args: Vec<Arg<'_>> = Vec::with_capacity(4 + c.args.len());
    args.push(Arg::Int("corr_id", c.stack));
    if c.parent != 0 {
        args.push(Arg::Int("ancestor_id", c.parent));
    }
    if c.external != 0 {
        args.push(Arg::Int("external_id", c.external));
    }
    for (n, v) in &c.args {
        args.push(Arg::Str(n, v));
    }
    let flow = [cx.ids.flow(c.stack)];
    out.flush_edges(track, name_iid, Some(cat), &args, &flow)?;
    out.counts.api += 1;
    Ok(Pass::Done)
}

/// Calls without duration and ROCTx marks: instants on their thread's track.
pub fn samples(out: &mut Out, cx: &Ctx<'_, '_>, _sorted: bool) -> Result<Pass> {
    let (Some(st), Some(tt)) = (cx.src.table("rocpd_sample"), cx.src.table("rocpd_track")) else {
        return Ok(Pass::Done);
    };
    let sql = format!(
        "SELECT S.id, T.tid, S.timestamp, T.name_id, S.event_id FROM {st} S \
         LEFT JOIN {tt} T ON T.id = S.track_id WHERE {} ORDER BY S.id",
        window::sql(&cx.window, "S.timestamp", "S.timestamp")
    );
    let conn = cx.src.input.connection();
    let err = cx.err();
    let mut events = match cx.src.table("rocpd_event") {
        Some(t) => Some(Statements::prepare(conn, &t, true).map_err(&err)?),
        None => None,
    };
    let mut lookup = events.as_mut().map(Lookup::new);
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    let mut cats: IdMap<i64, &'static str> = IdMap::default();
    let dims = &cx.dims;
    while let Some(r) = rows.next().map_err(&err)? {
        let id = col(r, 0).map_err(&err)?;
        let tid = col(r, 1).map_err(&err)?;
        let ts = col(r, 2).map_err(&err)?;
        let name_id = opt_col(r, 3).map_err(&err)?;
        let ev = match (lookup.as_mut(), opt_col(r, 4).map_err(&err)?) {
            (Some(l), Some(e)) => l.find(e).map_err(&err)?,
            _ => None,
        };
        let ev = ev.unwrap_or_default();
        let cat_id = ev.category_id;
        let stack = ev.stack_id.unwrap_or(id);
        let msg = ev.message;
        let track = out.track(cx, TrackKey::Thread(tid))?;
        let cat = *cats
            .entry(cat_id.unwrap_or(-1))
            .or_insert_with(|| category(dims.string(cat_id)));
        let name_iid = match &msg {
            Some(m) => out.seq.name_iid(m),
            None => out
                .seq
                .keyed_name_iid(cx.key(2, name_id.unwrap_or(-1)), || dims.string(name_id)),
        };
        out.seq.event(
            ts,
            track,
            Kind::Instant,
            name_iid,
            Some(cat),
            &[Arg::Int("corr_id", stack)],
            &[],
            None,
        )?;
        out.counts.instants += 1;
    }
    Ok(Pass::Done)
}

/// Memory copies: slices on copy tracks, linked to the API call that issued them, and a
/// bytes-in-flight counter per destination agent.
pub fn copies(out: &mut Out, cx: &Ctx<'_, '_>, sorted: bool) -> Result<Pass> {
    let order = if sorted { Order::Start } else { Order::Id };
    let mut nests: IdMap<u64, Nest> = IdMap::default();
    let flow = cx
        .src
        .copy_scan(order, |m| Ok(copy(out, cx, &mut nests, m)?.flow()))?;
    if flow.is_break() {
        return Ok(Pass::OutOfOrder);
    }
    out.close(nests)?;
    Ok(Pass::Done)
}

/// One memory copy: its slice and its two points on the destination's bytes counter.
fn copy(
    out: &mut Out,
    cx: &Ctx<'_, '_>,
    nests: &mut IdMap<u64, Nest>,
    m: &CopyRow,
) -> Result<Pass> {
    let dims = &cx.dims;
    let (stack, external) = (m.corr.internal, m.corr.external);
    let key = if cx.opts.group_by_queue {
        TrackKey::CopyThread(m.dst_agent_id.unwrap_or(-1), m.tid)
    } else {
        TrackKey::CopyStream(m.stream_id)
    };
    let track = out.track(cx, key)?;
    let nest = nests.entry(track).or_default();
    out.edges.clear();
    if nest.open(m.start, m.end, &mut out.edges).is_err() {
        return Ok(Pass::OutOfOrder);
    }
    let name_iid = out
        .seq
        .keyed_name_iid(cx.key(2, m.name_id.unwrap_or(-1)), || {
            dims.string(m.name_id)
        });
    let mut args = vec![
        Arg::Int("copy_id", m.id),
        Arg::Int("size", m.size),
        Arg::Interned("src_agent", dims.agent_label(m.src_agent_id)),
        Arg::Interned("dst_agent", dims.agent_label(m.dst_agent_id)),
        Arg::Int("corr_id", stack),
        Arg::Int("stream", m.stream_id),
        Arg::Int("tid", m.tid),
    ];
    if external != 0 {
        args.push(Arg::Int("external_id", external));
    }
    let flow = [cx.ids.flow(stack)];
    let flows: &[u64] = if stack != 0 { &flow } else { &[] };
    if stack != 0 {
        out.counts.flows += 1;
    }
    out.flush_edges(track, name_iid, Some("memory_copy"), &args, flows)?;
    out.counts.copies += 1;
    if let Some(a) = m.dst_agent_id {
        let t = out.track(cx, TrackKey::CopyBytes(a))?;
        let size = Some(m.size as f64);
        out.seq
            .event(m.start, t, Kind::Counter, 0, None, &[], &[], size)?;
        out.seq
            .event(m.end, t, Kind::Counter, 0, None, &[], &[], Some(0.0))?;
        out.counts.counter_points += 2;
    }
    Ok(Pass::Done)
}

/// Memory allocations (bytes allocated per agent, a running total matched by address) and
/// scratch memory (bytes per agent): counter tracks, one point per row.
pub fn allocations(out: &mut Out, cx: &Ctx<'_, '_>, _sorted: bool) -> Result<Pass> {
    let Some(mt) = cx.src.table("rocpd_memory_allocate") else {
        return Ok(Pass::Done);
    };
    let sql = format!(
        "SELECT M.id, M.agent_id, M.type, M.level, M.start, M.address, M.size FROM {mt} M WHERE {} \
         ORDER BY M.start, M.id",
        window::sql(&cx.window, "M.start", "M.\"end\"")
    );
    let conn = cx.src.input.connection();
    let err = cx.err();
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    let mut live: IdMap<i64, (i64, i64)> = IdMap::default();
    let mut totals: IdMap<i64, i64> = IdMap::default();
    let mut unknown_freed = 0i64;
    while let Some(r) = rows.next().map_err(&err)? {
        let agent = opt_col(r, 1).map_err(&err)?;
        let kind = text(r.get_ref(2).map_err(&err)?);
        let level = text(r.get_ref(3).map_err(&err)?);
        let start = col(r, 4).map_err(&err)?;
        let address = col(r, 5).map_err(&err)?;
        let size = col(r, 6).map_err(&err)?;
        let alloc = kind == "ALLOC";
        let (track, value) = if level == "SCRATCH" {
            let a = agent.unwrap_or(-1);
            let v = if alloc { size } else { 0 };
            (out.track(cx, TrackKey::Scratch(a))?, v)
        } else if alloc {
            let a = agent.unwrap_or(-1);
            live.insert(address, (a, size));
            let t = totals.entry(a).or_default();
            *t += size;
            let v = *t;
            (out.track(cx, TrackKey::Allocated(Some(a)))?, v)
        } else {
            match live.remove(&address) {
                Some((a, sz)) => {
                    let t = totals.entry(a).or_default();
                    *t -= sz;
                    let v = *t;
                    (out.track(cx, TrackKey::Allocated(Some(a)))?, v)
                }
                None => {
                    unknown_freed += size;
                    (out.track(cx, TrackKey::Allocated(None))?, unknown_freed)
                }
            }
        };
        out.seq.event(
            start,
            track,
            Kind::Counter,
            0,
            None,
            &[],
            &[],
            Some(value as f64),
        )?;
        out.counts.counter_points += 1;
    }
    Ok(Pass::Done)
}

fn text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        _ => String::new(),
    }
}

/// The sampled counters (`--spm` on CUDA, table `rocpd_spm_sample`): one counter track per agent
/// and counter, a point at each sample's start.
pub fn spm(out: &mut Out, cx: &Ctx<'_, '_>, _sorted: bool) -> Result<Pass> {
    let conn = cx.src.input.connection();
    let exists: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'rocpd_spm_sample'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false);
    if !exists {
        return Ok(Pass::Done);
    }
    let sql = format!(
        "SELECT agent_id, start, counter, value FROM rocpd_spm_sample S WHERE {} ORDER BY start, id",
        window::sql(&cx.window, "S.start", "S.\"end\"")
    );
    let err = cx.err();
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    while let Some(r) = rows.next().map_err(&err)? {
        let agent = opt_col(r, 0).map_err(&err)?.unwrap_or(-1);
        let start = col(r, 1).map_err(&err)?;
        let name = text(r.get_ref(2).map_err(&err)?);
        let value: Option<f64> = r.get(3).map_err(&err)?;
        let names = &mut out.declared.spm_names;
        let i = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name.to_owned());
                names.len() - 1
            }
        };
        let track = out.track(cx, TrackKey::Spm(agent, i))?;
        out.seq
            .event(start, track, Kind::Counter, 0, None, &[], &[], value)?;
        out.counts.counter_points += 1;
    }
    Ok(Pass::Done)
}
