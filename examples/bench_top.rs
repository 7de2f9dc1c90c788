//! Benchmark: what `rocprof-attach top` costs on each backend, with the stand-ins (docs/top.md,
//! docs/performance.md "Live view (issue 28)").
//!
//! Run: `cargo run --release --example bench_top` (as root or with CAP_SYS_PTRACE;
//! `ROCPROF_ATTACH_BIN` picks another build, `BENCH_ITERATIONS` the refreshes, default 20, at
//! `BENCH_INTERVAL`, default 1s). Prints a Markdown table:
//!
//! * CUDA: the CUDA stand-in launching `BENCH_KERNELS` kernels (default 4), a copy and a memset
//!   every `BENCH_STEP_US` µs (default 2000: about 2,000 kernels a second), watched by
//!   `top --batch` (with `--api` when `BENCH_API=1`: the runtime API calls too; with `--spm` when
//!   `BENCH_SPM=1`: SM activity sampled every 1 ms, 3 counters, read each interval): the kernels
//!   read per second, `top`'s own CPU (its final line: this process, every thread) and with its
//!   agents (rusage of the waited-for child). The H200's rate (about 20,000 kernels a second
//!   and their API calls): `BENCH_KERNELS=40 BENCH_STEP_US=1500 BENCH_API=1`; `BENCH_ONLY=cuda`
//!   leaves the ROCm row out, `BENCH_FULL_NAMES=0` shows shortened names (demangled: `top`'s
//!   default, without `--full-names`), `BENCH_KEEP=DIR` keeps the databases read (`top -d DIR`: count
//!   their rows);
//! * ROCm: the ROCm stand-in, whose tool writes a copy of a rocpd database at every detach, as
//!   rocprofiler-sdk writes at detach: one session per refresh; the time each refresh leaves
//!   untraced (attach, detach, read: the median of the header's figure) and the CPU as above.

use rocprof_testkit as kit;

use kit::cuda::build_standins;
use kit::{tool_lib, Target, TargetOpts};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn children_cpu_ms() -> f64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3;
    t(r.user_time()) + t(r.system_time())
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The number after `key` in `line` (`... take 12.3 ms each` → 12.3 for "take ").
fn number_after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches('%')
        .parse()
        .ok()
}

/// What one `top --batch` run cost.
struct Run {
    wall_s: f64,
    own_cpu_pct: f64,
    with_agents_pct: f64,
    gap_ms: f64,
    rows_per_s: f64,
    /// `top`'s own CPU per 1,000 kernels read (ms): the cost per row, whatever rate the loaded
    /// machine let the stand-in reach.
    ms_per_1k: f64,
}

/// Runs `top --batch` on `pid` and reads what it printed.
fn top(pid: i32, extra: &[&str], env: &[(&str, String)]) -> Run {
    let iterations = std::env::var("BENCH_ITERATIONS").unwrap_or_else(|_| "20".into());
    let interval = std::env::var("BENCH_INTERVAL").unwrap_or_else(|_| "1s".into());
    let cpu0 = children_cpu_ms();
    let start = std::time::Instant::now();
    let mut child = Command::new(kit::release_bin())
        .args(["top", "-p", &pid.to_string(), "--batch"])
        .args((std::env::var("BENCH_FULL_NAMES").as_deref() != Ok("0")).then_some("--full-names"))
        .args(["--interval", &interval, "-n", &iterations])
        .args(extra)
        .args(
            std::env::var("BENCH_KEEP")
                .map(|d| vec!["-d".to_string(), d])
                .unwrap_or_default(),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run rocprof-attach top");
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    let gaps: Vec<f64> = lines
        .iter()
        .filter_map(|l| number_after(l, "attach, detach and read take "))
        .collect();
    let (own_ms, own) = lines
        .iter()
        .find_map(|l| {
            let cpu = number_after(l, "top's own CPU: ")?;
            Some((cpu, cpu / 10.0 / number_after(l, " ms over ")?))
        })
        .unwrap_or((f64::NAN, f64::NAN));
    // The final table: the launches of every kernel since the start, first on each row.
    let totals = lines
        .iter()
        .position(|l| l.starts_with("rocprof-attach top - totals since the start"))
        .expect("a final table");
    let header = totals
        + lines[totals..]
            .iter()
            .position(|l| l.trim_start().starts_with("ALL_LAUNCHES"))
            .expect("a kernel table");
    let launches: f64 = lines[header + 1..]
        .iter()
        .map_while(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .sum();
    let status = child.wait().unwrap();
    assert!(status.success(), "top failed");
    let wall_s = start.elapsed().as_secs_f64();
    Run {
        wall_s,
        own_cpu_pct: own,
        with_agents_pct: (children_cpu_ms() - cpu0) / 10.0 / wall_s,
        gap_ms: median(gaps),
        rows_per_s: launches / wall_s,
        ms_per_1k: own_ms * 1e3 / launches,
    }
}

fn main() {
    println!("| Backend | Target | Wall | Kernels read / s | top's own CPU | with its agents | per 1,000 kernels | Untraced per refresh |");
    println!("|---|---|---|---|---|---|---|---|");
    let s = build_standins();
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let (kernels, step_us) = (env("BENCH_KERNELS", "4"), env("BENCH_STEP_US", "2000"));
    let api = env("BENCH_API", "0") == "1";
    let spm = env("BENCH_SPM", "0") == "1";
    let mut cuda = kit::cuda::start_target(&s, &kernels, &step_us);
    let tool = kit::release_bin().with_file_name("librocprof_cuda_tool.so");
    let extra: Vec<&str> = [api.then_some("--api"), spm.then_some("--spm")]
        .into_iter()
        .flatten()
        .collect();
    let r = top(
        cuda.id() as i32,
        &extra,
        &[("ROCPROF_ATTACH_CUDA_TOOL", tool.display().to_string())],
    );
    println!(
        "| CUDA | stand-in, {kernels} kernels + 2 copies / {step_us} µs{}{} | {:.1} s | {:.0} | {:.2} % | {:.2} % | {:.3} ms | none (one session) |",
        if api { ", API calls traced" } else { "" },
        if spm { ", --spm" } else { "" },
        r.wall_s, r.rows_per_s, r.own_cpu_pct, r.with_agents_pct, r.ms_per_1k
    );
    let _ = cuda.kill();
    let _ = cuda.wait();
    if env("BENCH_ONLY", "") == "cuda" {
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let db = kit::rocpd::full_db(&dir.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.display().to_string())],
        ..Default::default()
    });
    let r = top(t.pid, &["-t", tool_lib().to_str().unwrap()], &[]);
    println!(
        "| ROCm | stand-in register and tool, a database copied at each detach | {:.1} s | {:.0} | {:.2} % | {:.2} % | {:.3} ms | {:.1} ms (median) |",
        r.wall_s, r.rows_per_s, r.own_cpu_pct, r.with_agents_pct, r.ms_per_1k, r.gap_ms
    );
}
