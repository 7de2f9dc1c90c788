//! The GPU-free CUDA stand-ins themselves (tests/fixtures/cuda): the fake CUPTI's self-test, and
//! the target's threads as an injector will find them. The CUDA backend's tests rely on both.

use crate::common::cuda;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn run_selftest(held: bool) -> String {
    let standins = cuda::build_standins();
    let selftest = cuda::build_selftest();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(selftest);
    cmd.arg(&standins.libcupti)
        .arg(dir.path().join("state"))
        .env_remove("FAKE_CUPTI_HELD")
        .env_remove("FAKE_CUDA_NO_EVENT_THREAD")
        .env_remove("FAKE_CUDA_DEVICES");
    if held {
        cmd.arg("held").env("FAKE_CUPTI_HELD", "1");
    }
    let out = cmd.output().expect("run selftest");
    assert!(
        out.status.success(),
        "selftest failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fake_cupti_selftest() {
    assert_eq!(run_selftest(false), "selftest ok\n");
}

#[test]
fn fake_cupti_held_by_another_tool() {
    assert_eq!(run_selftest(true), "selftest held ok\n");
}

/// A running cuda_target; killed when dropped.
struct Target {
    child: Child,
    pid: i32,
    lines: mpsc::Receiver<String>,
}

impl Target {
    fn spawn(args: &[&str]) -> Target {
        let standins = cuda::build_standins();
        let mut child = Command::new(&standins.target)
            .arg("--with-cupti")
            .arg(&standins.libcupti)
            .args(args)
            .env_remove("FAKE_CUDA_NO_EVENT_THREAD")
            .env_remove("FAKE_CUDA_DEVICES")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cuda_target");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id() as i32;
        let t = Target { child, pid, lines };
        assert_eq!(t.next_line(), "ready");
        t
    }

    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from cuda_target within 20 s")
    }

    /// (tid, comm, first field of /proc/.../syscall) of every thread.
    fn threads(&self) -> Vec<(i32, String, String)> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid)).expect("task dir") {
            let e = e.expect("task entry");
            let tid: i32 = e.file_name().to_string_lossy().parse().expect("tid");
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let syscall = std::fs::read_to_string(e.path().join("syscall")).unwrap_or_default();
            let nr = syscall.split_whitespace().next().unwrap_or("").to_string();
            v.push((tid, comm.trim_end().to_string(), nr));
        }
        v
    }

    /// Poll (bounded) until `f` holds for the thread list; returns the list.
    fn wait_threads(
        &self,
        what: &str,
        f: impl Fn(&[(i32, String, String)]) -> bool,
    ) -> Vec<(i32, String, String)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = self.threads();
            if f(&t) {
                return t;
            }
            assert!(Instant::now() < deadline, "{what}; threads: {t:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then the exit status (bounded wait).
    fn terminate(&mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("kill");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(Instant::now() < deadline, "cuda_target ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Syscall numbers (x86_64) that /proc/TID/syscall shows first.
const SYS_POLL: &str = "7";
const SYS_FUTEX: &str = "202";

#[test]
fn target_has_the_threads_of_a_cuda_process() {
    let mut t = Target::spawn(&["--step-us", "1000"]);
    assert_eq!(t.next_line(), "step 100");
    let threads = t.wait_threads("cuda-EvtHandlr in poll, the idle worker in futex", |th| {
        th.iter()
            .any(|(_, c, s)| c == "cuda-EvtHandlr" && s == SYS_POLL)
            && th
                .iter()
                .any(|(_, c, s)| c == "dataloader-idle" && s == SYS_FUTEX)
    });
    let names: Vec<&str> = threads.iter().map(|(_, c, _)| c.as_str()).collect();
    for want in [
        "cuda_target",
        "cuda-EvtHandlr",
        "dataloader-idle",
        "cpu-busy",
    ] {
        assert!(names.contains(&want), "no thread {want}: {threads:?}");
    }
    // The event thread's syscall line starts with poll's number: what an injector looking for a
    // thread parked in a plain syscall reads.
    let (tid, _, _) = threads
        .iter()
        .find(|(_, c, _)| c == "cuda-EvtHandlr")
        .unwrap();
    let line = std::fs::read_to_string(format!("/proc/{}/task/{tid}/syscall", t.pid)).unwrap();
    assert!(line.starts_with("7 "), "cuda-EvtHandlr syscall: {line}");
    // CUPTI is mapped before anyone profiles the process.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid)).expect("maps");
    assert!(maps.contains("libcupti.so.13") && maps.contains("libcuda.so.1"));
    assert_eq!(t.terminate().code(), Some(0));
}

#[test]
fn target_without_a_safe_thread() {
    let mut t = Target::spawn(&["--no-safe-thread", "--step-us", "2000"]);
    // Every thread either runs (on a CPU: "running"; preempted: "-1 sp pc") or waits in a futex,
    // sampled a number of times.
    for _ in 0..20 {
        let threads = t.threads();
        assert!(
            !threads.iter().any(|(_, c, _)| c == "cuda-EvtHandlr"),
            "event thread started: {threads:?}"
        );
        for (_, comm, nr) in &threads {
            assert!(
                nr == "running" || nr == "-1" || nr == SYS_FUTEX,
                "thread {comm} in syscall {nr}: {threads:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(7));
    }
    assert_eq!(t.terminate().code(), Some(0));
}

#[test]
fn target_stops_after_steps() {
    let standins = cuda::build_standins();
    let out = Command::new(&standins.target)
        .args([
            "--steps",
            "200",
            "--step-us",
            "100",
            "--malloc",
            "--kernels-per-step",
            "2",
        ])
        .output()
        .expect("run cuda_target");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(lines[0], "ready");
    assert_eq!(&lines[1..], ["step 100", "step 200"]);
}
