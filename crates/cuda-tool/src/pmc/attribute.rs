//! Which range is which launch: range *i + x* is launch *i* of one context, the offset `x`
//! checked against an anchor metric where launches were uncertain (docs/cuda.md, "Counters").

use std::collections::HashMap;

use super::launches::Launch;
use super::{KernelValues, Report};
use crate::metrics::CounterPlan;

/// What makes range *i* launch *i + x*: launches seen (not recorded) after the budget, while
/// `Start` and `Stop` were called (each may or may not have become a range), and the ranges
/// CUPTI dropped.
pub(super) struct Uncertain {
    pub after: usize,
    pub during_start: usize,
    pub during_stop: usize,
    pub dropped: usize,
}

/// An anchor metric checks that a range is its launch: `(index among the metrics evaluated,
/// warps (true) or blocks (false))`.
pub type Anchor = Option<(usize, bool)>;

fn anchor_holds(anchor: Anchor, l: &Launch, values: &[f64]) -> Option<bool> {
    let (i, warps) = anchor?;
    let (blocks, threads) = l.grid?;
    let want = if warps {
        blocks * threads.div_ceil(32)
    } else {
        blocks
    };
    // NaN: the anchor's pass did not count this range (iteration multiplexing): unknown.
    let v = values.get(i).filter(|v| !v.is_nan())?;
    Some(*v == want as f64)
}

/// The offset `x` (range `i + x` is launch `i`). Launches wait at the gate while `Start` is
/// called, so `x` is 0 unless launches were uncertain there (in flight when the window opened,
/// or past the gate's time limit): then `x` is at most their number, and the one offset at which
/// every launch's grid matches its range's anchor metric is taken; `None` when there is no
/// single such offset. Ranges beyond the recorded launches (after the budget, during `Stop`) and
/// recorded launches that were not ranges (during `Stop`) are at the end and change nothing.
fn offset(
    launches: &[&Launch],
    u: &Uncertain,
    anchor: Anchor,
    ranges: &[Vec<f64>],
) -> Option<usize> {
    let hi = u.during_start.min(ranges.len());
    let fits = |x: usize| {
        launches
            .iter()
            .zip(ranges.iter().skip(x))
            .all(|(l, v)| anchor_holds(anchor, l, v) != Some(false))
    };
    let candidates: Vec<usize> = (0..=hi).filter(|&x| fits(x)).collect();
    match candidates.as_slice() {
        [x] => Some(*x),
        _ => None,
    }
}

/// Gives range *i + x* to launch *i* of one context ([`offset`]); when no single offset fits,
/// nothing is attributed and a note says why: no value is ever given to the wrong launch.
pub(super) fn attribute(
    plan: &CounterPlan,
    launches: &[&Launch],
    u: &Uncertain,
    anchor: Anchor,
    ranges: Vec<Vec<f64>>,
    out: &mut HashMap<u32, KernelValues>,
    report: &mut Report,
) {
    for l in launches {
        out.insert(
            l.correlation,
            KernelValues {
                values: Vec::new(),
                enter: l.enter,
                exit: l.exit.max(l.enter),
            },
        );
    }
    let Some(x) = offset(launches, u, anchor, &ranges) else {
        report.notes.push(format!(
            "the range profiler returned {} ranges ({} dropped) for {} launches ({} more after the budget, {} during Start, {} during Stop), and no alignment fits{}: no value of this window is attributed, none is given to the wrong kernel; attach again",
            ranges.len() + u.dropped, u.dropped, launches.len(), u.after, u.during_start, u.during_stop,
            if anchor.is_some() { " the launches' grids" } else { " (add sm__ctas_launched.sum or SQ_WAVES to check grids)" }
        ));
        return;
    };
    for (l, v) in launches.iter().zip(ranges.into_iter().skip(x)) {
        if !l.keep {
            continue;
        }
        let values = v
            .iter()
            .zip(&plan.counters)
            .map(|(x, c)| x * c.scale)
            .collect();
        out.insert(
            l.correlation,
            KernelValues {
                values,
                enter: l.enter,
                exit: l.exit.max(l.enter),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(correlation: u32, blocks: u64) -> Launch {
        Launch {
            correlation,
            ctx: 1,
            name: format!("k{blocks}"),
            keep: true,
            grid: Some((blocks, 64)),
            enter: 10,
            exit: 20,
        }
    }

    fn uncertain(during_start: usize) -> Uncertain {
        Uncertain {
            after: 0,
            during_start,
            during_stop: 0,
            dropped: 0,
        }
    }

    /// Ranges whose anchor (index 0, blocks) is `blocks`.
    fn ranges(blocks: &[u64]) -> Vec<Vec<f64>> {
        blocks.iter().map(|&b| vec![b as f64, 7.0]).collect()
    }

    #[test]
    fn ranges_are_aligned_to_launches() {
        let ls: Vec<Launch> = [3, 5, 7, 3, 5]
            .iter()
            .zip(1..)
            .map(|(&b, c)| launch(c, b))
            .collect();
        let refs: Vec<&Launch> = ls.iter().collect();
        let anchor = Some((0, false));
        // No uncertain launch: range i is launch i.
        assert_eq!(
            offset(&refs, &uncertain(0), anchor, &ranges(&[3, 5, 7, 3, 5])),
            Some(0)
        );
        // Two launches in flight at Start became the first two ranges: the grids say so.
        let r = ranges(&[9, 9, 3, 5, 7, 3, 5]);
        assert_eq!(offset(&refs, &uncertain(2), anchor, &r), Some(2));
        // A grid that matches no alignment: nothing is attributed.
        assert_eq!(
            offset(&refs, &uncertain(1), anchor, &ranges(&[4, 4, 4, 4, 4])),
            None
        );
        // Without an anchor an uncertain start cannot be resolved.
        assert_eq!(offset(&refs, &uncertain(1), None, &r), None);
        assert_eq!(offset(&refs, &uncertain(0), None, &r), Some(0));
        // A periodic pattern fits two offsets: refused.
        let ls: Vec<Launch> = [3, 5, 3, 5]
            .iter()
            .zip(1..)
            .map(|(&b, c)| launch(c, b))
            .collect();
        let refs: Vec<&Launch> = ls.iter().collect();
        assert_eq!(
            offset(&refs, &uncertain(2), anchor, &ranges(&[3, 5, 3, 5, 3, 5])),
            None
        );
    }

    #[test]
    fn attributed_values_are_scaled_and_unattributed_launches_keep_their_times() {
        let plan = crate::metrics::counter_plan(
            &[(
                "ROCPROF_COUNTERS".to_owned(),
                "pmc: sm__ctas_launched.sum FETCH_SIZE".to_owned(),
            )]
            .into_iter()
            .collect(),
        )
        .unwrap()
        .unwrap();
        let ls = [launch(1, 3), launch(2, 5)];
        let refs: Vec<&Launch> = ls.iter().collect();
        let (mut out, mut report) = (HashMap::new(), Report::default());
        let r = vec![vec![3.0, 2048.0], vec![5.0, 1024.0]];
        attribute(
            &plan,
            &refs,
            &uncertain(0),
            Some((0, false)),
            r,
            &mut out,
            &mut report,
        );
        assert_eq!(out[&1].values, vec![3.0, 2.0], "FETCH_SIZE in kB");
        assert_eq!(out[&2].values, vec![5.0, 1.0]);
        let (mut out, mut report) = (HashMap::new(), Report::default());
        let r = vec![vec![4.0, 0.0], vec![4.0, 0.0]];
        attribute(
            &plan,
            &refs,
            &uncertain(0),
            Some((0, false)),
            r,
            &mut out,
            &mut report,
        );
        assert!(out.values().all(|v| v.values.is_empty() && v.enter == 10));
        assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    }
}
