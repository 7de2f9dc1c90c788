//! rocpd → rocprofv3 CSV: the same file names, columns, quoting and number formats rocprofv3
//! writes with `--output-format csv`. Rows come in id order per process (dispatch id, internal
//! correlation id, copy/allocation id); processes in GUID order.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::domain::{lds_block_size, Domain};
use super::numfmt::{csv_double, hex16, Line};
use super::output::{OutFile, OutputSet};
use super::reader::{Dims, Source};
use super::ConvertOptions;
use crate::Result;

/// The CSV files one run may write, lazily created when their first row arrives.
struct Files<'o> {
    out: &'o mut OutputSet,
    name: String,
    open: HashMap<Domain, OutFile>,
    order: Vec<Domain>,
}

impl Files<'_> {
    fn get(&mut self, d: Domain) -> Result<&mut OutFile> {
        match self.open.entry(d) {
            Entry::Occupied(o) => Ok(o.into_mut()),
            Entry::Vacant(v) => {
                let mut f = self
                    .out
                    .create(&format!("{}_{}.csv", self.name, d.trace_name()))?;
                f.write_all(d.csv_header().as_bytes())?;
                self.order.push(d);
                Ok(v.insert(f))
            }
        }
    }
}

/// The CSV file names (`<name>_<trace>.csv`) a conversion may produce.
pub fn file_names(name: &str) -> Vec<String> {
    Domain::ALL
        .iter()
        .map(|d| format!("{name}_{}.csv", d.trace_name()))
        .collect()
}

/// Writes all CSV files for `sources` into `out`.
pub fn write(
    sources: &[Source<'_>],
    opts: &ConvertOptions,
    out: &mut OutputSet,
    name: &str,
) -> Result<u64> {
    let mut files = Files {
        out,
        name: name.to_owned(),
        open: HashMap::new(),
        order: Vec::new(),
    };
    let mut line = Line::default();
    let mut rows = 0u64;
    for src in sources {
        let dims = src.dims(opts.agent_index)?;
        rows += kernels(src, &dims, opts, &mut files, &mut line)?;
        rows += apis(src, &dims, &mut files, &mut line)?;
        rows += copies(src, &dims, &mut files, &mut line)?;
        rows += allocations(src, &dims, &mut files, &mut line)?;
        rows += counters(src, &dims, opts, &mut files, &mut line)?;
    }
    for d in std::mem::take(&mut files.order) {
        if let Some(f) = files.open.remove(&d) {
            f.finish()?;
        }
    }
    Ok(rows)
}

/// The kernel name as rocprofv3 prints it, honouring `--kernel-rename`.
pub fn kernel_name<'d>(
    dims: &'d Dims,
    kernel_id: i64,
    region_name_id: Option<i64>,
    rename: bool,
) -> &'d str {
    if rename {
        let region = dims.string(region_name_id);
        if !region.is_empty() {
            return region;
        }
    }
    dims.symbols
        .get(&kernel_id)
        .map(|s| s.display_name.as_str())
        .unwrap_or("")
}

fn kernels(
    src: &Source<'_>,
    dims: &Dims,
    opts: &ConvertOptions,
    files: &mut Files<'_>,
    line: &mut Line,
) -> Result<u64> {
    let mut n = 0;
    let default_sym = Default::default();
    src.dispatches(|k| {
        let sym = dims.symbols.get(&k.kernel_id).unwrap_or(&default_sym);
        let kind = match dims.string(k.category_id) {
            "" => "KERNEL_DISPATCH",
            s => s,
        };
        let bytes = line
            .start()
            .s(kind)
            .s(dims.agent_label(Some(k.agent_id)))
            .i(k.queue_id)
            .i(k.stream_id)
            .i(k.tid)
            .i(k.dispatch_id)
            .i(k.kernel_id)
            .s(kernel_name(
                dims,
                k.kernel_id,
                k.region_name_id,
                opts.kernel_rename,
            ))
            .i(k.corr.internal)
            .i(k.start)
            .i(k.end)
            .i(lds_block_size(sym.group_segment_size))
            .i(k.private_segment_size)
            .i(sym.arch_vgpr_count)
            .i(sym.accum_vgpr_count)
            .i(sym.sgpr_count)
            .i(k.workgroup[0])
            .i(k.workgroup[1])
            .i(k.workgroup[2])
            .i(k.grid[0])
            .i(k.grid[1])
            .i(k.grid[2])
            .end();
        files.get(Domain::KernelDispatch)?.write_all(bytes)?;
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

fn apis(src: &Source<'_>, dims: &Dims, files: &mut Files<'_>, line: &mut Line) -> Result<u64> {
    let mut n = 0;
    let mut domains: HashMap<Option<i64>, Option<Domain>> = HashMap::new();
    src.api_calls(|a| {
        let kind = dims.string(a.category_id);
        let domain = *domains
            .entry(a.category_id)
            .or_insert_with(|| Domain::of_api_kind(kind));
        let Some(domain) = domain else { return Ok(()) };
        let function = match (&a.message, domain) {
            (Some(m), Domain::MarkerApi) => m.as_str(),
            _ => dims.string(a.name_id),
        };
        let bytes = line
            .start()
            .s(kind)
            .s(function)
            .i(a.pid)
            .i(a.tid)
            .i(a.corr.internal)
            .i(a.start)
            .i(a.end)
            .end();
        files.get(domain)?.write_all(bytes)?;
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

fn copies(src: &Source<'_>, dims: &Dims, files: &mut Files<'_>, line: &mut Line) -> Result<u64> {
    let mut n = 0;
    src.memory_copies(|m| {
        let kind = match dims.string(m.category_id) {
            "" => "MEMORY_COPY",
            s => s,
        };
        let bytes = line
            .start()
            .s(kind)
            .s(dims.string(m.name_id))
            .i(m.stream_id)
            .s(dims.agent_label(m.src_agent_id))
            .s(dims.agent_label(m.dst_agent_id))
            .i(m.corr.internal)
            .i(m.start)
            .i(m.end)
            .end();
        files.get(Domain::MemoryCopy)?.write_all(bytes)?;
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

fn allocations(
    src: &Source<'_>,
    dims: &Dims,
    files: &mut Files<'_>,
    line: &mut Line,
) -> Result<u64> {
    let mut n = 0;
    src.memory_allocations(|m| {
        let agent = if m.operation.ends_with("FREE") {
            ""
        } else {
            dims.agent_label(m.agent_id)
        };
        if m.scratch {
            let kind = match dims.string(m.category_id) {
                "" => "SCRATCH_MEMORY",
                s => s,
            };
            let bytes = line
                .start()
                .s(kind)
                .s(m.operation)
                .s(agent)
                .i(m.queue_id)
                .i(m.tid)
                .i(m.flags)
                .i(m.start)
                .i(m.end)
                .i(m.size)
                .end();
            files.get(Domain::ScratchMemory)?.write_all(bytes)?;
        } else {
            let kind = match dims.string(m.category_id) {
                "" => "MEMORY_ALLOCATION",
                s => s,
            };
            let bytes = line
                .start()
                .s(kind)
                .s(m.operation)
                .s(agent)
                .i(m.size)
                .s(&hex16(m.address as u64))
                .i(m.corr.internal)
                .i(m.start)
                .i(m.end)
                .end();
            files.get(Domain::MemoryAllocation)?.write_all(bytes)?;
        }
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

fn counters(
    src: &Source<'_>,
    dims: &Dims,
    opts: &ConvertOptions,
    files: &mut Files<'_>,
    line: &mut Line,
) -> Result<u64> {
    let mut n = 0;
    let names: HashMap<i64, &str> = dims
        .pmcs
        .iter()
        .map(|(id, p)| (*id, p.name.as_str()))
        .collect();
    let default_sym = Default::default();
    src.counters(|c| {
        let k = &c.dispatch;
        let sym = dims.symbols.get(&k.kernel_id).unwrap_or(&default_sym);
        let bytes = line
            .start()
            .i(k.corr.internal)
            .i(k.dispatch_id)
            .s(dims.agent_label(Some(k.agent_id)))
            .i(k.queue_id)
            .i(k.pid)
            .i(k.tid)
            .i(k.grid[0] * k.grid[1] * k.grid[2])
            .i(k.kernel_id)
            .s(kernel_name(
                dims,
                k.kernel_id,
                k.region_name_id,
                opts.kernel_rename,
            ))
            .i(k.workgroup[0] * k.workgroup[1] * k.workgroup[2])
            .i(lds_block_size(sym.group_segment_size))
            .i(sym.private_segment_size)
            .i(sym.arch_vgpr_count)
            .i(sym.accum_vgpr_count)
            .i(sym.sgpr_count)
            .s(names.get(&c.pmc_id).copied().unwrap_or(""))
            .raw(&csv_double(c.value))
            .i(k.start)
            .i(k.end)
            .end();
        files.get(Domain::CounterCollection)?.write_all(bytes)?;
        n += 1;
        Ok(())
    })?;
    Ok(n)
}
