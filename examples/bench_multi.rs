//! Benchmark: one `rocprof-attach` session attaching to and detaching from N stand-in targets.
//!
//! Run: `cargo run --release --example bench_multi` (as root or with CAP_SYS_PTRACE). Prints a
//! Markdown table; docs/performance.md ("Many targets (issue 6)") records the figures.
//!
//! For N = 1, 8, 32, 128 (override with `BENCH_COUNTS=1,8`) and each `--parallel` setting
//! (`BENCH_PARALLEL=16,64`), the release binary runs `--attach <all N PIDs>` with the stand-in
//! tool and a 1 ms window, `BENCH_REPS` times (default 5). Reported: median wall time of the whole
//! session minus the window, and the CPU time of rocprof-attach and its agents (user + system,
//! from the rusage of waited-for children). The targets run no heartbeat workers, so 128 of them
//! do not load the machine.
//!
//! Then, for each N, one more session with the session's step log on
//! (`ROCPROF_ATTACH_LOG=rocprof_attach::cli::session=debug`, what `-vv` shows): wall time and our
//! front end's CPU per step, and the agent server's CPU, per target: where the per-target cost
//! goes (our own counters; `perf` is not needed).

use rocprof_testkit as common;

use common::{tool_lib, Target, TargetOpts};
use std::process::{Command, Stdio};
use std::time::Instant;

fn children_cpu_ms() -> f64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3;
    t(r.user_time()) + t(r.system_time())
}

fn list(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One session over `pids` writing into a fresh directory (so the before/after scan of the
/// output directory stays the same size); returns (wall ms, CPU ms of rocprof-attach and agents).
fn session(pids: &str, parallel: usize, tool: &str) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cpu0 = children_cpu_ms();
    let start = Instant::now();
    let res = Command::new(common::release_bin())
        .args(["--attach", pids, "--kernel-trace", "-d", out, "-t", tool])
        .args([
            "--attach-duration-msec",
            "1",
            "--parallel",
            &parallel.to_string(),
            "-q",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run rocprof-attach");
    let wall = start.elapsed().as_secs_f64() * 1e3 - 1.0;
    assert!(
        res.status.success(),
        "rocprof-attach failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    (wall, children_cpu_ms() - cpu0)
}

/// Strip ANSI colour codes from a log line.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number before `unit` in `text` after `key` ("plan ...: 1.20 ms" -> 1.20).
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

/// One session with the step log: [(step, wall ms, front-end CPU ms)] and the server's CPU.
fn steps(pids: &str, parallel: usize, tool: &str) -> (Vec<(String, f64, f64)>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let res = Command::new(common::release_bin())
        .args(["--attach", pids, "--kernel-trace", "-d"])
        .arg(dir.path())
        .args(["-t", tool, "--attach-duration-msec", "1", "--parallel"])
        .arg(parallel.to_string())
        .env("ROCPROF_ATTACH_LOG", "rocprof_attach::cli::session=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run rocprof-attach");
    let text = String::from_utf8_lossy(&res.stderr);
    let mut out = Vec::new();
    let mut server = 0.0;
    for line in text.lines().map(plain) {
        if let Some(rest) = line.split("session step ").nth(1) {
            let (name, numbers) = rest.split_once(": ").unwrap_or((rest, ""));
            let wall = number_after(numbers, "").unwrap_or(0.0);
            let cpu = number_after(numbers, "our CPU").unwrap_or(0.0);
            out.push((name.to_string(), wall, cpu));
        } else if let Some(v) = number_after(&line, "agent server CPU") {
            server = v;
        }
    }
    (out, server)
}

fn main() {
    let bin = common::release_bin();
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--release", "--bin", "rocprof-attach"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "build {} first: cargo build --release", bin.display());
    }
    let counts = list("BENCH_COUNTS", &[1, 8, 32, 128]);
    let parallels = list("BENCH_PARALLEL", &[16, 64]);
    let reps = list("BENCH_REPS", &[5])[0].max(1);
    let tool = tool_lib();
    let tool = tool.to_str().unwrap();
    let max = *counts.iter().max().unwrap();
    eprintln!("starting {max} stand-in targets...");
    let targets: Vec<Target> = (0..max)
        .map(|_| {
            Target::spawn(TargetOpts {
                workers: 0,
                ..Default::default()
            })
        })
        .collect();
    println!(
        "| targets | --parallel | wall ms (median of {reps}) | × one target | CPU ms (rocprof-attach + agents) | CPU ms per target |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &parallel in &parallels {
        let mut one = None;
        for &n in &counts {
            let pids = targets[..n]
                .iter()
                .map(|t| t.pid.to_string())
                .collect::<Vec<_>>()
                .join(",");
            session(&pids, parallel, tool); // warm-up (and the first attach loads the tool)
            let runs: Vec<(f64, f64)> = (0..reps).map(|_| session(&pids, parallel, tool)).collect();
            let wall = median(runs.iter().map(|r| r.0).collect());
            let cpu = median(runs.iter().map(|r| r.1).collect());
            let base = *one.get_or_insert(wall);
            println!(
                "| {n} | {parallel} | {wall:.1} | {:.2} | {cpu:.1} | {:.2} |",
                wall / base,
                cpu / n as f64
            );
        }
    }
    let parallel = parallels[0];
    println!();
    println!(
        "Where the time goes (one session each, --parallel {parallel}; wall ms / our front end's CPU ms, per step):"
    );
    println!();
    let mut rows: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut servers = Vec::new();
    for &n in &counts {
        let pids = targets[..n]
            .iter()
            .map(|t| t.pid.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let (st, server) = steps(&pids, parallel, tool);
        for (name, wall, cpu) in st {
            match rows.iter_mut().find(|(r, _)| *r == name) {
                Some((_, v)) => v.push((wall, cpu)),
                None => rows.push((name, vec![(wall, cpu)])),
            }
        }
        servers.push(server / n as f64);
    }
    let header: Vec<String> = counts.iter().map(|n| format!("{n} targets")).collect();
    println!("| step | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(counts.len()));
    for (name, v) in &rows {
        let cells: Vec<String> = v.iter().map(|(w, c)| format!("{w:.2} / {c:.2}")).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    let cells: Vec<String> = servers.iter().map(|s| format!("{s:.3}")).collect();
    println!(
        "| agent server CPU per target (ms) | {} |",
        cells.join(" | ")
    );
}
