//! End-to-end benchmark of the `rocprof-attach` binary (issues 5 and 12): whole sessions against
//! the C stand-in target, with gdb making the same two register calls as the baseline.
//!
//! Run: `cargo run --release --example bench_e2e` (as root or with CAP_SYS_PTRACE; builds the
//! release binary first; gdb optional). Prints Markdown tables; docs/performance.md records them.
//!
//! The target's register library is the stand-in padded with 4 MiB of non-loaded data (an extra
//! section added with `objcopy`), the size of a RelWithDebInfo build of the real
//! librocprofiler-register, so reading the whole library would show. `BENCH_E2E_PAD_MIB` changes
//! the padding (0: none).
//!
//! Measured in one run (`BENCH_E2E_RUNS` sessions, default 30):
//! * the whole session with a 1 ms window (`--attach-duration-msec 1`), process start to exit;
//! * the time the target itself spends inside the attach and detach calls (the stand-in logs it);
//! * our own CPU time and page faults per session (`wait4` rusage of the binary, which includes
//!   its agent server);
//! * the listener's stop time per attach, as the binary reports it;
//! * gdb attaching and making the same two calls (`gdb -p PID -batch -ex 'call ...'`, one gdb run
//!   per call), its wall time, CPU and page faults, as ratios to ours;
//! * the floor: a C program (`tests/fixtures/floor.c`) making the same `/proc` reads and ptrace
//!   stops with no call, no ELF lookup, no option parsing and no output, run between our
//!   sessions: what any attacher pays on this machine, and ours as a ratio to it;
//! * ptrace stops per attach and detach; our CPU for a whole session with a 10 s window
//!   (`BENCH_E2E_WINDOW_SECS`); the workers' largest heartbeat gap while we attach and detach.

use rocprof_testkit as common;

use common::{at_entry, env_buffer, records, symbol_addr, Target, TargetOpts};
use rocprof_attach::engine::agent::{self, CallTimeouts, Job};
use rocprof_attach::engine::ptrace::{wait_with_rusage, ChildUsage};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// (median, p90, max) of a sample.
fn dist(v: &[f64]) -> (f64, f64, f64) {
    let s = sorted(v.to_vec());
    let n = s.len();
    (s[n / 2], s[(n * 9 / 10).min(n - 1)], s[n - 1])
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
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

/// The stand-in register library with `mib` MiB of padding in a section that is never loaded.
fn padded_register_lib(mib: usize) -> PathBuf {
    let lib = common::register_lib();
    if mib == 0 {
        return lib;
    }
    // Prebuilt fixtures (a machine without a compiler) keep it in a subfolder.
    if let Some(dir) = std::env::var_os("ROCPROF_FIXTURES_DIR") {
        let prebuilt = Path::new(&dir)
            .join(format!("pad{mib}"))
            .join("librocprofiler-register.so.0");
        assert!(prebuilt.exists(), "{} is missing", prebuilt.display());
        return prebuilt;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/tmp/bench_e2e/pad{mib}"));
    let out = dir.join("librocprofiler-register.so.0");
    if out.exists() {
        return out;
    }
    std::fs::create_dir_all(&dir).unwrap();
    // Deterministic, incompressible-looking filler (xorshift), like real debug info in size.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let pad: Vec<u8> = (0..mib << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let pad_file = dir.join("pad.bin");
    std::fs::write(&pad_file, pad).unwrap();
    let tmp = dir.join("lib.tmp");
    let ok = Command::new("objcopy")
        .arg("--add-section")
        .arg(format!(".debug_pad={}", pad_file.display()))
        .args(["--set-section-flags", ".debug_pad=readonly"])
        .arg(&lib)
        .arg(&tmp)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "objcopy failed (install binutils, or set BENCH_E2E_PAD_MIB=0)"
    );
    std::fs::rename(&tmp, &out).unwrap();
    let _ = std::fs::remove_file(pad_file);
    out
}

struct Session {
    wall_ms: f64,
    usage: ChildUsage,
    /// Target's time inside the attach + detach calls.
    calls_ms: f64,
    stopped_us: f64,
}

/// One whole session of the release binary with a 1 ms window (reaped with `wait4` for its
/// resource usage, which clippy cannot see).
#[allow(clippy::zombie_processes)]
fn session(t: &Target, tool: &str, n: usize) -> Session {
    let out = t.dir.path().join("out");
    let err_path = t.dir.path().join(format!("session-{n}.stderr"));
    let err = std::fs::File::create(&err_path).unwrap();
    let before = records(t).len();
    let start = Instant::now();
    let child = Command::new(common::release_bin())
        .args(["--attach", &t.pid.to_string(), "--kernel-trace", "-d"])
        .arg(&out)
        .args(["-o", "run", "-t", tool, "--attach-duration-msec", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let usage = wait_with_rusage(child.id() as i32).unwrap();
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        libc::WIFEXITED(usage.status) && libc::WEXITSTATUS(usage.status) == 0,
        "rocprof-attach failed: {stderr}"
    );
    let stopped_us = stderr
        .split("listener stopped ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a 'listener stopped N µs' line");
    let new = &records(t)[before..];
    assert_eq!(new.len(), 2, "one attach and one detach record: {new:?}");
    let calls_ms = new
        .iter()
        .map(|r| r.get("ns").parse::<f64>().expect("ns= in the stand-in log"))
        .sum::<f64>()
        / 1e6;
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&err_path);
    Session {
        wall_ms,
        usage,
        calls_ms,
        stopped_us,
    }
}

/// One run of the floor program `bin` (`tests/fixtures/floor.c`) against `t`, reaped with `wait4`.
#[allow(clippy::zombie_processes)]
fn floor(bin: &Path, t: &Target) -> ChildUsage {
    let child = Command::new(bin)
        .arg(t.pid.to_string())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let usage = wait_with_rusage(child.id() as i32).unwrap();
    let code = libc::WIFEXITED(usage.status).then(|| libc::WEXITSTATUS(usage.status));
    let why = match code {
        Some(0) => return usage,
        Some(3) => "a /proc file of the target could not be read",
        Some(4) => "the target has no 'rocp-bg-attach' thread",
        Some(5) => "a ptrace step failed: run as root or with CAP_SYS_PTRACE",
        _ => "it failed or was killed",
    };
    panic!(
        "the floor program ({}) failed on process {}: {why} (wait status {:#x})",
        bin.display(),
        t.pid,
        usage.status
    );
}

/// One gdb run making `call`: (wall ms, usage), reaped with `wait4`; Err
/// ([`common::gdb_failure`]) when it did not make the call.
#[allow(clippy::zombie_processes)]
fn gdb_call(pid: i32, call: &str) -> Result<(f64, ChildUsage), String> {
    let s = Instant::now();
    let child = Command::new("gdb")
        .args(["-nx", "-p", &pid.to_string(), "-batch", "-ex", call])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let (mut text, mut errors) = (String::new(), String::new());
    std::io::Read::read_to_string(&mut child.stdout.unwrap(), &mut text).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.unwrap(), &mut errors).unwrap();
    let usage = wait_with_rusage(pid).unwrap();
    let ms = s.elapsed().as_secs_f64() * 1e3;
    if !text.contains("= 0") {
        return Err(common::gdb_failure(&errors));
    }
    Ok((ms, usage))
}

fn row(name: &str, v: &[f64], unit: &str, goal: &str) {
    let (med, p90, max) = dist(v);
    let digits = if unit == "µs" { 0 } else { 2 };
    println!("| {name} | {med:.digits$} {unit} | {p90:.digits$} {unit} | {max:.digits$} {unit} | {goal} |");
}

// The 10 s session's child is reaped with wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn main() {
    let runs: usize = env_num("BENCH_E2E_RUNS", 30).max(1);
    let window_s: u64 = env_num("BENCH_E2E_WINDOW_SECS", 10);
    let pad_mib: usize = env_num("BENCH_E2E_PAD_MIB", 4);
    // ROCPROF_ATTACH_BIN names a binary built beforehand (a machine without cargo).
    if std::env::var_os("ROCPROF_ATTACH_BIN").is_none() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "--release", "--bin", "rocprof-attach"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(built.success(), "building the release binary failed");
    }
    let lib = padded_register_lib(pad_mib);
    let lib_size = std::fs::metadata(&lib).unwrap().len();
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_REGISTER_LIB".into(), lib.to_str().unwrap().into())],
        ..Default::default()
    });
    let tool = common::tool_lib();
    let tool = tool.to_str().unwrap();
    let floor_bin = common::build("floor", &["floor.c"], &["-O2"]);
    session(&t, tool, 0); // warm-up: page cache, tool loaded
    floor(&floor_bin, &t);

    // 1. Our sessions, each followed by one run of the floor program, with the workers' largest
    // heartbeat gap over all of them.
    reset_gaps(&t);
    let phase = Instant::now();
    let (mut sessions, mut floors) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        sessions.push(session(&t, tool, i));
        floors.push(floor(&floor_bin, &t));
    }
    let ours_secs = phase.elapsed();
    let gap_ours = max_gap_ms(&t);

    // 2. The same length of time with nobody attaching.
    reset_gaps(&t);
    std::thread::sleep(ours_secs);
    let gap_idle = max_gap_ms(&t);

    // 3. ptrace stops per attach: the agent code the binary runs, in-process for its counters.
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
    let child = Command::new(common::release_bin())
        .args(["--attach", &t.pid.to_string(), "--kernel-trace", "-d"])
        .arg(&out)
        .args(["-o", "run", "-t", tool, "--attach-duration-msec"])
        .arg((window_s * 1000).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let long = wait_with_rusage(child.id() as i32).unwrap();
    assert!(libc::WIFEXITED(long.status) && libc::WEXITSTATUS(long.status) == 0);

    // Our sessions left the target working (checked before gdb, which may break it: see gdb_call).
    t.assert_heartbeat();

    // 5. gdb making the same two calls into the same target.
    let gdb = Command::new("gdb").arg("--version").output().is_ok();
    let (mut gdb_wall, mut gdb_cpu, mut gdb_faults) = (Vec::new(), Vec::new(), Vec::new());
    let mut gap_gdb = 0.0;
    let mut gdb_failed = None;
    if gdb {
        reset_gaps(&t);
        for _ in 0..5 {
            let attach = format!("call (int)rocprofiler_register_attach(0, \"{tool}\")");
            let pair = gdb_call(t.pid, &attach).and_then(|a| {
                gdb_call(t.pid, "call (int)rocprofiler_register_detach()").map(|d| (a, d))
            });
            match pair {
                Ok(((wa, ua), (wd, ud))) => {
                    gdb_wall.push(wa + wd);
                    gdb_cpu.push((ua.cpu_us + ud.cpu_us) as f64 / 1e3);
                    gdb_faults.push((ua.faults + ud.faults) as f64);
                }
                Err(e) => {
                    gdb_failed = Some(e);
                    break;
                }
            }
        }
        gap_gdb = max_gap_ms(&t);
    }
    let gdb = gdb && gdb_failed.is_none();

    let wall: Vec<f64> = sessions.iter().map(|s| s.wall_ms).collect();
    let calls: Vec<f64> = sessions.iter().map(|s| s.calls_ms).collect();
    let ours: Vec<f64> = sessions
        .iter()
        .map(|s| s.wall_ms - 1.0 - s.calls_ms)
        .collect();
    let cpu: Vec<f64> = sessions
        .iter()
        .map(|s| s.usage.cpu_us as f64 / 1e3)
        .collect();
    let faults: Vec<f64> = sessions.iter().map(|s| s.usage.faults as f64).collect();
    let stopped: Vec<f64> = sessions.iter().map(|s| s.stopped_us).collect();
    let floor_cpu: Vec<f64> = floors.iter().map(|u| u.cpu_us as f64 / 1e3).collect();
    let floor_faults: Vec<f64> = floors.iter().map(|u| u.faults as f64).collect();
    println!(
        "Register library {:.1} MiB; {runs} sessions, each with a 1 ms window.",
        lib_size as f64 / (1 << 20) as f64
    );
    println!();
    println!("| per session | median | p90 | max | goal |");
    println!("|---|---|---|---|---|");
    row("whole session: process start to exit", &wall, "ms", "");
    row("target inside the attach + detach calls", &calls, "ms", "");
    row(
        "ours: whole session − 1 ms window − target's calls",
        &ours,
        "ms",
        "≤ 4 ms",
    );
    row("our CPU (front end + agent server)", &cpu, "ms", "≤ 2 ms");
    let (fm, f9, fx) = dist(&faults);
    println!("| our page faults (minor + major) | {fm:.0} | {f9:.0} | {fx:.0} | ≤ 400 |");
    row(
        "listener stopped per attach, outside the call",
        &stopped,
        "µs",
        "≤ 150 µs",
    );
    row(
        "floor CPU: the same /proc reads and ptrace stops in C, no call",
        &floor_cpu,
        "ms",
        "",
    );
    let (gm, g9, gx) = dist(&floor_faults);
    println!("| floor page faults | {gm:.0} | {g9:.0} | {gx:.0} |  |");
    println!(
        "| our CPU / floor CPU (medians) | {:.2} |  |  |  |",
        dist(&cpu).0 / dist(&floor_cpu).0
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
    println!(
        "| our CPU, whole session with a {window_s} s window | {:.1} ms |",
        long.cpu_us as f64 / 1e3
    );
    println!("| our peak RSS (front end) | {} kB |", long.maxrss_kb);
    println!(
        "| workers' largest heartbeat gap, {:.1} s with nobody attaching | {gap_idle:.2} ms |",
        ours_secs.as_secs_f64()
    );
    println!("| workers' largest heartbeat gap over our {runs} sessions | {gap_ours:.2} ms |");
    if gdb {
        let (w, c, f) = (dist(&gdb_wall).0, dist(&gdb_cpu).0, dist(&gdb_faults).0);
        println!("| workers' largest heartbeat gap over 5 gdb attach+detach | {gap_gdb:.2} ms |");
        println!();
        println!("| gdb making the same two calls (5 pairs, one gdb run per call), median | gdb | ours | gdb / ours |");
        println!("|---|---|---|---|");
        println!(
            "| wall time (two gdb runs; our whole session) | {w:.1} ms | {:.2} ms | {:.0}x |",
            dist(&wall).0,
            w / dist(&wall).0
        );
        println!(
            "| CPU | {c:.1} ms | {:.2} ms | {:.0}x |",
            dist(&cpu).0,
            c / dist(&cpu).0
        );
        println!(
            "| page faults | {f:.0} | {:.0} | {:.0}x |",
            dist(&faults).0,
            f / dist(&faults).0
        );
    } else if let Some(why) = gdb_failed {
        println!("| gdb | {why} |");
    } else {
        println!("| gdb | not installed |");
    }
}
