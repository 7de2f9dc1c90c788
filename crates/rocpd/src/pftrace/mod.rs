//! rocpd → Perfetto (`<name>_results.pftrace`), modelled on ROCm's `rocpd convert -f pftrace`
//! (output-formats spec §4.2) but streamed: nothing is buffered beyond one row and the open
//! slices of each track, and no event is dropped whatever the database size.
//!
//! Layout: one process track per process (merged databases side by side, on their common
//! CLOCK_BOOTTIME time base), a thread track per thread with API calls and ROCTx ranges as
//! slices (arguments from `rocpd_arg`) and instants for samples and marks, kernel dispatches on
//! `STREAM [<id>]` tracks (`--group-by-queue`: `COMPUTE AGENT [<n>] (GPU) QUEUE [<q>]`), memory
//! copies on their own tracks, flows from each API call to the kernels and copies it launched
//! (by internal correlation id), and counter tracks for copied, allocated and scratch bytes and
//! every PMC counter. Overlapping kernels on one track are made to nest ([`nest`]).
//!
//! Two threads write two packet sequences (kernels and counters; host events) into scratch
//! files; the final file is the process descriptors followed by both, renamed into place when
//! complete. Messages are prost-generated from Perfetto's own `.proto` definitions ([`proto`]).

pub mod device;
pub mod encoder;
pub mod events;
pub mod host;
pub mod nest;
pub mod proto;
pub mod tracks;
pub mod wire;

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::Row;

use encoder::{Arg, Kind, Sequence};
use nest::{Edge, Nest};
use tracks::{Declared, ProcessIds, TrackKey};

use super::output::OutputSet;
use super::reader::{self, AgentIndex, Dims, IdMap, Input, Source};
use super::window::{self, MaybeWindow};
use crate::{Error, Result};

/// Options of the Perfetto converter.
#[derive(Debug, Clone, Copy, Default)]
pub struct PftraceOptions {
    /// How agents are numbered in track names and arguments.
    pub agent_index: AgentIndex,
    /// Name kernels after their enclosing ROCTx region when there is one.
    pub kernel_rename: bool,
    /// Kernel tracks per agent and queue instead of per stream.
    pub group_by_queue: bool,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Kernel dispatch slices.
    pub kernels: u64,
    /// API call and ROCTx range slices.
    pub api: u64,
    /// Instants (samples, marks).
    pub instants: u64,
    /// Memory copy slices.
    pub copies: u64,
    /// Counter values.
    pub counter_points: u64,
    /// Kernels and copies linked to their API call.
    pub flows: u64,
    /// Slices whose edges were moved so that they nest.
    pub adjusted: u64,
    /// Trace packets written.
    pub packets: u64,
}

impl Counts {
    /// Events read from the database (rows turned into slices, instants or counter values).
    pub fn events(&self) -> u64 {
        self.kernels + self.api + self.instants + self.copies + self.counter_points
    }

    fn add(&mut self, o: &Counts) {
        self.kernels += o.kernels;
        self.api += o.api;
        self.instants += o.instants;
        self.copies += o.copies;
        self.counter_points += o.counter_points;
        self.flows += o.flows;
        self.adjusted += o.adjusted;
        self.packets += o.packets;
    }
}

/// Packet sequences holding the kernel tracks (a track belongs to sequence `key % KERNEL_SHARDS`,
/// see [`device::shard`]).
const KERNEL_SHARDS: usize = 2;

/// The output file name for prefix `name`.
pub fn file_name(name: &str) -> String {
    format!("{name}_results.pftrace")
}

/// Outcome of one pass over a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// All rows written.
    Done,
    /// Rows were not in start order per track; the pass must be redone sorted.
    OutOfOrder,
}

impl Pass {
    /// Whether a row scan goes on: stop at the first row out of order.
    pub fn flow(self) -> std::ops::ControlFlow<()> {
        match self {
            Pass::Done => std::ops::ControlFlow::Continue(()),
            Pass::OutOfOrder => std::ops::ControlFlow::Break(()),
        }
    }
}

/// One process being converted.
pub struct Ctx<'s, 'a> {
    /// The source.
    pub src: &'s Source<'a>,
    /// Its dimension tables.
    pub dims: Dims,
    /// Its track ids.
    pub ids: ProcessIds,
    /// Options.
    pub opts: PftraceOptions,
    /// The time window.
    pub window: MaybeWindow,
    index: u64,
}

impl<'s, 'a> Ctx<'s, 'a> {
    /// The context of the `index`-th source (in GUID order).
    pub fn new(
        src: &'s Source<'a>,
        index: usize,
        dims: Dims,
        opts: PftraceOptions,
        window: MaybeWindow,
    ) -> Self {
        Ctx {
            src,
            ids: ProcessIds::new(index, dims.process.pid),
            dims,
            opts,
            window,
            index: index as u64,
        }
    }

    /// Maps SQLite errors to errors naming the input.
    pub fn err(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |e| reader::read_error(&self.src.input.path, e)
    }

    /// A sequence-wide key for an id of kind `kind` (1: kernel id, 2: string id) of this process.
    pub fn key(&self, kind: u64, id: i64) -> u64 {
        (self.index << 48) | (kind << 44) | (id as u64 & ((1 << 44) - 1))
    }
}

/// One packet sequence with its declared tracks and counts.
pub struct Out {
    /// The sequence.
    pub seq: Sequence,
    /// Tracks declared on it.
    pub declared: Declared,
    /// What was written.
    pub counts: Counts,
    /// Scratch list of slice edges.
    pub edges: Vec<Edge>,
}

impl Out {
    /// Packet sequence `seq_id` written to `file`.
    pub fn new(file: File, seq_id: u32, dest: &Path) -> Result<Out> {
        Ok(Out {
            seq: Sequence::new(file, seq_id, dest)?,
            declared: Declared::new(seq_id),
            counts: Counts::default(),
            edges: Vec::new(),
        })
    }

    /// Flushes the sequence; its file and what was written.
    pub fn finish(self) -> Result<(File, Counts)> {
        let counts = Counts {
            packets: self.seq.packets,
            ..self.counts
        };
        Ok((self.seq.finish()?, counts))
    }

    /// The uuid of a track, declared on first use.
    pub fn track(&mut self, cx: &Ctx<'_, '_>, key: TrackKey) -> Result<u64> {
        self.declared
            .get(&mut self.seq, &cx.ids, &cx.dims, cx.opts.agent_index, key)
    }

    /// Writes the edges in `self.edges`: ends as bare slice ends, the begin with the given name,
    /// category, arguments and flows.
    pub fn flush_edges(
        &mut self,
        track: u64,
        name_iid: u64,
        category: Option<&'static str>,
        args: &[Arg<'_>],
        flows: &[u64],
    ) -> Result<()> {
        for i in 0..self.edges.len() {
            match self.edges[i] {
                Edge::End(t) => self
                    .seq
                    .event(t, track, Kind::End, 0, None, &[], &[], None)?,
                Edge::Begin(t) => {
                    self.seq
                        .event(t, track, Kind::Begin, name_iid, category, args, flows, None)?
                }
            }
        }
        Ok(())
    }

    /// Ends every open slice of `nests`.
    pub fn close(&mut self, nests: IdMap<u64, Nest>) -> Result<()> {
        let mut tracks: Vec<(u64, Nest)> = nests.into_iter().collect();
        tracks.sort_by_key(|t| t.0);
        for (track, mut nest) in tracks {
            self.edges.clear();
            nest.close_all(&mut self.edges);
            self.flush_edges(track, 0, None, &[], &[])?;
            self.counts.adjusted += nest.adjusted;
        }
        Ok(())
    }
}

/// An integer column (NULL → 0).
pub fn col(r: &Row<'_>, i: usize) -> rusqlite::Result<i64> {
    Ok(opt_col(r, i)?.unwrap_or(0))
}

/// An optional integer column.
pub fn opt_col(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(v) => Some(v as i64),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        _ => None,
    })
}

type PassFn = fn(&mut Out, &Ctx<'_, '_>, bool) -> Result<Pass>;

/// Runs `passes` over every source of `dbs`, writing sequence `seq_id` to `file`.
#[allow(clippy::too_many_arguments)]
fn run_passes(
    dbs: &[Input],
    opts: PftraceOptions,
    window: MaybeWindow,
    file: File,
    seq_id: u32,
    dest: &Path,
    passes: &[PassFn],
) -> Result<(File, Counts)> {
    let sources = reader::all_sources_in(dbs, window)?;
    let mut out = Out::new(file, seq_id, dest)?;
    for (i, src) in sources.iter().enumerate() {
        let dims = src.dims(opts.agent_index)?;
        let cx = Ctx::new(src, i, dims, opts, window);
        out.declared.next_process();
        for pass in passes {
            let cp = out.seq.checkpoint()?;
            let (declared, counts) = (out.declared.clone(), out.counts);
            if pass(&mut out, &cx, false)? == Pass::OutOfOrder {
                tracing::info!(
                    "{}: rows not in start order; reading them sorted",
                    src.input.path.display()
                );
                out.seq.rollback(cp)?;
                out.declared = declared;
                out.counts = counts;
                if pass(&mut out, &cx, true)? == Pass::OutOfOrder {
                    return Err(Error::usage(format!(
                        "{}: the database's rows cannot be ordered by time; it may be corrupt",
                        src.input.path.display()
                    )));
                }
            }
        }
    }
    out.finish()
}

/// The passes of the host sequence: regions, samples, copies, allocations, sampled counters.
const HOST_PASSES: [PassFn; 5] = [
    host::regions,
    host::samples,
    host::copies,
    host::allocations,
    host::spm,
];

/// Writes `<name>_results.pftrace` for `dbs` into `out` (committed by the caller).
pub fn write(
    dbs: &[Input],
    opts: PftraceOptions,
    window: MaybeWindow,
    out: &mut OutputSet,
    name: &str,
) -> Result<Counts> {
    let file_name = file_name(name);
    let dest = out.dest(&file_name);
    let sources = reader::all_sources(dbs)?;
    // The final file: process descriptors, then the kernel sequence written straight after them
    // by its thread, then the host sequence copied in from its scratch file.
    let mut head = Sequence::new(out.create_raw(&file_name)?, 1, &dest)?;
    for (i, src) in sources.iter().enumerate() {
        let p = process_row(src)?;
        let ids = ProcessIds::new(i, p.0);
        head.track(tracks::process_descriptor(&ids, &p.2, p.1))?;
    }
    let mut total = Counts {
        packets: head.packets,
        ..Default::default()
    };
    let head = head.finish()?;
    let paths: Vec<PathBuf> = dbs.iter().map(|d| d.path.clone()).collect();
    // Kernels cost most: their thread reads the dispatches on every core ([`device::write`]) and
    // encodes them into KERNEL_SHARDS sequences; host events, copies and allocations take one
    // more thread. Shard 0 writes straight after the descriptors; the other parts are appended
    // from scratch files.
    let mut files = vec![head];
    for _ in 1..KERNEL_SHARDS {
        files.push(out.scratch()?);
    }
    let host_file = out.scratch()?;
    let results = std::thread::scope(|sc| {
        let (dest, paths) = (&dest, &paths);
        let kernels = sc.spawn(move || {
            let dbs = reader::open_all(paths)?;
            device::write(&dbs, opts, window, files, dest)
        });
        let host = run_passes(dbs, opts, window, host_file, 3, dest, &HOST_PASSES);
        let kernels = kernels
            .join()
            .unwrap_or_else(|_| Err(Error::usage("the kernel converter thread panicked")));
        (kernels, host)
    });
    let (kernels, host) = results;
    let mut all = kernels?;
    all.push(host?);
    let mut parts = Vec::new();
    for (f, c) in all {
        total.add(&c);
        parts.push(f);
    }
    if let Some(w) = &window {
        if total.events() == 0 {
            return Err(window::empty(w));
        }
    }
    let io = |e: std::io::Error| super::output::write_error(&dest, &e);
    let mut parts = parts.into_iter();
    let mut first = parts.next().expect("shard 0");
    for mut part in parts {
        part.seek(SeekFrom::Start(0)).map_err(io)?;
        std::io::copy(&mut part, &mut first).map_err(io)?;
    }
    Ok(total)
}
/// pid, init and command of a source's process.
fn process_row(src: &Source<'_>) -> Result<(i64, i64, String)> {
    let Some(t) = src.table("rocpd_info_process") else {
        return Ok((0, 0, String::new()));
    };
    let r = src.input.connection().query_row(
        &format!("SELECT pid, init, command FROM {t} LIMIT 1"),
        [],
        |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            ))
        },
    );
    match r {
        Ok(v) => Ok(v),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok((0, 0, String::new())),
        Err(e) => Err(reader::read_error(&src.input.path, e)),
    }
}
