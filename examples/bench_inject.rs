//! Benchmark of the injection engine against the C stand-in target, with gdb as the baseline.
//!
//! Run: `cargo run --release --example bench_inject` (as root or with CAP_SYS_PTRACE; gdb
//! optional). Prints a Markdown table; docs/performance.md records the figures.
//!
//! Measured, in one run:
//! * one remote call round trip inside an open sequence (setregs, continue, trap, getregs);
//! * a whole sequence: interrupt, save, patch, mmap, write, call, munmap, restore, continue;
//! * ptrace stops per sequence;
//! * the attach and detach sequences through the agent server (seize to release, exactly what
//!   `rocprof-attach` runs per process), with the distribution of the listener's stop time per
//!   attach outside the call (min, p50, p90, p99, max; `BENCH_AGENT_RUNS` attach/detach pairs,
//!   default 500);
//! * our CPU time while a target is attached (tool loaded, nothing of ours traced) for 5 s;
//! * our CPU time while the listener stays seized (not stopped) for 5 s;
//! * `gdb -p PID -batch -ex 'call ...'` making the same call, as a ratio.
//!
//! `BENCH_PID=<pid>` measures an already running process instead of a fresh stand-in target:
//! one that has loaded the stand-in register library and started its listener, such as the
//! PyTorch training loop of `examples/torch_target.py` (docs/performance.md, "Listener stop").

use rocprof_testkit as common;

use common::{at_entry, env_buffer, symbol_addr, Target, TargetOpts};
use rocprof_attach::engine::agent::{self, Agents, CallTimeouts, Job};
use rocprof_attach::engine::inject::{Injection, Timeouts};
use rocprof_attach::engine::ptrace::Tracee;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[(v.len() * 99) / 100]
}

/// "min / p50 / p90 / p99 / max" of a sample.
fn distribution(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: usize| v[((v.len() - 1) * q) / 100];
    format!(
        "{:.1} / {:.1} / {:.1} / {:.1} / {:.1}",
        v[0],
        at(50),
        at(90),
        at(99),
        v[v.len() - 1]
    )
}

fn cpu_us() -> f64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e6 + tv.tv_usec() as f64;
    t(r.user_time()) + t(r.system_time())
}

fn main() {
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let agent_runs: usize = std::env::var("BENCH_AGENT_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
        .max(1);
    // The agent server is forked first, while this process is single-threaded, as the binary does.
    let agents = Agents::start(CallTimeouts::default());
    let external: Option<i32> = std::env::var("BENCH_PID").ok().map(|p| {
        p.parse()
            .expect("BENCH_PID is the PID of a process with a listener")
    });
    let target = external
        .is_none()
        .then(|| Target::spawn(TargetOpts::default()));
    let pid = external.unwrap_or_else(|| target.as_ref().unwrap().pid);
    // The stand-in register library as the target mapped it.
    let lib = match external {
        None => common::register_lib(),
        Some(pid) => common::maps_text(pid)
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("librocprofiler-register"))
            .map(std::path::PathBuf::from)
            .expect("the process maps the stand-in librocprofiler-register"),
    };
    let probe = symbol_addr(pid, &lib, "rocprofiler_standin_probe");
    let site = at_entry(pid);
    let listener = common::listener_tid(pid).expect("the process has a rocp-bg-attach thread");
    if let Some(pid) = external {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .count();
        let maps = common::maps_text(pid).lines().count();
        println!("Process {pid}: {threads} threads, {maps} mappings.");
        println!();
    }
    let call_timeout = Some(Duration::from_secs(10));

    // Like the agent does: trace from the CPU the listener runs on (see ptrace::follow_cpu_of).
    // BENCH_NO_PIN=1 measures without it (cross-CPU wakeups; slow on an idle VM).
    if std::env::var_os("BENCH_NO_PIN").is_none() {
        rocprof_attach::engine::ptrace::follow_cpu_of(pid, listener);
    }

    // 1. One remote call round trip inside an open sequence.
    let mut tr = Tracee::seize(pid, listener).unwrap();
    let mut calls = Vec::new();
    {
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        let a = inj.push_buffer(b"abc\0").unwrap();
        for _ in 0..200 {
            inj.call_int(probe, [a, a, 0, 0, 0, 0], call_timeout)
                .unwrap();
        }
        for _ in 0..5000 {
            let s = Instant::now();
            let r = inj
                .call_int(probe, [a, a, 0, 0, 0, 0], call_timeout)
                .unwrap();
            calls.push(s.elapsed().as_secs_f64() * 1e6);
            assert_eq!(r, 3003);
        }
        inj.finish().unwrap();
    }

    // 2. Whole sequences: map + write + call + unmap, one interrupt-stop each.
    let before = tr.counts();
    let mut seqs = Vec::new();
    let n_seq = 2000;
    for _ in 0..n_seq {
        let s = Instant::now();
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        let a = inj.mmap(4096).unwrap();
        inj.write(a, b"abcdef\0").unwrap();
        inj.call_int(probe, [a, a, 0, 0, 0, 0], call_timeout)
            .unwrap();
        inj.munmap(a).unwrap();
        inj.finish().unwrap();
        seqs.push(s.elapsed().as_secs_f64() * 1e6);
    }
    let after = tr.counts();
    let interrupts_per_seq = (after.interrupts - before.interrupts) as f64 / n_seq as f64;
    let completions_per_seq = (after.traps - before.traps) as f64 / n_seq as f64;

    // 3. Seized but idle: our CPU while we hold the listener traced (not stopped).
    let c0 = cpu_us();
    std::thread::sleep(Duration::from_secs(idle_secs));
    let seized_idle_cpu_ms = (cpu_us() - c0) / 1000.0;
    tr.detach(Duration::from_secs(5)).unwrap();

    // 4. The attach sequence through the forked agent (what rocprof-attach runs per process).
    let att = agent::Target {
        pid,
        tid: listener,
        site,
        function: symbol_addr(pid, &lib, "rocprofiler_register_attach"),
    };
    let det = agent::Target {
        function: symbol_addr(pid, &lib, "rocprofiler_register_detach"),
        ..att.clone()
    };
    let env = env_buffer(&[
        ("ROCPROF_KERNEL_TRACE", "1"),
        ("ROCPROF_OUTPUT_PATH", "/tmp/bench"),
    ]);
    let mut agent_attach = Vec::new();
    let mut agent_detach = Vec::new();
    let mut stopped = Vec::new();
    let mut detach_stopped = Vec::new();
    let attach_job = Job::Attach {
        env: env.clone(),
        tool: b"bench-tool.so".to_vec(),
    };
    for _ in 0..agent_runs {
        let s = Instant::now();
        let o = agents.run(&att, &attach_job).unwrap();
        agent_attach.push(s.elapsed().as_secs_f64() * 1e6);
        stopped.push(o.stopped_ns() as f64 / 1e3);
        let s = Instant::now();
        let o = agents.run(&det, &Job::Detach).unwrap();
        agent_detach.push(s.elapsed().as_secs_f64() * 1e6);
        detach_stopped.push(o.stopped_ns() as f64 / 1e3);
    }

    // 5. Attached and idle: the profiling window. Nothing of ours is traced; we just wait.
    agents.run(&att, &attach_job).unwrap();
    let c0 = cpu_us();
    std::thread::sleep(Duration::from_secs(idle_secs));
    let attached_idle_cpu_ms = (cpu_us() - c0) / 1000.0;
    agents.run(&det, &Job::Detach).unwrap();

    // 6. gdb making the same call.
    let gdb = std::process::Command::new("gdb")
        .arg("--version")
        .output()
        .is_ok();
    // Our work left the target running (checked before gdb, which may break it: some gdb builds
    // cannot write the FPU state of some CPUs, "Couldn't write extended state status").
    if let Some(t) = &target {
        t.assert_heartbeat();
    }
    let mut gdb_times = Vec::new();
    let mut gdb_failed = None;
    if gdb {
        for _ in 0..5 {
            let s = Instant::now();
            let out = std::process::Command::new("gdb")
                .args(["-nx", "-p", &pid.to_string(), "-batch", "-ex"])
                .arg("call (int)rocprofiler_standin_probe(\"abc\", \"abc\")")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            if !text.contains("3003") {
                gdb_failed = Some(common::gdb_failure(&String::from_utf8_lossy(&out.stderr)));
                break;
            }
            gdb_times.push(s.elapsed().as_secs_f64() * 1e6);
        }
    }
    let gdb = gdb && gdb_failed.is_none();

    let call_med = median(calls.clone());
    let seq_med = median(seqs.clone());
    let att_med = median(agent_attach.clone());
    println!("| measurement | median | p99 |");
    println!("|---|---|---|");
    println!(
        "| one remote call round trip (inside a sequence) | {call_med:.1} µs | {:.1} µs |",
        p99(calls)
    );
    println!("| sequence: interrupt + mmap + write + call + munmap + restore | {seq_med:.1} µs | {:.1} µs |", p99(seqs));
    println!("| attach through the agent server (request, seize, sequence, release, result) | {att_med:.1} µs | {:.1} µs |", p99(agent_attach));
    println!(
        "| detach through the agent server | {:.1} µs | {:.1} µs |",
        median(agent_detach.clone()),
        p99(agent_detach)
    );
    println!();
    println!(
        "| listener stopped outside the call ({agent_runs} runs) | min / p50 / p90 / p99 / max |"
    );
    println!("|---|---|");
    println!("| per attach | {} µs |", distribution(stopped));
    println!("| per detach | {} µs |", distribution(detach_stopped));
    println!();
    println!("| measurement | value |");
    println!("|---|---|");
    println!("| interrupt-stops per sequence | {interrupts_per_seq:.2} |");
    println!(
        "| syscall/call completions per sequence (mmap, call, munmap) | {completions_per_seq:.2} |"
    );
    println!(
        "| our CPU, listener seized but running, {idle_secs} s | {seized_idle_cpu_ms:.2} ms |"
    );
    println!("| our CPU, target attached (profiling window), {idle_secs} s | {attached_idle_cpu_ms:.2} ms |");
    if gdb && !gdb_times.is_empty() {
        let g = median(gdb_times);
        println!(
            "| gdb -p PID -batch -ex 'call ...' | {:.1} ms |",
            g / 1000.0
        );
        println!("| gdb / one remote call | {:.0}x |", g / call_med);
        println!("| gdb / whole sequence | {:.0}x |", g / seq_med);
        println!(
            "| gdb / attach through the agent server | {:.0}x |",
            g / att_med
        );
    } else if let Some(why) = gdb_failed {
        println!("| gdb | {why} |");
    } else {
        println!("| gdb | not installed |");
    }
}
