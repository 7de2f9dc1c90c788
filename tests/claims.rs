//! One session per target (issue 19, items 1 and 5): a second session, from the CLI or the C ABI,
//! is refused before any ptrace with who holds the target and since when; a stale claim is
//! cleared; a session left active (a failed detach, a killed front end) refuses new attaches with
//! the fix and is finished by `rocprof-attach --detach -p PID` or `rocattach_detach(PID)`.

use crate::capi_common;
use crate::common;

use capi_common::{host, status_of, Layout};
use common::{records, rocprof_attach, tool_lib, tracer_pid, Target, TargetOpts};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLAIMS: &str = "/run/rocprof-attach/claims";

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn kinds(t: &Target) -> Vec<String> {
    records(t).iter().map(|r| r.kind.clone()).collect()
}

/// Field 22 of /proc/PID/stat.
fn start_time(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// The claim file: the target's PID namespace inode, its PID and its start time.
fn claim_file(pid: i32) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .unwrap()
        .ino();
    Path::new(CLAIMS).join(format!("{ns}-{pid}-{}.claim", start_time(pid)))
}

/// Exactly one `rocprof-attach: error:` line; returns it.
fn one_error(stderr: &str) -> String {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rocprof-attach: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line expected: {stderr}");
    errors[0].to_string()
}

/// A session of `t` with output in `out` that stays in its window until it is signalled.
pub(crate) fn window(t: &Target, out: &Path, extra: &[&str]) -> common::Run {
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let mut args = vec!["-p", &pid, "--kernel-trace", "-d", s(out), "-t", s(&tool)];
    args.extend_from_slice(extra);
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling until");
    run
}

/// A short session of `t` (50 ms window).
pub(crate) fn short(t: &Target, out: &Path) -> (i32, String, String) {
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(out),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50ms",
    ];
    rocprof_attach(&args, &[]).finish()
}

#[test]
fn a_second_session_is_refused_before_any_ptrace_with_who_holds_the_target_and_since_when() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let first = window(&t, out.path(), &[]);
    let holder = first.child.id();
    assert!(claim_file(t.pid).is_file(), "the session holds a claim");

    // The CLI: exit 4, who (front end, pid, user, command) and since when, and no ptrace.
    let (code, stdout, stderr) = short(&t, out.path());
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    let e = one_error(&stderr);
    for needle in [
        "already has an active profiling session",
        &format!("rocprof-attach (pid {holder}"),
        "uid ",
        "since ",
        " ago)",
        "in its profiling window",
        &format!("its output goes to {}", s(out.path())),
        &format!("kill -INT {holder}"),
    ] {
        assert!(e.contains(needle), "{needle:?} in {e}");
    }
    assert_eq!(kinds(&t), ["attach"], "the second session sent nothing");

    // The C ABI (and Python through it): rocattach's "already attached" status 2, same words.
    let layout = Layout::install();
    let p = t.pid.to_string();
    let (_, out_lines, err) = host(&layout.lib(), &["attach", &p], &[]).finish();
    assert_eq!(status_of(&out_lines, &format!("attach {p}")), 2, "{err}");
    assert!(
        err.contains("already has an active profiling session")
            && err.contains(&format!("rocprof-attach (pid {holder}")),
        "{err}"
    );
    assert_eq!(kinds(&t), ["attach"]);

    // The first session is unharmed; once it ends the target is free again.
    first.signal(Signal::SIGINT);
    let (code, _, stderr) = first.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(kinds(&t), ["attach", "detach"]);
    assert!(!claim_file(t.pid).exists(), "the claim is removed");
    let (code, _, stderr) = short(&t, out.path());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(kinds(&t), ["attach", "detach", "attach", "detach"]);
}

#[test]
fn a_library_session_is_refused_to_the_cli_and_a_stale_claim_is_cleared() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let layout = Layout::install();
    let p = t.pid.to_string();
    let mut h = host(
        &layout.lib(),
        &["attach", &p, "wait", "detach", &p],
        &[("ROCPROF_OUTPUT_PATH", Some(s(out.path())))],
    );
    h.expect(&format!("attach {p}"));
    h.expect("waiting");
    let (code, stdout, stderr) = short(&t, out.path());
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    let e = one_error(&stderr);
    let host_pid = h.child.id();
    for needle in [
        &format!("the rocattach library (pid {host_pid}"),
        "capi_client",
        &format!("rocattach_detach({p}) in that process"),
    ] {
        assert!(e.contains(needle), "{needle:?} in {e}");
    }
    h.resume();
    let (code, lines, err) = h.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(status_of(&lines, &format!("detach {p}")), 0, "{err}");
    assert!(!claim_file(t.pid).exists());

    // A claim nobody holds whose session never attached (its front end died before): cleared.
    let dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let mut dead = dead;
    dead.wait().unwrap();
    let record = format!(
        r#"{{"version":1,"target_pid":{},"target_start":{},"front_end":"rocprof-attach","holder_pid":{dead_pid},"holder_start":1,"uid":0,"command":"rocprof-attach -p {}","since":1,"changed":1,"state":"claimed","output":null,"note":null}}"#,
        t.pid,
        start_time(t.pid),
        t.pid
    );
    std::fs::write(claim_file(t.pid), record).unwrap();
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "-v",
        "-p",
        &pid,
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50ms",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cleared a stale claim"), "{stderr}");
    assert!(!claim_file(t.pid).exists());
}

/// Stop the target during the window of `run` and make its detach fail (exit 11).
fn strand(t: &Target, out: &Path) {
    let run = window(t, out, &["--stopped-timeout", "300ms"]);
    kill(Pid::from_raw(t.pid), Signal::SIGSTOP).unwrap();
    let listener = t.listener();
    common::wait_until(Duration::from_secs(10), || {
        common::thread_state(t.pid, t.pid) == Some('T')
            && common::thread_state(t.pid, listener) == Some('T')
    });
    run.signal(Signal::SIGINT);
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 11, "{stderr}");
    assert!(
        stderr.contains(&format!("rocprof-attach --detach -p {}", t.pid)),
        "the exit-11 message names the fix: {stderr}"
    );
    kill(Pid::from_raw(t.pid), Signal::SIGCONT).unwrap();
    common::wait_until(Duration::from_secs(10), || {
        common::thread_state(t.pid, listener) != Some('T')
    });
    assert_eq!(kinds(t), ["attach"]);
}

#[test]
fn a_stranded_session_refuses_new_attaches_until_detach_finishes_it() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let p = t.pid.to_string();
    // Nothing recorded: nothing to finish.
    let (code, _, stderr) = rocprof_attach(&["--detach", "-p", &p], &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(
        one_error(&stderr).contains("no active session is recorded"),
        "{stderr}"
    );
    assert!(kinds(&t).is_empty());

    strand(&t, out.path());
    // A new attach says a session is active, where its output goes, and the fix; sends nothing.
    let other = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = short(&t, other.path());
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    let e = one_error(&stderr);
    for needle in [
        "has an active profiling session left by rocprof-attach",
        "its detach failed",
        &format!("its output goes to {}", s(out.path())),
        &format!("run `rocprof-attach --detach -p {p}` first"),
    ] {
        assert!(e.contains(needle), "{needle:?} in {e}");
    }
    assert_eq!(kinds(&t), ["attach"]);

    // --detach finishes it: the detach call runs and the tool writes that session's output.
    // It lists the session's files as a session does: expanded paths, with their sizes.
    let (code, stdout, stderr) = rocprof_attach(&["--detach", "-p", &p], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("finishing the session left by"), "{stderr}");
    assert!(stdout.starts_with("rocprof-attach: wrote "), "{stdout}");
    let listed: Vec<&str> = stdout.lines().skip(1).collect();
    assert!(
        !listed.is_empty()
            && listed
                .iter()
                .all(|l| l.contains(s(out.path())) && !l.contains('%')),
        "{stdout}"
    );
    assert_eq!(kinds(&t), ["attach", "detach"]);
    let written = std::fs::read_dir(out.path()).unwrap().count();
    assert!(written > 0, "the stranded session's output appeared");
    assert_eq!(tracer_pid(t.pid, t.listener()), 0);
    assert!(!claim_file(t.pid).exists());
    // A new session works again.
    let (code, _, stderr) = short(&t, other.path());
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn the_c_abi_finishes_a_session_the_cli_left_and_a_killed_front_end_leaves_nothing_to_do() {
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let p = t.pid.to_string();
    strand(&t, out.path());
    let layout = Layout::install();
    let (_, lines, err) = host(&layout.lib(), &["attach", &p, "detach", &p], &[]).finish();
    assert_eq!(status_of(&lines, &format!("attach {p}")), 2, "{err}");
    assert!(err.contains("rocprof-attach --detach -p"), "{err}");
    assert_eq!(status_of(&lines, &format!("detach {p}")), 0, "{err}");
    assert_eq!(kinds(&t), ["attach", "detach"]);
    assert!(!claim_file(t.pid).exists());

    // A front end killed during its window leaves nothing to do: its agent detaches, writes the
    // session's output and releases the claim, so a plain attach right afterwards works.
    let mut run = window(&t, out.path(), &[]);
    run.signal(Signal::SIGKILL);
    let _ = run.child.wait();
    let (code, _, stderr) = short(&t, out.path());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        kinds(&t),
        ["attach", "detach", "attach", "detach", "attach", "detach"]
    );
}
