//! `rocprof-attach top` (issue 28, docs/top.md) on the CUDA stand-ins, which write their rows
//! while the window runs: the batch table and the JSON lines checked line by line (and the final
//! totals against `summary` of the kept database: the same code, so the same numbers), a target
//! that exits while watched, and the full-screen view inside tmux, read with `capture-pane`
//! (kernel names, a column per process, resize, `q` detaches and the target stays attachable).
//! Every wait is bounded and ends on what it waits for (a line, a screen's text).

use crate::common::{self, cuda};
use crate::prereq;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one wait may take (a loaded 2-core machine included).
const LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn tool() -> PathBuf {
    common::built_library("rocprof-cuda-tool", "librocprof_cuda_tool.so")
}

/// A running CUDA stand-in.
pub(crate) struct Target {
    child: Child,
    pub(crate) pid: i32,
    _dir: tempfile::TempDir,
}

impl Target {
    pub(crate) fn spawn(args: &[&str]) -> Target {
        Target::spawn_with(args, &[])
    }

    /// A stand-in with `env` added (a job's rank variables, say).
    fn spawn_with(args: &[&str], env: &[(&str, &str)]) -> Target {
        let s = cuda::build_standins();
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(&s.target)
            .arg("--with-cupti")
            .arg(&s.libcupti)
            .args(args)
            .envs(env.iter().copied())
            .env("FAKE_CUPTI_STATE", dir.path().join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cuda_target");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while line.trim() != "ready" {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "cuda_target ended before ready"
            );
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let pid = child.id() as i32;
        Target {
            child,
            pid,
            _dir: dir,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rocprof-attach top` with its stdout read line by line.
pub(crate) struct Top {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Top {
    pub(crate) fn spawn(args: &[&str]) -> Top {
        let mut child = Command::new(common::bin())
            .arg("top")
            .args(args)
            .env("ROCPROF_ATTACH_CUDA_TOOL", tool())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rocprof-attach top");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Top {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// The next stdout line (bounded); None at the end of the output.
    pub(crate) fn line(&mut self) -> Option<String> {
        match self.lines.recv_timeout(LIMIT) {
            Ok(l) => {
                self.seen.push(l.clone());
                Some(l)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(e) => panic!("no output within {LIMIT:?} ({e}); so far: {:#?}", self.seen),
        }
    }

    /// Reads lines until one satisfies `f`.
    pub(crate) fn until(&mut self, what: &str, f: impl Fn(&str) -> bool) -> String {
        loop {
            match self.line() {
                Some(l) if f(&l) => return l,
                Some(_) => {}
                None => panic!("output ended before {what}: {:#?}", self.seen),
            }
        }
    }

    pub(crate) fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// The rest of stdout, the exit code and stderr.
    pub(crate) fn finish(mut self) -> (Vec<String>, i32, String) {
        let mut rest = Vec::new();
        while let Some(l) = self.line() {
            rest.push(l);
        }
        let out = self.child.wait_with_output().expect("wait for top");
        (
            rest,
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A row of a batch table: its leading numbers and the name after them (None for a line that
/// does not start with a number: a header, a note, the end of the table).
pub(crate) fn row(l: &str) -> Option<(Vec<f64>, String)> {
    let mut nums = Vec::new();
    let mut rest = l.trim_start();
    while let Some(w) = rest.split_whitespace().next() {
        let Ok(v) = w.parse::<f64>() else { break };
        nums.push(v);
        rest = rest[w.len()..].trim_start();
    }
    (!nums.is_empty() && !rest.is_empty()).then(|| (nums, rest.to_string()))
}

/// The rows under the next header that starts with `header` (after its spaces).
pub(crate) fn table(lines: &[String], header: &str) -> Option<Vec<(Vec<f64>, String)>> {
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(header))?;
    Some(lines[at + 1..].iter().map_while(|l| row(l)).collect())
}

/// `summary --format csv`'s kernel rows of `dbs`: name → calls, total ns.
fn summary_kernels(dbs: &[PathBuf]) -> Vec<(String, u64, u64)> {
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(common::bin());
    cmd.arg("summary")
        .arg("-i")
        .args(dbs)
        .args(["--format", "csv", "-d"])
        .arg(out_dir.path());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "summary: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("kernel_stats.csv"))
        .expect("a kernel_stats.csv");
    let mut r = csv::Reader::from_path(file).unwrap();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            (
                rec[0].to_string(),
                rec[1].parse().unwrap(),
                rec[2].parse().unwrap(),
            )
        })
        .collect()
}

pub(crate) fn databases(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with("_results.db") {
                v.push(p);
            }
        }
    }
    v
}

#[test]
fn batch_tables_count_the_standins_kernels_and_match_summary() {
    let t = Target::spawn(&["--kernels-per-step", "4", "--step-us", "2000"]);
    let keep = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let started = Instant::now();
    let mut top = Top::spawn(&[
        "-p",
        &pid,
        "--batch",
        "--full-names",
        "--interval",
        "300ms",
        "-d",
        keep.path().to_str().unwrap(),
    ]);
    let header = top.until("the first header", |l| {
        l.starts_with("rocprof-attach top - interval")
    });
    assert!(header.contains("CUDA"), "{header}");
    // An interval whose table shows every kernel: one launch each per step, so the counts of
    // one interval differ by at most one (a step cut by the interval's edge).
    let counts = loop {
        top.until("a kernel table", |l| l.trim_start().starts_with("LAUNCHES"));
        let mut counts = Vec::new();
        loop {
            let l = top.line().expect("a table's lines");
            match row(&l) {
                Some((n, name)) => counts.push((name, n[0])),
                None => break,
            }
        }
        if counts.len() >= 3 && counts.iter().all(|c| c.1 >= 2.0) {
            break counts;
        }
    };
    let (lo, hi) = counts
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), c| (lo.min(c.1), hi.max(c.1)));
    assert!(
        hi - lo <= 2.0,
        "one launch of each kernel per step: {counts:?}"
    );
    top.signal(nix::sys::signal::Signal::SIGTERM);
    let (rest, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    let start = rest
        .iter()
        .position(|l| l.starts_with("rocprof-attach top - totals since the start"))
        .unwrap_or_else(|| panic!("a final table: {rest:#?}"));
    let totals: Vec<(String, u64, u64)> = table(&rest[start..], "ALL_LAUNCHES")
        .unwrap_or_else(|| panic!("a kernel table: {rest:#?}"))
        .into_iter()
        .map(|(n, name)| (name, n[0] as u64, n[1] as u64))
        .collect();
    let dbs = databases(keep.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}; {stderr}");
    let summary = summary_kernels(&dbs);
    assert!(!totals.is_empty(), "{rest:#?}");
    assert_eq!(
        totals.len(),
        summary.len(),
        "top: {totals:?}; summary: {summary:?}"
    );
    // At most one launch of each kernel per step, a step every 2 ms at the most.
    let most = started.elapsed().as_secs_f64() / 0.002;
    for (name, launches, _) in &totals {
        assert!(
            *launches >= 1 && (*launches as f64) <= most,
            "{name}: {launches} launches, at most {most:.0}"
        );
    }
    for (name, launches, ns) in &totals {
        let s = summary
            .iter()
            .find(|s| s.0 == *name)
            .unwrap_or_else(|| panic!("{name} in {summary:?}"));
        assert_eq!(*launches, s.1, "{name}: top's launches vs summary's calls");
        // top prints milliseconds with 3 decimals.
        assert!(
            ns.abs_diff(s.2) <= 500,
            "{name}: top {ns} ns, summary {} ns",
            s.2
        );
    }
    // The target goes on, detached: a new session attaches it.
    assert!(common::pid_alive(t.pid));
}

#[test]
fn json_lines_one_object_per_interval_then_the_totals() {
    let t = Target::spawn(&["--kernels-per-step", "4", "--step-us", "2000"]);
    let pid = t.pid.to_string();
    let top = Top::spawn(&["-p", &pid, "--json", "--interval", "200ms", "-n", "3"]);
    let (lines, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines.len(), 4, "3 intervals and the totals: {lines:#?}");
    let objs: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (i, o) in objs.iter().enumerate().take(3) {
        assert_eq!(o["type"], "interval", "{o}");
        assert_eq!(o["iteration"], i as u64 + 1, "{o}");
        assert_eq!(o["processes"][0]["pid"], t.pid, "{o}");
        assert!(o["sampling"].as_str().unwrap().contains("CUDA"), "{o}");
    }
    let last = &objs[3];
    assert_eq!(last["type"], "final", "{last}");
    let kernels = last["kernels"].as_array().unwrap();
    assert!(kernels.len() >= 3, "{last}");
    let sum: u64 = kernels
        .iter()
        .map(|k| k["since_start"]["total_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, last["kernel_ns_since_start"].as_u64().unwrap());
    for k in kernels {
        assert!(k["since_start"]["launches"].as_u64().unwrap() > 0, "{k}");
        let (name, short) = (
            k["name"].as_str().unwrap(),
            k["short_name"].as_str().unwrap(),
        );
        assert!(!short.is_empty() && short.len() <= name.len(), "{k}");
        assert!(!short.contains('(') && !short.contains('<'), "{k}");
    }
}

#[test]
fn a_target_that_exits_is_reported_and_the_others_go_on() {
    let stays = Target::spawn(&["--step-us", "2000"]);
    let leaves = Target::spawn(&["--step-us", "2000"]);
    let pids = format!("{},{}", stays.pid, leaves.pid);
    let mut top = Top::spawn(&["-p", &pids, "--batch", "--interval", "300ms"]);
    top.until("the first table", |l| {
        l.starts_with("rocprof-attach top - interval")
    });
    let mut leaves = leaves;
    let _ = leaves.child.kill();
    let _ = leaves.child.wait();
    top.until("the exit noted", |l| {
        l.contains(&format!("process {} exited", leaves.pid))
    });
    // The next tables still watch the other one, and mark the one that left.
    top.until("the exited state", |l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.first() == Some(&leaves.pid.to_string().as_str()) && f.contains(&"exited")
    });
    top.until("the other one still watched", |l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.first() == Some(&stays.pid.to_string().as_str()) && f.contains(&"watched")
    });
    top.signal(nix::sys::signal::Signal::SIGINT);
    let (_, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(common::pid_alive(stays.pid));
}

/// A tmux server of this test's own, killed when dropped.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("rocprof-top-{name}-{}", std::process::id()),
        }
    }

    /// Starts the pane "top" of `cols` x `rows` running `command` (a shell line).
    pub(crate) fn session(&self, cols: u16, rows: u16, command: &str) {
        let (x, y) = (cols.to_string(), rows.to_string());
        let out = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &x,
            "-y",
            &y,
            command,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Polls the screen until `f` holds (bounded).
    pub(crate) fn wait_screen(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn alive(&self) -> bool {
        self.cmd(&["has-session", "-t", "top"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn the_screen_in_tmux_shows_kernels_ranks_resizes_and_q_detaches() {
    if !prereq::tmux() {
        return;
    }
    let a = Target::spawn(&["--step-us", "2000"]);
    let b = Target::spawn(&["--step-us", "2000"]);
    let tmux = Tmux::new("screen");
    let command = format!(
        "env ROCPROF_ATTACH_CUDA_TOOL={} {} top -p {},{} --interval 300ms",
        tool().display(),
        common::bin().display(),
        a.pid,
        b.pid
    );
    tmux.session(120, 40, &command);
    let s = tmux.wait_screen("both processes' kernels", |s| {
        // The stand-in's `_Z10gemm_kerneli` demangles to `gemm_kerne(long)`.
        s.contains("gemm_kerne")
            && s.contains(&format!("pid {}", a.pid))
            && s.contains(&format!("pid {}", b.pid))
    });
    assert!(s.contains("rocprof-attach top - interval"), "{s}");
    assert!(s.contains("q quit"), "{s}");
    tmux.cmd(&["send-keys", "-t", "top", "r"]);
    tmux.wait_screen("a column per process", |s| {
        s.contains(&format!("pid {} ms", a.pid)) && s.contains(&format!("pid {} ms", b.pid))
    });
    tmux.cmd(&["send-keys", "-t", "top", "?"]);
    tmux.wait_screen("the help", |s| {
        s.contains("detach from every process and quit")
    });
    tmux.cmd(&["send-keys", "-t", "top", "x"]);
    tmux.wait_screen("the help closed", |s| {
        !s.contains("detach from every process and quit")
    });
    tmux.cmd(&["resize-window", "-t", "top", "-x", "60", "-y", "20"]);
    let narrow = tmux.wait_screen("the narrow screen", |s| {
        s.lines().all(|l| l.chars().count() <= 60)
            && s.contains("gemm_kerne")
            && !s.contains("ALL ms")
    });
    assert!(narrow.contains("LAUNCHES"), "{narrow}");
    tmux.cmd(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + LIMIT;
    while tmux.alive() {
        assert!(
            Instant::now() < deadline,
            "top did not quit on q:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Detached cleanly: both stay, and a new session attaches them.
    for t in [&a, &b] {
        assert!(common::pid_alive(t.pid));
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(common::bin())
            .args([
                "-p",
                &t.pid.to_string(),
                "--kernel-trace",
                "--attach-duration-msec",
                "300ms",
                "-d",
            ])
            .arg(dir.path())
            .env("ROCPROF_ATTACH_CUDA_TOOL", tool())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn rocm_targets_are_sampled_by_one_session_per_refresh() {
    // The ROCm stand-in's tool writes a copy of this database (3 kernel dispatches) at every
    // detach, as rocprofiler-sdk writes its database at detach.
    let scratch = tempfile::tempdir().unwrap();
    let db = crate::rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = common::Target::spawn(common::TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let pid = t.pid.to_string();
    let tool = common::tool_lib();
    let mut top = Top::spawn(&[
        "-p",
        &pid,
        "-t",
        tool.to_str().unwrap(),
        "--batch",
        "--interval",
        "200ms",
        "-n",
        "3",
    ]);
    let mut launches = Vec::new();
    for _ in 0..3 {
        let h = top.until("a header", |l| {
            l.starts_with("rocprof-attach top - interval")
        });
        assert!(h.contains("ROCm: a session of 0.20 s per refresh"), "{h}");
        assert!(
            h.contains("% of the time untraced"),
            "the cost, measured: {h}"
        );
        top.until("the kernel table", |l| {
            l.trim_start().starts_with("LAUNCHES")
        });
        let mut all = 0.0;
        // LAUNCHES TOTAL_MS MEAN_US %GPU ALL_LAUNCHES ...
        while let Some((n, _)) = top.line().as_deref().and_then(row) {
            all += n[4];
        }
        launches.push(all);
    }
    let (_, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    // Every refresh reads one session's database: 3 more launches since the start each time.
    assert_eq!(launches, [3.0, 6.0, 9.0], "{stderr}");
    assert!(t.alive());
}

#[test]
fn the_process_whose_gpu_idles_most_stands_out() {
    // 4 kernels every 1 ms against 4 every 40 ms: the second one's GPU idles far more.
    let busy = Target::spawn(&["--step-us", "1000"]);
    let idle = Target::spawn(&["--step-us", "40000"]);
    let pids = format!("{},{}", busy.pid, idle.pid);
    let mut top = Top::spawn(&["-p", &pids, "--batch", "--interval", "500ms"]);
    let line = top.until("the idle one marked", |l| l.contains("<- GPU idles most"));
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[0], idle.pid.to_string(), "{line}");
    // Its kernel table has a column per process.
    let header = top.until("a kernel table", |l| l.trim_start().starts_with("LAUNCHES"));
    for t in [&busy, &idle] {
        assert!(header.contains(&format!("PID_{}_MS", t.pid)), "{header}");
    }
    top.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// The ranks of a torchrun job (`RANK` in each process's environment) are labelled by rank, as
/// MPI and Slurm ranks are: the CUDA tool keeps the rank variables in the process row.
#[test]
fn torchrun_ranks_are_labelled_by_rank() {
    let r0 = Target::spawn_with(
        &["--step-us", "2000"],
        &[("RANK", "0"), ("WORLD_SIZE", "2")],
    );
    let r1 = Target::spawn_with(
        &["--step-us", "2000"],
        &[("RANK", "1"), ("WORLD_SIZE", "2")],
    );
    let pids = format!("{},{}", r0.pid, r1.pid);
    let mut top = Top::spawn(&["-p", &pids, "--batch", "--interval", "300ms"]);
    for (t, rank) in [(&r0, "0"), (&r1, "1")] {
        let line = top.until("a ranked process row", |l| {
            l.split_whitespace().next() == Some(&t.pid.to_string())
                && l.split_whitespace().nth(1) != Some("-")
        });
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[1], rank, "{line}");
    }
    top.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn sigterm_restores_the_terminal_and_detaches() {
    if !prereq::tmux() {
        return;
    }
    let t = Target::spawn(&["--step-us", "2000"]);
    let tmux = Tmux::new("sigterm");
    // A shell stays in the pane after top, to show what top left on the screen.
    let command = format!(
        "env ROCPROF_ATTACH_CUDA_TOOL={} {} top -p {} --interval 300ms; echo top-exited-$?; \
         stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; exec sleep 120",
        tool().display(),
        common::bin().display(),
        t.pid
    );
    tmux.session(100, 30, &command);
    tmux.wait_screen("the kernels", |s| s.contains("gemm_kerne"));
    let format = |f: &str| {
        String::from_utf8_lossy(&tmux.cmd(&["display-message", "-p", "-t", "top", f]).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(
        format("#{alternate_on}"),
        "1",
        "the view uses the alternate screen"
    );
    let shell: i32 = format("#{pane_pid}").parse().unwrap();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let top_pid: i32 = children
        .split_whitespace()
        .next()
        .expect("top runs")
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top_pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    // The shell's lines after top: its exit status, then stty's `icanon` or `-icanon`.
    let s = tmux.wait_screen("top's exit and stty", |s| {
        s.contains("top-exited-") && s.lines().any(|l| l.trim().ends_with("icanon"))
    });
    assert!(s.contains("top-exited-0"), "{s}");
    assert!(
        s.lines().any(|l| l.trim() == "icanon"),
        "raw mode is off again: {s}"
    );
    assert!(s.contains("a signal asked to stop; detached after"), "{s}");
    assert_eq!(format("#{alternate_on}"), "0", "the main screen is back");
    assert!(common::pid_alive(t.pid));
}

#[test]
fn usage_errors_say_what_to_do() {
    let run = |args: &[&str]| {
        let out = Command::new(common::bin())
            .arg("top")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass -p PID"), "{err}");
    let (code, err) = run(&["-p", "1", "--interval", "10ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--interval 10ms is too short"), "{err}");
    let (code, err) = run(&["-p", "1", "--all"]);
    assert_eq!(code, 2, "{err}");
    let (code, err) = run(&["-p", "1", "--batch", "--json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rocprof-attach top --help"), "{err}");
    let (code, err) = run(&["-p", "2147483000", "--batch"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn another_users_process_writes_into_the_temporary_directory() {
    if !prereq::root("to run the target as another user") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // The target (nobody) copies this database at every detach; top keeps no files (no -d), so
    // the tool writes into top's temporary directory, which must then be nobody's.
    let scratch = common::public_dir();
    let db = crate::rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let t = common::Target::spawn(common::TargetOpts {
        uid: Some(65534),
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let tool_dir = common::public_dir();
    let tool = common::public_copy(&common::tool_lib(), tool_dir.path());
    let pid = t.pid.to_string();
    let top = Top::spawn(&[
        "-p",
        &pid,
        "-t",
        tool.to_str().unwrap(),
        "--json",
        "--interval",
        "200ms",
        "-n",
        "2",
    ]);
    let (lines, code, stderr) = top.finish();
    assert_eq!(code, 0, "{stderr}");
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["type"], "final");
    let launches: u64 = last["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["since_start"]["launches"].as_u64().unwrap())
        .sum();
    // Three sessions (two refreshes and the last one at the end), 3 dispatches each.
    assert_eq!(launches, 9, "{last}");
}
