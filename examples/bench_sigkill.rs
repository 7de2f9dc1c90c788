//! Benchmark: how much of its end a CUDA target killed by SIGKILL during a session loses
//! (issue 29, docs/cuda.md "When the target ends", docs/performance.md "SIGKILL during a CUDA
//! session"), with the stand-ins.
//!
//! Run: `cargo run --release --example bench_sigkill` (as root or with CAP_SYS_PTRACE;
//! `ROCPROF_ATTACH_BIN` picks another build, whose directory holds the CUDA tool, `BENCH_TOOL`
//! another CUDA tool). Each of
//! `BENCH_ITERATIONS` rounds (default 10) starts the CUDA stand-in launching `BENCH_KERNELS`
//! kernels (default 20), a copy and a memset every `BENCH_STEP_US` µs (default 1000: up to
//! 20,000 kernels a second, the H200 loop's rate, if the machine keeps up), attaches with
//! `--kernel-trace --runtime-trace` (`BENCH_TRACE` replaces them), lets it run `BENCH_RUN_MS`
//! (default 2000) plus a varying part of a second after the first committed row, and kills it
//! with SIGKILL. Then it reads the database the tool left:
//!
//! * lost: the kill's time minus the newest kernel start kept (the stand-in launches all the
//!   time, so its last kernel started within a step of the kill);
//! * since commit: the kill minus the last commit (the process's `end`, set at each commit);
//! * undelivered: the last commit minus `delivered_through_ns` (what CUPTI had not handed over;
//!   about nothing on the stand-in, which completes every record at once);
//! * held: `delivered_through_ns` minus the newest kernel kept (the ordering lag);
//! * late rows: `late_records` (rows written after a later row of their kind: what a lag too
//!   short for CUPTI's delivery order costs).
//!
//! With `BENCH_JSON` set, each round's process JSON goes to stderr (the tool's `tick` and
//! `lag_ns`). Prints one Markdown row per round and the median and worst of each column. All times are
//! `CLOCK_BOOTTIME`, the database's clock.

use rocprof_testkit as kit;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn boottime_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

fn env(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}

/// One value of `sql` on `db`, read without waiting for the writer (None while the file is
/// being created or is locked).
fn value(db: &std::path::Path, sql: &str) -> Option<i64> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()?;
    c.busy_timeout(Duration::from_millis(50)).ok()?;
    c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
        .ok()
        .flatten()
}

struct Round {
    lost_ms: f64,
    since_commit_ms: f64,
    undelivered_ms: f64,
    held_ms: f64,
    kernels_per_s: f64,
    late: i64,
}

// Long because: one round is one ordered script (start, attach, wait, kill, read) whose steps
// share the target, the session and the database; split, each would take them all.
fn round(i: u64, tool: &std::path::Path) -> Round {
    let s = kit::cuda::build_standins();
    let dir = tempfile::tempdir().unwrap();
    let (kernels, step_us) = (env("BENCH_KERNELS", "20"), env("BENCH_STEP_US", "1000"));
    let mut target = kit::cuda::start_target(&s, &kernels, &step_us);
    let trace = env("BENCH_TRACE", "--kernel-trace --runtime-trace");
    let pid = target.id().to_string();
    let out = dir.path().join("out");
    let mut session = Command::new(kit::release_bin())
        .args(["-p", &pid, "-d", out.to_str().unwrap(), "-o", "run"])
        .args(trace.split_whitespace())
        .args(["--attach-duration-msec", "600000"])
        .env("ROCPROF_ATTACH_CUDA_TOOL", tool)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run rocprof-attach");
    let db = out.join("run_results.db");
    let count = "SELECT count(*) FROM rocpd_kernel_dispatch";
    let until = Instant::now() + Duration::from_secs(60);
    while value(&db, count).unwrap_or(0) == 0 {
        assert!(Instant::now() < until, "no kernel committed within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A varying moment of the tick: 0 to 997 ms more, in 37 ms steps.
    let run_ms: u64 = env("BENCH_RUN_MS", "2000").parse().unwrap();
    std::thread::sleep(Duration::from_millis(run_ms + (i * 37) % 1000));
    let killed = boottime_ns();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(target.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = target.wait();
    let _ = session.wait();
    let newest = value(&db, "SELECT max(start) FROM rocpd_kernel_dispatch").unwrap();
    let oldest = value(&db, "SELECT min(start) FROM rocpd_kernel_dispatch").unwrap();
    let n = value(&db, count).unwrap();
    let commit = value(&db, "SELECT \"end\" FROM rocpd_info_process").unwrap();
    let delivered = value(
        &db,
        "SELECT json_extract(extdata, '$.delivered_through_ns') FROM rocpd_info_process",
    )
    .unwrap_or(commit);
    let late = value(
        &db,
        "SELECT json_extract(extdata, '$.late_records') FROM rocpd_info_process",
    )
    .unwrap_or(0);
    if std::env::var_os("BENCH_JSON").is_some() {
        let c = rusqlite::Connection::open(&db).unwrap();
        let json: String = c
            .query_row("SELECT extdata FROM rocpd_info_process", [], |r| r.get(0))
            .unwrap();
        eprintln!("round {}: {json}", i + 1);
    }
    let ms = |ns: i64| ns as f64 / 1e6;
    Round {
        lost_ms: ms(killed - newest),
        since_commit_ms: ms(killed - commit),
        undelivered_ms: ms(commit - delivered),
        held_ms: ms(delivered - newest),
        kernels_per_s: n as f64 / ((newest - oldest).max(1) as f64 / 1e9),
        late,
    }
}

fn stats(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (s[s.len() / 2], s[s.len() - 1])
}

fn main() {
    let tool = std::env::var_os("BENCH_TOOL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| kit::release_bin().with_file_name("librocprof_cuda_tool.so"));
    let rounds: u64 = env("BENCH_ITERATIONS", "10").parse().unwrap();
    println!("| Round | Kernels / s kept | Lost (kill - newest kernel) | Kill - last commit | Commit - delivered | Delivered - newest kernel | Late rows |");
    println!("|---|---|---|---|---|---|---|");
    let mut all = Vec::new();
    for i in 0..rounds {
        let r = round(i, &tool);
        println!(
            "| {} | {:.0} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {} |",
            i + 1,
            r.kernels_per_s,
            r.lost_ms,
            r.since_commit_ms,
            r.undelivered_ms,
            r.held_ms,
            r.late
        );
        all.push(r);
    }
    let col = |f: fn(&Round) -> f64| stats(&all.iter().map(f).collect::<Vec<_>>());
    let (rate, lost, since, undelivered, held) = (
        col(|r| r.kernels_per_s),
        col(|r| r.lost_ms),
        col(|r| r.since_commit_ms),
        col(|r| r.undelivered_ms),
        col(|r| r.held_ms),
    );
    println!(
        "| median (worst) | {:.0} | **{:.0} ms** ({:.0}) | {:.0} ms ({:.0}) | {:.0} ms ({:.0}) | {:.0} ms ({:.0}) | {} in all |",
        rate.0, lost.0, lost.1, since.0, since.1, undelivered.0, undelivered.1, held.0, held.1,
        all.iter().map(|r| r.late).sum::<i64>()
    );
}
