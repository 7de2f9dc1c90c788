//! Makes the slices of one track nest, as Perfetto requires, while streaming.
//!
//! Slices arrive in start order per track (SQLite's id order, checked). Each track keeps the end
//! times of its open slices on a stack: ends at or before the next start are emitted first; a
//! slice that starts inside an open one but ends after it (two kernels overlapping on one stream)
//! moves both edges to the midpoint of the overlap, as rocprofv3 does, so the two become
//! adjacent. Every emitted timestamp on a track is then non-decreasing, so begin/end pairs match
//! in any reader. Memory is the nesting depth.

/// One edge to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// End of the innermost open slice at this time.
    End(i64),
    /// Begin of the new slice at this time.
    Begin(i64),
}

/// The slice state of one track.
#[derive(Debug, Default, Clone)]
pub struct Nest {
    open: Vec<i64>,
    floor: i64,
    last_start: i64,
    started: bool,
    /// Slices whose edges were moved to make them nest.
    pub adjusted: u64,
}

/// A slice started earlier than the previous one on its track: the rows are not in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder;

impl Nest {
    /// Opens a slice `[start, end]`, pushing the edges to emit (ends of earlier slices, then this
    /// slice's begin) into `edges`.
    pub fn open(&mut self, start: i64, end: i64, edges: &mut Vec<Edge>) -> Result<(), OutOfOrder> {
        if self.started && start < self.last_start {
            return Err(OutOfOrder);
        }
        self.started = true;
        self.last_start = start;
        let mut s = start.max(self.floor);
        let e = end.max(s);
        if s != start || e != end {
            self.adjusted += 1;
        }
        while let Some(&top) = self.open.last() {
            if top > s {
                break;
            }
            edges.push(Edge::End(top));
            self.open.pop();
            self.floor = top;
        }
        while let Some(&top) = self.open.last() {
            if e <= top {
                break;
            }
            let m = s + (top - s) / 2;
            edges.push(Edge::End(m));
            self.open.pop();
            self.adjusted += 1;
            s = m;
            self.floor = m;
        }
        edges.push(Edge::Begin(s));
        self.open.push(e);
        self.floor = s;
        Ok(())
    }

    /// Closes every open slice (end of the track's rows).
    pub fn close_all(&mut self, edges: &mut Vec<Edge>) {
        while let Some(top) = self.open.pop() {
            edges.push(Edge::End(top));
            self.floor = top;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(slices: &[(i64, i64)]) -> Vec<Edge> {
        let mut n = Nest::default();
        let mut v = Vec::new();
        for &(s, e) in slices {
            n.open(s, e, &mut v).unwrap();
        }
        n.close_all(&mut v);
        v
    }

    #[test]
    fn nested_and_sequential_slices_are_kept() {
        use Edge::*;
        assert_eq!(
            run(&[(0, 10), (2, 5), (5, 8), (12, 13)]),
            vec![
                Begin(0),
                Begin(2),
                End(5),
                Begin(5),
                End(8),
                End(10),
                Begin(12),
                End(13)
            ]
        );
    }

    #[test]
    fn overlaps_meet_at_the_midpoint() {
        use Edge::*;
        assert_eq!(
            run(&[(0, 10), (6, 20)]),
            vec![Begin(0), End(8), Begin(8), End(20)]
        );
    }

    #[test]
    fn edges_never_go_back_in_time() {
        let slices = [
            (0, 100),
            (10, 50),
            (20, 120),
            (30, 40),
            (35, 130),
            (130, 131),
        ];
        let mut last = i64::MIN;
        let mut depth = 0i64;
        for e in run(&slices) {
            let t = match e {
                Edge::Begin(t) => {
                    depth += 1;
                    t
                }
                Edge::End(t) => {
                    depth -= 1;
                    t
                }
            };
            assert!(t >= last && depth >= 0);
            last = t;
        }
        assert_eq!(depth, 0);
    }

    #[test]
    fn out_of_order_is_detected() {
        let mut n = Nest::default();
        let mut v = Vec::new();
        n.open(10, 20, &mut v).unwrap();
        assert_eq!(n.open(5, 6, &mut v), Err(OutOfOrder));
    }
}
