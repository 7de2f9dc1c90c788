//! The records of `buffer_records`, one JSON object per row, encoded one id range at a time with
//! the kind indices the first pass found (`kinds`), and the counter records.

use super::builder::J;
use super::kinds::{Plan, Table};
use super::sections::Chunk;
use super::spool::slot;
use crate::error::{Error, Result};
use crate::model::Correlation;
use crate::output::OutFile;
use crate::reader::{Dims, DispatchRow, Source};

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

/// Appends the element in `j` to `buf` (comma-separated).
fn put(buf: &mut Vec<u8>, j: &J) {
    if !buf.is_empty() {
        buf.push(b',');
    }
    buf.extend_from_slice(&j.b);
}

/// Encodes the records of one id range of `table` (a source limited with
/// [`Source::with_ids`]); returns them by array and their number.
pub(super) fn encode(
    src: &Source<'_>,
    dims: &Dims,
    plan: &Plan,
    table: Table,
) -> Result<(Chunk, u64)> {
    let mut chunk: Chunk = Default::default();
    let rows = match table {
        Table::Dispatches => {
            kernel_dispatches(src, dims, plan, &mut chunk[slot("kernel_dispatch")])?
        }
        Table::ApiCalls => api_calls(src, plan, &mut chunk)?,
        Table::Copies => memory_copies(src, dims, plan, &mut chunk[slot("memory_copy")])?,
        Table::Allocations => memory_allocations(src, dims, plan, &mut chunk)?,
    };
    Ok((chunk, rows))
}

/// A row whose kind the first pass did not see: the database changed between the passes.
fn changed(what: &str) -> Error {
    Error::usage(format!(
        "the database changed while it was being converted (a {what} of an unknown kind appeared); convert it again once \
         nothing writes to it"
    ))
}

/// Encodes the kernel dispatches of `src` into `buf`.
fn kernel_dispatches(src: &Source<'_>, dims: &Dims, plan: &Plan, buf: &mut Vec<u8>) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;
    src.dispatches(|k| {
        let &(kind, op) = plan
            .dispatch
            .get(&k.category_id)
            .ok_or_else(|| changed("dispatch"))?;
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
        put(buf, &j);
        Ok(())
    })?;
    Ok(rows)
}

/// Encodes the API calls of `src` into their domains' arrays of `chunk`.
fn api_calls(src: &Source<'_>, plan: &Plan, chunk: &mut Chunk) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;
    src.api_calls(|a| {
        let entry = plan
            .api
            .get(&(a.category_id, a.name_id))
            .ok_or_else(|| changed("API call"))?;
        let Some((_, key, kind, op)) = *entry else {
            return Ok(());
        };
        j.b.clear();
        j.obj().i("kind", kind).i("operation", op);
        corr(&mut j, &a.corr);
        j.i("start_timestamp", a.start)
            .i("end_timestamp", a.end)
            .i("thread_id", a.tid)
            .end_obj();
        rows += 1;
        if let Some(buf) = chunk.get_mut(key) {
            put(buf, &j);
        }
        Ok(())
    })?;
    Ok(rows)
}

/// Encodes the memory copies of `src` into `buf`.
fn memory_copies(src: &Source<'_>, dims: &Dims, plan: &Plan, buf: &mut Vec<u8>) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;
    src.memory_copies(|m| {
        let &(kind, op) = plan
            .copy
            .get(&(m.category_id, m.name_id))
            .ok_or_else(|| changed("memory copy"))?;
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
        put(buf, &j);
        Ok(())
    })?;
    Ok(rows)
}

/// Encodes the memory and scratch allocations of `src` into their arrays of `chunk`.
fn memory_allocations(
    src: &Source<'_>,
    dims: &Dims,
    plan: &Plan,
    chunk: &mut Chunk,
) -> Result<u64> {
    let mut j = J::default();
    let mut rows = 0u64;
    let (scratch_key, alloc_key) = (slot("scratch_memory"), slot("memory_allocation"));
    src.memory_allocations(|m| {
        let &(kind, op) = plan
            .alloc
            .get(&(m.category_id, m.operation, m.scratch))
            .ok_or_else(|| changed("memory allocation"))?;
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
            put(&mut chunk[scratch_key], &j);
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
            put(&mut chunk[alloc_key], &j);
        }
        Ok(())
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
