//! End-to-end benchmark of the `rocprof-attach` binary against the C stand-in target, with gdb
//! making the same register calls into the same target as the baseline (issue 5).
//!
//! Run: `cargo run --release --example bench_e2e` (as root or with CAP_SYS_PTRACE; builds the
//! release binary first; gdb optional). Prints a Markdown table; docs/performance.md records it.
//!
//! Measured in one run:
//! * attach latency: spawn of the release binary to its "attached to" stderr line;
//! * detach latency: SIGINT to the binary's exit (detach call, output report, exit);
//! * listener stop time per attach, as the binary reports it ("listener stopped N µs");
//! * ptrace stops per attach (the same agent code, run in-process to read its counters);
//! * our CPU for a whole 10 s session (`wait4` rusage of the binary and its agents);
//! * the largest heartbeat gap of the target's worker threads while we attach and detach, compared
//!   with the same length of time with nobody attaching, and while gdb does the same calls;
//! * `gdb -p PID -batch -ex 'call (int)rocprofiler_register_attach(0, "TOOL")'` and the detach
//!   call, as ratios.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{at_entry, env_buffer, symbol_addr, Target, TargetOpts};
use rocprof_attach::agent::{self, CallTimeouts, Job};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// Offset of max_gap_ns[0] in the heartbeat page (see target.c).
const GAP_OFFSET: u64 = (4 + common::MAX_WORKERS as u64) * 8;

fn reset_gaps(t: &Target) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&t.heartbeat)
        .unwrap();
    f.write_all_at(&[0u8; common::MAX_WORKERS * 8], GAP_OFFSET)
        .unwrap();
}

fn max_gap_ms(t: &Target) -> f64 {
    t.beats().max_gap_ns.iter().copied().max().unwrap_or(0) as f64 / 1e6
}

struct Session {
    attach_ms: f64,
    detach_ms: f64,
    stopped_us: f64,
}

/// One session of the release binary: time to "attached to", then SIGINT and time to exit.
fn session(t: &Target, tool: &str) -> Session {
    let out = t.dir.path().join("out");
    let start = Instant::now();
    let mut child = Command::new(common::bin())
        .args(["--attach", &t.pid.to_string(), "--kernel-trace", "-d"])
        .arg(&out)
        .args(["-o", "run", "-t", tool])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stopped_us = 0.0;
    let attach_ms = loop {
        let l = lines
            .next()
            .expect("rocprof-attach ended before attaching")
            .unwrap();
        if let Some(rest) = l.split("listener stopped ").nth(1) {
            stopped_us = rest.split_whitespace().next().unwrap().parse().unwrap();
        }
        if l.contains("attached to PID") {
            break start.elapsed().as_secs_f64() * 1e3;
        }
    };
    // Wait for the profiling window to start so SIGINT means "detach now".
    for l in lines.by_ref() {
        if l.unwrap().contains("profiling until") {
            break;
        }
    }
    let d = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let detach_ms = d.elapsed().as_secs_f64() * 1e3;
    assert!(status.success(), "rocprof-attach failed: {status}");
    let _ = std::fs::remove_dir_all(&out);
    Session {
        attach_ms,
        detach_ms,
        stopped_us,
    }
}

fn gdb_call(pid: i32, call: &str) -> f64 {
    let s = Instant::now();
    let out = Command::new("gdb")
        .args(["-nx", "-p", &pid.to_string(), "-batch", "-ex", call])
        .output()
        .unwrap();
    let ms = s.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("= 0"), "gdb did not make the call: {text}");
    ms
}

// The 10 s session's child is reaped with wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn main() {
    let runs: usize = std::env::var("BENCH_E2E_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let window_s: u64 = std::env::var("BENCH_E2E_WINDOW_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let built = Command::new(env!("CARGO"))
        .args(["build", "--release", "--bin", "rocprof-attach"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(built.success(), "building the release binary failed");
    let t = Target::spawn(TargetOpts::default());
    let tool = common::tool_lib();
    let tool = tool.to_str().unwrap();
    session(&t, tool); // warm-up: page cache, tool loaded

    // 1. Our sessions, with the workers' largest heartbeat gap over all of them.
    reset_gaps(&t);
    let phase = Instant::now();
    let sessions: Vec<Session> = (0..runs).map(|_| session(&t, tool)).collect();
    let ours_secs = phase.elapsed();
    let gap_ours = max_gap_ms(&t);

    // 2. The same length of time with nobody attaching.
    reset_gaps(&t);
    std::thread::sleep(ours_secs);
    let gap_idle = max_gap_ms(&t);

    // 3. ptrace stops per attach: the agent code the binary runs, in-process for its counters.
    let lib = common::register_lib();
    let att = agent::Target {
        pid: t.pid,
        tid: t.listener(),
        site: at_entry(t.pid),
        function: symbol_addr(t.pid, &lib, "rocprofiler_register_attach"),
    };
    let det = agent::Target {
        function: symbol_addr(t.pid, &lib, "rocprofiler_register_detach"),
        ..att.clone()
    };
    let job = Job::Attach {
        env: env_buffer(&[("ROCPROF_KERNEL_TRACE", "1")]),
        tool: tool.as_bytes().to_vec(),
    };
    let a = agent::run(&att, &job, CallTimeouts::default()).unwrap();
    let d = agent::run(&det, &Job::Detach, CallTimeouts::default()).unwrap();

    // 4. Our CPU for a whole session with a window of `window_s` seconds.
    let out = t.dir.path().join("out");
    let child = Command::new(common::bin())
        .args(["--attach", &t.pid.to_string(), "--kernel-trace", "-d"])
        .arg(&out)
        .args(["-o", "run", "-t", tool, "--attach-duration-msec"])
        .arg((window_s * 1000).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let usage = loop {
        if let Some(u) = rocprof_attach::ptrace::reap_with_rusage(pid).unwrap() {
            break u;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(libc::WIFEXITED(usage.status) && libc::WEXITSTATUS(usage.status) == 0);
    let cpu_ms = usage.cpu_us as f64 / 1e3;

    // 5. gdb making the same calls into the same target.
    let gdb = Command::new("gdb").arg("--version").output().is_ok();
    let (mut gdb_attach, mut gdb_detach) = (Vec::new(), Vec::new());
    let mut gap_gdb = 0.0;
    if gdb {
        reset_gaps(&t);
        for _ in 0..5 {
            gdb_attach.push(gdb_call(
                t.pid,
                &format!("call (int)rocprofiler_register_attach(0, \"{tool}\")"),
            ));
            gdb_detach.push(gdb_call(t.pid, "call (int)rocprofiler_register_detach()"));
        }
        gap_gdb = max_gap_ms(&t);
    }
    t.assert_heartbeat();

    let attach: Vec<f64> = sessions.iter().map(|s| s.attach_ms).collect();
    let detach: Vec<f64> = sessions.iter().map(|s| s.detach_ms).collect();
    let stopped: Vec<f64> = sessions.iter().map(|s| s.stopped_us).collect();
    let (att_med, det_med) = (median(attach.clone()), median(detach.clone()));
    println!("| measurement ({runs} sessions) | median | max |");
    println!("|---|---|---|");
    println!(
        "| attach: process start to \"attached to\" | {att_med:.2} ms | {:.2} ms |",
        max(&attach)
    );
    println!(
        "| detach: SIGINT to exit (detach call, report) | {det_med:.2} ms | {:.2} ms |",
        max(&detach)
    );
    println!(
        "| listener stopped per attach (outside the call) | {:.0} µs | {:.0} µs |",
        median(stopped.clone()),
        max(&stopped)
    );
    println!();
    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| ptrace stops per attach (interrupt-stops + syscall/call completions) | {} + {} |",
        a.interrupts, a.traps
    );
    println!(
        "| ptrace stops per detach | {} + {} |",
        d.interrupts, d.traps
    );
    println!("| our CPU, whole session with a {window_s} s window (front end + agents) | {cpu_ms:.1} ms |");
    println!("| our peak RSS (front end) | {} kB |", usage.maxrss_kb);
    println!(
        "| workers' largest heartbeat gap, {:.1} s with nobody attaching | {gap_idle:.2} ms |",
        ours_secs.as_secs_f64()
    );
    println!("| workers' largest heartbeat gap over our {runs} attach/detach sessions | {gap_ours:.2} ms |");
    println!(
        "| difference (ours - nobody) | {:+.2} ms |",
        gap_ours - gap_idle
    );
    if gdb {
        let (ga, gd) = (median(gdb_attach), median(gdb_detach));
        println!("| gdb: attach call (process start to exit) | {ga:.1} ms |");
        println!("| gdb: detach call | {gd:.1} ms |");
        println!("| workers' largest heartbeat gap over 5 gdb attach+detach | {gap_gdb:.2} ms |");
        println!("| gdb attach / our attach | {:.0}x |", ga / att_med);
        println!("| gdb detach / our detach | {:.0}x |", gd / det_med);
    } else {
        println!("| gdb | not installed |");
    }
}
