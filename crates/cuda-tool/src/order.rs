//! How long each kind of row is held before it is written ([`crate::sink`]): learnt from the
//! order CUPTI delivers the session's rows in.
//!
//! A row is written once no row of its kind that starts earlier is expected any more. For the
//! first [`LEARN_NS`] of a session every kind waits [`LAG_NS`] behind the newest start of any
//! kind (the frontier). Meanwhile, and for the rest of the session, each kind's disorder is
//! measured: how far behind the newest start of its kind already delivered a row arrives. After
//! that a kind is also written up to its own newest start less twice its disorder (at least
//! [`MIN_LAG_NS`], at most [`LAG_NS`]); a row later than that is still written and counted late,
//! and raises its kind's lag. A kind that stops coming is still written [`LAG_NS`] behind the
//! frontier. Kernels on one stream, or API calls of one thread, come in order: their rows wait
//! [`MIN_LAG_NS`], so a process killed by SIGKILL loses that much to ordering instead of
//! [`LAG_NS`] (docs/cuda.md, "When the target ends").

use crate::sink::{LAG_NS, LEARN_NS, MIN_LAG_NS};

/// The kinds written in start order: kernels, copies, API calls.
pub const KINDS: usize = 3;

/// The delivery order seen so far.
#[derive(Debug, Default)]
pub struct Order {
    /// Newest start delivered per kind.
    seen: [u64; KINDS],
    /// The most a row of each kind came behind the newest of its kind delivered before it.
    worst: [u64; KINDS],
    /// The first start seen (0: none yet).
    first: u64,
}

impl Order {
    /// A row of kind `i` starting at `start` was delivered (in delivery order).
    pub fn observe(&mut self, i: usize, start: u64) {
        if start == 0 {
            return; // no timestamp (a counted kernel): says nothing about the order
        }
        if self.first == 0 || start < self.first {
            self.first = start;
        }
        if start < self.seen[i] {
            self.worst[i] = self.worst[i].max(self.seen[i] - start);
        }
        self.seen[i] = self.seen[i].max(start);
    }

    /// How far behind the newest start of its kind a row of kind `i` is held, with the
    /// frontier (the newest start of any kind) at `frontier`.
    pub fn lag(&self, i: usize, frontier: u64) -> u64 {
        if self.first == 0 || frontier < self.first.saturating_add(LEARN_NS) {
            return LAG_NS;
        }
        self.worst[i].saturating_mul(2).clamp(MIN_LAG_NS, LAG_NS)
    }

    /// Rows of kind `i` that start before this are written.
    pub fn limit(&self, i: usize, frontier: u64) -> u64 {
        let own = self.seen[i].saturating_sub(self.lag(i, frontier));
        frontier.saturating_sub(LAG_NS).max(own)
    }

    /// Each kind's lag now (ns), for the process's JSON.
    pub fn lags(&self, frontier: u64) -> [u64; KINDS] {
        [0, 1, 2].map(|i| self.lag(i, frontier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_full_lag_while_learning_then_the_kinds_own() {
        let mut o = Order::default();
        let t0 = 1_000 * MS;
        o.observe(0, t0);
        o.observe(0, t0 + 100 * MS);
        assert_eq!(o.lag(0, t0 + 100 * MS), LAG_NS);
        assert_eq!(o.limit(0, t0 + 100 * MS), t0 + 100 * MS - LAG_NS);
        // In order for LEARN_NS: the least lag.
        let later = t0 + LEARN_NS + 10 * MS;
        o.observe(0, later);
        assert_eq!(o.lag(0, later), MIN_LAG_NS);
        assert_eq!(o.limit(0, later), later - MIN_LAG_NS);
        // A row 70 ms behind the newest of its kind: twice that from now on.
        o.observe(0, later - 70 * MS);
        assert_eq!(o.lag(0, later), 140 * MS);
        // Far behind: never more than LAG_NS.
        o.observe(0, later - 900 * MS);
        assert_eq!(o.lag(0, later), LAG_NS);
    }

    #[test]
    fn a_kind_that_stops_is_written_behind_the_frontier() {
        let mut o = Order::default();
        let t0 = 1_000 * MS;
        o.observe(1, t0);
        o.observe(2, t0 + LEARN_NS + 500 * MS);
        let f = t0 + LEARN_NS + 500 * MS;
        assert_eq!(o.limit(1, f), f - LAG_NS);
        assert!(o.limit(1, f) > t0, "the lone copy goes out");
        // Kinds are learnt apart: API calls in order, copies not seen late either.
        assert_eq!(o.lag(2, f), MIN_LAG_NS);
    }

    #[test]
    fn rows_without_a_start_say_nothing() {
        let mut o = Order::default();
        o.observe(0, 5 * MS);
        o.observe(0, 0);
        assert_eq!(o.worst[0], 0);
    }
}
