//! Benchmark of the rocattach C ABI (src/capi) against the C stand-in target.
//!
//! Run: `cargo build --release && cargo run --release --example bench_capi` (as root or with
//! CAP_SYS_PTRACE). Prints a Markdown table; docs/performance.md records the figures.
//!
//! Measured, in one run:
//! * attach+detach through the C ABI: a C host dlopens the installed library and calls
//!   `rocattach_attach` / `rocattach_detach` N times; wall time per pair, the host's own CPU and
//!   that of the agent servers (`rocprof-attach __agent-server`, one per attached process; the
//!   host makes itself a child subreaper to count them) per pair;
//! * the same through the CLI: `rocprof-attach -p PID --attach-duration-msec 1`, wall time and
//!   CPU per session (includes the CLI's start-up and the output listing);
//! * the host's CPU over a 3 s window while the target is attached through the library (the
//!   goal is at most 1 ms; rocattach keeps two threads spinning per target for that window).

use rocprof_testkit as common;

use common::{Target, TargetOpts};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// `target/release`, or `BENCH_CAPI_DIR` (e.g. to compare two debug builds).
fn release_dir() -> PathBuf {
    std::env::var_os("BENCH_CAPI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release"))
}

fn children_cpu_us() -> u64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
    us(r.user_time()) + us(r.system_time())
}

fn client(lib: &Path, args: &[&str], tool: &Path) -> Vec<String> {
    let out = Command::new(common::build("capi_client", &["capi_client.c"], &[]))
        .arg(lib)
        .args(args)
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", tool)
        .env_remove("ROCATTACH_AGENT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn main() {
    let runs: usize = std::env::var("BENCH_CAPI_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let rel = release_dir();
    assert!(
        rel.join("librocattach.so").is_file() && rel.join("rocprof-attach").is_file(),
        "run `cargo build --release` first"
    );
    let prefix = tempfile::tempdir().unwrap();
    let ok = Command::new(rel.join("rocprof-attach"))
        .args(["install-library", "--prefix"])
        .arg(prefix.path())
        .arg("--library")
        .arg(rel.join("librocattach.so"))
        .output()
        .unwrap();
    assert!(ok.status.success());
    let lib = prefix.path().join("lib/librocprofiler-sdk-rocattach.so.1");
    let tool = common::tool_lib();
    let t = Target::spawn(TargetOpts::default());
    let pid = t.pid.to_string();
    client(&lib, &["cycle", &pid, "2"], &tool); // warm-up: tool loaded, page cache

    // 1. C ABI.
    let line = client(&lib, &["cycle", &pid, &runs.to_string()], &tool)
        .pop()
        .unwrap();
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(f[1], 0, "failed calls: {line}");
    let n = f[0] as f64;
    let (capi_wall, capi_self, capi_children) = (f[2] as f64 / n, f[3] as f64 / n, f[4] as f64 / n);

    // 2. CLI.
    let out_dir = t.dir.path().join("bench-out");
    let cpu0 = children_cpu_us();
    let start = Instant::now();
    for _ in 0..runs {
        let st = Command::new(rel.join("rocprof-attach"))
            .args(["-p", &pid, "--attach-duration-msec", "1", "-q", "-d"])
            .arg(&out_dir)
            .arg("-t")
            .arg(&tool)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    }
    let cli_wall = start.elapsed().as_micros() as f64 / runs as f64;
    let cli_cpu = (children_cpu_us() - cpu0) as f64 / runs as f64;

    // 3. The host's CPU over 3 s while attached.
    let lines = client(
        &lib,
        &["attach", &pid, "cpu_window", "3000", "detach", &pid],
        &tool,
    );
    let window = lines.iter().find(|l| l.starts_with("cpu_window")).unwrap();
    let w: Vec<u64> = window
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();

    println!("| measurement ({runs} runs) | value |");
    println!("|---|---:|");
    println!(
        "| C ABI attach+detach, wall per pair | {:.2} ms |",
        capi_wall / 1000.0
    );
    println!(
        "| C ABI attach+detach, host CPU per pair | {:.2} ms |",
        capi_self / 1000.0
    );
    println!(
        "| C ABI attach+detach, agent processes' CPU per pair | {:.2} ms |",
        capi_children / 1000.0
    );
    println!(
        "| CLI session (`--attach-duration-msec 1`), wall | {:.2} ms |",
        cli_wall / 1000.0
    );
    println!(
        "| CLI session, CPU (CLI + agents) | {:.2} ms |",
        cli_cpu / 1000.0
    );
    println!(
        "| host CPU over a 3 s window while attached (user + sys) | {:.3} ms |",
        (w[0] + w[1]) as f64 / 1000.0
    );
}
