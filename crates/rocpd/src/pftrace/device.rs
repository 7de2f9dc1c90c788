//! Kernel dispatches (slices on stream or queue tracks, with their dispatch's own PMC values as
//! arguments) and PMC counter tracks.

use std::ops::ControlFlow;

use super::encoder::{Arg, Kind};
use super::nest::Nest;
use super::tracks::TrackKey;
use super::{Ctx, Out, Pass};
use crate::reader::{DispatchRow, IdMap, Order};
use crate::Result;

/// Writes every kernel dispatch of the source (in the window) that belongs to this pass's shard.
/// With `sorted`, rows are read in start order ([`Order::Start`]); otherwise in id order, which
/// is start order per track in databases rocprofv3 writes, and [`Pass::OutOfOrder`] is returned
/// if it is not.
pub fn kernels(out: &mut Out, cx: &Ctx<'_, '_>, sorted: bool) -> Result<Pass> {
    let order = if sorted { Order::Start } else { Order::Id };
    let counters = !cx.dims.pmcs.is_empty();
    let (i, n) = cx.shard;
    let mut nests: IdMap<u64, Nest> = IdMap::default();
    let flow = cx.src.dispatch_scan(order, counters, |k, values| {
        let key = if cx.opts.group_by_queue {
            k.agent_id.wrapping_mul(65599).wrapping_add(k.queue_id)
        } else {
            k.stream_id
        };
        if key.rem_euclid(n) != i {
            return Ok(ControlFlow::Continue(()));
        }
        Ok(match emit(out, cx, &mut nests, k, values)? {
            Pass::Done => ControlFlow::Continue(()),
            Pass::OutOfOrder => ControlFlow::Break(()),
        })
    })?;
    if flow.is_break() {
        return Ok(Pass::OutOfOrder);
    }
    out.close(nests)?;
    Ok(Pass::Done)
}

fn emit(
    out: &mut Out,
    cx: &Ctx<'_, '_>,
    nests: &mut IdMap<u64, Nest>,
    k: &DispatchRow,
    counters: &[(i64, f64)],
) -> Result<Pass> {
    let key = if cx.opts.group_by_queue {
        TrackKey::Queue(k.agent_id, k.queue_id)
    } else {
        TrackKey::Stream(k.stream_id)
    };
    let track = out.track(cx, key)?;
    let nest = nests.entry(track).or_default();
    out.edges.clear();
    if nest.open(k.start, k.end, &mut out.edges).is_err() {
        return Ok(Pass::OutOfOrder);
    }
    let dims = &cx.dims;
    let name_iid = if cx.opts.kernel_rename && !dims.string(k.region_name_id).is_empty() {
        out.seq.name_iid(dims.string(k.region_name_id))
    } else {
        out.seq.keyed_name_iid(cx.key(1, k.kernel_id), || {
            dims.trace_kernel_name(k.kernel_id, None, false)
        })
    };
    let sym = dims.symbols.get(&k.kernel_id);
    let agent = dims.agent_label(Some(k.agent_id));
    // Arguments as rocprofv3 writes them; zero sizes and the stream (or queue) the track's name
    // already shows are left out to keep the per-dispatch packet small.
    let mut args = [Arg::Int("", 0); 16];
    let lds = crate::domain::lds_block_size(
        k.group_segment_size
            .max(sym.map_or(0, |s| s.group_segment_size)),
    );
    let optional = [
        (true, Arg::Int("dispatch_id", k.id)),
        (true, Arg::Int("corr_id", k.corr.internal)),
        (true, Arg::Int("kernel_id", k.kernel_id)),
        (true, Arg::Interned("agent", agent)),
        (!cx.opts.group_by_queue, Arg::Int("queue", k.queue_id)),
        (cx.opts.group_by_queue, Arg::Int("stream", k.stream_id)),
        (true, Arg::Int("tid", k.tid)),
        (
            true,
            Arg::Int("grid_size", k.grid[0] * k.grid[1].max(1) * k.grid[2].max(1)),
        ),
        (
            true,
            Arg::Int(
                "workgroup_size",
                k.workgroup[0] * k.workgroup[1].max(1) * k.workgroup[2].max(1),
            ),
        ),
        (lds != 0, Arg::Int("LDS_Block_Size", lds)),
        (
            k.private_segment_size != 0,
            Arg::Int("Scratch_Size", k.private_segment_size),
        ),
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
        (
            k.corr.external != 0,
            Arg::Int("external_id", k.corr.external),
        ),
    ];
    let mut n = 0;
    for (keep, a) in optional {
        if keep {
            args[n] = a;
            n += 1;
        }
    }
    let flow = [cx.ids.flow(k.corr.internal)];
    let flows: &[u64] = if k.corr.internal != 0 { &flow } else { &[] };
    if k.corr.internal != 0 {
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
        let t = out.track(cx, TrackKey::Pmc(k.agent_id, *p))?;
        out.seq
            .event(k.start, t, Kind::Counter, 0, None, &[], &[], Some(*v))?;
        out.counts.counter_points += 1;
    }
    Ok(Pass::Done)
}
