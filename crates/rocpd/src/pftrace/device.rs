//! Kernel dispatches (slices on stream or queue tracks, with their dispatch's own PMC values as
//! arguments) and PMC counter tracks.

use std::fs::File;
use std::ops::ControlFlow;
use std::path::Path;

use super::encoder::{Arg, Kind};
use super::nest::Nest;
use super::tracks::TrackKey;
use super::{Counts, Ctx, Out, Pass, PftraceOptions};
use crate::par;
use crate::reader::{self, DispatchRow, IdMap, Input, Order, Source};
use crate::window::MaybeWindow;
use crate::{Error, Result};

/// Writes the kernel dispatches of every source of `dbs` (in the window) into one packet sequence
/// per file of `files` (sequence ids 2, 4, ...; a track goes to the sequence [`shard`] names).
///
/// Dispatches are read in id order on every core ([`crate::par`]: id ranges read on worker
/// threads, each with its own connection, handed over in order) and encoded here; id order is
/// start order per track in the databases rocprofv3 writes. When it is not, what this source
/// wrote is rolled back and its dispatches are read again sorted by start, one shard at a time.
pub fn write(
    dbs: &[Input],
    opts: PftraceOptions,
    window: MaybeWindow,
    files: Vec<File>,
    dest: &Path,
) -> Result<Vec<(File, Counts)>> {
    let mut outs = files
        .into_iter()
        .enumerate()
        .map(|(i, f)| Out::new(f, 2 + 2 * i as u32, dest))
        .collect::<Result<Vec<_>>>()?;
    for (i, src) in reader::all_sources_in(dbs, window)?.iter().enumerate() {
        let dims = src.dims(opts.agent_index)?;
        let cx = Ctx::new(src, i, dims, opts, window);
        let mut saved = Vec::new();
        for out in &mut outs {
            out.declared.next_process();
            saved.push((out.seq.checkpoint()?, out.declared.clone(), out.counts));
        }
        if in_id_order(&mut outs, &cx)? == Pass::Done {
            continue;
        }
        tracing::info!(
            "{}: rows not in start order; reading them sorted",
            src.input.path.display()
        );
        let n = outs.len();
        for (s, (out, (cp, declared, counts))) in outs.iter_mut().zip(saved).enumerate() {
            out.seq.rollback(cp)?;
            out.declared = declared;
            out.counts = counts;
            if kernels(out, &cx, (s, n), Order::Start)? == Pass::OutOfOrder {
                return Err(Error::usage(format!(
                    "{}: the database's rows cannot be ordered by time; it may be corrupt",
                    src.input.path.display()
                )));
            }
        }
    }
    outs.into_iter().map(Out::finish).collect()
}

/// The kernel sequence (of `n`) that holds the track of dispatch `k`.
pub fn shard(cx: &Ctx<'_, '_>, k: &DispatchRow, n: usize) -> usize {
    let key = if cx.opts.group_by_queue {
        k.agent_id.wrapping_mul(65599).wrapping_add(k.queue_id)
    } else {
        k.stream_id
    };
    key.rem_euclid(n as i64) as usize
}

/// Writes the dispatches of `cx`'s source in id order into `outs`; [`Pass::OutOfOrder`] when a
/// track's dispatches do not come in start order. Dispatches with PMC values (counter
/// collection: few dispatches) are read on this thread, joined with their values.
fn in_id_order(outs: &mut [Out], cx: &Ctx<'_, '_>) -> Result<Pass> {
    let n = outs.len();
    let mut nests: Vec<IdMap<u64, Nest>> = (0..n).map(|_| IdMap::default()).collect();
    let mut route = |k: &DispatchRow, values: &[(i64, f64)]| -> Result<Pass> {
        let s = shard(cx, k, n);
        emit(&mut outs[s], cx, &mut nests[s], k, values)
    };
    if !cx.dims.pmcs.is_empty() && cx.src.has_rows("rocpd_pmc_event")? {
        let flow = cx
            .src
            .dispatch_scan(Order::Id, true, |k, values| Ok(route(k, values)?.flow()))?;
        if flow.is_break() {
            return Ok(Pass::OutOfOrder);
        }
    } else {
        let span = cx.src.id_span(&["rocpd_kernel_dispatch"])?;
        let mut disorder = false;
        let read = |range: &Source<'_>| {
            let mut rows = Vec::new();
            range.dispatches(|k| {
                rows.push(k.clone());
                Ok(())
            })?;
            Ok(rows)
        };
        let run = par::ordered_chunks(cx.src, span, par::threads(), read, |rows| {
            for k in &rows {
                if route(k, &[])? == Pass::OutOfOrder {
                    // Ends the run; told apart from a real error by `disorder`.
                    disorder = true;
                    return Err(Error::usage("dispatches out of start order"));
                }
            }
            Ok(())
        });
        if disorder {
            return Ok(Pass::OutOfOrder);
        }
        run?;
    }
    for (out, nests) in outs.iter_mut().zip(nests) {
        out.close(nests)?;
    }
    Ok(Pass::Done)
}

/// Writes the kernel dispatches of `cx`'s source in `order` whose track belongs to `shard`
/// (`(index, count)`, see [`shard`]); [`Pass::OutOfOrder`] when a track's dispatches do not come
/// in start order.
fn kernels(out: &mut Out, cx: &Ctx<'_, '_>, (i, n): (usize, usize), order: Order) -> Result<Pass> {
    let counters = !cx.dims.pmcs.is_empty();
    let mut nests: IdMap<u64, Nest> = IdMap::default();
    let flow = cx.src.dispatch_scan(order, counters, |k, values| {
        if shard(cx, k, n) != i {
            return Ok(ControlFlow::Continue(()));
        }
        Ok(emit(out, cx, &mut nests, k, values)?.flow())
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
    let (args, n) = kernel_args(cx, k);
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

/// The arguments of a kernel's slice as rocprofv3 writes them (the first `n` of the array); zero
/// sizes and the stream (or queue) the track's name already shows are left out to keep the
/// per-dispatch packet small.
fn kernel_args<'d>(cx: &'d Ctx<'_, '_>, k: &DispatchRow) -> ([Arg<'d>; 16], usize) {
    let dims = &cx.dims;
    let sym = dims.symbols.get(&k.kernel_id);
    let agent = dims.agent_label(Some(k.agent_id));
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
    (args, n)
}
