//! Reading databases while they are written, a little at a time (`rocprof-attach top`): the rows
//! added since the last read, turned into the statistics `summary` computes from the same rows
//! (the same [`Stats`], names and domains as [`crate::report::pass`]: `ByKey`, [`kernel_name`],
//! [`Domain::of_api_kind`]), so the live view and `summary` of the kept database never disagree.
//! Besides: each agent's kernel intervals (how busy it is), the bytes copied, the slowest API
//! calls.
//!
//! Rows are read by id: each read takes the rows of each table whose id is above the highest
//! one read before, in one read transaction (a writer commits between reads, never during one).
//! A file that does not exist yet, or whose first commit has not happened, is "not ready".
//!
//! What a read costs grows with the rows added, not with the database (`top` at a 1 s interval
//! reads tens of thousands of rows a second; docs/performance.md, "Live view"): the rows come
//! through [`crate::reader::Source::kernel_times`] and its siblings (the few columns folded,
//! statements prepared once, an API call's category looked up by its event id, no scan of the
//! event table, no JSON), are folded by ids, and named once per read from dimension tables kept
//! between reads (loaded again only when a row names an id they lack: rows are only ever added
//! to them). The table list is read again only when the schema changes. Sampled counters
//! (`--spm`, table `rocpd_spm_sample`) are read by id too and folded as `summary -f html` folds
//! them ([`crate::report::spm`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::pass::{merge_named, ByKey};
use super::spm::{Series, SpmFold};
use crate::csv::kernel_name;
use crate::domain::Domain;
use crate::error::Result;
use crate::reader::{Dims, IdMap, Input, Source};
use crate::summary::{Stats, Summary};
use crate::ConvertOptions;

/// How many of the slowest API calls one read keeps.
pub const SLOWEST: usize = 20;

/// One API call, for the list of the slowest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The operation's name.
    pub name: String,
    /// Its domain.
    pub domain: Domain,
    /// Thread id.
    pub tid: i64,
    /// Duration in ns.
    pub duration: u64,
}

/// What one read of one process found: the rows added since the previous read.
#[derive(Debug, Default)]
pub struct Delta {
    /// The process's pid (as the database records it).
    pub pid: i64,
    /// Its MPI rank, when its environment names one ([`super::summary::rank_of`]).
    pub rank: Option<i64>,
    /// Statistics of the new kernels, copies and API calls, as `summary` computes them.
    pub summary: Summary,
    /// Bytes copied per copy name (the names of [`Domain::MemoryCopy`]).
    pub copy_bytes: HashMap<String, u64>,
    /// Kernel intervals `[start, end]` (ns) per agent name, in the order read.
    pub intervals: BTreeMap<String, Vec<(i64, i64)>>,
    /// The slowest new API calls, longest first (at most [`SLOWEST`]).
    pub slowest: Vec<Call>,
    /// Rows read (kernels, copies, API calls).
    pub rows: u64,
    /// The sampled counters of the new samples (`--spm`) per agent name
    /// ([`crate::report::spm`]: the figures `summary -f html` gives); empty without samples.
    pub spm: BTreeMap<String, Series>,
}

/// The next id to read of each table of one process.
#[derive(Debug, Default, Clone, Copy)]
struct Next {
    dispatch: i64,
    copy: i64,
    api: i64,
    spm: i64,
}

/// One of the slowest calls: duration, row id, name id, tid.
type Slow = (u64, i64, Option<i64>, i64);

/// What is kept of one process between reads: where the next read starts, its rank, and its
/// dimension tables (strings, symbols, agents: rows are only ever added to them, so they are
/// loaded again only when a new row names an id they lack).
struct Known {
    next: Next,
    rank: Option<i64>,
    dims: Dims,
    /// The domain of each API category id.
    kinds: IdMap<Option<i64>, Option<Domain>>,
}

/// Sets the allocator up for a process that reads live databases every interval: freed memory
/// is kept for the next read instead of being handed back to the system and faulted in again
/// (SQLite frees its page cache at every read of a file another process changed). Process-wide
/// (glibc's thresholds), so a front end calls it, once.
pub fn keep_freed_memory() {
    crate::sys::keep_freed_heap();
}

/// A database read a little at a time.
pub struct LiveDb {
    path: PathBuf,
    input: Option<Input>,
    /// The tables, as of the schema version read with them.
    tables: Option<(i64, Vec<String>)>,
    known: HashMap<String, Known>,
}

impl LiveDb {
    /// A database at `path`, opened at the first [`LiveDb::read`] that finds it ready.
    pub fn new(path: &Path) -> LiveDb {
        LiveDb {
            path: path.to_path_buf(),
            input: None,
            tables: None,
            known: HashMap::new(),
        }
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rows added since the last read, one [`Delta`] per process the database holds; `None`
    /// while it is not ready (missing, or not committed once yet).
    pub fn read(&mut self, opts: &ConvertOptions) -> Result<Option<Vec<Delta>>> {
        if self.input.is_none() {
            if !self.path.exists() {
                return Ok(None);
            }
            match Input::open(&self.path) {
                Ok(i) => self.input = Some(i),
                Err(_) => return Ok(None),
            }
        }
        let Some(input) = self.input.as_ref() else {
            return Ok(None);
        };
        // One snapshot for the dimensions and the rows: a kernel read always finds its symbol.
        input.connection().execute_batch("BEGIN")?;
        let out = read_all(input, opts, &mut self.tables, &mut self.known);
        let _ = input.connection().execute_batch("COMMIT");
        out.map(Some)
    }
}

/// The database's tables: read again only when its schema changed.
fn tables<'t>(input: &Input, cached: &'t mut Option<(i64, Vec<String>)>) -> Result<&'t [String]> {
    let version: i64 = input
        .connection()
        .prepare_cached("PRAGMA schema_version")?
        .query_row([], |r| r.get(0))?;
    if cached.as_ref().is_none_or(|c| c.0 != version) {
        *cached = Some((version, input.table_names()?));
    }
    Ok(cached.as_ref().map(|c| c.1.as_slice()).unwrap_or_default())
}

fn read_all(
    input: &Input,
    opts: &ConvertOptions,
    cached: &mut Option<(i64, Vec<String>)>,
    known: &mut HashMap<String, Known>,
) -> Result<Vec<Delta>> {
    let mut out = Vec::new();
    for src in input.sources_in(tables(input, cached)?) {
        let k = match known.entry(src.info.guid.clone()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Known {
                next: Next::default(),
                rank: super::summary::rank_of(&src),
                dims: src.dims(opts.agent_index)?,
                kinds: IdMap::default(),
            }),
        };
        let mut d = read_source(&src, opts, k)?;
        d.rank = k.rank;
        out.push(d);
    }
    Ok(out)
}

/// The rows of one process read from `next` on, folded by ids (named once the read is done).
#[derive(Default)]
struct Folded {
    kernels: ByKey<(i64, Option<i64>)>,
    agents: IdMap<i64, Vec<(i64, i64)>>,
    copies: ByKey<Option<i64>>,
    bytes: IdMap<Option<i64>, u64>,
    /// API calls by their category and name ids (the domain comes with the names).
    apis: ByKey<(Option<i64>, Option<i64>)>,
    /// The slowest calls of each category (the domain comes with the names): duration, row
    /// id, name, tid.
    slow: IdMap<Option<i64>, Vec<Slow>>,
    rows: u64,
    spm: SpmFold,
}

/// Reads the rows of one process from `k.next` on, and moves `k.next` past them.
fn read_source(src: &Source<'_>, opts: &ConvertOptions, k: &mut Known) -> Result<Delta> {
    let next = &mut k.next;
    let mut f = Folded::default();
    next.dispatch = src.kernel_times(next.dispatch, opts.kernel_rename, |r| {
        f.kernels
            .add((r.kernel_id, r.region_name_id), r.start, r.end);
        f.agents
            .entry(r.agent_id)
            .or_default()
            .push((r.start, r.end));
        f.rows += 1;
    })?;
    next.copy = src.copy_times(next.copy, |m| {
        f.copies.add(m.name_id, m.start, m.end);
        *f.bytes.entry(m.name_id).or_default() += m.size.max(0) as u64;
        f.rows += 1;
    })?;
    src.call_times(next.api, |a| {
        next.api = next.api.max(a.id + 1);
        f.rows += 1;
        f.apis.add((a.category_id, a.name_id), a.start, a.end);
        keep_slowest(
            f.slow.entry(a.category_id).or_default(),
            (
                super::pass::duration(a.start, a.end),
                a.id,
                a.name_id,
                a.tid,
            ),
        );
    })?;
    next.spm = src.spm_rows(next.spm, |r| f.spm.add(r))?;
    if lacks_names(&k.dims, &f, opts.kernel_rename) {
        k.dims = src.dims(opts.agent_index)?;
    }
    Ok(name(&k.dims, &mut k.kinds, opts, f))
}

/// Whether a row read names a string, symbol or agent that `dims` lacks (added since they were
/// loaded).
fn lacks_names(dims: &Dims, f: &Folded, rename: bool) -> bool {
    let string = |id: &Option<i64>| id.is_some_and(|i| !dims.strings.contains_key(&i));
    f.kernels.entries().any(|((kernel, region), _)| {
        !dims.symbols.contains_key(kernel) || (rename && string(region))
    }) || f.agents.keys().any(|a| !dims.agents.contains_key(a))
        || f.copies.entries().any(|(n, _)| string(n))
        || f.apis.entries().any(|((c, n), _)| string(c) || string(n))
        || f.spm.agents.keys().any(|a| !dims.agents.contains_key(a))
}

/// The statistics of `f` under their names, as `summary` names them.
fn name(
    dims: &Dims,
    kinds: &mut IdMap<Option<i64>, Option<Domain>>,
    opts: &ConvertOptions,
    f: Folded,
) -> Delta {
    let mut d = Delta {
        pid: dims.process.pid,
        rows: f.rows,
        ..Delta::default()
    };
    // A category's domain is kept once its name is known (a missing one may come later).
    let mut domain = |c: Option<i64>| match kinds.get(&c) {
        Some(d) => *d,
        None => {
            let d = Domain::of_api_kind(dims.string(c));
            if c.is_none_or(|i| dims.strings.contains_key(&i)) {
                kinds.insert(c, d);
            }
            d
        }
    };
    let kmap = d.summary.domains.entry(Domain::KernelDispatch).or_default();
    f.kernels.name_into(kmap, |(kernel, region)| {
        kernel_name(dims, *kernel, *region, opts.kernel_rename)
    });
    let cmap = d.summary.domains.entry(Domain::MemoryCopy).or_default();
    f.copies.name_into(cmap, |n| dims.string(*n));
    for (n, b) in &f.bytes {
        *d.copy_bytes.entry(dims.string(*n).to_owned()).or_default() += b;
    }
    for ((c, n), s) in f.apis.entries() {
        // Markers are left out (their names are their messages), and so are unknown kinds.
        if let Some(dom) = domain(*c).filter(|d| *d != Domain::MarkerApi) {
            merge_named(
                d.summary.domains.entry(dom).or_default(),
                dims.string(*n),
                s,
            );
        }
    }
    d.summary.domains.retain(|_, m| !m.is_empty());
    for (a, v) in f.agents {
        let name = crate::pftrace::tracks::agent_name(dims, a, opts.agent_index);
        d.intervals.entry(name).or_default().extend(v);
    }
    for (a, series) in f.spm.finish() {
        let name = crate::pftrace::tracks::agent_name(dims, a, opts.agent_index);
        let into = d.spm.entry(name).or_default();
        for (n, st) in series {
            into.entry(n).or_default().merge(&st);
        }
    }
    // The slowest of every category kept, longest first, then in id order (as read).
    let mut slow: Vec<(Slow, Domain)> = f
        .slow
        .into_iter()
        .filter_map(|(c, v)| Some((v, domain(c).filter(|d| *d != Domain::MarkerApi)?)))
        .flat_map(|(v, dom)| v.into_iter().map(move |s| (s, dom)))
        .collect();
    slow.sort_unstable_by_key(|(s, _)| (std::cmp::Reverse(s.0), s.1));
    slow.truncate(SLOWEST);
    d.slowest = slow
        .into_iter()
        .map(|((duration, _, name, tid), domain)| Call {
            name: dims.string(name).to_owned(),
            domain,
            tid,
            duration,
        })
        .collect();
    d
}

/// Keeps the [`SLOWEST`] longest calls, longest first, then by row id: the calls kept and their
/// order do not depend on the order they come in.
fn keep_slowest(v: &mut Vec<Slow>, c: Slow) {
    let key = |x: &Slow| (std::cmp::Reverse(x.0), x.1);
    if v.len() == SLOWEST && v.last().is_some_and(|l| key(l) <= key(&c)) {
        return;
    }
    let at = v.partition_point(|x| key(x) <= key(&c));
    v.insert(at, c);
    v.truncate(SLOWEST);
}

/// The time `intervals` cover inside `[lo, hi)`, overlaps counted once (ns). Sorts `intervals`.
pub fn busy_ns(intervals: &mut [(i64, i64)], lo: i64, hi: i64) -> i64 {
    intervals.sort_unstable();
    let (mut busy, mut upto) = (0i64, lo);
    for &(s, e) in intervals.iter() {
        let (s, e) = (s.max(upto), e.min(hi));
        if e > s {
            busy += e - s;
            upto = e;
        }
    }
    busy
}

/// Total kernel time of `s` (ns).
pub fn kernel_total(s: &Summary) -> u64 {
    s.domains
        .get(&Domain::KernelDispatch)
        .map(|m| m.values().map(|x| x.sum).fold(0, u64::saturating_add))
        .unwrap_or(0)
}

/// The statistics of one name of one domain, if any.
pub fn stats_of(s: &Summary, d: Domain, name: &str) -> Option<Stats> {
    s.domains.get(&d).and_then(|m| m.get(name)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_counts_overlaps_once_and_clips() {
        let mut v = vec![(10, 20), (15, 30), (40, 50), (0, 5)];
        assert_eq!(busy_ns(&mut v, 0, 100), 5 + 20 + 10);
        assert_eq!(busy_ns(&mut v, 12, 45), 18 + 5);
        assert_eq!(busy_ns(&mut [], 0, 10), 0);
    }

    #[test]
    fn keeps_the_slowest_longest_first() {
        let mut v: Vec<Slow> = Vec::new();
        for i in 0..100i64 {
            keep_slowest(&mut v, ((i as u64 * 37) % 101 / 4, i, None, 0));
        }
        assert_eq!(v.len(), SLOWEST);
        assert!(v.windows(2).all(|w| (w[0].0, w[1].1) > (w[1].0, w[0].1)));
        let max = (0..100u64).map(|i| (i * 37) % 101 / 4).max().unwrap();
        assert_eq!(v[0].0, max);
        // The same calls in the reverse order: the same list.
        let mut r: Vec<Slow> = Vec::new();
        for i in (0..100i64).rev() {
            keep_slowest(&mut r, ((i as u64 * 37) % 101 / 4, i, None, 0));
        }
        assert_eq!(r, v);
    }
}
