//! A front end killed at any moment leaves no work for a person (issue 29, item 2): during its
//! attach call, its window or its detach call, the agent server it forked finishes the session
//! itself (its will: detach, output written, claim released), so a plain attach right afterwards
//! works; only when the agent is killed too is
//! `rocprof-attach --detach -p PID` needed, and it then expands the session's output template,
//! lists and checks the files, takes `-d`, and supports `--json`.

use crate::claims::{s, short, window};
use crate::common;

use common::{
    pid_alive, records, rocprof_attach, tool_lib, tracer_pid, wait_until, Target, TargetOpts,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::time::Duration;

fn kinds(t: &Target) -> Vec<String> {
    records(t).iter().map(|r| r.kind.clone()).collect()
}

/// The processes whose parent is `pid` (the front end's agent server).
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| {
                st.rfind(')')
                    .and_then(|i| st[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn files_in(dir: &Path) -> usize {
    walk(dir).len()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// SIGKILL the front end of `run` and wait (bounded) until it is gone.
fn kill_front_end(mut run: common::Run) {
    run.signal(Signal::SIGKILL);
    wait_until(Duration::from_secs(10), || {
        run.child.try_wait().unwrap().is_some()
    });
}

#[test]
fn a_front_end_killed_in_its_window_is_finished_by_its_agent() {
    let t = Target::spawn(TargetOpts::default());
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let run = window(&t, first.path(), &[]);
    let agent = children_of(run.child.id());
    assert_eq!(agent.len(), 1, "one agent server: {agent:?}");
    kill_front_end(run);
    // A plain attach at once: it waits (bounded) for the agent to finish, then runs.
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(kinds(&t), ["attach", "detach", "attach", "detach"]);
    assert!(
        files_in(first.path()) > 0,
        "the killed session's output was written"
    );
    assert!(files_in(second.path()) > 0);
    // Nothing keeps running once the session is finished.
    wait_until(Duration::from_secs(20), || !pid_alive(agent[0]));
    assert_eq!(tracer_pid(t.pid, t.listener()), 0);
    t.assert_heartbeat();
}

#[test]
fn a_front_end_killed_during_its_attach_call_is_finished_by_its_agent() {
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_ATTACH_SLEEP_MS".into(), "1500".into())],
        ..Default::default()
    });
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let tool = tool_lib();
    // The same services as the plain session after it: a reattach may not change them.
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(first.path()),
        "-t",
        s(&tool),
    ];
    let run = rocprof_attach(&args, &[]);
    // The attach call is running once an agent traces the listener.
    let listener = t.listener();
    wait_until(Duration::from_secs(20), || tracer_pid(t.pid, listener) != 0);
    let agent = children_of(run.child.id());
    kill_front_end(run);
    // The attach runs to its end, then the agent detaches: a plain attach right away works.
    finished_by_agent(&t, first.path(), second.path(), &agent);
}

/// After a killed front end: a plain session into `second` works at once, the target saw one
/// attach and one detach per session (nothing sent twice), the killed session's output is in
/// `first`, its `agent` processes end, and the target runs on.
fn finished_by_agent(t: &Target, first: &Path, second: &Path, agent: &[i32]) {
    let (code, _, stderr) = short(t, second);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        kinds(t),
        ["attach", "detach", "attach", "detach"],
        "nothing sent twice"
    );
    assert!(
        files_in(first) > 0,
        "the killed session's output was written"
    );
    wait_until(Duration::from_secs(20), || {
        agent.iter().all(|&a| !pid_alive(a))
    });
    t.assert_heartbeat();
}

#[test]
fn a_front_end_killed_during_its_detach_call_is_finished_by_its_agent() {
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_DETACH_SLEEP_MS".into(), "1500".into())],
        ..Default::default()
    });
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(first.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100ms",
    ];
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling for");
    let agent = children_of(run.child.id());
    // The detach call is running once the listener is traced again (the attach released it).
    let listener = t.listener();
    wait_until(Duration::from_secs(20), || tracer_pid(t.pid, listener) != 0);
    kill_front_end(run);
    // The detach in flight is not sent again.
    finished_by_agent(&t, first.path(), second.path(), &agent);
}

#[test]
fn with_its_agent_killed_too_detach_finishes_the_session_and_lists_its_files() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let p = t.pid.to_string();
    let run = window(&t, out.path(), &[]);
    let agent = children_of(run.child.id());
    assert_eq!(agent.len(), 1, "{agent:?}");
    kill(Pid::from_raw(agent[0]), Signal::SIGKILL).unwrap();
    kill_front_end(run);
    wait_until(Duration::from_secs(10), || !pid_alive(agent[0]));
    // Nobody finished it: a plain attach is refused with the fix.
    let (code, _, stderr) = short(&t, other.path());
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains(&format!("rocprof-attach --detach -p {p}")),
        "{stderr}"
    );
    // --detach (with a thread id, -d and --json) finishes it and lists the files it wrote.
    let tid = std::fs::read_dir(format!("/proc/{p}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|&x| x != t.pid)
        .unwrap()
        .to_string();
    let (code, stdout, stderr) = rocprof_attach(
        &["--detach", "-p", &tid, "-d", s(out.path()), "--json"],
        &[],
    )
    .finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["command"], "detach", "{doc}");
    let listed: Vec<String> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    let mut on_disk: Vec<String> = walk(out.path())
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    on_disk.sort();
    assert!(!listed.is_empty(), "{doc}");
    assert_eq!(listed, on_disk, "every file of the session, expanded paths");
    assert!(listed.iter().all(|f| !f.contains('%')), "{listed:?}");
    assert_eq!(doc["processes"][0]["pid"], t.pid, "{doc}");
    assert_eq!(kinds(&t), ["attach", "detach"]);
    // Without --json: the files as a session prints them; then a plain session works.
    let (code, _, stderr) = short(&t, other.path());
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn detach_checks_the_files_it_lists_as_a_session_does() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let p = t.pid.to_string();
    let run = window(&t, out.path(), &[]);
    let agent = children_of(run.child.id());
    kill(Pid::from_raw(agent[0]), Signal::SIGKILL).unwrap();
    kill_front_end(run);
    wait_until(Duration::from_secs(10), || !pid_alive(agent[0]));
    // A file the session's template names, left empty (a full disk, a killed writer).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let dir = out.path().join(host);
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join(format!("{p}_empty.csv"));
    std::fs::write(&empty, "").unwrap();
    let (code, stdout, stderr) = rocprof_attach(&["--detach", "-p", &p], &[]).finish();
    assert_eq!(code, 9, "{stderr}\n{stdout}");
    assert!(
        stdout.contains(&format!("{}  (INCOMPLETE: empty (0 bytes))", s(&empty))),
        "{stdout}"
    );
    assert!(stderr.contains("INCOMPLETE"), "{stderr}");
    assert_eq!(
        kinds(&t),
        ["attach", "detach"],
        "the session was finished all the same"
    );
}
