//! One pass over the rows for `summary`: the statistics of every domain (per process, and all
//! processes merged) and, for the HTML page, the timeline overview's busy bins, computed together.
//!
//! Each process is read once, on two threads with a connection each: kernel dispatches and then
//! memory copies (both shade the agent lanes, in this order, as the earlier two-pass code did, so
//! the bins' floating-point sums are unchanged) on a second thread; API calls and allocations on
//! the calling thread. Rows are accumulated by their integer ids (a fast hash, no string per row)
//! and turned into names at the end; statistics merge exactly (integer sums, min, max).

use std::collections::{BTreeMap, HashMap};

use super::html::Lane;
use crate::csv::kernel_name;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::reader::{Dims, IdMap, Source};
use crate::summary::{Stats, Summary};
use crate::window::{self, keeps, MaybeWindow};
use crate::ConvertOptions;

/// Number of bins of a timeline lane.
pub const BINS: usize = 300;

/// The timeline overview: its time span and lanes (a host lane per process, then one per agent).
pub struct Timeline {
    /// First nanosecond shown.
    pub start: i64,
    /// Last nanosecond shown.
    pub end: i64,
    /// The lanes (none when the span is empty).
    pub lanes: Vec<Lane>,
}

/// What one pass over all sources found.
pub struct Pass {
    /// Statistics per source, in source order.
    pub per_source: Vec<Summary>,
    /// Statistics of all sources together.
    pub overall: Summary,
    /// The timeline, when asked for.
    pub timeline: Option<Timeline>,
}

/// Busy time per bin of one lane.
#[derive(Clone)]
struct Bins {
    start: i64,
    width: f64,
    busy: Vec<f64>,
}

impl Bins {
    fn add(&mut self, s: i64, e: i64) {
        let n = self.busy.len();
        let (s, e) = (s as f64 - self.start as f64, e as f64 - self.start as f64);
        if e < 0.0 || n == 0 {
            return;
        }
        let first = ((s / self.width).floor().max(0.0) as usize).min(n - 1);
        let last = ((e / self.width).floor().max(0.0) as usize).min(n - 1);
        for b in first..=last {
            let lo = (b as f64 * self.width).max(s);
            let hi = ((b + 1) as f64 * self.width).min(e);
            if hi > lo {
                self.busy[b] += hi - lo;
            } else if s == e {
                self.busy[b] += self.width * 0.01;
            }
        }
    }

    fn fractions(&self) -> Vec<f32> {
        self.busy.iter().map(|v| (v / self.width) as f32).collect()
    }
}

/// The duration of a row spanning `[start, end]` (ns; 0 when the end comes first): the one
/// definition `summary` and `top` ([`super::live`]) use.
pub(crate) fn duration(start: i64, end: i64) -> u64 {
    end.saturating_sub(start).max(0) as u64
}

/// Accumulates durations by a key, named at the end.
pub(crate) struct ByKey<K>(IdMap<K, Stats>);

impl<K> Default for ByKey<K> {
    fn default() -> Self {
        ByKey(IdMap::default())
    }
}

impl<K: std::hash::Hash + Eq> ByKey<K> {
    pub(crate) fn new() -> Self {
        ByKey(IdMap::default())
    }
    pub(crate) fn add(&mut self, key: K, start: i64, end: i64) {
        self.0.entry(key).or_default().add(duration(start, end));
    }
    /// Merges every key's stats into `out` under the name `name` gives it.
    pub(crate) fn name_into<'k>(
        &'k self,
        out: &mut HashMap<String, Stats>,
        name: impl Fn(&'k K) -> &'k str,
    ) {
        for (k, s) in &self.0 {
            merge_named(out, name(k), s);
        }
    }
    /// Every key and its statistics.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&K, &Stats)> {
        self.0.iter()
    }
}

pub(crate) fn merge_named(out: &mut HashMap<String, Stats>, name: &str, s: &Stats) {
    match out.get_mut(name) {
        Some(t) => t.merge(s),
        None => {
            out.insert(name.to_owned(), *s);
        }
    }
}

/// The kernel thread's findings: kernel and copy statistics, agent bins.
struct DeviceSide {
    kernels: ByKey<(i64, Option<i64>)>,
    copies: ByKey<Option<i64>>,
    agents: BTreeMap<i64, Bins>,
}

/// The calling thread's findings: API, marker and allocation statistics, host bins.
struct HostSide {
    apis: ByKey<(Domain, Option<i64>)>,
    markers: HashMap<String, Stats>,
    allocs: ByKey<(bool, &'static str)>,
    host: Option<Bins>,
}

fn device_side(src: &Source<'_>, w: &MaybeWindow, bins: Option<&Bins>) -> Result<DeviceSide> {
    let mut d = DeviceSide {
        kernels: ByKey::new(),
        copies: ByKey::new(),
        agents: BTreeMap::new(),
    };
    src.dispatches(|k| {
        if keeps(w, k.start, k.end) {
            d.kernels
                .add((k.kernel_id, k.region_name_id), k.start, k.end);
            if let Some(b) = bins {
                d.agents
                    .entry(k.agent_id)
                    .or_insert_with(|| b.clone())
                    .add(k.start, k.end);
            }
        }
        Ok(())
    })?;
    src.memory_copies(|m| {
        if keeps(w, m.start, m.end) {
            d.copies.add(m.name_id, m.start, m.end);
            if let Some(b) = bins {
                d.agents
                    .entry(m.dst_agent_id.unwrap_or(-1))
                    .or_insert_with(|| b.clone())
                    .add(m.start, m.end);
            }
        }
        Ok(())
    })?;
    Ok(d)
}

fn host_side(
    src: &Source<'_>,
    dims: &Dims,
    w: &MaybeWindow,
    bins: Option<&Bins>,
) -> Result<HostSide> {
    let mut h = HostSide {
        apis: ByKey::new(),
        markers: HashMap::new(),
        allocs: ByKey::new(),
        host: bins.cloned(),
    };
    let mut kinds: IdMap<Option<i64>, Option<Domain>> = IdMap::default();
    src.api_calls(|a| {
        if !keeps(w, a.start, a.end) {
            return Ok(());
        }
        if let Some(b) = h.host.as_mut() {
            b.add(a.start, a.end);
        }
        let domain = *kinds
            .entry(a.category_id)
            .or_insert_with(|| Domain::of_api_kind(dims.string(a.category_id)));
        match (domain, &a.message) {
            (Some(Domain::MarkerApi), Some(m)) => {
                let d = a.end.saturating_sub(a.start).max(0) as u64;
                match h.markers.get_mut(m.as_str()) {
                    Some(s) => s.add(d),
                    None => {
                        let mut s = Stats::default();
                        s.add(d);
                        h.markers.insert(m.clone(), s);
                    }
                }
            }
            (Some(d), _) => h.apis.add((d, a.name_id), a.start, a.end),
            (None, _) => {}
        }
        Ok(())
    })?;
    src.memory_allocations(|m| {
        if keeps(w, m.start, m.end) {
            h.allocs.add((m.scratch, m.operation), m.start, m.end);
        }
        Ok(())
    })?;
    Ok(h)
}

/// Reads one source once; returns its statistics and, with `bins`, its lanes.
fn one_source(
    src: &Source<'_>,
    index: usize,
    opts: &ConvertOptions,
    w: &MaybeWindow,
    bins: Option<&Bins>,
) -> Result<(Summary, Vec<Lane>)> {
    let dims = src.dims(opts.agent_index)?;
    let second = src.input.reopen()?;
    let (info, src_window) = (src.info.clone(), src.window());
    let (device, host) = std::thread::scope(|s| {
        let handle = s.spawn(move || -> Result<DeviceSide> {
            let ksrc = second.source_for(&info)?.with_window(src_window);
            device_side(&ksrc, w, bins)
        });
        let host = host_side(src, &dims, w, bins);
        let device = handle.join().unwrap_or_else(|_| {
            Err(Error::usage(
                "internal error: the summary's kernel thread panicked",
            ))
        });
        (device, host)
    });
    let (device, host) = (device?, host?);

    let mut sum = Summary::default();
    let kmap = sum.domains.entry(Domain::KernelDispatch).or_default();
    device.kernels.name_into(kmap, |(kernel, region)| {
        kernel_name(&dims, *kernel, *region, opts.kernel_rename)
    });
    for ((d, name), s) in &host.apis.0 {
        merge_named(sum.domains.entry(*d).or_default(), dims.string(*name), s);
    }
    if !host.markers.is_empty() {
        let mmap = sum.domains.entry(Domain::MarkerApi).or_default();
        for (m, s) in &host.markers {
            merge_named(mmap, m, s);
        }
    }
    let cmap = sum.domains.entry(Domain::MemoryCopy).or_default();
    device.copies.name_into(cmap, |n| dims.string(*n));
    for ((scratch, op), s) in &host.allocs.0 {
        let d = if *scratch {
            Domain::ScratchMemory
        } else {
            Domain::MemoryAllocation
        };
        merge_named(sum.domains.entry(d).or_default(), op, s);
    }
    sum.domains.retain(|_, m| !m.is_empty());
    sum.counters = super::counters::collect(src, &dims, opts, w)?;

    let mut lanes = Vec::new();
    if let Some(b) = &host.host {
        let pid = dims.process.pid;
        lanes.push(Lane {
            label: format!("pid {pid} host"),
            busy: b.fractions(),
            color: 2 * index,
        });
        for (a, b) in &device.agents {
            lanes.push(Lane {
                label: format!(
                    "pid {pid} {}",
                    crate::pftrace::tracks::agent_name(&dims, *a, opts.agent_index)
                ),
                busy: b.fractions(),
                color: 2 * index + 1,
            });
        }
    }
    Ok((sum, lanes))
}

/// The time span the timeline shows: every source's extent, cut to the window.
fn span(sources: &[Source<'_>], window: &MaybeWindow) -> Result<(i64, i64)> {
    let mut span: Option<(i64, i64)> = None;
    for s in sources {
        if let Some((a, b)) = window::extent(s)? {
            span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
    }
    let (mut start, mut end) = span.unwrap_or((0, 0));
    if let Some(w) = window {
        start = start.max(w.start);
        end = end.min(w.end);
    }
    Ok((start, end))
}

/// Reads every row of `sources` that `window` keeps once, computing the statistics and (with
/// `timeline`) the timeline overview.
pub fn run(
    sources: &[Source<'_>],
    opts: &ConvertOptions,
    window: &MaybeWindow,
    timeline: bool,
) -> Result<Pass> {
    let mut tl = None;
    let mut bins = None;
    if timeline {
        let (start, end) = span(sources, window)?;
        if end > start {
            bins = Some(Bins {
                start,
                width: (end - start) as f64 / BINS as f64,
                busy: vec![0.0; BINS],
            });
        }
        tl = Some(Timeline {
            start,
            end,
            lanes: Vec::new(),
        });
    }
    let mut per_source = Vec::with_capacity(sources.len());
    let mut overall = Summary::default();
    for (i, src) in sources.iter().enumerate() {
        let (s, lanes) = one_source(src, i, opts, window, bins.as_ref())?;
        overall.merge(&s);
        per_source.push(s);
        if let Some(t) = tl.as_mut() {
            t.lanes.extend(lanes);
        }
    }
    Ok(Pass {
        per_source,
        overall,
        timeline: tl,
    })
}
