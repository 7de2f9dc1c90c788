//! The records of `buffer_records`, one JSON object per row, streamed into spools. Kernel
//! dispatches form one stream (run on their own thread and connection); API calls, memory copies
//! and allocations the other.

use std::collections::HashMap;

use super::builder::J;
use super::spool::{slot, Kinds, Spools, MARKER_STRINGS};
use crate::rocpd::domain::Domain;
use crate::rocpd::error::Result;
use crate::rocpd::model::Correlation;
use crate::rocpd::output::OutFile;
use crate::rocpd::reader::{Dims, DispatchRow, IdMap, Source};

/// `s`, or `default` when `s` is empty.
pub(super) fn non_empty<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() {
        default
    } else {
        s
    }
}

/// `"correlation_id":{"internal":..,"external":..,"ancestor":..}`.
fn corr(j: &mut J, c: &Correlation) {
    j.ko("correlation_id")
        .i("internal", c.internal)
        .i("external", c.external)
        .i("ancestor", c.ancestor)
        .end_obj();
}

/// `"dispatch_info":{...}` of a dispatch.
pub(super) fn dispatch_info(j: &mut J, dims: &Dims, k: &DispatchRow) {
    j.ko("dispatch_info")
        .handle("agent_id", dims.agent_handle(Some(k.agent_id)))
        .handle("queue_id", k.queue_id as u64)
        .i("kernel_id", k.kernel_id)
        .i("dispatch_id", k.dispatch_id)
        .i("private_segment_size", k.private_segment_size)
        .i("group_segment_size", k.group_segment_size)
        .ko("workgroup_size")
        .i("x", k.workgroup[0])
        .i("y", k.workgroup[1])
        .i("z", k.workgroup[2])
        .end_obj()
        .ko("grid_size")
        .i("x", k.grid[0])
        .i("y", k.grid[1])
        .i("z", k.grid[2])
        .end_obj()
        .end_obj();
}

/// Streams every kernel dispatch into `spools`; returns the number of records.
pub(super) fn kernel_dispatches(
    src: &Source<'_>,
    dims: &Dims,
    kinds: &mut Kinds,
    spools: &mut Spools<'_>,
) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;
    let mut ids: IdMap<Option<i64>, (i64, i64)> = IdMap::default();
    let key = slot("kernel_dispatch");
    src.dispatches(|k| {
        let (kind, op) = *ids.entry(k.category_id).or_insert_with(|| {
            kinds.id(
                non_empty(dims.string(k.category_id), "KERNEL_DISPATCH"),
                "KERNEL_DISPATCH_COMPLETE",
            )
        });
        j.b.clear();
        j.obj()
            .i("kind", kind)
            .i("operation", op)
            .i("thread_id", k.tid);
        corr(&mut j, &k.corr);
        j.i("start_timestamp", k.start).i("end_timestamp", k.end);
        dispatch_info(&mut j, dims, k);
        j.handle("stream_id", k.stream_id as u64).end_obj();
        rows += 1;
        spools.push(key, &j.b)
    })?;
    Ok(rows)
}

/// Streams API calls, memory copies and allocations into `spools`; returns the number of records.
pub(super) fn host_records(
    src: &Source<'_>,
    dims: &Dims,
    kinds: &mut Kinds,
    spools: &mut Spools<'_>,
) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;

    // (category id, name id) → (domain, spool slot, kind index, operation index), or None for
    // kinds that are not API calls.
    type ApiKind = Option<(Domain, usize, i64, i64)>;
    let mut api: IdMap<(Option<i64>, Option<i64>), ApiKind> = IdMap::default();
    src.api_calls(|a| {
        let entry = *api.entry((a.category_id, a.name_id)).or_insert_with(|| {
            let kind = dims.string(a.category_id);
            Domain::of_api_kind(kind).map(|d| {
                let (k, o) = kinds.id(kind, dims.string(a.name_id));
                (d, slot(d.json_key()), k, o)
            })
        });
        let Some((domain, key, kind, op)) = entry else {
            return Ok(());
        };
        if let (Domain::MarkerApi, Some(m)) = (domain, &a.message) {
            j.b.clear();
            j.obj().i("key", a.corr.internal).s("value", m).end_obj();
            spools.push(MARKER_STRINGS, &j.b)?;
        }
        j.b.clear();
        j.obj().i("kind", kind).i("operation", op);
        corr(&mut j, &a.corr);
        j.i("start_timestamp", a.start)
            .i("end_timestamp", a.end)
            .i("thread_id", a.tid)
            .end_obj();
        rows += 1;
        spools.push(key, &j.b)
    })?;

    let mut copy_ids: IdMap<(Option<i64>, Option<i64>), (i64, i64)> = IdMap::default();
    let copy_key = slot("memory_copy");
    src.memory_copies(|m| {
        let (kind, op) = *copy_ids
            .entry((m.category_id, m.name_id))
            .or_insert_with(|| {
                kinds.id(
                    non_empty(dims.string(m.category_id), "MEMORY_COPY"),
                    dims.string(m.name_id),
                )
            });
        j.b.clear();
        j.obj()
            .i("kind", kind)
            .i("operation", op)
            .i("thread_id", m.tid);
        corr(&mut j, &m.corr);
        j.i("start_timestamp", m.start)
            .i("end_timestamp", m.end)
            .handle("dst_agent_id", dims.agent_handle(m.dst_agent_id))
            .handle("src_agent_id", dims.agent_handle(m.src_agent_id))
            .i("bytes", m.size)
            .handle("stream_id", m.stream_id as u64)
            .end_obj();
        rows += 1;
        spools.push(copy_key, &j.b)
    })?;

    let mut alloc_ids: HashMap<(Option<i64>, &'static str), (i64, i64)> = HashMap::new();
    let (scratch_key, alloc_key) = (slot("scratch_memory"), slot("memory_allocation"));
    src.memory_allocations(|m| {
        let default_kind = if m.scratch {
            "SCRATCH_MEMORY"
        } else {
            "MEMORY_ALLOCATION"
        };
        let (kind, op) = *alloc_ids
            .entry((m.category_id, m.operation))
            .or_insert_with(|| {
                kinds.id(
                    non_empty(dims.string(m.category_id), default_kind),
                    m.operation,
                )
            });
        j.b.clear();
        j.obj().i("kind", kind).i("operation", op);
        rows += 1;
        if m.scratch {
            j.handle("agent_id", dims.agent_handle(m.agent_id))
                .handle("queue_id", m.queue_id as u64)
                .i("thread_id", m.tid)
                .i("start_timestamp", m.start)
                .i("end_timestamp", m.end);
            corr(&mut j, &m.corr);
            j.i("flags", m.flags).i("allocation_size", m.size).end_obj();
            spools.push(scratch_key, &j.b)
        } else {
            j.i("thread_id", m.tid);
            corr(&mut j, &m.corr);
            j.i("start_timestamp", m.start)
                .i("end_timestamp", m.end)
                .handle("agent_id", dims.agent_handle(m.agent_id))
                .hex16("address", m.address as u64)
                .i("allocation_size", m.size)
                .handle("stream_id", m.stream_id as u64)
                .end_obj();
            spools.push(alloc_key, &j.b)
        }
    })?;
    Ok(rows)
}

/// Writes the `callback_records.counter_collection` elements (counter values grouped per
/// dispatch) straight into `file`; returns the number of counter values.
pub(super) fn counter_records(src: &Source<'_>, dims: &Dims, file: &mut OutFile) -> Result<u64> {
    let mut rows = 0u64;
    let mut current: Option<i64> = None;
    let mut first = true;
    let mut flush_open = false;
    let mut prev_stream = 0u64;
    let mut buf = J::default();
    src.counters(|c| {
        let k = &c.dispatch;
        if current != Some(k.id) {
            if flush_open {
                buf.b.extend_from_slice(b"]");
                buf.comma.pop();
                buf.handle("stream_id", prev_stream).end_obj();
            }
            if !first {
                buf.b.push(b',');
            }
            first = false;
            buf.comma = vec![false];
            buf.b.push(b'{');
            buf.i("thread_id", k.tid).ko("dispatch_data");
            buf.ko("correlation_id")
                .i("internal", k.corr.internal)
                .i("external", k.corr.external)
                .end_obj();
            buf.i("start_timestamp", k.start).i("end_timestamp", k.end);
            dispatch_info(&mut buf, dims, k);
            buf.end_obj().ka("records");
            current = Some(k.id);
            flush_open = true;
            prev_stream = k.stream_id as u64;
        }
        buf.obj()
            .handle("counter_id", c.pmc_id as u64)
            .f("value", c.value)
            .end_obj();
        rows += 1;
        if buf.b.len() > 64 * 1024 {
            file.write_all(&buf.take())?;
        }
        Ok(())
    })?;
    if flush_open {
        buf.b.extend_from_slice(b"]");
        buf.comma.pop();
        buf.handle("stream_id", prev_stream).end_obj();
    }
    file.write_all(&buf.take())?;

    Ok(rows)
}
