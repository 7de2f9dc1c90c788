//! What `top` knows: the statistics of every watched process over the last interval and since
//! the view started, built from the rows [`crate::rocpd::report::live`] reads (the same
//! statistics as `summary`), and the rows the views show, sorted.

use crate::rocpd::domain::Domain;
use crate::rocpd::report::live::{busy_ns, Call, Delta};
use crate::rocpd::summary::{Stats, Summary};
use std::collections::{BTreeMap, HashMap};

/// How the kernel table is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// GPU time over the last interval (the default).
    #[default]
    Interval,
    /// GPU time since the view started.
    Total,
    /// Launches over the last interval.
    Launches,
    /// Mean duration over the last interval.
    Mean,
    /// Name.
    Name,
}

impl Sort {
    /// The next order (the `s` key).
    pub fn next(self) -> Sort {
        match self {
            Sort::Interval => Sort::Total,
            Sort::Total => Sort::Launches,
            Sort::Launches => Sort::Mean,
            Sort::Mean => Sort::Name,
            Sort::Name => Sort::Interval,
        }
    }

    /// Its name, as the views show it.
    pub fn label(self) -> &'static str {
        match self {
            Sort::Interval => "GPU time (interval)",
            Sort::Total => "GPU time (since start)",
            Sort::Launches => "launches",
            Sort::Mean => "mean",
            Sort::Name => "name",
        }
    }
}

/// How busy one agent is: the union of its kernels' time.
#[derive(Debug, Clone, Default)]
pub struct Busy {
    /// The latest kernel end seen (ns): the next interval's start.
    frontier: Option<i64>,
    /// Busy and covered time since the start (ns).
    busy_total: i64,
    span_total: i64,
    /// Busy fraction over the rows of the last interval (None: no kernel).
    pub last: Option<f64>,
    /// The GPU time the last interval's rows cover (ns): from the previous interval's last
    /// kernel end to this one's.
    pub last_span: i64,
}

impl Busy {
    /// Adds one interval's kernels: the time from the previous frontier to the latest end.
    fn add(&mut self, intervals: &mut [(i64, i64)]) {
        if intervals.is_empty() {
            self.last = None;
            return;
        }
        let lo = self
            .frontier
            .unwrap_or_else(|| intervals.iter().map(|i| i.0).min().unwrap_or(0));
        let hi = intervals.iter().map(|i| i.1).max().unwrap_or(lo).max(lo);
        let busy = busy_ns(intervals, lo, hi);
        self.frontier = Some(hi);
        self.busy_total += busy;
        self.span_total += hi - lo;
        self.last = (hi > lo).then(|| busy as f64 / (hi - lo) as f64);
        self.last_span = hi - lo;
    }

    /// Busy fraction since the start.
    pub fn overall(&self) -> Option<f64> {
        (self.span_total > 0).then(|| self.busy_total as f64 / self.span_total as f64)
    }
}

/// One watched process.
#[derive(Debug, Default)]
pub struct Proc {
    /// Process id.
    pub pid: i32,
    /// MPI rank, when its environment names one.
    pub rank: Option<i64>,
    /// It exited while watched.
    pub exited: bool,
    /// Statistics since the start and of the last interval.
    pub total: Summary,
    /// The last interval's.
    pub interval: Summary,
    /// Bytes copied per copy name, since the start and in the last interval.
    pub bytes_total: HashMap<String, u64>,
    /// The last interval's.
    pub bytes_interval: HashMap<String, u64>,
    /// How busy each agent is.
    pub busy: BTreeMap<String, Busy>,
    /// The slowest API calls of the last interval.
    pub slowest: Vec<Call>,
    /// Sampled counters (`--spm`).
    pub spm: super::spm::Sampled,
}

impl Proc {
    /// The rank, else the pid, as a column label.
    pub fn label(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {}", self.pid),
        }
    }

    /// Kernel time of the last interval (ns).
    pub fn kernel_ns(&self) -> u64 {
        domain_total(&self.interval, Domain::KernelDispatch)
    }

    /// Kernel time since the start (ns).
    pub fn kernel_ns_total(&self) -> u64 {
        domain_total(&self.total, Domain::KernelDispatch)
    }

    /// Mean busy fraction of its agents since the start (None: no kernel).
    pub fn busy_overall(&self) -> Option<f64> {
        let v: Vec<f64> = self.busy.values().filter_map(Busy::overall).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Collective (NCCL/RCCL) kernel time of the last interval (ns).
    pub fn collective_ns(&self) -> u64 {
        self.interval
            .domains
            .get(&Domain::KernelDispatch)
            .map(|m| {
                m.iter()
                    .filter(|(n, _)| is_collective(n))
                    .map(|(_, s)| s.sum)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Mean busy fraction of its agents over the last interval (None: no kernel).
    pub fn busy_last(&self) -> Option<f64> {
        let v: Vec<f64> = self.busy.values().filter_map(|b| b.last).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Whether a kernel is a collective of NCCL or RCCL.
pub fn is_collective(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.contains("nccl") || l.contains("rccl")
}

fn domain_total(s: &Summary, d: Domain) -> u64 {
    s.domains
        .get(&d)
        .map(|m| m.values().map(|x| x.sum).fold(0, u64::saturating_add))
        .unwrap_or(0)
}

/// One row of the kernel table.
#[derive(Debug, Clone)]
pub struct KernelRow {
    /// The full name (as `summary` shows it).
    pub name: String,
    /// The last interval's statistics.
    pub interval: Stats,
    /// Since the start.
    pub total: Stats,
    /// Per process (in [`Model::procs`] order): the last interval's GPU time (ns).
    pub per_proc: Vec<u64>,
}

/// One row of the copy table.
#[derive(Debug, Clone)]
pub struct CopyRow {
    /// The copy's operation name.
    pub name: String,
    /// The last interval's statistics and bytes.
    pub interval: Stats,
    /// Bytes of the last interval.
    pub bytes: u64,
    /// Since the start.
    pub total: Stats,
    /// Bytes since the start.
    pub bytes_total: u64,
}

impl CopyRow {
    /// Bandwidth over the copies' own time in the last interval (bytes per second).
    pub fn bandwidth(&self) -> Option<f64> {
        (self.interval.sum > 0).then(|| self.bytes as f64 * 1e9 / self.interval.sum as f64)
    }
}

/// Everything watched.
#[derive(Debug, Default)]
pub struct Model {
    /// The processes, in the order they were attached.
    pub procs: Vec<Proc>,
    /// Refreshes so far.
    pub iteration: u64,
    /// Kernel table order.
    pub sort: Sort,
    /// How the rows are sampled (shown in the header).
    pub sampling: String,
    /// Things to tell the user (exits, warnings), newest last.
    pub messages: Vec<String>,
    /// `--spm` was asked for: the views show the sampled counters.
    pub spm: bool,
}

impl Model {
    /// A model for the attached processes.
    pub fn new(pids: &[i32], sampling: String) -> Model {
        Model {
            procs: pids
                .iter()
                .map(|&pid| Proc {
                    pid,
                    ..Proc::default()
                })
                .collect(),
            sampling,
            ..Model::default()
        }
    }

    /// Starts a new interval: the last interval's figures are cleared.
    pub fn begin_interval(&mut self) {
        self.iteration += 1;
        for p in &mut self.procs {
            p.interval = Summary::default();
            p.bytes_interval.clear();
            p.slowest.clear();
            p.spm.interval.clear();
            // An agent with no kernel in this interval's rows shows as idle.
            for b in p.busy.values_mut() {
                b.last = None;
                b.last_span = 0;
            }
        }
    }

    /// Adds the rows one read found: those of a process watched under the pid its database
    /// records, else those of `pid` (the process whose session wrote the database).
    pub fn add(&mut self, pid: i32, deltas: Vec<Delta>) {
        for d in deltas {
            let recorded = i32::try_from(d.pid).unwrap_or(pid);
            let found = [recorded, pid]
                .iter()
                .find_map(|w| self.procs.iter().position(|p| p.pid == *w));
            let i = found.unwrap_or_else(|| {
                self.procs.push(Proc {
                    pid: recorded,
                    ..Proc::default()
                });
                self.procs.len() - 1
            });
            let p = &mut self.procs[i];
            if d.rank.is_some() {
                p.rank = d.rank;
            }
            p.total.merge(&d.summary);
            p.interval.merge(&d.summary);
            for (n, b) in &d.copy_bytes {
                *p.bytes_total.entry(n.clone()).or_default() += b;
                *p.bytes_interval.entry(n.clone()).or_default() += b;
            }
            for (agent, mut v) in d.intervals {
                p.busy.entry(agent).or_default().add(&mut v);
            }
            p.spm.add(&d.spm);
            p.slowest.extend(d.slowest);
            p.slowest.sort_by_key(|c| std::cmp::Reverse(c.duration));
            p.slowest.truncate(crate::rocpd::report::live::SLOWEST);
        }
    }

    /// Marks a process as exited (and says so).
    pub fn exited(&mut self, pid: i32) {
        if let Some(p) = self.procs.iter_mut().find(|p| p.pid == pid) {
            if !p.exited {
                p.exited = true;
                self.messages.push(format!(
                    "process {pid} exited; the others are still watched"
                ));
            }
        }
    }

    /// The kernel rows, in the chosen order.
    pub fn kernels(&self) -> Vec<KernelRow> {
        let mut rows: HashMap<&str, KernelRow> = HashMap::new();
        let n = self.procs.len();
        for (i, p) in self.procs.iter().enumerate() {
            for (name, s) in p
                .total
                .domains
                .get(&Domain::KernelDispatch)
                .into_iter()
                .flatten()
            {
                let r = rows.entry(name.as_str()).or_insert_with(|| KernelRow {
                    name: name.clone(),
                    interval: Stats::default(),
                    total: Stats::default(),
                    per_proc: vec![0; n],
                });
                r.total.merge(s);
                if let Some(s) = p
                    .interval
                    .domains
                    .get(&Domain::KernelDispatch)
                    .and_then(|m| m.get(name))
                {
                    r.interval.merge(s);
                    r.per_proc[i] += s.sum;
                }
            }
        }
        let mut v: Vec<KernelRow> = rows.into_values().collect();
        let key = |r: &KernelRow| -> (u64, u64) {
            match self.sort {
                Sort::Interval => (r.interval.sum, r.total.sum),
                Sort::Total => (r.total.sum, r.interval.sum),
                Sort::Launches => (r.interval.count, r.total.count),
                Sort::Mean => (r.interval.mean() as u64, r.total.mean() as u64),
                Sort::Name => (0, 0),
            }
        };
        v.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name)));
        v
    }

    /// The copy rows, by time of the last interval, then since the start.
    pub fn copies(&self) -> Vec<CopyRow> {
        let mut rows: HashMap<&str, CopyRow> = HashMap::new();
        for p in &self.procs {
            for (name, s) in p
                .total
                .domains
                .get(&Domain::MemoryCopy)
                .into_iter()
                .flatten()
            {
                let r = rows.entry(name.as_str()).or_insert_with(|| CopyRow {
                    name: name.clone(),
                    interval: Stats::default(),
                    bytes: 0,
                    total: Stats::default(),
                    bytes_total: 0,
                });
                r.total.merge(s);
                r.bytes_total += p.bytes_total.get(name).copied().unwrap_or(0);
                if let Some(s) = p
                    .interval
                    .domains
                    .get(&Domain::MemoryCopy)
                    .and_then(|m| m.get(name))
                {
                    r.interval.merge(s);
                    r.bytes += p.bytes_interval.get(name).copied().unwrap_or(0);
                }
            }
        }
        let mut v: Vec<CopyRow> = rows.into_values().collect();
        v.sort_by(|a, b| {
            (b.interval.sum, b.total.sum)
                .cmp(&(a.interval.sum, a.total.sum))
                .then_with(|| a.name.cmp(&b.name))
        });
        v
    }

    /// The slowest API calls of the last interval, with their process, longest first.
    pub fn slowest(&self) -> Vec<(i32, &Call)> {
        let mut v: Vec<(i32, &Call)> = self
            .procs
            .iter()
            .flat_map(|p| p.slowest.iter().map(move |c| (p.pid, c)))
            .collect();
        v.sort_by_key(|c| std::cmp::Reverse(c.1.duration));
        v
    }

    /// The GPU time the last interval's rows cover, the longest of any agent (s; None: no
    /// kernel). The rows are those the profiler committed during the interval, so this varies
    /// around the interval's length.
    pub fn gpu_span_s(&self) -> Option<f64> {
        self.procs
            .iter()
            .flat_map(|p| p.busy.values())
            .filter(|b| b.last.is_some())
            .map(|b| b.last_span as f64 / 1e9)
            .reduce(f64::max)
    }

    /// Kernel time of the last interval, all processes (ns).
    pub fn interval_kernel_ns(&self) -> u64 {
        self.procs.iter().map(Proc::kernel_ns).sum()
    }

    /// Kernel time since the start, all processes (ns).
    pub fn total_kernel_ns(&self) -> u64 {
        self.procs
            .iter()
            .map(|p| domain_total(&p.total, Domain::KernelDispatch))
            .sum()
    }

    /// The process that stands out among several: the one whose GPU idled most in the last
    /// interval (5 points below the busiest, or less than half as busy), else the one whose
    /// collective kernels took longest. None with one process.
    pub fn straggler(&self) -> Option<(usize, &'static str)> {
        let live: Vec<(usize, &Proc)> = self
            .procs
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.exited)
            .collect();
        if live.len() < 2 {
            return None;
        }
        let busy: Vec<(usize, f64)> = live
            .iter()
            .filter_map(|(i, p)| p.busy_last().map(|b| (*i, b)))
            .collect();
        if busy.len() == live.len() {
            let (lo, hi) = busy.iter().fold((busy[0], busy[0]), |(lo, hi), &x| {
                (
                    if x.1 < lo.1 { x } else { lo },
                    if x.1 > hi.1 { x } else { hi },
                )
            });
            // 5 points apart, or busy less than half as much as the busiest.
            if hi.1 - lo.1 >= 0.05 || lo.1 < hi.1 / 2.0 {
                return Some((lo.0, "GPU idles most"));
            }
        }
        let coll = live
            .iter()
            .map(|(i, p)| (*i, p.collective_ns()))
            .max_by_key(|x| x.1)?;
        (coll.1 > 0).then_some((coll.0, "longest collectives"))
    }
}

/// The percentage `part` is of `whole`.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// A kernel name shortened for a table: demangled (when the tool left it mangled), without its
/// return type, template arguments and parameters (`void at::native::foo<4, Bar>(int)` →
/// `at::native::foo`). Each distinct name is shortened once: the tables show the same names at
/// every refresh.
pub fn short_name(name: &str) -> String {
    thread_local! {
        static SHORT: std::cell::RefCell<HashMap<String, String>> = Default::default();
    }
    SHORT.with_borrow_mut(|m| {
        if let Some(s) = m.get(name) {
            return s.clone();
        }
        let s = shorten(name);
        m.insert(name.to_string(), s.clone());
        s
    })
}

fn shorten(name: &str) -> String {
    let demangled = name
        .starts_with("_Z")
        .then(|| cpp_demangle::Symbol::new(name).ok().map(|s| s.to_string()))
        .flatten();
    let name = demangled.as_deref().unwrap_or(name);
    let mut out = String::new();
    let mut depth = 0i32;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            '(' if depth == 0 => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out.trim();
    // The return type, e.g. `void `: what comes before the last space outside brackets.
    let out = out.rsplit(' ').next().unwrap_or(out).trim();
    if out.is_empty() {
        name.to_string()
    } else {
        out.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_templates_parameters_and_return_types() {
        assert_eq!(
            short_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(short_name("gemm_kernel(int)"), "gemm_kernel");
        assert_eq!(short_name("_Z11gemm_kerneli"), "gemm_kernel");
        assert_eq!(short_name("_Z!!"), "_Z!!");
        assert_eq!(
            short_name("_Z3addIfEvPT_i"), // void add<float>(float*, int)
            "add"
        );
    }

    /// One process's rows of an interval: `kernels` (name, ns) on agent 0 from 0 on, one after
    /// the other, and `idle` ns of gap after each.
    fn delta(pid: i64, kernels: &[(&str, u64)], idle: i64) -> Delta {
        let mut d = Delta {
            pid,
            ..Delta::default()
        };
        let mut t = 0i64;
        let mut v = Vec::new();
        for (name, ns) in kernels {
            let mut s = Stats::default();
            s.add(*ns);
            d.summary
                .domains
                .entry(Domain::KernelDispatch)
                .or_default()
                .entry(name.to_string())
                .or_default()
                .merge(&s);
            v.push((t, t + *ns as i64));
            t += *ns as i64 + idle;
        }
        d.intervals.insert("GPU 0".into(), v);
        d
    }

    #[test]
    fn the_idlest_gpu_else_the_longest_collectives_stand_out() {
        let mut m = Model::new(&[1, 2, 3], String::new());
        m.begin_interval();
        m.add(1, vec![delta(1, &[("gemm", 100), ("gemm", 100)], 0)]);
        m.add(2, vec![delta(2, &[("gemm", 100), ("gemm", 100)], 300)]);
        m.add(3, vec![delta(3, &[("gemm", 100), ("gemm", 100)], 0)]);
        assert_eq!(m.straggler(), Some((1, "GPU idles most")));
        assert_eq!(m.procs[1].busy_last(), Some(200.0 / 500.0));
        m.begin_interval();
        for pid in 1..=3 {
            let nccl = if pid == 3 { 900 } else { 100 };
            m.add(
                pid,
                vec![delta(pid as i64, &[("ncclKernel_AllReduce", nccl)], 0)],
            );
        }
        assert_eq!(m.straggler(), Some((2, "longest collectives")));
        assert_eq!(m.procs[2].collective_ns(), 900);
        m.exited(1);
        m.exited(2);
        assert_eq!(m.straggler(), None, "one process left");
    }

    #[test]
    fn busy_is_the_union_from_the_last_frontier() {
        let mut b = Busy::default();
        b.add(&mut [(0, 50), (25, 75), (90, 100)]);
        assert_eq!(b.last, Some(0.85));
        b.add(&mut [(150, 200)]);
        assert_eq!(b.last, Some(0.5));
        assert_eq!(b.overall(), Some(135.0 / 200.0));
    }
}
