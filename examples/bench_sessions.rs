//! Benchmark: the CUDA target's resident memory and threads over many attach/detach sessions
//! (issue 29, "threads and RSS flat"; docs/performance.md "Many CUDA sessions"), with the
//! stand-ins.
//!
//! Run: `cargo run --release --example bench_sessions` (as root or with CAP_SYS_PTRACE;
//! `ROCPROF_ATTACH_BIN` picks another build, whose directory holds the CUDA tool, `BENCH_TOOL`
//! another CUDA tool). Starts the
//! CUDA stand-in (4 kernels, a copy and a memset every 1000 µs), then runs `BENCH_SESSIONS`
//! sessions (default 50) of `rocprof-attach -p PID ARGS --attach-duration-msec 200`, ARGS being
//! `BENCH_TRACE` (default `--kernel-trace`; `--pmc SQ_WAVES` or `--spm --spm-beta-enabled`
//! for the counters), and after each reads `VmRSS` and `Threads` of /proc/PID/status. Prints
//! them every `BENCH_EVERY` sessions (default 10) and the growth per session after the first
//! (the first loads the tool, SQLite and CUPTI's state: a one-time cost).

use rocprof_testkit as kit;

use std::process::{Command, Stdio};

fn env(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}

/// (VmRSS in KiB, Threads) of `pid`.
fn status(pid: u32) -> (i64, i64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(-1)
    };
    (field("VmRSS:"), field("Threads:"))
}

fn main() {
    let s = kit::cuda::build_standins();
    let tool = std::env::var_os("BENCH_TOOL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| kit::release_bin().with_file_name("librocprof_cuda_tool.so"));
    let sessions: usize = env("BENCH_SESSIONS", "50").parse().unwrap();
    let every: usize = env("BENCH_EVERY", "10").parse().unwrap();
    let trace = env("BENCH_TRACE", "--kernel-trace");
    let dir = tempfile::tempdir().unwrap();
    let mut target = kit::cuda::start_target(&s, "4", "1000");
    let pid = target.id();
    let before = status(pid);
    println!("`{trace}`, {sessions} sessions of 200 ms on the CUDA stand-in (pid {pid})");
    println!();
    println!("| After session | VmRSS | Threads |");
    println!("|---|---|---|");
    println!("| 0 | {:.2} MiB | {} |", before.0 as f64 / 1024.0, before.1);
    let mut after = Vec::new();
    for i in 1..=sessions {
        let out = dir.path().join(format!("s{i}"));
        let st = Command::new(kit::release_bin())
            .args([
                "-p",
                &pid.to_string(),
                "-d",
                out.to_str().unwrap(),
                "-o",
                "run",
            ])
            .args(trace.split_whitespace())
            .args(["--attach-duration-msec", "200"])
            .env("ROCPROF_ATTACH_CUDA_TOOL", &tool)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run rocprof-attach");
        assert!(st.success(), "session {i} failed: {st}");
        let _ = std::fs::remove_dir_all(&out);
        let now = status(pid);
        after.push(now);
        if i == 1 || i % every == 0 || i == sessions {
            println!("| {i} | {:.2} MiB | {} |", now.0 as f64 / 1024.0, now.1);
        }
    }
    let (first, last) = (after[0], after[after.len() - 1]);
    println!();
    println!(
        "first session: {:+.2} MiB, {:+} threads; then {:+.3} MiB and {:+.2} threads a session over {} sessions",
        (first.0 - before.0) as f64 / 1024.0,
        first.1 - before.1,
        (last.0 - first.0) as f64 / 1024.0 / (sessions - 1).max(1) as f64,
        (last.1 - first.1) as f64 / (sessions - 1).max(1) as f64,
        sessions - 1
    );
    if after.len() > 20 {
        let tenth = after[9];
        println!(
            "from session 10 to {}: {:+.3} MiB a session",
            after.len(),
            (last.0 - tenth.0) as f64 / 1024.0 / (after.len() - 10) as f64
        );
    }
    let _ = target.kill();
    let _ = target.wait();
}
