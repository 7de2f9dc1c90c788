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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::pass::{merge_named, ByKey};
use crate::csv::kernel_name;
use crate::domain::Domain;
use crate::error::Result;
use crate::reader::{IdMap, Input, Source};
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
}

/// The next id to read of each table of one process.
#[derive(Debug, Default, Clone, Copy)]
struct Next {
    dispatch: i64,
    copy: i64,
    api: i64,
}

/// A database read a little at a time.
pub struct LiveDb {
    path: PathBuf,
    input: Option<Input>,
    next: HashMap<String, Next>,
    ranks: HashMap<String, Option<i64>>,
}

impl LiveDb {
    /// A database at `path`, opened at the first [`LiveDb::read`] that finds it ready.
    pub fn new(path: &Path) -> LiveDb {
        LiveDb {
            path: path.to_path_buf(),
            input: None,
            next: HashMap::new(),
            ranks: HashMap::new(),
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
        let out = read_all(input, opts, &mut self.next, &mut self.ranks);
        let _ = input.connection().execute_batch("COMMIT");
        out.map(Some)
    }
}

fn read_all(
    input: &Input,
    opts: &ConvertOptions,
    next: &mut HashMap<String, Next>,
    ranks: &mut HashMap<String, Option<i64>>,
) -> Result<Vec<Delta>> {
    let mut out = Vec::new();
    for src in input.sources()? {
        let key = src.info.guid.clone();
        let rank = *ranks
            .entry(key.clone())
            .or_insert_with(|| super::summary::rank_of(&src));
        let n = next.entry(key).or_default();
        let mut d = read_source(&src, opts, n)?;
        d.rank = rank;
        out.push(d);
    }
    Ok(out)
}

/// A source limited to the ids from `from` on.
fn from_id<'a>(src: &Source<'a>, from: i64) -> Source<'a> {
    src.clone().with_ids(Some((from, i64::MAX)))
}

/// Reads the rows of one process from `next` on, and moves `next` past them.
fn read_source(src: &Source<'_>, opts: &ConvertOptions, next: &mut Next) -> Result<Delta> {
    let dims = src.dims(opts.agent_index)?;
    let mut d = Delta {
        pid: dims.process.pid,
        ..Delta::default()
    };
    let mut kernels: ByKey<(i64, Option<i64>)> = ByKey::new();
    let mut agents: IdMap<i64, Vec<(i64, i64)>> = IdMap::default();
    from_id(src, next.dispatch).dispatches(|k| {
        next.dispatch = next.dispatch.max(k.id + 1);
        kernels.add((k.kernel_id, k.region_name_id), k.start, k.end);
        agents.entry(k.agent_id).or_default().push((k.start, k.end));
        d.rows += 1;
        Ok(())
    })?;
    let mut copies: ByKey<Option<i64>> = ByKey::new();
    let mut bytes: IdMap<Option<i64>, u64> = IdMap::default();
    from_id(src, next.copy).memory_copies(|m| {
        next.copy = next.copy.max(m.id + 1);
        copies.add(m.name_id, m.start, m.end);
        *bytes.entry(m.name_id).or_default() += m.size.max(0) as u64;
        d.rows += 1;
        Ok(())
    })?;
    let mut apis: ByKey<(Domain, Option<i64>)> = ByKey::new();
    let mut kinds: IdMap<Option<i64>, Option<Domain>> = IdMap::default();
    let mut slow: Vec<(u64, Domain, Option<i64>, i64)> = Vec::new();
    from_id(src, next.api).api_calls(|a| {
        next.api = next.api.max(a.id + 1);
        d.rows += 1;
        let domain = *kinds
            .entry(a.category_id)
            .or_insert_with(|| Domain::of_api_kind(dims.string(a.category_id)));
        match domain {
            Some(Domain::MarkerApi) | None => {}
            Some(dom) => {
                apis.add((dom, a.name_id), a.start, a.end);
                keep_slowest(
                    &mut slow,
                    (super::pass::duration(a.start, a.end), dom, a.name_id, a.tid),
                );
            }
        }
        Ok(())
    })?;
    let kmap = d.summary.domains.entry(Domain::KernelDispatch).or_default();
    kernels.name_into(kmap, |(kernel, region)| {
        kernel_name(&dims, *kernel, *region, opts.kernel_rename)
    });
    let cmap = d.summary.domains.entry(Domain::MemoryCopy).or_default();
    copies.name_into(cmap, |n| dims.string(*n));
    for (n, b) in &bytes {
        *d.copy_bytes.entry(dims.string(*n).to_owned()).or_default() += b;
    }
    for ((dom, name), s) in apis.entries() {
        merge_named(
            d.summary.domains.entry(*dom).or_default(),
            dims.string(*name),
            s,
        );
    }
    d.summary.domains.retain(|_, m| !m.is_empty());
    for (a, v) in agents {
        let name = crate::pftrace::tracks::agent_name(&dims, a, opts.agent_index);
        d.intervals.entry(name).or_default().extend(v);
    }
    d.slowest = slow
        .into_iter()
        .map(|(duration, domain, name, tid)| Call {
            name: dims.string(name).to_owned(),
            domain,
            tid,
            duration,
        })
        .collect();
    Ok(d)
}

/// Keeps the [`SLOWEST`] longest calls, longest first.
fn keep_slowest<T: Ord + Copy>(
    v: &mut Vec<(u64, T, Option<i64>, i64)>,
    c: (u64, T, Option<i64>, i64),
) {
    if v.len() == SLOWEST && v.last().is_some_and(|l| l.0 >= c.0) {
        return;
    }
    let at = v.partition_point(|x| x.0 >= c.0);
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
        let mut v: Vec<(u64, u8, Option<i64>, i64)> = Vec::new();
        for i in 0..100u64 {
            keep_slowest(&mut v, ((i * 37) % 101, 0, None, 0));
        }
        assert_eq!(v.len(), SLOWEST);
        assert!(v.windows(2).all(|w| w[0].0 >= w[1].0));
        let max = (0..100u64).map(|i| (i * 37) % 101).max().unwrap();
        assert_eq!(v[0].0, max);
    }
}
