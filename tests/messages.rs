//! What a user reads on stderr: `-v` logs in a file are plain text (no colour codes, no Rust
//! debug notation), messages have no runs of spaces, `-q` still says in one line why the exit
//! code is not 0, a target that exits during the window is reported once, and `completions`
//! without a shell names the shells.

use crate::common;

use common::{records, rocprof_attach, tool_lib, Target, TargetOpts};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A target whose stand-in register library and tool read `env`.
fn target(env: &[(&str, &str)]) -> Target {
    Target::spawn(TargetOpts {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    })
}

/// A 100 ms session on `pid` with the stand-in tool, writing under `out`; `extra` first.
fn session<'a>(extra: &[&'a str], pid: &'a str, out: &'a Path, tool: &'a Path) -> Vec<&'a str> {
    let mut args = extra.to_vec();
    args.extend([
        "-p",
        pid,
        "--kernel-trace",
        "-d",
        s(out),
        "-t",
        s(tool),
        "--attach-duration-msec",
        "100",
    ]);
    args
}

/// Whether `text` holds an ANSI colour (SGR) sequence, `ESC [ ... m`.
fn has_colour(text: &str) -> bool {
    text.split('\x1b').skip(1).any(|rest| {
        rest.strip_prefix('[').is_some_and(|r| {
            let end = r.find(|c: char| !(c.is_ascii_digit() || c == ';'));
            end.is_some_and(|i| r[i..].starts_with('m'))
        })
    })
}

#[test]
fn verbose_logs_in_a_file_are_plain_text() {
    let t = target(&[]);
    let out = tempfile::tempdir().unwrap();
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    let (code, _, err) = rocprof_attach(&session(&["-vv"], &pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains('\x1b'),
        "no escape sequences in a file: {err}"
    );
    for debug in ["Some(", "None", "Duration", "(Explicit)", "Ok(", "Err("] {
        assert!(!err.contains(debug), "no Rust debug text ({debug}): {err}");
    }
    assert!(
        err.contains("attach returned 0 in") && err.contains("detach returned 0 in"),
        "{err}"
    );
    assert!(
        err.contains(" ms: the requested duration passed"),
        "the window's end in words: {err}"
    );
    assert!(
        err.contains(&format!(
            "tool library {} (given with -t / ROCPROF_ATTACH_TOOL_LIBRARY)",
            tool.display()
        )),
        "{err}"
    );
}

/// Run a `-v` session with stderr on a pseudo-terminal; everything written there.
fn on_a_terminal(t: &Target, env: &[(&str, &str)]) -> (i32, String) {
    let out = tempfile::tempdir().unwrap();
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut cmd = Command::new(common::bin());
    cmd.args(session(&["-v"], &pid, out.path(), &tool))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(pty.slave));
    let mut child = cmd.spawn().expect("spawn rocprof-attach");
    // The terminal ends (EIO) once the last writer, the child, has gone.
    drop(cmd);
    let (tx, rx) = mpsc::channel();
    let mut master = std::fs::File::from(pty.master);
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = master.read(&mut buf) {
            text.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(String::from_utf8_lossy(&text).into_owned());
    });
    let text = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("rocprof-attach ends within 60 s");
    let status = child.wait().unwrap();
    (status.code().unwrap_or(-1), text)
}

#[test]
fn colours_only_on_a_terminal_and_not_with_no_color() {
    let t = target(&[]);
    let (code, text) = on_a_terminal(&t, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        has_colour(&text),
        "log lines are coloured on a terminal: {text:?}"
    );
    let (code, text) = on_a_terminal(&t, &[("NO_COLOR", "1")]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(" INFO "), "{text:?}");
    assert!(!has_colour(&text), "NO_COLOR: no colours: {text:?}");
}

/// Every stderr line, past its indentation, has no run of spaces.
fn assert_single_spaced(stderr: &str, what: &str) {
    for line in stderr.lines() {
        assert!(
            !line.trim_start().contains("  "),
            "{what}: a run of spaces in {line:?}"
        );
    }
}

/// Failing sessions and commands, with `extra` arguments: (what, exit code, stderr).
fn failures(extra: &[&str]) -> Vec<(&'static str, i32, String)> {
    let mut runs = Vec::new();
    let tool = tool_lib();
    let out = tempfile::tempdir().unwrap();
    let mut run = |what, t: &Target, tool: &Path, more: &[&str]| {
        let pid = t.pid.to_string();
        let mut args = session(extra, &pid, out.path(), tool);
        args.extend(more);
        let (code, _, err) = rocprof_attach(&args, &[]).finish();
        runs.push((what, code, err));
    };
    run(
        "refused detach",
        &target(&[("STANDIN_DETACH_STATUS", "2")]),
        &tool,
        &[],
    );
    run(
        "rejected attach",
        &target(&[("STANDIN_ATTACH_STATUS", "6")]),
        &tool,
        &[],
    );
    run(
        "no output",
        &target(&[("STANDIN_TOOL_NO_OUTPUT", "1")]),
        &tool,
        &[],
    );
    run("format missing", &target(&[]), &tool, &["-f", "json"]);
    let text = out.path().join("libtext.so");
    std::fs::write(&text, "this is not a library\n").unwrap();
    run("text tool", &target(&[]), &text, &[]);
    // Two targets, one refusing: a partial success.
    let (ok, refusing) = (target(&[]), target(&[("STANDIN_ATTACH_STATUS", "6")]));
    let pids = format!("{},{}", ok.pid, refusing.pid);
    let args = session(extra, &pids, out.path(), &tool);
    let (code, _, err) = rocprof_attach(&args, &[]).finish();
    runs.push(("partial", code, err));
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id().to_string();
    gone.wait().unwrap();
    let mut args = extra.to_vec();
    args.extend(["-p", &gone_pid, "--kernel-trace"]);
    let (code, _, err) = rocprof_attach(&args, &[]).finish();
    runs.push(("no such process", code, err));
    let mut args = extra.to_vec();
    args.extend(["--check", "-p", &gone_pid]);
    let (code, _, err) = rocprof_attach(&args, &[]).finish();
    runs.push(("check", code, err));
    runs
}

#[test]
fn messages_have_no_runs_of_spaces() {
    let mut runs = failures(&[]);
    for args in [
        &["completions"][..],
        &["-p", "1,x"],
        &["--attach-duration-msec"],
    ] {
        let (code, _, err) = rocprof_attach(args, &[]).finish();
        runs.push(("usage", code, err));
    }
    for (what, code, err) in &runs {
        assert_ne!(*code, 0, "{what}: {err}");
        // An error, or (a format nothing produced, exit 12) a warning.
        assert!(
            err.contains("rocprof-attach: error: ") || err.contains("rocprof-attach: warning: "),
            "{what}: {err}"
        );
        assert_single_spaced(err, what);
    }
    let detach = &runs[0].2;
    assert!(
        detach.contains("the profiler may still be active in it"),
        "{detach}"
    );
}

#[test]
fn quiet_failures_say_why_in_one_line() {
    let expected = [
        ("refused detach", 11, "detach"),
        ("rejected attach", 6, "rejected the attach"),
        ("no output", 9, "no output file appeared"),
        ("format missing", 12, "no json output was produced"),
        ("text tool", 4, "not an ELF shared object"),
        ("partial", 8, "rejected the attach"),
        ("no such process", 3, "does not exist"),
        ("check", 3, "does not exist"),
    ];
    let runs = failures(&["-q"]);
    assert_eq!(runs.len(), expected.len());
    for ((what, code, err), (name, want, needle)) in runs.iter().zip(expected) {
        assert_eq!(*what, name);
        assert_eq!(*code, want, "{what}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: exactly one line: {err}");
        assert!(
            lines[0].starts_with("rocprof-attach: error: ") && lines[0].contains(needle),
            "{what}: the reason ({needle}): {err}"
        );
    }
}

#[test]
fn a_target_that_exits_during_the_window_is_reported_once() {
    for quiet in [false, true] {
        let mut t = target(&[]);
        let out = tempfile::tempdir().unwrap();
        let (pid, tool) = (t.pid.to_string(), tool_lib());
        let mut args = vec![
            "-p",
            &pid,
            "--kernel-trace",
            "-d",
            s(out.path()),
            "-t",
            s(&tool),
        ];
        if quiet {
            args.insert(0, "-q");
        }
        let mut run = rocprof_attach(&args, &[]);
        if quiet {
            // Nothing on stderr to wait for: the attach call shows in the target's own log,
            // and the listener is released once it has returned.
            let listener = t.listener();
            common::wait_until(Duration::from_secs(20), || {
                !records(&t).is_empty() && common::tracer_pid(t.pid, listener) == 0
            });
        } else {
            run.wait_for("profiling until");
        }
        t.kill();
        let (code, _, err) = run.finish();
        assert_eq!(code, 7, "quiet {quiet}: {err}");
        // The live warning says it (not with -q); the conclusion does not repeat it.
        assert_eq!(
            err.matches("exited during the session").count(),
            usize::from(!quiet),
            "quiet {quiet}: {err}"
        );
        let errors: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("rocprof-attach: error: "))
            .collect();
        assert_eq!(errors.len(), 1, "quiet {quiet}: {err}");
        assert!(
            errors[0].contains(&format!(
                "process {pid} exited before the tool wrote any output"
            )),
            "quiet {quiet}: {err}"
        );
        if quiet {
            assert_eq!(err.lines().count(), 1, "{err}");
        } else {
            // What rocprofiler-sdk does at a process's end, said as it is (issue 29 item 3).
            assert!(
                err.contains("rocprofiler-sdk writes the output of a session still attached when the process exits normally"),
                "{err}"
            );
        }
    }
}

#[test]
fn completions_without_a_shell_names_the_shells() {
    let (code, out, err) = rocprof_attach(&["completions"], &[]).finish();
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("rocprof-attach: error: ") && lines[0].contains("<SHELL>"),
        "{err}"
    );
    assert!(
        lines[0].contains("[possible values: bash, zsh, fish, elvish, powershell]"),
        "{err}"
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = rocprof_attach(&["completions", shell], &[]).finish();
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains("rocprof-attach"), "{shell}: {out}");
    }
}

/// A detach the register refuses is one error: why (the detach's own meaning of the status, not
/// the attach's), that the profiler may still be active, that the listed files were written in
/// this session, and the fix; never "writes its output when it exits" beside a file list.
#[test]
fn a_refused_detach_is_one_true_message() {
    let t = target(&[("STANDIN_DETACH_STATUS", "6")]);
    let out = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = session(&[], &pid, out.path(), &tool);
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 11, "{stderr}");
    assert!(stdout.contains("wrote 1 file"), "{stdout}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rocprof-attach: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error: {stderr}");
    for needle in [
        "rocprofiler_register_detach returned 6, ROCP_REG_ROCPROFILER_ERROR (rocprofiler-sdk's detach failed)",
        "the files listed were written during this session",
        &format!("`rocprof-attach --detach -p {pid}`"),
    ] {
        assert!(errors[0].contains(needle), "{needle}: {}", errors[0]);
    }
    for wrong in [
        "failed to load or configure",
        "reattach",
        "not into this session's file list",
    ] {
        assert!(!stderr.contains(wrong), "{wrong}: {stderr}");
    }
}
