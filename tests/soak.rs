//! Soak (issue 5): many attach/detach cycles of the real binary on one target.
//!
//! Every cycle is one `rocprof-attach --attach PID ... --attach-duration-msec 1` process that
//! must exit 0. After a warm-up (the first attach loads the tool; glibc and the tool settle their
//! allocations in the first few sessions), the target's fd count and mapping count must stay
//! exactly equal, its RSS within a small bound, and the peak RSS of each rocprof-attach run
//! (from `wait4`) within a small bound of the warm-up runs'. The listener's registers, the bytes
//! at the injection site and the blocked mask are compared at the end too.
//!
//! SOAK_CYCLES sets the count (default 300 for CI; tests/scripts/soak.sh runs 10,000).

use crate::common;

use common::{fd_count, status_kb, tool_lib, wait_until, Pristine, Target, TargetOpts};
use std::process::{Command, Stdio};
use std::time::Duration;

const WARMUP: usize = 20;
/// Allowed growth of the target's RSS over the whole soak.
const TARGET_RSS_SLACK_KB: u64 = 256;
/// Allowed growth of one rocprof-attach run's peak RSS over the warm-up runs' largest.
const OUR_PEAK_SLACK_KB: u64 = 512;

#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kb: u64,
    fds: usize,
    maps: usize,
}

fn sample(pid: i32) -> Sample {
    Sample {
        rss_kb: status_kb(pid, "VmRSS:"),
        fds: fd_count(pid),
        maps: common::maps_text(pid).lines().count(),
    }
}

/// One session; returns the peak RSS of the rocprof-attach process in kB.
// The child is reaped with wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn cycle(t: &Target, i: usize, stderr_path: &std::path::Path) -> u64 {
    let out = t.dir.path().join("out");
    let stderr = std::fs::File::create(stderr_path).unwrap();
    let child = Command::new(common::bin())
        .args(["--attach", &t.pid.to_string(), "--kernel-trace", "-d"])
        .arg(&out)
        .args(["-o", "run", "-t"])
        .arg(tool_lib())
        .args(["--attach-duration-msec", "1"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut done = None;
    // Bounded: a hung rocprof-attach fails the soak.
    wait_until(Duration::from_secs(60), || {
        done = rocprof_attach::engine::ptrace::reap_with_rusage(pid).unwrap();
        done.is_some()
    });
    let usage = done.unwrap();
    let (status, maxrss) = (usage.status, usage.maxrss_kb);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    assert_eq!(
        code,
        0,
        "cycle {i}: {}",
        std::fs::read_to_string(stderr_path).unwrap_or_default()
    );
    // Only the newest files are interesting; keep the output directory small.
    let _ = std::fs::remove_dir_all(&out);
    maxrss
}

#[test]
fn attach_detach_cycles_leave_the_target_flat() {
    let cycles: usize = std::env::var("SOAK_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
        .max(WARMUP + 1);
    let t = Target::spawn(TargetOpts::default());
    let stderr_path = t.dir.path().join("rocprof-attach.stderr");
    let start = std::time::Instant::now();
    let mut warm_peak = 0;
    for i in 0..WARMUP {
        warm_peak = warm_peak.max(cycle(&t, i, &stderr_path));
    }
    let before = sample(t.pid);
    let pristine = Pristine::take(&t);
    let mut peak = 0;
    let mut worst = before;
    for i in WARMUP..cycles {
        peak = peak.max(cycle(&t, i, &stderr_path));
        if i % 100 == 0 || i + 1 == cycles {
            let s = sample(t.pid);
            worst.rss_kb = worst.rss_kb.max(s.rss_kb);
            assert_eq!(s.fds, before.fds, "cycle {i}: target fd count");
            assert_eq!(s.maps, before.maps, "cycle {i}: target mapping count");
            assert!(
                s.rss_kb <= before.rss_kb + TARGET_RSS_SLACK_KB,
                "cycle {i}: target RSS grew from {} kB to {} kB",
                before.rss_kb,
                s.rss_kb
            );
        }
        if (i + 1) % 1000 == 0 {
            eprintln!("soak: {} cycles", i + 1);
        }
    }
    let after = sample(t.pid);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "soak: {cycles} cycles in {secs:.1} s ({:.1} ms each); target after warm-up: RSS {} kB, {} fds, {} maps; \
         at the end: RSS {} kB (max seen {} kB), {} fds, {} maps; our peak RSS per run: warm-up max {warm_peak} kB, \
         later max {peak} kB",
        secs * 1000.0 / cycles as f64,
        before.rss_kb,
        before.fds,
        before.maps,
        after.rss_kb,
        worst.rss_kb,
        after.fds,
        after.maps,
    );
    assert!(
        peak <= warm_peak + OUR_PEAK_SLACK_KB,
        "our peak RSS grew from {warm_peak} kB to {peak} kB"
    );
    t.assert_heartbeat();
    pristine.assert_same(&t, "after the soak");
    let recs = common::records(&t);
    assert_eq!(
        recs.len(),
        2 * cycles,
        "one attach and one detach per cycle"
    );
    assert!(recs.iter().all(|r| r.get("status") == "0"));
}
