//! Reading one table on several threads with the results kept in table order.
//!
//! A converter that must write rows in id order (JSON's arrays) can still read on every core:
//! [`ordered_chunks`] splits the id span of a table into ranges, reads and encodes the ranges on
//! worker threads (each with its own read-only connection, so SQLite's work runs in parallel) and
//! hands each range's result to one consumer strictly in range order. Memory stays bounded: ranges
//! hold at most `MAX_RANGE` ids, and a worker does not start a range more than one per worker
//! plus `AHEAD` past the one the consumer waits for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::error::{Error, Result};
use super::reader::Source;

/// How many ranges beyond one per worker may wait for the consumer.
const AHEAD: usize = 2;

/// The fewest ids a range holds (smaller ranges cost more in statement setup than they gain).
const MIN_RANGE: i64 = 512;

/// The most ids a range holds: a range's encoded rows wait in memory (about 300 bytes a row in
/// JSON, so at most about 0.6 MiB a range).
const MAX_RANGE: i64 = 2048;

/// Ranges per worker thread: enough that a slow range does not leave the others idle at the end.
const RANGES_PER_WORKER: i64 = 8;

/// Worker threads for a conversion: the machine's cores, at most 8 (`ROCPROF_ATTACH_THREADS`
/// overrides, for benchmarks and tests; 1 reads on the calling thread alone).
pub fn threads() -> usize {
    if let Some(n) = std::env::var("ROCPROF_ATTACH_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
}

/// The id ranges `[lo, hi)` that split `span` (lowest and highest id, inclusive) for `workers`.
fn ranges(span: (i64, i64), workers: usize) -> Vec<(i64, i64)> {
    let (lo, hi) = span;
    let len = hi.saturating_sub(lo).saturating_add(1).max(1);
    let want = (workers as i64).saturating_mul(RANGES_PER_WORKER).max(1);
    let step = (len / want).clamp(MIN_RANGE, MAX_RANGE);
    let mut out = Vec::new();
    let mut a = lo;
    while a <= hi {
        let b = a.saturating_add(step).min(hi.saturating_add(1));
        out.push((a, b));
        if b == a {
            break;
        }
        a = b;
    }
    out
}

/// Locks `m`; a poisoned lock means a worker panicked.
fn lock<T>(m: &Mutex<State<T>>) -> Result<std::sync::MutexGuard<'_, State<T>>> {
    m.lock().map_err(|_| panicked())
}

/// The error of a run whose worker panicked.
fn panicked() -> Error {
    Error::usage("internal error: a conversion thread panicked")
}

/// Shared state of one [`ordered_chunks`] run.
struct State<T> {
    /// Finished ranges not yet taken by the consumer, by range index.
    done: BTreeMap<usize, Result<T>>,
    /// The range index the consumer waits for.
    next: usize,
    /// A worker failed or panicked: everyone stops.
    abort: bool,
}

/// Sets `abort` if a worker unwinds, so that the consumer never waits for a range that will not
/// come.
struct AbortOnPanic<'a, T>(&'a Mutex<State<T>>, &'a Condvar);

impl<T> Drop for AbortOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut s) = self.0.lock() {
                s.abort = true;
            }
            self.1.notify_all();
        }
    }
}

/// Reads the rows of `src` whose ids lie in `span` in ranges, runs `work` on each range (a
/// [`Source`] limited to it with [`Source::with_ids`]) on up to `workers` threads, and calls
/// `sink` with the results in range order. With one worker, or a span too small to split, the
/// ranges are read one after the other on this thread. The first error (from `work` or `sink`) ends the run.
pub fn ordered_chunks<T: Send>(
    src: &Source<'_>,
    span: Option<(i64, i64)>,
    workers: usize,
    work: impl Fn(&Source<'_>) -> Result<T> + Sync,
    mut sink: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let Some(span) = span else {
        return Ok(());
    };
    let ranges = ranges(span, workers);
    if workers <= 1 || ranges.len() <= 1 {
        let r = ranges
            .into_iter()
            .try_for_each(|range| sink(work(&src.clone().with_ids(Some(range)))?));
        src.release_cache();
        return r;
    }
    let (info, time_window) = (src.info, src.window());
    // One read-only connection per worker, opened here (a connection is not shared by threads).
    let conns = (0..workers.min(ranges.len()))
        .map(|_| src.input.reopen_for_ranges())
        .collect::<Result<Vec<_>>>()?;
    let run = Run {
        state: Mutex::new(State {
            done: BTreeMap::new(),
            next: 0,
            abort: false,
        }),
        changed: Condvar::new(),
        taken: AtomicUsize::new(0),
        window: workers + AHEAD,
        ranges,
    };
    std::thread::scope(|s| -> Result<()> {
        for conn in conns {
            let (run, work) = (&run, &work);
            s.spawn(move || {
                let _guard = AbortOnPanic(&run.state, &run.changed);
                let mine = conn.source_for(info).map(|m| m.with_window(time_window));
                if let Err(e) = mine.and_then(|mine| run.work(&mine, work)) {
                    if let Ok(mut st) = run.state.lock() {
                        st.abort = true;
                        st.done.insert(usize::MAX, Err(e));
                    }
                    run.changed.notify_all();
                }
            });
        }
        run.consume(sink)
    })
}

/// What the workers and the consumer of one [`ordered_chunks`] run share.
struct Run<T> {
    state: Mutex<State<T>>,
    /// Notified when a range is done, taken by the consumer, or the run aborts.
    changed: Condvar,
    /// How many ranges the workers have taken.
    taken: AtomicUsize,
    /// A worker starts range `i` only when `i < next + window`.
    window: usize,
    ranges: Vec<(i64, i64)>,
}

impl<T> Run<T> {
    /// A worker: take the next range, wait until it is within the window of the consumer, run
    /// `work` on it from `mine`, hand over the result; until no range is left, the run aborts or
    /// `work` fails.
    fn work(&self, mine: &Source<'_>, work: &impl Fn(&Source<'_>) -> Result<T>) -> Result<()> {
        loop {
            let i = self.taken.fetch_add(1, Ordering::Relaxed);
            let Some(&range) = self.ranges.get(i) else {
                return Ok(());
            };
            {
                let mut st = lock(&self.state)?;
                while !st.abort && i >= st.next + self.window {
                    st = self.changed.wait(st).map_err(|_| panicked())?;
                }
                if st.abort {
                    return Ok(());
                }
            }
            let r = work(&mine.clone().with_ids(Some(range)));
            let failed = r.is_err();
            let mut st = lock(&self.state)?;
            st.done.insert(i, r);
            self.changed.notify_all();
            if failed {
                return Ok(());
            }
        }
    }

    /// The consumer: hand every range's result to `sink` in range order; the first error (a
    /// range's, a worker's or `sink`'s) stops the workers and ends the run.
    fn consume(&self, mut sink: impl FnMut(T) -> Result<()>) -> Result<()> {
        for i in 0..self.ranges.len() {
            let r = self.result(i)?;
            self.changed.notify_all();
            if let Err(e) = r.and_then(&mut sink) {
                if let Ok(mut st) = self.state.lock() {
                    st.abort = true;
                }
                self.changed.notify_all();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Wait for the result of range `i`, or for a worker's error; Err if a worker panicked.
    fn result(&self, i: usize) -> Result<Result<T>> {
        let mut st = lock(&self.state)?;
        loop {
            if let Some(r) = st.done.remove(&i) {
                st.next = i + 1;
                return Ok(r);
            }
            if let Some(e) = st.done.remove(&usize::MAX) {
                return Ok(e);
            }
            if st.abort {
                return Err(panicked());
            }
            st = self.changed.wait(st).map_err(|_| panicked())?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn ranges_cover_the_span_once_in_order() {
        for (span, workers) in [
            ((1, 1), 4),
            ((5, 1_000_000), 3),
            ((-3, 70_000), 8),
            ((0, 10), 1),
        ] {
            let r = ranges(span, workers);
            assert_eq!(r.first().map(|x| x.0), Some(span.0));
            assert_eq!(r.last().map(|x| x.1), Some(span.1 + 1));
            for w in r.windows(2) {
                assert_eq!(w[0].1, w[1].0);
                assert!(w[0].0 < w[0].1);
            }
        }
    }
}
