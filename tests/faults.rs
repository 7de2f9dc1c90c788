//! Fault injection at every step of attach and detach (issue 5).
//!
//! Each trial runs the real `rocprof-attach` binary (built with `--features fault-injection`)
//! against the C stand-in target, pauses the injection agent at one named step (src/faults.rs),
//! does one harmful thing while it is paused, releases it, and then checks:
//!
//! * rocprof-attach exits, with the documented code for that outcome (docs/exit-codes.md);
//! * the paused agent exits too (nobody stays behind tracing the target);
//! * a target that was not killed is alive with its heartbeat, nothing traces it, and it is
//!   exactly as before: the same mappings, the same bytes at the injection site (AT_ENTRY, read
//!   through /proc/PID/mem), the same listener registers (read by a bounded PTRACE_INTERRUPT once
//!   the listener is back in its futex wait) and the same blocked-signal mask (SigBlk);
//! * the stand-in's log shows exactly the register calls that outcome implies;
//! * a final clean session succeeds (exit 0, one attach and one detach record).
//!
//! Mappings rule: a completed attach legitimately dlopens the stand-in tool (it is never
//! unloaded, like rocprofv3's tool). So every target first goes through one clean reference
//! session; the snapshot taken after it (tool loaded, the listener's malloc arena already
//! created by the stand-in at start-up) is what every later state must equal, line for line,
//! whatever the outcome. Any page we mapped and did not unmap shows up as a difference.
//!
//! Actions at each step: (a) SIGKILL the target, (b) SIGTERM rocprof-attach, (c) SIGKILL
//! rocprof-attach (the front end's PID, not the paused agent). `grid_*` runs the full 9x3 grid;
//! `random_*` runs seeded random trials (FAULTS_TRIALS per shard, FAULTS_SEED to replay; the seed
//! is printed). tests/scripts/soak.sh runs the random trials 10,000 times.

#![cfg(feature = "fault-injection")]

use crate::common;

use common::{records, rocprof_attach, tool_lib, wait_until, Pristine, Target, TargetOpts};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rocprof_attach::engine::faults::Step;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    KillTarget,
    TermFrontEnd,
    KillFrontEnd,
}

const ACTIONS: [Action; 3] = [
    Action::KillTarget,
    Action::TermFrontEnd,
    Action::KillFrontEnd,
];

/// A target with its reference snapshot.
struct Subject {
    t: Target,
    pristine: Pristine,
    records: usize,
}

impl Subject {
    fn new() -> Subject {
        let t = Target::spawn(TargetOpts::default());
        // The reference session: loads the tool, which stays loaded (see the module docs).
        let (code, _, stderr) = session(&t, &[]).finish();
        assert_eq!(code, 0, "reference session: {stderr}");
        let pristine = Pristine::take(&t);
        let records = records(&t).len();
        assert_eq!(records, 2);
        Subject {
            t,
            pristine,
            records,
        }
    }

    /// New "kind=status" records since the last call.
    fn new_records(&mut self) -> Vec<String> {
        let all = records(&self.t);
        let new = all[self.records..]
            .iter()
            .map(|r| format!("{}={}", r.kind, r.get("status")))
            .collect();
        self.records = all.len();
        new
    }
}

/// Start a short session (50 ms window) on `t`, with extra environment.
fn session(t: &Target, env: &[(&str, &str)]) -> common::Run {
    let out = t.dir.path().join("out");
    let (pid, out, tool) = (
        t.pid.to_string(),
        out.to_str().unwrap().to_string(),
        tool_lib().to_str().unwrap().to_string(),
    );
    rocprof_attach(
        &[
            "--attach",
            &pid,
            "--kernel-trace",
            "-d",
            &out,
            "-o",
            "run",
            "-t",
            &tool,
            "--attach-duration-msec",
            "50",
        ],
        env,
    )
}

/// A FIFO for the pause, held open read-write by the test so the paused process never blocks on
/// open and the release line stays in the pipe until it is read.
struct Pause {
    _dir: tempfile::TempDir,
    fifo: PathBuf,
    keep: std::fs::File,
}

impl Pause {
    fn new() -> Pause {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pause");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let keep = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        Pause {
            _dir: dir,
            fifo,
            keep,
        }
    }

    fn marker(&self) -> PathBuf {
        PathBuf::from(format!("{}.paused", self.fifo.display()))
    }

    /// Wait (bounded) for a process to pause; returns (step name, pid of the paused process).
    fn wait_paused(&self, context: &str) -> (String, i32) {
        let marker = self.marker();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let text = loop {
            let text = std::fs::read_to_string(&marker).unwrap_or_default();
            if text.ends_with('\n') {
                break text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{context}: nothing paused within 20 s (is {} built with --features fault-injection?)",
                common::bin().display()
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        let mut it = text.split_whitespace();
        let step = it.next().unwrap().to_string();
        let pid = it.next().unwrap().parse().unwrap();
        (step, pid)
    }

    fn release(&mut self) {
        self.keep.write_all(b"go\n").unwrap();
    }
}

fn fifo_env(p: &Pause, step: Step) -> [(String, String); 2] {
    [
        ("ROCPROF_ATTACH_FAULT_STEP".into(), step.name().into()),
        (
            "ROCPROF_ATTACH_FAULT_FIFO".into(),
            p.fifo.to_str().unwrap().into(),
        ),
    ]
}

/// Exit code rocprof-attach must report, and the stand-in calls the target must have seen.
fn expected(action: Action) -> (i32, &'static [&'static str]) {
    match action {
        // The target dies under a paused agent: "target exited during the session" (7), whether
        // it died during the attach or, once attached, before its detach call (so the tool never
        // wrote output; the message says so) (docs/exit-codes.md).
        Action::KillTarget => (7, &[]),
        // SIGTERM is deferred until the listener is restored, then the session detaches cleanly.
        Action::TermFrontEnd => (0, &["attach=0", "detach=0"]),
        // The front end dies; the agent finishes its sequence alone and restores the thread, then
        // finishes the session (the will it was handed before the attach): the detach call runs
        // once (a detach in flight is not sent again) and the claim is released.
        Action::KillFrontEnd => (128 + 9, &["attach=0", "detach=0"]),
    }
}

fn trial(subject: &mut Option<Subject>, step: Step, action: Action, label: &str) {
    let s = subject.get_or_insert_with(Subject::new);
    let context = format!("{label}: step {} action {action:?}", step.name());
    let mut pause = Pause::new();
    let env = fifo_env(&pause, step);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut run = session(&s.t, &env);
    let front = run.child.id() as i32;
    let (name, agent) = pause.wait_paused(&context);
    assert_eq!(name, step.name(), "{context}");
    assert_ne!(
        agent, front,
        "{context}: the agent pauses, not the front end"
    );
    match action {
        Action::KillTarget => kill(Pid::from_raw(s.t.pid), Signal::SIGKILL).unwrap(),
        Action::TermFrontEnd => run.signal(Signal::SIGTERM),
        Action::KillFrontEnd => {
            run.signal(Signal::SIGKILL);
            wait_until(Duration::from_secs(10), || {
                run.child.try_wait().unwrap().is_some()
            });
        }
    }
    pause.release();
    let (code, _, stderr) = run.finish();
    // The agent never stays behind (it is orphaned when the front end was killed).
    wait_until(Duration::from_secs(20), || !common::pid_alive(agent));
    let (want_code, want_calls) = expected(action);
    assert_eq!(code, want_code, "{context}: exit code; stderr:\n{stderr}");
    if action == Action::KillTarget {
        assert!(stderr.contains("exited"), "{context}: {stderr}");
        let mut dead = subject.take().unwrap();
        dead.t.kill();
        return;
    }
    assert_eq!(s.new_records(), want_calls, "{context}: register calls");
    assert!(s.t.alive(), "{context}: target died");
    s.t.assert_heartbeat();
    s.pristine.assert_same(&s.t, &context);
    // And it can be attached again: after a killed front end too, with no `--detach` (its agent
    // finished the session).
    let (code, _, stderr) = session(&s.t, &[]).finish();
    assert_eq!(code, 0, "{context}: final clean session: {stderr}");
    assert_eq!(s.new_records(), ["attach=0", "detach=0"], "{context}");
    s.pristine
        .assert_same(&s.t, &format!("{context}, after the clean session"));
}

/// A session whose detach failed may still be active: a new session is refused with the fix
/// until `rocprof-attach --detach -p PID` finishes it.
fn finish_stranded(t: &Target, context: &str) {
    let (code, _, stderr) = session(t, &[]).finish();
    assert_eq!(
        code, 4,
        "{context}: refused while a session is active: {stderr}"
    );
    let fix = format!("rocprof-attach --detach -p {}", t.pid);
    assert!(stderr.contains(&fix), "{context}: {stderr}");
    let pid = t.pid.to_string();
    let (code, _, stderr) = rocprof_attach(&["--detach", "-p", &pid], &[]).finish();
    assert_eq!(code, 0, "{context}: --detach: {stderr}");
}

fn grid(step: Step) {
    let mut subject = None;
    for action in ACTIONS {
        trial(&mut subject, step, action, "grid");
    }
}

#[test]
fn grid_seize() {
    grid(Step::Seize);
}
#[test]
fn grid_interrupt() {
    grid(Step::Interrupt);
}
#[test]
fn grid_map() {
    grid(Step::Map);
}
#[test]
fn grid_write() {
    grid(Step::Write);
}
#[test]
fn grid_call() {
    grid(Step::Call);
}
#[test]
fn grid_unmap() {
    grid(Step::Unmap);
}
#[test]
fn grid_release() {
    grid(Step::Release);
}
#[test]
fn grid_reseize() {
    grid(Step::Reseize);
}
#[test]
fn grid_detach_call() {
    grid(Step::DetachCall);
}

/// splitmix64: a tiny seeded generator (no extra dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
}

fn seed() -> u64 {
    std::env::var("FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// `FAULTS_TRIALS` random trials (default 25 per shard; 4 shards = 100 in CI).
fn random(shard: u64) {
    let n: u64 = std::env::var("FAULTS_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let base = seed();
    let seed = base.wrapping_add(shard);
    eprintln!("faults: shard {shard}: {n} random trials, FAULTS_SEED={base} replays them");
    let mut rng = Rng(seed);
    let mut subject = None;
    for i in 0..n {
        let step = Step::ALL[(rng.next() % Step::ALL.len() as u64) as usize];
        let action = ACTIONS[(rng.next() % ACTIONS.len() as u64) as usize];
        let label = format!("FAULTS_SEED={base} shard {shard} trial {i}");
        trial(&mut subject, step, action, &label);
        if (i + 1) % 500 == 0 {
            eprintln!("faults: shard {shard}: {} trials passed", i + 1);
        }
    }
    eprintln!("faults: shard {shard}: {n} trials passed (FAULTS_SEED={base})");
}

#[test]
fn random_shard_0() {
    random(0);
}
#[test]
fn random_shard_1() {
    random(1);
}
#[test]
fn random_shard_2() {
    random(2);
}
#[test]
fn random_shard_3() {
    random(3);
}

/// Job control stops the target at one step of the detach, with `--stopped-timeout 300ms`:
/// returns the front end's exit code and stderr, and the agent's pid.
fn stopped_at(s: &Subject, step: Step) -> (i32, String, i32) {
    let mut pause = Pause::new();
    let env = fifo_env(&pause, step);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (pid, out, tool) = (
        s.t.pid.to_string(),
        s.t.dir.path().join("out").to_str().unwrap().to_string(),
        tool_lib().to_str().unwrap().to_string(),
    );
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        &out,
        "-t",
        &tool,
        "--attach-duration-msec",
        "50",
        "--stopped-timeout",
        "300ms",
    ];
    let run = rocprof_attach(&args, &env);
    let (name, agent) = pause.wait_paused(step.name());
    assert_eq!(name, step.name());
    kill(Pid::from_raw(s.t.pid), Signal::SIGSTOP).unwrap();
    // Stopped for good: the main thread is in its group-stop (the listener, traced by the paused
    // agent, enters its own as soon as it may run).
    wait_until(Duration::from_secs(10), || {
        common::thread_state(s.t.pid, s.t.pid) == Some('T')
    });
    pause.release();
    let (code, _, stderr) = run.finish();
    (code, stderr, agent)
}

/// The stopped-target message: exit 11, the bound, the fix, and nothing of a missing output.
fn assert_stopped_failure(code: i32, stderr: &str, pid: i32, what: &str) {
    assert_eq!(code, 11, "{what}: {stderr}");
    assert!(stderr.contains("is stopped"), "{what}: {stderr}");
    assert!(stderr.contains("within 300 ms"), "{what}: {stderr}");
    assert!(
        stderr.contains(&format!("kill -CONT {pid}")),
        "{what}: {stderr}"
    );
    assert!(!stderr.contains("timed out"), "{what}: {stderr}");
}

#[test]
fn job_control_between_the_state_check_and_the_interrupt_is_a_bounded_detach_failure() {
    let mut s = Subject::new();
    let (code, stderr, agent) = stopped_at(&s, Step::Reseize);
    assert_stopped_failure(code, &stderr, s.t.pid, "stopped after the seize");
    // The agent released the thread without touching it, and left.
    wait_until(Duration::from_secs(20), || !common::pid_alive(agent));
    kill(Pid::from_raw(s.t.pid), Signal::SIGCONT).unwrap();
    assert_eq!(s.new_records(), ["attach=0"], "never detached");
    assert!(s.t.alive());
    s.t.assert_heartbeat();
    s.pristine.assert_same(&s.t, "stopped after the seize");
}

#[test]
fn job_control_during_the_detach_call_is_a_bounded_failure_and_the_call_ends_on_sigcont() {
    let mut s = Subject::new();
    let (code, stderr, agent) = stopped_at(&s, Step::DetachCall);
    assert_stopped_failure(code, &stderr, s.t.pid, "stopped during the call");
    assert!(
        stderr.contains("the call finishes"),
        "says what happens next: {stderr}"
    );
    // The agent stays with the thread, which runs our call; once continued, the call returns, the
    // thread is restored and the agent leaves.
    assert!(common::pid_alive(agent), "the agent waits for the call");
    kill(Pid::from_raw(s.t.pid), Signal::SIGCONT).unwrap();
    wait_until(Duration::from_secs(20), || !common::pid_alive(agent));
    assert_eq!(s.new_records(), ["attach=0", "detach=0"]);
    s.t.assert_heartbeat();
    s.pristine.assert_same(&s.t, "stopped during the call");
    // Exit 11 left the session recorded as active: --detach finishes it (a second detach call).
    finish_stranded(&s.t, "stopped during the call");
    assert_eq!(s.new_records(), ["detach=0"]);
    let (code, _, stderr) = session(&s.t, &[]).finish();
    assert_eq!(code, 0, "a clean session afterwards: {stderr}");
}

#[test]
fn job_control_between_the_preflight_and_the_attach_interrupt_refuses_untouched() {
    let mut s = Subject::new();
    let (code, stderr, agent) = stopped_at(&s, Step::Seize);
    assert_eq!(
        code, 4,
        "like a target stopped before the preflight: {stderr}"
    );
    assert!(stderr.contains("is stopped"), "{stderr}");
    assert!(
        stderr.contains(&format!("kill -CONT {}", s.t.pid)),
        "{stderr}"
    );
    assert!(!stderr.contains("timed out"), "{stderr}");
    wait_until(Duration::from_secs(20), || !common::pid_alive(agent));
    kill(Pid::from_raw(s.t.pid), Signal::SIGCONT).unwrap();
    assert!(s.new_records().is_empty(), "no register call");
    s.t.assert_heartbeat();
    s.pristine
        .assert_same(&s.t, "stopped before the attach interrupt");
    let (code, _, stderr) = session(&s.t, &[]).finish();
    assert_eq!(code, 0, "a clean session afterwards: {stderr}");
}
