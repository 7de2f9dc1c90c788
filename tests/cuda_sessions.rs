//! Many sessions on one CUDA process (issue 29, "threads and RSS flat"; docs/performance.md,
//! "Many CUDA sessions"): after the first session, which loads the tool (its two threads,
//! SQLite, CUPTI's state), later sessions leave the stand-in target with the same threads and
//! about the same resident memory. CUPTI's 8 MiB buffers were `malloc` blocks: once one was
//! freed, glibc served the next ones from the heap of the application thread that asked for
//! them, and with a release build a second `--pmc` session left the target 16 MiB larger for
//! good (how soon depends on the sessions' timing; the tool's unit test
//! `freed_buffers_leave_mallocs_threshold_alone` checks the cause itself).

use crate::cuda::{session, Target};

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
    let mut after = Vec::new();
    for i in 0..5 {
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
        after.push(status(t.pid));
    }
    let (rss1, threads1) = after[0];
    for (i, &(rss, threads)) in after.iter().enumerate().skip(1) {
        assert_eq!(
            threads,
            threads1,
            "threads after session {}: {after:?} (KiB, threads)",
            i + 1
        );
        // Less than one CUPTI buffer (8 MiB) more than after the first session.
        assert!(
            rss - rss1 < 6 << 10,
            "resident memory after session {} against the first: {after:?} (KiB, threads)",
            i + 1
        );
    }
}
