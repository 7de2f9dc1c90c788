//! Iteration multiplexing (`--replay-mode iteration`): a metric set of several passes counted
//! one pass per window, each launch with the metrics of the pass that counted it.
//!
//! What the H200 showed (docs/cuda.md, "More counters than one pass holds"): with user replay,
//! each `Start`/`Stop` is one pass of the config; a pass decoded merges its range *i* into range
//! *i* of the counter data image, and a metric whose pass a range has not seen yet evaluates to
//! NaN. So after pass *p* is decoded, the metrics that range *i* has for the first time are pass
//! *p*'s, and they count pass *p*'s launch *i*: they are given to that launch, and nothing else
//! is. No pass is lined up with another; a kernel gets every group when it launches in every
//! pass, over successive launches, and the report says per kernel how many launches each pass
//! gave values to.
//!
//! A metric that needs several passes by itself would mix launches in one value: it is refused
//! at set-up (`setup`), so every value written counts exactly one launch.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::launches::Launch;
use crate::metrics::CounterPlan;

/// What iteration multiplexing adds to a window's report (the `counters` object of the detach
/// reply, docs/json.md).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Multiplexed {
    /// Passes counted (of the report's `passes`).
    pub passes_counted: usize,
    /// The metrics each counted pass gave, as CUPTI scheduled them (the plan's names).
    pub groups: Vec<Vec<String>>,
    /// Per kernel name: the launches given values by each counted pass.
    pub kernels: Vec<KernelPasses>,
}

/// One kernel's launches with values, per pass.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KernelPasses {
    /// The kernel's name.
    pub name: String,
    /// Launches given values by pass 1, 2, ...
    pub launches: Vec<usize>,
}

impl Multiplexed {
    /// Kernels that got values from every pass of `passes`.
    pub fn complete(&self, passes: usize) -> usize {
        self.kernels
            .iter()
            .filter(|k| k.launches.len() >= passes && k.launches.iter().all(|n| *n > 0))
            .count()
    }
}

/// The state of a cycle of passes.
pub struct Multiplex {
    /// The pass the next window counts (0-based).
    pub pass: usize,
    /// Passes of the set.
    pub passes: usize,
    /// Per object, per range: which metrics the range had before this pass.
    seen: Vec<Vec<Vec<bool>>>,
    /// The plan, for the next pass's window.
    pub plan: Option<Arc<CounterPlan>>,
    /// Whether the next pass is to be counted (the last window stopped by itself, not by the
    /// detach, and the cycle is not complete).
    pub next: bool,
    /// What the cycle counted so far.
    pub summary: Multiplexed,
    per_kernel: BTreeMap<String, Vec<usize>>,
}

impl Multiplex {
    /// A cycle of `passes` passes over `objects` range profilers, at its first pass.
    pub fn new(passes: usize, objects: usize) -> Multiplex {
        Multiplex {
            pass: 0,
            passes,
            seen: vec![Vec::new(); objects],
            plan: None,
            next: false,
            summary: Multiplexed::default(),
            per_kernel: BTreeMap::new(),
        }
    }

    /// Starts a cycle again (the image is initialised again at pass 0).
    pub fn restart(&mut self) {
        self.pass = 0;
        for s in &mut self.seen {
            s.clear();
        }
    }

    /// The values of object `object`'s ranges that this pass gave: every metric a range has for
    /// the first time; the others NaN. The metrics new in this pass are added to its group.
    pub fn fresh(
        &mut self,
        object: usize,
        ranges: Vec<Vec<f64>>,
        names: &[String],
    ) -> Vec<Vec<f64>> {
        let seen = &mut self.seen[object];
        let mut group: Vec<bool> = vec![false; names.len()];
        let out = ranges
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                if seen.len() <= i {
                    seen.push(vec![false; v.len()]);
                }
                v.iter()
                    .enumerate()
                    .map(|(m, x)| {
                        if x.is_nan() || seen[i][m] {
                            f64::NAN
                        } else {
                            seen[i][m] = true;
                            if let Some(g) = group.get_mut(m) {
                                *g = true;
                            }
                            *x
                        }
                    })
                    .collect()
            })
            .collect();
        let pass = self.pass;
        let groups = &mut self.summary.groups;
        if groups.len() <= pass {
            groups.resize(pass + 1, Vec::new());
        }
        // A metric belongs to the first pass that gave it (a range that pass 1 did not reach
        // gets pass 1's metrics from a later pass's launch, but they are still pass 1's).
        for (m, new) in group.iter().enumerate() {
            if *new && !groups.iter().any(|g| g.contains(&names[m])) {
                groups[pass].push(names[m].clone());
            }
        }
        out
    }

    /// The kernel names the first pass of the cycle gave values to (a later pass waits for
    /// each: [`super::launches::Window::want`]).
    pub fn first_pass_names(&self) -> std::collections::HashSet<String> {
        self.per_kernel
            .iter()
            .filter(|(_, per)| per.first().is_some_and(|n| *n > 0))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Counts the launches of this pass that were given at least one value, per kernel name.
    pub fn count(&mut self, launches: &[Launch], given: impl Fn(u32) -> bool) {
        for l in launches {
            if given(l.correlation) {
                let per = self.per_kernel.entry(l.name.clone()).or_default();
                if per.len() <= self.pass {
                    per.resize(self.pass + 1, 0);
                }
                per[self.pass] += 1;
            }
        }
    }

    /// Ends the pass: `all_submitted` (CUPTI's `Stop`) ends the cycle; `by_itself`: the window
    /// stopped by its budget or its filters (not by the detach), so the next pass may follow.
    pub fn end_pass(&mut self, all_submitted: bool, by_itself: bool) {
        self.summary.passes_counted = self.summary.passes_counted.max(self.pass + 1);
        let passes = self.summary.passes_counted;
        self.summary.kernels = self
            .per_kernel
            .iter()
            .map(|(name, per)| {
                let mut launches = per.clone();
                launches.resize(passes, 0);
                KernelPasses {
                    name: name.clone(),
                    launches,
                }
            })
            .collect();
        if all_submitted || self.pass + 1 >= self.passes {
            self.next = false;
            self.restart();
        } else {
            self.pass += 1;
            self.next = by_itself;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(correlation: u32, name: &str) -> Launch {
        Launch {
            correlation,
            ctx: 1,
            name: name.into(),
            keep: true,
            grid: None,
            enter: 1,
            exit: 2,
        }
    }

    #[test]
    fn each_pass_gives_only_the_metrics_new_to_a_range() {
        let names = ["a".to_string(), "b".to_string()];
        let mut m = Multiplex::new(2, 1);
        let nan = f64::NAN;
        // Pass 1: metric a counted; b not yet.
        let r = m.fresh(0, vec![vec![1.0, nan], vec![2.0, nan]], &names);
        assert_eq!(r[0][0], 1.0);
        assert!(r[0][1].is_nan());
        m.count(&[launch(1, "k"), launch(2, "j")], |_| true);
        m.end_pass(false, true);
        assert!(m.next && m.pass == 1);
        // Pass 2: a is still there (pass 1's), b is new; a third range has both for the first
        // time (pass 1 had fewer launches).
        let r = m.fresh(
            0,
            vec![vec![1.0, 10.0], vec![2.0, 20.0], vec![3.0, 30.0]],
            &names,
        );
        assert!(r[0][0].is_nan() && r[0][1] == 10.0);
        assert!(r[1][0].is_nan() && r[1][1] == 20.0);
        assert_eq!(r[2], vec![3.0, 30.0]);
        m.count(&[launch(3, "k"), launch(4, "k"), launch(5, "x")], |c| {
            c != 5
        });
        m.end_pass(true, true);
        assert!(!m.next && m.pass == 0, "the cycle is complete");
        assert_eq!(
            m.summary.groups,
            vec![vec!["a".to_string()], vec!["b".to_string()]]
        );
        let k = |n: &str| m.summary.kernels.iter().find(|k| k.name == n).unwrap();
        assert_eq!(k("k").launches, vec![1, 2]);
        assert_eq!(k("j").launches, vec![1, 0]);
        assert_eq!(m.summary.complete(2), 1);
        let first: Vec<String> = {
            let mut v: Vec<String> = m.first_pass_names().into_iter().collect();
            v.sort();
            v
        };
        assert_eq!(
            first,
            vec!["j".to_string(), "k".to_string()],
            "x never got pass 1's values"
        );
    }

    #[test]
    fn a_pass_ended_by_the_detach_is_the_last() {
        let mut m = Multiplex::new(3, 1);
        m.end_pass(false, false);
        assert!(!m.next);
        assert_eq!(m.summary.passes_counted, 1);
    }
}
