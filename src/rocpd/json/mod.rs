//! rocpd → rocprofv3's JSON layout (`<name>_results.json`), streamed.
//!
//! One object per process under `"rocprofiler-sdk-tool"`, compact like RapidJSON's writer. Records
//! are streamed in one pass per table into unlinked spool files (one per `buffer_records` key),
//! then the document is assembled in rocprofv3's key order; memory use does not depend on the
//! number of rows. `kind`/`operation` integers index the `strings.buffer_records` table written in
//! the same document (rocpd does not store rocprofiler's enum values).
//!
//! Kernel dispatches are encoded on a second thread with its own read-only connection while this
//! thread encodes API calls, memory copies and allocations.
//!
//! * [`builder`](self::builder): the compact-JSON writer;
//! * `spool`: spool files and the kind table;
//! * `records`: the `buffer_records` and counter records;
//! * `header`: metadata, agents, counters, code objects, kernel symbols.

mod builder;
mod header;
mod records;
mod spool;

pub use builder::{push_f64, push_str};

use builder::J;
use records::{counter_records, host_records, kernel_dispatches};
use spool::{Kinds, Spools, BUFFER_KEYS, MARKER_STRINGS};

use super::output::{OutFile, OutputSet};
use super::reader::Source;
use super::ConvertOptions;
use crate::rocpd::error::{Error, Result};

/// The name of the JSON output file.
pub fn file_name(name: &str) -> String {
    format!("{name}_results.json")
}

/// Writes `<name>_results.json` for `sources`. Returns the number of records written.
pub fn write(
    sources: &[Source<'_>],
    opts: &ConvertOptions,
    out: &mut OutputSet,
    name: &str,
) -> Result<u64> {
    let mut file = out.create(&file_name(name))?;
    file.write_all(b"{\"rocprofiler-sdk-tool\":[")?;
    let mut rows = 0;
    for (i, src) in sources.iter().enumerate() {
        if i > 0 {
            file.write_all(b",")?;
        }
        rows += process(src, opts, out, &mut file)?;
    }
    file.write_all(b"]}")?;
    file.finish()?;
    Ok(rows)
}

/// The kind table the dispatches are expected to produce: `KERNEL_DISPATCH` with its one
/// operation when there are dispatches (rocprofv3 files every dispatch under that kind).
fn expected_kernel_kinds(src: &Source<'_>) -> Result<Kinds> {
    let mut k = Kinds::default();
    if src.has_rows("rocpd_kernel_dispatch")? {
        k.id("KERNEL_DISPATCH", "KERNEL_DISPATCH_COMPLETE");
    }
    Ok(k)
}

fn process(
    src: &Source<'_>,
    opts: &ConvertOptions,
    out: &OutputSet,
    file: &mut OutFile,
) -> Result<u64> {
    let dims = src.dims(opts.agent_index)?;
    // Kind indices follow the order one pass would meet them: dispatches first. The host records
    // start from the kinds the dispatches are expected to add and are encoded again (after the
    // dispatches) in the rare case that guess was wrong.
    let expected = expected_kernel_kinds(src)?;
    let second = src.input.reopen()?;
    let (info, window) = (src.info.clone(), src.window());
    let (kernel, host) = std::thread::scope(|s| {
        let dims = &dims;
        let handle = s.spawn(move || -> Result<(Kinds, Spools<'_>, u64)> {
            let ksrc = second.source_for(&info)?.with_window(window);
            let mut kinds = Kinds::default();
            let mut spools = Spools::new(out);
            let n = kernel_dispatches(&ksrc, dims, &mut kinds, &mut spools)?;
            Ok((kinds, spools, n))
        });
        let mut kinds = expected.clone();
        let mut spools = Spools::new(out);
        let host = host_records(src, dims, &mut kinds, &mut spools).map(|n| (kinds, spools, n));
        let kernel = handle.join().unwrap_or_else(|_| {
            Err(Error::usage(
                "internal error: the kernel dispatch encoder thread panicked",
            ))
        });
        (kernel, host)
    });
    let (kernel_kinds, kernel_spools, kernel_rows) = kernel?;
    let (mut kinds, mut spools, mut rows) = host?;
    if kernel_kinds.list != expected.list {
        kinds = kernel_kinds;
        spools = Spools::new(out);
        rows = host_records(src, &dims, &mut kinds, &mut spools)?;
    }
    spools.absorb(kernel_spools);
    rows += kernel_rows;

    // Header sections, now that the kind table is known.
    let mut j = J::default();
    j.obj();
    header::metadata(&mut j, &dims);
    header::agents(&mut j, &dims);
    header::counters(&mut j, &dims);
    j.ko("strings")
        .ka("callback_records")
        .end_arr()
        .ka("buffer_records");
    for (kind, ops) in &kinds.list {
        j.obj().s("kind", kind).ka("operations");
        for o in ops {
            j.str_elem(o);
        }
        j.end_arr().end_obj();
    }
    j.end_arr().ka("marker_api");
    file.write_all(&j.take())?;
    if let Some(s) = spools.take(MARKER_STRINGS) {
        s.copy_into(file)?;
    }
    j.end_arr();
    j.ko("correlation_id").ka("external").end_arr().end_obj();
    j.ko("counters").ka("dimension_ids").end_arr().end_obj();
    j.end_obj();
    header::code_objects(&mut j, &dims);
    header::kernel_symbols(&mut j, &dims);
    j.ka("host_functions").end_arr().ka("summary").end_arr();
    j.ko("callback_records").ka("counter_collection");
    file.write_all(&j.take())?;

    rows += counter_records(src, &dims, file)?;

    file.write_all(b"]},\"buffer_records\":{")?;
    for (i, key) in BUFFER_KEYS.iter().enumerate() {
        let mut b = Vec::new();
        if i > 0 {
            b.push(b',');
        }
        push_str(&mut b, key);
        b.extend_from_slice(b":[");
        file.write_all(&b)?;
        if let Some(s) = spools.take(i) {
            s.copy_into(file)?;
        }
        file.write_all(b"]")?;
    }
    file.write_all(b"}}")?;
    Ok(rows)
}
