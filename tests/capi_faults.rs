//! The host of the C library SIGKILLed at each injection step (the fault-injection pause points
//! of crates/engine/src/faults.rs): the session's agent server finishes the sequence on its own,
//! then the session (its will: one detach, never a second one), the target is left exactly as
//! before (registers, code, mappings, signal mask, nobody tracing it) with its heartbeat, and it
//! can be attached again through the library at once.

#![cfg(feature = "fault-injection")]

use crate::capi_common;
use crate::common;

use capi_common::{calls_of, host, run, status_of, Layout};
use common::{wait_until, Pristine, Target, TargetOpts};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rocprof_attach::engine::faults::Step;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// A FIFO the paused agent waits on; the test holds it open read-write.
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

    /// (step, pid of the paused process), bounded.
    fn wait_paused(&self) -> (String, i32) {
        let marker = format!("{}.paused", self.fifo.display());
        let mut text = String::new();
        wait_until(Duration::from_secs(30), || {
            text = std::fs::read_to_string(&marker).unwrap_or_default();
            text.ends_with('\n')
        });
        let mut it = text.split_whitespace();
        (
            it.next().unwrap().into(),
            it.next().unwrap().parse().unwrap(),
        )
    }

    fn release(&mut self) {
        self.keep.write_all(b"go\n").unwrap();
    }
}

fn host_killed_at(step: Step) {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let p = t.pid.to_string();
    // Reference session (loads the stand-in tool, which stays loaded), then the snapshot.
    let (out, err) = run(&layout.lib(), &["attach", &p, "detach", &p], &[]);
    assert_eq!(status_of(&out, &format!("detach {p}")), 0, "{err}");
    let pristine = Pristine::take(&t);
    let before = calls_of(&t.log, t.pid).len();

    let mut pause = Pause::new();
    let fifo = pause.fifo.to_str().unwrap().to_string();
    let mut h = host(
        &layout.lib(),
        &["attach", &p, "detach", &p],
        &[
            ("ROCPROF_ATTACH_FAULT_STEP", Some(step.name())),
            ("ROCPROF_ATTACH_FAULT_FIFO", Some(&fifo)),
        ],
    );
    let host_pid = h.child.id() as i32;
    let (name, agent) = pause.wait_paused();
    let context = format!("host killed at {name}");
    assert_eq!(name, step.name());
    assert_ne!(
        agent, host_pid,
        "{context}: the agent server pauses, not the host"
    );
    kill(Pid::from_raw(host_pid), Signal::SIGKILL).unwrap();
    let (code, _, _) = {
        wait_until(Duration::from_secs(10), || {
            h.child.try_wait().unwrap().is_some()
        });
        pause.release();
        h.finish()
    };
    assert_eq!(code, 128 + 9, "{context}");
    // The agent server finishes the sequence and the session alone, then nothing of ours is
    // left: one attach and one detach, whether the host had sent the detach or not.
    wait_until(Duration::from_secs(30), || !common::pid_alive(agent));
    let calls = calls_of(&t.log, t.pid)[before..].to_vec();
    assert_eq!(calls, ["attach=0", "detach=0"], "{context}: register calls");
    assert!(t.alive(), "{context}: target died");
    t.assert_heartbeat();
    pristine.assert_same(&t, &context);
    // The killed host's session is finished and its claim released: the target is attachable
    // again through the library at once (a reattach with the same tool is accepted).
    let args = ["attach", &p, "detach", &p];
    let (out, err) = run(&layout.lib(), &args, &[]);
    let statuses: Vec<i32> = out
        .iter()
        .filter(|l| l.starts_with("attach ") || l.starts_with("detach "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(statuses, [0, 0], "{context}: {out:?} {err}");
    pristine.assert_same(&t, &format!("{context}, after a clean session"));
}

#[test]
fn host_killed_at_seize() {
    host_killed_at(Step::Seize);
}

#[test]
fn host_killed_at_interrupt() {
    host_killed_at(Step::Interrupt);
}

#[test]
fn host_killed_at_map() {
    host_killed_at(Step::Map);
}

#[test]
fn host_killed_at_write() {
    host_killed_at(Step::Write);
}

#[test]
fn host_killed_at_call() {
    host_killed_at(Step::Call);
}

#[test]
fn host_killed_at_unmap() {
    host_killed_at(Step::Unmap);
}

#[test]
fn host_killed_at_release() {
    host_killed_at(Step::Release);
}

#[test]
fn host_killed_at_reseize() {
    host_killed_at(Step::Reseize);
}

#[test]
fn host_killed_at_detach_call() {
    host_killed_at(Step::DetachCall);
}
