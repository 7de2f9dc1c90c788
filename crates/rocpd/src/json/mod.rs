//! rocpd → rocprofv3's JSON layout (`<name>_results.json`), streamed.
//!
//! One object per process under `"rocprofiler-sdk-tool"`, compact like RapidJSON's writer, in
//! rocprofv3's key order. `kind`/`operation` integers index the `strings.buffer_records` table
//! written in the same document (rocpd does not store rocprofiler's enum values); that table comes
//! first and depends on every row, so the tables are read twice:
//!
//! 1. a light first pass (`kinds`) finds the kind table, the marker strings and which arrays
//!    have records;
//! 2. the second pass encodes each record once and writes it straight into the document
//!    (`sections`); only arrays that follow another array of the same table are spooled.
//!
//! Both passes read each table in id ranges on every core ([`crate::par`]) and keep the
//! id order; memory use does not depend on the number of rows.
//!
//! * `builder`: the compact-JSON writer;
//! * `kinds`: the first pass; `spool`: the array keys, the kind table, spool files;
//! * `records`: the `buffer_records` and counter records; `sections`: their arrays in order;
//! * `header`: metadata, agents, counters, code objects, kernel symbols.

mod builder;
mod header;
mod kinds;
mod records;
mod sections;
mod spool;

pub use builder::{push_f64, push_str};

use builder::J;
use kinds::Table;
use records::counter_records;
use sections::Sections;

use super::output::{OutFile, OutputSet};
use super::par;
use super::reader::Source;
use super::ConvertOptions;
use crate::error::Result;

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

fn process(
    src: &Source<'_>,
    opts: &ConvertOptions,
    out: &OutputSet,
    file: &mut OutFile,
) -> Result<u64> {
    let dims = src.dims(opts.agent_index)?;
    // First pass: the kind table and the marker strings the header needs.
    let mut plan = kinds::plan(src, &dims, out)?;

    let mut j = J::default();
    j.obj();
    header::metadata(&mut j, &dims);
    header::agents(&mut j, &dims);
    header::counters(&mut j, &dims);
    j.ko("strings")
        .ka("callback_records")
        .end_arr()
        .ka("buffer_records");
    for (kind, ops) in &plan.kinds.list {
        j.obj().s("kind", kind).ka("operations");
        for o in ops {
            j.str_elem(o);
        }
        j.end_arr().end_obj();
    }
    j.end_arr().ka("marker_api");
    file.write_all(&j.take())?;
    if let Some(s) = plan.markers.take() {
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

    let mut rows = counter_records(src, &dims, file)?;
    file.write_all(b"]},")?;

    // Second pass: every record encoded once, on every core, written in id order.
    let mut sections = Sections::begin(out, plan.present, file)?;
    let workers = par::threads();
    for table in Table::ALL {
        sections.start(table, file)?;
        par::ordered_chunks(
            src,
            plan.spans[table as usize],
            workers,
            |s| records::encode(s, &dims, &plan, table),
            |(chunk, n)| {
                rows += n;
                sections.add(chunk, file)
            },
        )?;
        sections.finish(table, file)?;
    }
    sections.end(file)?;
    file.write_all(b"}")?;
    Ok(rows)
}
