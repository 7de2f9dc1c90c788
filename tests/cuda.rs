//! The CUDA backend end to end (issue 20, docs/cuda.md), on the GPU-free stand-ins of
//! tests/fixtures/cuda: a plain process that maps a fake `libcuda.so.1` (and, like PyTorch, a
//! `libcupti.so.13` built on NVIDIA's real CUPTI headers) is attached with no opt-in, traced,
//! detached, attached again; what CUDA cannot do, a process with no safe thread and a CUPTI held
//! by another subscriber are refused with the target untouched; a front end killed at each step
//! of the spawn or during the window leaves the target alive, attachable, and with no activity
//! enabled.
//!
//! The fake CUPTI writes its state (`subscribed=… callbacks=… enabled=… dropped=… zeroed=… dirty=…`) to the file
//! named by `FAKE_CUPTI_STATE` after every change: that is how the tests see what is enabled.

use crate::common;
use crate::common::cuda;

use common::{rocprof_attach, wait_until};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `rocprof-attach CMD -i DB -f FORMAT... -d DIR` (`convert` or `summary`), which must succeed.
pub(crate) fn run_on_db(cmd: &str, db: &Path, formats: &[&str], dir: &Path) {
    let mut args = vec![cmd, "-i", db.to_str().unwrap(), "-f"];
    args.extend_from_slice(formats);
    args.extend(["-d", dir.to_str().unwrap()]);
    let (code, _, err) = common::rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{cmd}: {err}");
}

/// Our CUDA tool library, built beside the binary.
pub(crate) fn tool() -> PathBuf {
    common::built_library("rocprof-cuda-tool", "librocprof_cuda_tool.so")
}

/// A running stand-in target and its scratch directory.
pub(crate) struct Target {
    pub(crate) child: Child,
    pub(crate) pid: i32,
    pub(crate) dir: tempfile::TempDir,
    /// The target's stdout lines after `ready`.
    pub(crate) lines: std::sync::mpsc::Receiver<String>,
}

impl Target {
    /// Start the target (with its CUPTI mapped unless `--no-cupti` is in `args`) and wait for
    /// its `ready` line.
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)]) -> Target {
        let s = cuda::build_standins();
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(&s.target);
        if !args.contains(&"--no-cupti") {
            cmd.arg("--with-cupti").arg(&s.libcupti);
        }
        cmd.args(args.iter().filter(|a| **a != "--no-cupti"))
            .env("FAKE_CUPTI_STATE", dir.path().join("state"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // No core file from a target a test ends with abort().
        // SAFETY: setrlimit only, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("start cuda_target");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("cuda_target prints ready within 20 s");
            if line == "ready" {
                break;
            }
        }
        let pid = child.id() as i32;
        Target {
            child,
            pid,
            dir,
            lines: rx,
        }
    }

    /// The fake CUPTI's last state line ("" before its first change).
    pub(crate) fn state(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state")).unwrap_or_default()
    }

    /// Enabled activity kinds (CUPTI's numbers), as the fake CUPTI last wrote them.
    pub(crate) fn enabled(&self) -> Vec<u32> {
        let state = self.state();
        let list = state
            .split_whitespace()
            .find_map(|f| f.strip_prefix("enabled="))
            .unwrap_or("");
        list.split(',').filter_map(|k| k.parse().ok()).collect()
    }

    fn threads(&self) -> Vec<String> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid)).unwrap() {
            let tid = e.unwrap().file_name();
            let comm = std::fs::read_to_string(format!(
                "/proc/{}/task/{}/comm",
                self.pid,
                tid.to_str().unwrap()
            ))
            .unwrap_or_default();
            names.push(comm.trim().to_string());
        }
        names
    }

    /// The mapped files and the executable mappings (anonymous data mappings and the heap come
    /// and go as malloc grows and shrinks them).
    fn maps(&self) -> Vec<String> {
        let text = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        text.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 5 && f[5] != "[heap]") || f.get(1).is_some_and(|p| p.contains('x'))
            })
            .map(str::to_string)
            .collect()
    }

    pub(crate) fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub(crate) fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run rocprof-attach on `t` with `args` (after `-p PID -d OUT`), our tool library given.
pub(crate) fn session(t: &Target, args: &[&str]) -> (i32, String, String) {
    let run = start(t, args, &[]);
    run.finish()
}

pub(crate) fn start(t: &Target, args: &[&str], env: &[(&str, &str)]) -> common::Run {
    let pid = t.pid.to_string();
    let out = t.out();
    let tool = tool();
    let mut all = vec!["-p", &pid, "-d", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut env: Vec<(&str, &str)> = env.to_vec();
    env.push(("ROCPROF_ATTACH_CUDA_TOOL", tool.to_str().unwrap()));
    rocprof_attach(&all, &env)
}

pub(crate) fn query(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        (0..n)
            .map(|i| {
                r.get::<_, rusqlite::types::Value>(i).map(|v| match v {
                    rusqlite::types::Value::Text(s) => s,
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Real(f) => f.to_string(),
                    rusqlite::types::Value::Null => "NULL".into(),
                    rusqlite::types::Value::Blob(_) => "blob".into(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

pub(crate) fn count(db: &Path, sql: &str) -> i64 {
    query(db, sql)[0][0].parse().unwrap()
}

const TRACE: [&str; 3] = ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"];

#[test]
fn a_plain_cuda_process_is_traced_and_left_with_nothing_enabled() {
    let mut t = Target::spawn(&[], &[]);
    let mut args = TRACE.to_vec();
    args.extend([
        "-o",
        "run",
        "--attach-duration-msec",
        "300",
        "--output-format",
        "csv,rocpd",
        "-v",
    ]);
    let (code, _, stderr) = session(&t, &args);
    assert_eq!(code, 0, "{stderr}");
    // In CUDA's words, and only about what was asked for: nothing of ROCm's listener or ROCTx,
    // no switch named as if typed when --runtime-trace implied it, and where the API rows went.
    for rocm in [
        "rocp-bg-attach",
        "listener",
        "rocprofiler_register_attach",
        "ROCTx",
        "--rccl-trace",
        "--marker-trace collected",
        "--memory-allocation-trace collected",
    ] {
        assert!(!stderr.contains(rocm), "{rocm}: {stderr}");
    }
    for cuda in [
        "through CUPTI",
        "rocp-cu-attach",
        "HIP_RUNTIME_API_CUDA",
        "_hip_api_trace.csv",
    ] {
        assert!(stderr.contains(cuda), "{cuda}: {stderr}");
    }
    let db = t.out().join("run_results.db");
    assert!(db.is_file(), "{} written: {stderr}", db.display());
    let kernels = count(&db, "SELECT COUNT(*) FROM kernels");
    assert!(kernels > 0, "kernels in the database");
    let names = query(&db, "SELECT DISTINCT name FROM kernels");
    assert!(
        names.iter().any(|n| n[0] == "_Z10gemm_kerneli"),
        "the target's kernel names: {names:?}"
    );
    assert!(
        count(&db, "SELECT COUNT(*) FROM memory_copies") > 0,
        "copies"
    );
    // API rows carry the kernel's thread ids: the main thread launches everything.
    let tids = query(&db, "SELECT DISTINCT tid FROM regions");
    assert_eq!(
        tids,
        vec![vec![t.pid.to_string()]],
        "API calls on the main thread"
    );
    assert!(
        t.out().join("run_kernel_trace.csv").is_file(),
        "the CSV conversion: {stderr}"
    );
    assert!(t.alive(), "the target lives");
    assert_eq!(
        t.enabled(),
        Vec::<u32>::new(),
        "nothing stays enabled: {}",
        t.state()
    );
    assert_eq!(
        t.threads()
            .iter()
            .filter(|n| *n == "rocp-cu-attach")
            .count(),
        1,
        "one tool thread stays: {:?}",
        t.threads()
    );
    // CUPTI itself is torn down (cuptiFinalize) at the target's next launch, from the launch's
    // exit callback: a CUPTI left initialised kept a PyTorch loop 55 % slower on the H200.
    wait_until(Duration::from_secs(10), || {
        t.state().contains(" finalized=1")
    });
    assert!(
        t.state().starts_with("subscribed=0 callbacks=0 "),
        "{}",
        t.state()
    );
}

#[test]
fn a_second_session_reuses_the_loaded_tool_without_ptrace() {
    let t = Target::spawn(&[], &[]);
    let (code, _, first) = session(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "a",
            "--attach-duration-msec",
            "100",
            "-vv",
        ],
    );
    assert_eq!(code, 0, "{first}");
    assert!(
        first.contains("spawn"),
        "the first session loads the tool: {first}"
    );
    let maps = t.maps();
    // Small buffers, so several are reused within the window: each must come back zeroed, as
    // the tool promised CUPTI.
    let (code, _, second) = start(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "a",
            "--attach-duration-msec",
            "600",
            "-vv",
        ],
        &[("ROCPROF_ATTACH_BUFFER_BYTES", "65536")],
    )
    .finish();
    let state = t.state();
    // (The promise itself is gone once CUPTI is torn down after the session: zeroed=0.)
    assert!(
        state.contains(" dirty=0 "),
        "buffers handed to CUPTI are zeroed: {state}"
    );
    assert_eq!(code, 0, "{second}");
    assert!(
        !second.contains("spawn:"),
        "no injection the second time: {second}"
    );
    assert!(
        t.out().join("a_1_results.db").is_file(),
        "a second database beside the first"
    );
    assert_eq!(t.maps(), maps, "nothing new mapped by the second session");
    // Each session ends with CUPTI torn down, and the next one starts it again.
    wait_until(Duration::from_secs(10), || {
        t.state().contains(" finalized=2")
    });
}

#[test]
fn sys_trace_enables_every_kind_and_detach_disables_them() {
    let t = Target::spawn(&["--malloc"], &[]);
    let run = start(
        &t,
        &["--sys-trace", "-o", "s", "--attach-duration-msec", "30s"],
        &[],
    );
    wait_until(Duration::from_secs(20), || t.enabled().len() >= 6);
    let on = t.enabled();
    for kind in [1, 2, 4, 5, 10, 49] {
        assert!(on.contains(&kind), "kind {kind} enabled: {on:?}");
    }
    run.signal(nix::sys::signal::Signal::SIGINT);
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(t.enabled(), Vec::<u32>::new(), "{}", t.state());
    assert!(
        stderr.contains("warning") && stderr.contains("NVTX_INJECTION64_PATH"),
        "the tool's caveat about NVTX is a warning of the session: {stderr}"
    );
    assert!(
        !stderr.contains("scratch"),
        "switches --sys-trace implies that CUDA lacks are named only with -v: {stderr}"
    );
    let db = t.out().join("s_results.db");
    assert!(
        count(&db, "SELECT COUNT(*) FROM memory_allocations") > 0,
        "allocations"
    );
}

#[test]
fn a_process_started_with_the_launch_time_path_is_attached_without_ptrace() {
    let tool = tool();
    // No thread parked anywhere: only the launch-time path can serve this process.
    let t = Target::spawn(
        &["--no-safe-thread"],
        &[("CUDA_INJECTION64_PATH", tool.to_str().unwrap())],
    );
    // The driver started the tool's thread in cuInit; it names itself as it starts.
    wait_until(Duration::from_secs(20), || {
        t.threads().iter().any(|n| n == "rocp-cu-attach")
    });
    let (code, _, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "l",
            "--attach-duration-msec",
            "100",
            "-vv",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("spawn:"), "no injection: {stderr}");
    assert!(
        count(
            &t.out().join("l_results.db"),
            "SELECT COUNT(*) FROM kernels"
        ) > 0
    );
}

#[test]
fn what_cuda_cannot_do_is_refused_by_name_and_nothing_is_touched() {
    let t = Target::spawn(&[], &[]);
    let maps = t.maps();
    let (code, _, stderr) = session(
        &t,
        &["--advanced-thread-trace", "--attach-duration-msec", "100"],
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--advanced-thread-trace"),
        "names the option: {stderr}"
    );
    assert_eq!(t.maps(), maps, "nothing loaded");
    assert!(!t.threads().iter().any(|n| n == "rocp-cu-attach"));
}

#[test]
fn a_process_with_no_parked_thread_is_refused_untouched() {
    let t = Target::spawn(&["--no-safe-thread"], &[]);
    let maps = t.maps();
    let (code, _, stderr) = session(&t, &["--kernel-trace", "--attach-duration-msec", "100"]);
    assert_eq!(code, 4, "not attachable: {stderr}");
    assert!(stderr.contains("none of its threads waits"), "{stderr}");
    assert_eq!(t.maps(), maps, "nothing loaded");
}

#[test]
fn a_cupti_held_by_another_subscriber_is_a_clear_error() {
    let mut t = Target::spawn(&[], &[("FAKE_CUPTI_HELD", "1")]);
    let (code, _, stderr) = session(&t, &["--kernel-trace", "--attach-duration-msec", "100"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("another") && stderr.contains("CUPTI"),
        "says another profiler holds CUPTI: {stderr}"
    );
    assert!(t.alive());
    assert_eq!(t.enabled(), Vec::<u32>::new());
}

#[test]
fn check_list_and_json_name_the_cuda_backend() {
    let t = Target::spawn(&[], &[]);
    let (code, out, stderr) = session(&t, &["--check"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.contains("backend:         cuda (it maps libcuda.so.1)"),
        "{out}"
    );
    assert!(out.contains("libcupti.so.13 (mapped already"), "{out}");
    assert!(out.contains("(cuda-EvtHandlr, waiting in poll)"), "{out}");
    let (code, out, _) = session(&t, &["--list"]);
    assert_eq!(code, 0);
    assert!(
        out.lines().nth(1).is_some_and(|l| l.contains(" cuda ")),
        "{out}"
    );
    let (_, out, _) = session(&t, &["--check", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["processes"][0]["backend"], "cuda", "{out}");
}

/// A process that maps no libcupti, with none where the tool looks: `--check` and a session say
/// so with the fix (exit 4, nothing touched); with ROCPROF_ATTACH_CUPTI naming one, `--check` says
/// which the tool will load.
#[test]
fn a_process_without_any_cupti_is_refused_with_the_fix() {
    let t = Target::spawn(&["--no-cupti"], &[]);
    let maps = t.maps();
    for args in [
        &["--check"][..],
        &["--kernel-trace", "--attach-duration-msec", "50"],
    ] {
        let (code, _, stderr) = start(&t, args, &[("ROCPROF_ATTACH_CUPTI", "")]).finish();
        assert_eq!(code, 4, "{args:?}: {stderr}");
        assert!(
            stderr.contains("maps no libcupti")
                && stderr.contains("ROCPROF_ATTACH_CUPTI=/path/to/libcupti.so"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(t.maps(), maps, "nothing loaded");
    let cupti = cuda::build_standins().libcupti;
    let (code, out, stderr) = start(
        &t,
        &["--check"],
        &[("ROCPROF_ATTACH_CUPTI", cupti.to_str().unwrap())],
    )
    .finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.contains(&format!("the tool will load {}", cupti.display())),
        "{out}"
    );
}

#[test]
fn a_front_end_killed_in_the_window_leaves_nothing_enabled_and_the_data_written() {
    let t = Target::spawn(&[], &[]);
    let mut run = start(&t, &["--kernel-trace", "-o", "k"], &[]);
    run.wait_for("attached to PID");
    wait_until(Duration::from_secs(20), || !t.enabled().is_empty());
    run.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = run.finish();
    wait_until(Duration::from_secs(30), || t.enabled().is_empty());
    let db = t.out().join("k_results.db");
    wait_until(Duration::from_secs(30), || db.is_file());
    // And the process can be attached again.
    let (code, _, stderr) = session(&t, &["--kernel-trace", "--attach-duration-msec", "100"]);
    assert_eq!(code, 0, "{stderr}");
}

/// SIGKILL of the front end at each step of the spawn: the agent finishes on its own, the target
/// lives, and a clean session succeeds afterwards.
#[cfg(feature = "fault-injection")]
#[test]
fn a_front_end_killed_at_each_spawn_step_leaves_an_attachable_target() {
    use rocprof_attach::engine::faults::Step;
    for step in [
        Step::Seize,
        Step::Interrupt,
        Step::Map,
        Step::Write,
        Step::Call,
        Step::Release,
    ] {
        let mut t = Target::spawn(&[], &[]);
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pause");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let mut keep = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let env = [
            ("ROCPROF_ATTACH_FAULT_STEP", step.name()),
            ("ROCPROF_ATTACH_FAULT_FIFO", fifo.to_str().unwrap()),
        ];
        let run = start(
            &t,
            &["--kernel-trace", "--attach-duration-msec", "100"],
            &env,
        );
        let marker = PathBuf::from(format!("{}.paused", fifo.display()));
        wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(&marker).is_ok_and(|s| s.ends_with('\n'))
        });
        run.signal(nix::sys::signal::Signal::SIGKILL);
        let _ = run.finish();
        keep.write_all(b"go\n").unwrap();
        // The agent restores and releases the thread on its own: nothing traces the target.
        wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(format!("/proc/{}/status", t.pid))
                .is_ok_and(|s| s.contains("TracerPid:\t0\n"))
                && std::fs::read_dir(format!("/proc/{}/task", t.pid))
                    .unwrap()
                    .all(|e| {
                        std::fs::read_to_string(format!(
                            "/proc/{}/task/{}/status",
                            t.pid,
                            e.unwrap().file_name().to_str().unwrap()
                        ))
                        .is_ok_and(|s| s.contains("TracerPid:\t0\n"))
                    })
        });
        assert!(t.alive(), "{}: the target lives", step.name());
        let (code, _, stderr) = session(
            &t,
            &[
                "--kernel-trace",
                "-o",
                "after",
                "--attach-duration-msec",
                "100",
            ],
        );
        assert_eq!(
            code,
            0,
            "{}: a clean session afterwards: {stderr}",
            step.name()
        );
        assert!(t.enabled().is_empty(), "{}: {}", step.name(), t.state());
    }
}

#[test]
fn a_second_concurrent_session_on_the_same_process_is_refused() {
    let t = Target::spawn(&[], &[]);
    let mut first = start(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "one",
            "--attach-duration-msec",
            "30s",
        ],
        &[],
    );
    first.wait_for("attached to PID");
    let (code, _, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "two",
            "--attach-duration-msec",
            "100",
        ],
    );
    assert_eq!(code, 4, "refused: {stderr}");
    first.signal(nix::sys::signal::Signal::SIGINT);
    let (code, _, stderr) = first.finish();
    assert_eq!(code, 0, "the first session is unharmed: {stderr}");
    assert!(t.out().join("one_results.db").is_file());
    assert!(!t.out().join("two_results.db").exists());
}

#[test]
fn the_rocattach_library_attaches_a_cuda_process_the_same_way() {
    let layout = crate::capi_common::Layout::install();
    let t = Target::spawn(&[], &[]);
    let (p, out, tool) = (t.pid.to_string(), t.out(), tool());
    let args = [
        "setenv",
        "ROCPROF_KERNEL_TRACE",
        "1",
        "setenv",
        "ROCPROF_OUTPUT_PATH",
        out.to_str().unwrap(),
        "setenv",
        "ROCPROF_OUTPUT_FILE_NAME",
        "capi",
        "attach",
        &p,
        "cpu_window",
        "200",
        "detach",
        &p,
    ];
    let env = [("ROCPROF_ATTACH_CUDA_TOOL", Some(tool.to_str().unwrap()))];
    let (lines, err) = crate::capi_common::run(&layout.lib(), &args, &env);
    assert_eq!(
        crate::capi_common::status_of(&lines, &format!("attach {p}")),
        0,
        "{err}"
    );
    assert_eq!(
        crate::capi_common::status_of(&lines, &format!("detach {p}")),
        0,
        "{err}"
    );
    let db = out.join("capi_results.db");
    assert!(count(&db, "SELECT COUNT(*) FROM kernels") > 0, "{err}");
    assert!(t.enabled().is_empty(), "{}", t.state());
}

/// `--match` picks CUDA processes, but not one that maps libcuda.so.1 without having started
/// CUDA (a launcher such as torchrun, which imports torch): it is named in a warning with the way
/// to attach it anyway, and the training process beside it is traced.
#[test]
fn match_leaves_out_a_launcher_that_has_not_started_cuda() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tag = format!("match{}x{nanos}", std::process::id());
    let launcher = Target::spawn(&["--launcher", "--tag", &tag], &[]);
    let t = Target::spawn(&["--tag", &tag], &[]);
    let out = t.out();
    let tool = tool();
    let run = rocprof_attach(
        &[
            "--match",
            &tag,
            "-d",
            out.to_str().unwrap(),
            "-o",
            "%pid%",
            "--kernel-trace",
            "--attach-duration-msec",
            "200",
        ],
        &[("ROCPROF_ATTACH_CUDA_TOOL", tool.to_str().unwrap())],
    );
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("process {} maps libcuda.so.1", launcher.pid))
            && stderr.contains(&format!("--pid {}", launcher.pid)),
        "the launcher is named, with how to attach it anyway: {stderr}"
    );
    assert!(
        out.join(format!("{}_results.db", t.pid)).is_file(),
        "the training process is traced: {stderr}"
    );
    assert!(
        !out.join(format!("{}_results.db", launcher.pid)).exists(),
        "the launcher is left alone: {stderr}"
    );
    assert!(
        !launcher.threads().iter().any(|n| n == "rocp-cu-attach"),
        "no tool loaded into the launcher"
    );
}
