//! A host of the C library killed at any moment leaves no work for a person (issue 29, item 2),
//! as the CLI's front end (tests/detach_after_kill.rs): SIGKILLed during its attach call, its
//! window or its detach call, the session's agent server finishes the session (the detach the
//! host had not sent, never a second one; the tool's output; the claim), so a plain attach right
//! afterwards works. A host that exits normally without detaching keeps rocattach's behaviour:
//! the session stays active until `rocattach_detach` or `rocprof-attach --detach` finishes it.
//! The same for a Python host (the package's module, from the checkout).

use crate::capi_common;
use crate::claims::short;
use crate::common;

use capi_common::{calls_of, host, run, status_of, Host, Layout};
use common::{pid_alive, tracer_pid, wait_until, Target, TargetOpts};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agent servers started from `layout`'s `rocprof-attach` (its path is this test's own).
fn servers_of(layout: &Layout) -> Vec<i32> {
    let agent = layout.path("bin/rocprof-attach").canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|exe| exe == agent)
                && cmd.split(|&b| b == 0).nth(1) == Some(b"__agent-server".as_slice())
        })
        .filter(|&p| pid_alive(p))
        .collect()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_in(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Threads of `pid` in a stop (state T or t).
fn stopped_threads(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).is_ok_and(|s| {
                matches!(
                    s.rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().next()),
                    Some("T") | Some("t")
                )
            })
        })
        .collect()
}

/// The host's environment: the services and output a plain CLI session (`claims::short`, with
/// `--kernel-trace`) asks for too (a reattach may not change them), synchronous output.
fn session_env(out: &Path) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("ROCPROF_KERNEL_TRACE", Some("1".into())),
        ("ROCPROF_OUTPUT_PATH", Some(out.to_str().unwrap().into())),
        ("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC", Some("1".into())),
    ]
}

fn start(layout: &Layout, args: &[&str], out: &Path) -> Host {
    let env = session_env(out);
    let env: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (*k, v.as_deref())).collect();
    host(&layout.lib(), args, &env)
}

/// SIGKILL the host and wait (bounded) until it is gone.
fn kill_host(h: Host) {
    kill(Pid::from_raw(h.child.id() as i32), Signal::SIGKILL).unwrap();
    let (code, _, _) = h.finish();
    assert_eq!(code, 128 + 9, "the host was killed");
}

/// After a killed host: a plain CLI session into `second` works at once (the claim was released,
/// or is waited for while the server finishes), the target saw one attach and one detach per
/// session (the killed one's detach came from its server), the killed session's output is in
/// `first`, the `servers` end, and the target runs on, traced and stopped by nobody.
fn finished_by_its_server(t: &Target, first: &Path, second: &Path, servers: &[i32]) {
    let (code, _, stderr) = short(t, second);
    assert_eq!(code, 0, "a plain attach after the killed host: {stderr}");
    assert_eq!(
        calls_of(&t.log, t.pid),
        ["attach=0", "detach=0", "attach=0", "detach=0"],
        "one detach per session, nothing sent twice"
    );
    assert!(
        !files_in(first).is_empty(),
        "the killed session's output was written"
    );
    assert!(!files_in(second).is_empty());
    wait_until(Duration::from_secs(20), || {
        servers.iter().all(|&s| !pid_alive(s))
    });
    assert!(t.alive());
    assert_eq!(
        tracer_pid(t.pid, t.listener()),
        0,
        "nobody traces the target"
    );
    assert_eq!(
        stopped_threads(t.pid),
        Vec::<i32>::new(),
        "no thread stopped"
    );
    t.assert_heartbeat();
}

/// A target whose register holds its attach or detach call (`var`: `STANDIN_ATTACH_GATE` or
/// `STANDIN_DETACH_GATE`) until the gate file is written.
struct Gated {
    t: Target,
    _gates: tempfile::TempDir,
    gate: PathBuf,
}

impl Gated {
    fn spawn(var: &str) -> Gated {
        let gates = tempfile::tempdir().unwrap();
        let gate = gates.path().join("open");
        let t = Target::spawn(TargetOpts {
            env: vec![(var.into(), gate.to_str().unwrap().into())],
            ..Default::default()
        });
        Gated {
            t,
            _gates: gates,
            gate,
        }
    }

    /// Once the held call traces the listener: kills host `h`, then opens the gate; the
    /// agent servers of `layout` at the kill.
    fn kill_in_call(&self, layout: &Layout, h: Host) -> Vec<i32> {
        let listener = self.t.listener();
        wait_until(Duration::from_secs(30), || {
            tracer_pid(self.t.pid, listener) != 0
        });
        let servers = servers_of(layout);
        kill_host(h);
        std::fs::write(&self.gate, "").unwrap();
        servers
    }
}

#[test]
fn a_host_killed_in_its_window_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    let mut h = start(&layout, &["attach", &p, "children", "wait"], first.path());
    assert_eq!(h.expect("attach "), format!("attach {p} 0"));
    // One idle server for the window, which is not a child of the host.
    assert_eq!(h.expect("children "), "children 0");
    h.expect("waiting");
    let servers = servers_of(&layout);
    assert_eq!(servers.len(), 1, "one agent server: {servers:?}");
    kill_host(h);
    finished_by_its_server(&t, first.path(), second.path(), &servers);
}

#[test]
fn a_host_killed_after_a_tree_attach_has_each_process_finished_by_its_agent_server() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts {
        exec_child: true,
        ..Default::default()
    });
    let child = t.exec_child.unwrap();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    let mut h = start(&layout, &["attach_tree", &p, "wait"], first.path());
    assert_eq!(h.expect("attach_tree "), format!("attach_tree {p} 0"));
    h.expect("waiting");
    let servers = servers_of(&layout);
    assert_eq!(servers.len(), 2, "one server per process: {servers:?}");
    kill_host(h);
    wait_until(Duration::from_secs(30), || {
        servers.iter().all(|&s| !pid_alive(s))
    });
    for pid in [t.pid, child] {
        assert_eq!(calls_of(&t.log, pid), ["attach=0", "detach=0"], "{pid}");
        assert!(
            files_in(first.path())
                .iter()
                .any(|f| f.to_str().unwrap().contains(&format!("/{pid}_"))),
            "output of {pid}: {:?}",
            files_in(first.path())
        );
    }
    // Both claims released: a plain tree attach (the CLI's default) works at once.
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 0, "{stderr}");
    for pid in [t.pid, child] {
        assert_eq!(calls_of(&t.log, pid).len(), 4, "{pid}");
        assert_eq!(stopped_threads(pid), Vec::<i32>::new());
    }
    t.assert_heartbeat();
}

#[test]
fn without_its_agent_server_a_session_still_runs_with_an_agent_per_injection() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let first = tempfile::tempdir().unwrap();
    let p = t.pid.to_string();
    // An agent program that refuses to be a server (an older rocprof-attach, say).
    let bin = layout.path("bin/rocprof-attach");
    let wrapper = first.path().join("agent.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = __agent-server ] && exit 2\nexec {} \"$@\"\n",
            bin.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut env = session_env(first.path());
    env.push(("ROCATTACH_AGENT", Some(wrapper.to_str().unwrap().into())));
    let env: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (*k, v.as_deref())).collect();
    let (out, err) = run(&layout.lib(), &["attach", &p, "detach", &p], &env);
    assert_eq!(status_of(&out, &format!("attach {p}")), 0, "{err}");
    assert_eq!(status_of(&out, &format!("detach {p}")), 0, "{err}");
    assert!(
        err.contains("starting the agent server") && err.contains("rocprof-attach --detach -p"),
        "the warning says what a killed host would leave: {err}"
    );
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0", "detach=0"]);
}

/// The host's fork (a process this test started): killed, and gone, when dropped.
struct Forked(i32);

impl Drop for Forked {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
        wait_until(Duration::from_secs(10), || !pid_alive(self.0));
    }
}

#[test]
fn a_host_killed_while_a_fork_of_it_lives_on_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    // The fork keeps a copy of the host's socket to the server open: the server watches the host
    // itself, and detaches (the tool writes its output) while the fork lives on.
    let mut h = start(&layout, &["attach", &p, "fork", "wait"], first.path());
    assert_eq!(h.expect("attach "), format!("attach {p} 0"));
    let fork = Forked(h.expect("forked ")[7..].parse().unwrap());
    h.expect("waiting");
    let servers = servers_of(&layout);
    kill_host(h);
    wait_until(Duration::from_secs(30), || {
        servers.iter().all(|&s| !pid_alive(s))
    });
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0", "detach=0"]);
    assert!(!files_in(first.path()).is_empty(), "the output was written");
    assert!(pid_alive(fork.0), "the fork lived on meanwhile");
    // The fork holds none of the host's claim locks (its copies are /dev/null): a plain attach
    // works while it lives on.
    finished_by_its_server(&t, first.path(), second.path(), &servers);
    assert!(pid_alive(fork.0), "the fork lives on");
}

#[test]
fn a_session_left_active_by_a_host_whose_fork_lives_on_can_be_finished_at_once() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    // The host forks while attached, then exits normally without detaching: the session stays
    // active (as rocattach leaves it) and its claim file stays, while the fork lives on.
    let mut h = start(&layout, &["attach", &p, "fork"], first.path());
    let fork = Forked(h.expect("forked ")[7..].parse().unwrap());
    let (code, out, err) = h.finish();
    assert_eq!(
        (code, status_of(&out, &format!("attach {p}"))),
        (0, 0),
        "{err}"
    );
    wait_until(Duration::from_secs(20), || servers_of(&layout).is_empty());
    // Another host finishes it at once: the fork does not hold the claim's lock.
    let (out, err) = run(&layout.lib(), &["detach", &p], &[]);
    assert_eq!(status_of(&out, &format!("detach {p}")), 0, "{err}");
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0", "detach=0"]);
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 0, "{stderr}");
    assert!(pid_alive(fork.0), "the fork lived on meanwhile");
    drop(fork);
    assert_eq!(calls_of(&t.log, t.pid).len(), 4, "nothing from the fork");
    t.assert_heartbeat();
}

#[test]
fn a_fork_of_the_host_holds_none_of_its_claim_locks_and_none_of_its_sessions() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    // The host forks while attached (its child inherits every descriptor and the library's
    // memory), then detaches normally while the child lives on, waiting on a pipe.
    let args = ["attach", &p, "fork_held", "detach", &p, "wait", "release"];
    let mut h = start(&layout, &args, first.path());
    assert_eq!(h.expect("attach "), format!("attach {p} 0"));
    let child = h.expect("forked ")[7..].parse::<i32>().unwrap();
    let fork = Forked(child);
    assert_eq!(h.expect("detach "), format!("detach {p} 0"));
    h.expect("waiting");
    // The child holds none of the parent's claim locks: a plain attach works while it lives.
    assert!(pid_alive(fork.0), "the fork lives on");
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(
        code, 0,
        "a plain attach while a fork of the host lives: {stderr}"
    );
    assert!(pid_alive(fork.0), "the fork lived on meanwhile");
    assert_eq!(
        calls_of(&t.log, t.pid),
        ["attach=0", "detach=0", "attach=0", "detach=0"]
    );
    // The child calls rocattach_detach(0) and exits normally (the library's destructor runs):
    // it has no session of the parent's, so nothing reaches the target.
    h.resume();
    assert_eq!(h.expect("reaped "), format!("reaped {child} 0"));
    std::mem::forget(fork); // reaped: its PID is no longer its own
    let (code, _, err) = h.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        calls_of(&t.log, t.pid),
        ["attach=0", "detach=0", "attach=0", "detach=0"],
        "no detach from the fork"
    );
    assert!(!files_in(first.path()).is_empty(), "the host's output");
    assert!(!files_in(second.path()).is_empty(), "the CLI's output");
    t.assert_heartbeat();
}

#[test]
fn a_host_killed_during_its_attach_call_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let g = Gated::spawn("STANDIN_ATTACH_GATE");
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = g.t.pid.to_string();
    let h = start(&layout, &["attach", &p, "wait"], first.path());
    // The attach call is running (held at the gate) while the server traces the listener.
    let servers = g.kill_in_call(&layout, h);
    // The attach runs to its end, then the server detaches.
    finished_by_its_server(&g.t, first.path(), second.path(), &servers);
}

#[test]
fn a_host_killed_during_its_detach_call_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let g = Gated::spawn("STANDIN_DETACH_GATE");
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = g.t.pid.to_string();
    let mut h = start(&layout, &["attach", &p, "detach", &p], first.path());
    assert_eq!(h.expect("attach "), format!("attach {p} 0"));
    // The attach released the listener; the detach call holds it traced at the gate.
    let servers = g.kill_in_call(&layout, h);
    // The detach in flight ends; it is not sent again.
    finished_by_its_server(&g.t, first.path(), second.path(), &servers);
}

#[test]
fn a_host_killed_while_it_finishes_a_session_left_active_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let g = Gated::spawn("STANDIN_DETACH_GATE");
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = g.t.pid.to_string();
    // A session left active by a host that exited without detaching.
    let (code, out, err) = start(&layout, &["attach", &p], first.path()).finish();
    assert_eq!(
        (code, status_of(&out, &format!("attach {p}"))),
        (0, 0),
        "{err}"
    );
    wait_until(Duration::from_secs(20), || servers_of(&layout).is_empty());
    // Another host finishes it (rocattach_detach of a process it did not attach), killed during
    // that detach call.
    let h = start(&layout, &["detach", &p], first.path());
    let servers = g.kill_in_call(&layout, h);
    assert_eq!(servers.len(), 1, "{servers:?}");
    finished_by_its_server(&g.t, first.path(), second.path(), &servers);
}

#[test]
fn a_host_that_exits_without_detaching_leaves_its_session_active_as_rocattach_does() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let p = t.pid.to_string();
    let (code, out, err) = start(&layout, &["attach", &p], first.path()).finish();
    assert_eq!(
        (code, status_of(&out, &format!("attach {p}"))),
        (0, 0),
        "{err}"
    );
    // The server was told to leave the session as it is, and ends without a detach.
    wait_until(Duration::from_secs(20), || servers_of(&layout).is_empty());
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0"]);
    // Still active: a plain attach is refused with the fix, which finishes it.
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains(&format!("rocprof-attach --detach -p {p}")),
        "{stderr}"
    );
    let (out, err) = run(&layout.lib(), &["detach", &p], &[]);
    assert_eq!(status_of(&out, &format!("detach {p}")), 0, "{err}");
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0", "detach=0"]);
    // The detach's server closed its copy of the claim's lock before the call returned (it
    // closes its socket, which the call waits for, when it exits): a plain attach works at once.
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 0, "{stderr}");
    wait_until(Duration::from_secs(10), || servers_of(&layout).is_empty());
    t.assert_heartbeat();
}

/// A Python host running `script` with the package's module from the checkout, its session's
/// environment for output into `out`: the process, and a reader of its standard output.
fn python_host(
    script: &str,
    out: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("python3 is needed for this test (tests/scripts/ci-deps.sh installs it)");
    }
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .env("PYTHONPATH", &python)
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", common::tool_lib())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    for (k, v) in session_env(out) {
        cmd.env(k, v.unwrap());
    }
    let mut py = cmd.spawn().unwrap();
    let reader = std::io::BufReader::new(py.stdout.take().unwrap());
    (py, reader)
}

fn line_of(reader: &mut impl std::io::BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line.trim().to_string()
}

#[test]
fn a_python_host_killed_in_its_window_is_finished_by_its_agent_server() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The package's module from the checkout, on the installed library.
    let script = format!(
        "import sys, rocprof_attach\n\
         print('attach', rocprof_attach.attach({pid}, library={lib:?}), flush=True)\n\
         sys.stdin.readline()\n",
        pid = t.pid,
        lib = layout.lib().to_str().unwrap(),
    );
    let (mut py, mut out) = python_host(&script, first.path());
    assert_eq!(line_of(&mut out), "attach 0");
    let servers = servers_of(&layout);
    assert_eq!(servers.len(), 1, "{servers:?}");
    py.kill().unwrap();
    py.wait().unwrap();
    finished_by_its_server(&t, first.path(), second.path(), &servers);
}

#[test]
fn a_python_multiprocessing_fork_holds_none_of_the_hosts_sessions() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A multiprocessing child (fork start method) started while attached waits on a pipe, then
    // calls detach(0) and returns; the host detaches normally meanwhile.
    let script = format!(
        "import os, sys, multiprocessing, rocprof_attach\n\
         lib = {lib:?}\n\
         def child(r, w):\n\
         \x20   os.close(w)\n\
         \x20   while os.read(r, 1): pass\n\
         \x20   rocprof_attach.detach(0, library=lib)\n\
         print('attach', rocprof_attach.attach({pid}, library=lib), flush=True)\n\
         r, w = os.pipe()\n\
         p = multiprocessing.get_context('fork').Process(target=child, args=(r, w))\n\
         p.start()\n\
         os.close(r)\n\
         print('forked', p.pid, flush=True)\n\
         print('detach', rocprof_attach.detach({pid}, library=lib), flush=True)\n\
         sys.stdin.readline()\n\
         os.close(w)\n\
         p.join(60)\n\
         print('joined', p.exitcode, flush=True)\n",
        pid = t.pid,
        lib = layout.lib().to_str().unwrap(),
    );
    let (mut py, mut out) = python_host(&script, first.path());
    assert_eq!(line_of(&mut out), "attach 0");
    let fork = Forked(line_of(&mut out)[7..].parse().unwrap());
    assert_eq!(line_of(&mut out), "detach 0");
    let (code, _, stderr) = short(&t, second.path());
    assert_eq!(code, 0, "a plain attach while the fork lives: {stderr}");
    assert!(pid_alive(fork.0), "the fork lived on meanwhile");
    use std::io::Write;
    py.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(line_of(&mut out), "joined 0");
    std::mem::forget(fork); // joined: its PID is no longer its own
    assert!(py.wait().unwrap().success());
    assert_eq!(
        calls_of(&t.log, t.pid),
        ["attach=0", "detach=0", "attach=0", "detach=0"],
        "no detach from the fork"
    );
    t.assert_heartbeat();
}
