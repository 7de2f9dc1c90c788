//! Many sessions on one CUDA process (issue 29, "threads and RSS flat"; docs/performance.md,
//! "Many CUDA sessions"): after the first session, which loads the tool (its two threads,
//! SQLite, CUPTI's state), later sessions leave the stand-in target with the same threads and
//! about the same resident memory. CUPTI's 8 MiB buffers were `malloc` blocks: once one was
//! freed, glibc served the next ones from the heap of the application thread that asked for
//! them, and with a release build a second `--pmc` session left the target 16 MiB larger for
//! good (how soon depends on the sessions' timing; the tool's unit test
//! `freed_buffers_leave_mallocs_threshold_alone` checks the cause itself).

use crate::common::wait_until;
use crate::cuda::{session, Target};

use std::time::{Duration, Instant};

/// (VmRSS in KiB, Threads) of `pid`.
fn status(pid: i32) -> (i64, i64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("Threads:"))
}

#[test]
fn counting_sessions_leave_threads_and_memory_flat() {
    let t = Target::spawn(&[], &[]);
    let (_, threads0) = status(t.pid);
    let mut after = Vec::new();
    for i in 1..=5 {
        let out = format!("s{i}");
        let (code, _, stderr) = session(
            &t,
            &[
                "--kernel-trace",
                "--pmc",
                "SQ_WAVES",
                "-o",
                &out,
                "--attach-duration-msec",
                "200",
            ],
        );
        assert_eq!(code, 0, "session {i}: {stderr}");
        // CUPTI is torn down at the target's next launch (cuptiFinalize, which ends CUPTI's
        // own thread); then the target has its own threads and the tool's two (rocp-cu-attach
        // and rocp-cu-exit), whatever the session started.
        let finalized = format!(" finalized={i} ");
        wait_until(Duration::from_secs(20), || t.state().contains(&finalized));
        let until = Instant::now() + Duration::from_secs(20);
        while status(t.pid).1 != threads0 + 2 {
            assert!(
                Instant::now() < until,
                "threads after session {i}: {} (the target's {threads0} and the tool's 2 expected; after the sessions before: {after:?})",
                status(t.pid).1
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        after.push(status(t.pid));
    }
    let (rss1, _) = after[0];
    for (i, &(rss, _)) in after.iter().enumerate().skip(1) {
        // Less than one CUPTI buffer (8 MiB) more than after the first session.
        assert!(
            rss - rss1 < 6 << 10,
            "resident memory after session {} against the first: {after:?} (KiB, threads)",
            i + 1
        );
    }
}
