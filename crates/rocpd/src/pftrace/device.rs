//! Kernel dispatches (slices on stream or queue tracks, with their dispatch's own PMC values as
//! arguments) and PMC counter tracks.

use super::encoder::{Arg, Kind};
use super::events::{Lookup, Statements};
use super::nest::Nest;
use super::tracks::TrackKey;
use super::{col, opt_col, Ctx, Out, Pass};
use crate::reader::IdMap;
use crate::window;
use crate::Result;

#[derive(Default, Clone)]
struct Kernel {
    id: i64,
    tid: i64,
    agent: i64,
    kernel_id: i64,
    queue: i64,
    stream: i64,
    start: i64,
    end: i64,
    scratch: i64,
    lds: i64,
    wg: [i64; 3],
    grid: [i64; 3],
    region_name_id: Option<i64>,
    stack: i64,
    external: i64,
}

/// Writes every kernel dispatch of the source (in the window). With `sorted`, rows are read in
/// start order per track (an SQL sort); otherwise in id order, which is start order in
/// databases rocprofv3 writes, and [`Pass::OutOfOrder`] is returned if it is not.
pub fn kernels(out: &mut Out, cx: &Ctx<'_, '_>, sorted: bool) -> Result<Pass> {
    let src = cx.src;
    let Some(kd) = src.table("rocpd_kernel_dispatch") else {
        return Ok(Pass::Done);
    };
    let pmc = match src.table("rocpd_pmc_event") {
        Some(pe) if !cx.dims.pmcs.is_empty() => Some(pe),
        _ => None,
    };
    let (pmc_cols, pmc_join, pmc_order) = match &pmc {
        Some(pe) => (
            ", C.pmc_id, C.v",
            format!(
                "LEFT JOIN (SELECT event_id, pmc_id, SUM(value) AS v FROM {pe} GROUP BY event_id, pmc_id) C \
                 ON C.event_id = K.event_id"
            ),
            ", C.pmc_id",
        ),
        None => ("", String::new(), ""),
    };
    let (i, n) = cx.shard;
    let key = if cx.opts.group_by_queue {
        "(K.agent_id * 65599 + K.queue_id)"
    } else {
        "K.stream_id"
    };
    let shard = format!("((({key} % {n}) + {n}) % {n}) = {i}");
    let order = if sorted {
        "K.start, K.\"end\" DESC, K.id"
    } else {
        "K.id"
    };
    let sql = format!(
        "SELECT K.id, K.tid, K.agent_id, K.kernel_id, K.queue_id, K.stream_id, K.start, K.\"end\", \
         K.private_segment_size, K.group_segment_size, K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z, \
         K.grid_size_x, K.grid_size_y, K.grid_size_z, K.region_name_id, K.event_id, NULL{pmc_cols} \
         FROM {kd} K {pmc_join} WHERE {} AND {shard} ORDER BY {order}{pmc_order}",
        window::sql(&cx.window, "K.start", "K.\"end\"")
    );
    let conn = src.input.connection();
    let err = cx.err();
    let mut events = match src.table("rocpd_event") {
        Some(t) => Some(Statements::prepare(conn, &t, false).map_err(&err)?),
        None => None,
    };
    let mut lookup = events.as_mut().map(Lookup::new);
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    let mut nests: IdMap<u64, Nest> = IdMap::default();
    let mut cur: Option<Kernel> = None;
    let mut counters: Vec<(i64, f64)> = Vec::new();
    while let Some(r) = rows.next().map_err(&err)? {
        let id = col(r, 0).map_err(&err)?;
        if cur.as_ref().is_some_and(|k| k.id != id) {
            let k = cur.take().unwrap_or_default();
            if emit(out, cx, &mut nests, &k, &counters)? == Pass::OutOfOrder {
                return Ok(Pass::OutOfOrder);
            }
            counters.clear();
        }
        if cur.is_none() {
            cur = Some(Kernel {
                id,
                tid: col(r, 1).map_err(&err)?,
                agent: col(r, 2).map_err(&err)?,
                kernel_id: col(r, 3).map_err(&err)?,
                queue: col(r, 4).map_err(&err)?,
                stream: col(r, 5).map_err(&err)?,
                start: col(r, 6).map_err(&err)?,
                end: col(r, 7).map_err(&err)?,
                scratch: col(r, 8).map_err(&err)?,
                lds: col(r, 9).map_err(&err)?,
                wg: [
                    col(r, 10).map_err(&err)?,
                    col(r, 11).map_err(&err)?,
                    col(r, 12).map_err(&err)?,
                ],
                grid: [
                    col(r, 13).map_err(&err)?,
                    col(r, 14).map_err(&err)?,
                    col(r, 15).map_err(&err)?,
                ],
                region_name_id: opt_col(r, 16).map_err(&err)?,
                stack: 0,
                external: 0,
            });
            if let (Some(l), Some(e)) = (lookup.as_mut(), opt_col(r, 17).map_err(&err)?) {
                if let (Some(k), Some(ev)) = (cur.as_mut(), l.find(e).map_err(&err)?) {
                    k.stack = ev.stack_id.unwrap_or(0);
                    k.external = ev.correlation_id;
                }
            }
        }
        if pmc.is_some() {
            if let Some(p) = opt_col(r, 19).map_err(&err)? {
                let v: f64 = r.get::<_, Option<f64>>(20).map_err(&err)?.unwrap_or(0.0);
                counters.push((p, v));
            }
        }
    }
    if let Some(k) = cur.take() {
        if emit(out, cx, &mut nests, &k, &counters)? == Pass::OutOfOrder {
            return Ok(Pass::OutOfOrder);
        }
    }
    let mut tracks: Vec<(u64, Nest)> = nests.into_iter().collect();
    tracks.sort_by_key(|t| t.0);
    for (track, mut nest) in tracks {
        out.edges.clear();
        nest.close_all(&mut out.edges);
        out.flush_edges(track, 0, None, &[], &[])?;
        out.counts.adjusted += nest.adjusted;
    }
    Ok(Pass::Done)
}

fn emit(
    out: &mut Out,
    cx: &Ctx<'_, '_>,
    nests: &mut IdMap<u64, Nest>,
    k: &Kernel,
    counters: &[(i64, f64)],
) -> Result<Pass> {
    let key = if cx.opts.group_by_queue {
        TrackKey::Queue(k.agent, k.queue)
    } else {
        TrackKey::Stream(k.stream)
    };
    let track = out.track(cx, key)?;
    let nest = nests.entry(track).or_default();
    out.edges.clear();
    if nest.open(k.start, k.end, &mut out.edges).is_err() {
        return Ok(Pass::OutOfOrder);
    }
    let dims = &cx.dims;
    let renamed = if cx.opts.kernel_rename {
        Some(dims.string(k.region_name_id)).filter(|s| !s.is_empty())
    } else {
        None
    };
    let name_iid = match renamed {
        Some(n) => out.seq.name_iid(n),
        None => out.seq.keyed_name_iid(cx.key(1, k.kernel_id), || {
            dims.symbols
                .get(&k.kernel_id)
                .map(|s| {
                    if s.display_name.is_empty() {
                        s.kernel_name.as_str()
                    } else {
                        s.display_name.as_str()
                    }
                })
                .unwrap_or("<unknown kernel>")
        }),
    };
    let sym = dims.symbols.get(&k.kernel_id);
    let agent = dims.agent_label(Some(k.agent));
    // Arguments as rocprofv3 writes them; zero sizes and the stream (or queue) the track's name
    // already shows are left out to keep the per-dispatch packet small.
    let mut args = [Arg::Int("", 0); 16];
    let lds = crate::domain::lds_block_size(k.lds.max(sym.map_or(0, |s| s.group_segment_size)));
    let optional = [
        (true, Arg::Int("dispatch_id", k.id)),
        (true, Arg::Int("corr_id", k.stack)),
        (true, Arg::Int("kernel_id", k.kernel_id)),
        (true, Arg::Interned("agent", agent)),
        (!cx.opts.group_by_queue, Arg::Int("queue", k.queue)),
        (cx.opts.group_by_queue, Arg::Int("stream", k.stream)),
        (true, Arg::Int("tid", k.tid)),
        (
            true,
            Arg::Int("grid_size", k.grid[0] * k.grid[1].max(1) * k.grid[2].max(1)),
        ),
        (
            true,
            Arg::Int("workgroup_size", k.wg[0] * k.wg[1].max(1) * k.wg[2].max(1)),
        ),
        (lds != 0, Arg::Int("LDS_Block_Size", lds)),
        (k.scratch != 0, Arg::Int("Scratch_Size", k.scratch)),
        (
            true,
            Arg::Int("VGPR_Count", sym.map_or(0, |s| s.arch_vgpr_count)),
        ),
        (
            sym.is_some_and(|s| s.accum_vgpr_count != 0),
            Arg::Int("Accum_VGPR_Count", sym.map_or(0, |s| s.accum_vgpr_count)),
        ),
        (
            true,
            Arg::Int("SGPR_Count", sym.map_or(0, |s| s.sgpr_count)),
        ),
        (k.external != 0, Arg::Int("external_id", k.external)),
    ];
    let mut n = 0;
    for (keep, a) in optional {
        if keep {
            args[n] = a;
            n += 1;
        }
    }
    let flow = [cx.ids.flow(k.stack)];
    let flows: &[u64] = if k.stack != 0 { &flow } else { &[] };
    if k.stack != 0 {
        out.counts.flows += 1;
    }
    let mut pmc_args: Vec<Arg<'_>> = Vec::new();
    let all_args: &[Arg<'_>] = if counters.is_empty() {
        &args[..n]
    } else {
        pmc_args.extend_from_slice(&args[..n]);
        for (p, v) in counters {
            let name = dims
                .pmcs
                .iter()
                .find(|(id, _)| id == p)
                .map(|(_, c)| c.name.as_str())
                .unwrap_or("PMC");
            pmc_args.push(Arg::NamedDouble(name, *v));
        }
        &pmc_args
    };
    out.flush_edges(track, name_iid, Some("kernel_dispatch"), all_args, flows)?;
    out.counts.kernels += 1;
    for (p, v) in counters {
        let t = out.track(cx, TrackKey::Pmc(k.agent, *p))?;
        out.seq
            .event(k.start, t, Kind::Counter, 0, None, &[], &[], Some(*v))?;
        out.counts.counter_points += 1;
    }
    Ok(Pass::Done)
}
