//! rocpd → rocprofv3 CSV: the same file names, columns, quoting and number formats rocprofv3
//! writes with `--output-format csv`. Rows come in id order per process (dispatch id, internal
//! correlation id, copy/allocation id); processes in GUID order.
//!
//! Kernel dispatches and counters are converted on a second thread with its own read-only
//! connection while the main thread converts API calls, copies and allocations.

use std::collections::HashMap;
use std::sync::Mutex;

use super::agent_info;
use super::domain::{lds_block_size, Domain};
use super::numfmt::{csv_double, Line};
use super::output::{OutFile, OutputSet};
use super::reader::{Dims, Source};
use super::ConvertOptions;
use crate::error::{Error, Result};

/// CSV files, lazily created when their first row arrives.
struct Files<'m, 'o> {
    out: &'m Mutex<&'o mut OutputSet>,
    name: &'m str,
    open: [Option<OutFile>; Domain::ALL.len()],
}

impl<'m, 'o> Files<'m, 'o> {
    fn new(out: &'m Mutex<&'o mut OutputSet>, name: &'m str) -> Self {
        Files {
            out,
            name,
            open: Default::default(),
        }
    }

    fn get(&mut self, d: Domain) -> Result<&mut OutFile> {
        let slot = &mut self.open[d as usize];
        if slot.is_none() {
            let file_name = format!("{}_{}.csv", self.name, d.trace_name());
            let mut f = {
                let mut out = self
                    .out
                    .lock()
                    .map_err(|_| Error::usage("internal error: output set lock poisoned"))?;
                out.create(&file_name)?
            };
            f.write_all(d.csv_header().as_bytes())?;
            *slot = Some(f);
        }
        slot.as_mut()
            .ok_or_else(|| Error::usage("internal error: CSV file not open"))
    }

    fn finish(self) -> Result<()> {
        for f in self.open.into_iter().flatten() {
            f.finish()?;
        }
        Ok(())
    }
}

/// The CSV file names (`<name>_<trace>.csv` and `<name>_agent_info.csv`) a conversion may produce.
pub fn file_names(name: &str) -> Vec<String> {
    Domain::ALL
        .iter()
        .map(|d| d.trace_name())
        .chain([agent_info::FILE_SUFFIX])
        .map(|t| format!("{name}_{t}.csv"))
        .collect()
}

/// Writes all CSV files for `sources` into `out`; returns the number of rows written.
pub fn write(
    sources: &[Source<'_>],
    opts: &ConvertOptions,
    out: &mut OutputSet,
    name: &str,
) -> Result<u64> {
    let shared = Mutex::new(out);
    let mut kfiles = Files::new(&shared, name);
    let mut afiles = Files::new(&shared, name);
    let mut rows = 0u64;
    let mut agents = Vec::new();
    for src in sources {
        let dims = src.dims(opts.agent_index)?;
        agents.extend(agent_info::rows(dims.agents.values()));
        let second = src.input.reopen()?;
        let (info, window) = (src.info.clone(), src.window());
        let (k, a) = std::thread::scope(|s| {
            let kf = &mut kfiles;
            let dims = &dims;
            let handle = s.spawn(move || -> Result<u64> {
                let ksrc = &second.source_for(&info)?.with_window(window);
                let mut line = Line::default();
                Ok(kernels(ksrc, dims, opts, kf, &mut line)?
                    + counters(ksrc, dims, opts, kf, &mut line)?)
            });
            let mut line = Line::default();
            let a = (|| -> Result<u64> {
                Ok(apis(src, dims, &mut afiles, &mut line)?
                    + copies(src, dims, &mut afiles, &mut line)?
                    + allocations(src, dims, &mut afiles, &mut line)?)
            })();
            let k = handle.join().unwrap_or_else(|_| {
                Err(Error::usage(
                    "internal error: the kernel converter thread panicked",
                ))
            });
            (k, a)
        });
        rows += k? + a?;
    }
    kfiles.finish()?;
    afiles.finish()?;
    if !agents.is_empty() {
        // rocprofv3 writes it beside the traces of every process.
        let file_name = format!("{name}_{}.csv", agent_info::FILE_SUFFIX);
        let mut f = shared
            .lock()
            .map_err(|_| Error::usage("internal error: output set lock poisoned"))?
            .create(&file_name)?;
        f.write_all(&agent_info::header())?;
        for row in &agents {
            f.write_all(row)?;
        }
        f.finish()?;
    }
    Ok(rows)
}

/// `x * y * z` of a grid or workgroup size, saturating (a corrupt database may hold any size).
fn volume(v: [i64; 3]) -> i64 {
    v[0].saturating_mul(v[1]).saturating_mul(v[2])
}

/// The kernel name as rocprofv3 prints it, honouring `--kernel-rename`.
pub fn kernel_name(dims: &Dims, kernel_id: i64, region_name_id: Option<i64>, rename: bool) -> &str {
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
    files: &mut Files<'_, '_>,
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

fn apis(src: &Source<'_>, dims: &Dims, files: &mut Files<'_, '_>, line: &mut Line) -> Result<u64> {
    let mut n = 0;
    let mut domains: super::reader::IdMap<Option<i64>, Option<Domain>> = Default::default();
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

fn copies(
    src: &Source<'_>,
    dims: &Dims,
    files: &mut Files<'_, '_>,
    line: &mut Line,
) -> Result<u64> {
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
    files: &mut Files<'_, '_>,
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
                .hex16(m.address as u64)
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
    files: &mut Files<'_, '_>,
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
            .i(volume(k.grid))
            .i(k.kernel_id)
            .s(kernel_name(
                dims,
                k.kernel_id,
                k.region_name_id,
                opts.kernel_rename,
            ))
            .i(volume(k.workgroup))
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
