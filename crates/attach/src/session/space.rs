//! The least free space of the output file systems during a session: a write that fills a file
//! system fails with ENOSPC and SQLite then rolls its transaction back, which frees the space
//! again, so the state after the session does not show that the disk was full.
//!
//! A thread samples `statvfs` of each directory (its nearest existing ancestor) until
//! [`SpaceWatch::stop`], which wakes it at once (a channel closed); it only reads. The pause
//! between samples follows the least free space: the time a writer at [`FILL_RATE`] would need
//! to fill it, between [`PERIOD`] and [`MAX_PERIOD`], so a nearly full disk is watched every 5 ms
//! and a roomy one wakes the thread at most once a second.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// The shortest pause between samples (a nearly full file system).
pub const PERIOD: Duration = Duration::from_millis(5);

/// The longest pause between samples (a roomy file system).
pub const MAX_PERIOD: Duration = Duration::from_secs(1);

/// The write rate assumed when choosing the pause: faster than any profiler's output.
pub const FILL_RATE: u64 = 1 << 30;

/// The pause before the next sample when `least` bytes are free.
fn pause(least: u64) -> Duration {
    let secs = least as f64 / FILL_RATE as f64;
    Duration::from_secs_f64(secs).clamp(PERIOD, MAX_PERIOD)
}

/// A running watch (stopped on drop).
#[derive(Debug)]
pub struct SpaceWatch {
    least: Arc<AtomicU64>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// `dir` or its nearest ancestor that exists.
fn existing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.exists()).map(Path::to_path_buf)
}

fn free(dir: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(s.blocks_available() * s.fragment_size())
}

impl SpaceWatch {
    /// Starts sampling the file systems of `dirs`.
    pub fn start(dirs: &[PathBuf]) -> SpaceWatch {
        let mut dirs: Vec<PathBuf> = dirs.iter().filter_map(|d| existing(d)).collect();
        dirs.sort();
        dirs.dedup();
        let least = Arc::new(AtomicU64::new(u64::MAX));
        let (stop, stopped) = mpsc::channel::<()>();
        let sample = {
            let least = least.clone();
            move |dirs: &[PathBuf]| {
                for d in dirs {
                    if let Some(f) = free(d) {
                        least.fetch_min(f, Ordering::Relaxed);
                    }
                }
            }
        };
        sample(&dirs);
        let thread = std::thread::Builder::new()
            .name("rocprof-space".into())
            .spawn({
                let least = least.clone();
                move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(pause(least.load(Ordering::Relaxed)))
                    {
                        sample(&dirs);
                    }
                }
            })
            .ok();
        SpaceWatch {
            least,
            stop: Some(stop),
            thread,
        }
    }

    /// Stops the watch: the least free space seen (bytes), None if none could be read.
    pub fn stop(mut self) -> Option<u64> {
        self.halt();
        match self.least.load(Ordering::Relaxed) {
            u64::MAX => None,
            n => Some(n),
        }
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SpaceWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_follows_the_free_space() {
        assert_eq!(pause(0), PERIOD);
        assert_eq!(pause(1 << 20), PERIOD);
        assert_eq!(pause(FILL_RATE / 10), Duration::from_millis(100));
        assert_eq!(pause(u64::MAX), MAX_PERIOD);
    }
}
