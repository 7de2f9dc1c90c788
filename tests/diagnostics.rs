//! Our own diagnostics end to end: `-v` shows the plan and every `ROCP*` pair sent, `-vv` the
//! steps, `-q` keeps stderr empty on success, and a bad `ROCPROF_ATTACH_LOG` is a usage error.

use crate::common;

use common::{records, rocprof_attach, tool_lib, tracer_pid, Target, TargetOpts};

/// A short session on `t` writing into its directory, with `extra` arguments first.
fn session(t: &Target, extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let pid = t.pid.to_string();
    let out = t.dir.path().join("out");
    let (out, tool) = (out.to_str().unwrap(), tool_lib());
    let mut args: Vec<&str> = extra.to_vec();
    args.extend([
        "--attach",
        &pid,
        "--kernel-trace",
        "-d",
        out,
        "-o",
        "run",
        "-t",
        tool.to_str().unwrap(),
        "--attach-duration-msec",
        "200",
    ]);
    rocprof_attach(&args, env).finish()
}

#[test]
fn verbose_shows_the_plan_and_every_pair_sent() {
    let t = Target::spawn(TargetOpts::default());
    let (code, _out, err) = session(&t, &["-v"], &[("ROCP_USER_SETTING", "kept")]);
    assert_eq!(code, 0, "stderr: {err}");
    let listener = t.listener();
    assert!(
        err.contains(&format!("listener thread {listener} (rocp-bg-attach)")),
        "the plan names the listener TID: {err}"
    );
    assert!(
        err.contains("rocprofiler_register_attach at 0x") && err.contains("(AT_ENTRY) 0x"),
        "the plan names the register entry and the injection site: {err}"
    );
    let tool = tool_lib();
    assert!(
        err.contains(&format!("tool library {}", tool.display())),
        "the plan names the resolved tool: {err}"
    );
    // Every pair the stand-in received is in the log, and nothing that was not sent.
    let recs = records(&t);
    assert_eq!(recs.len(), 2, "{recs:?}");
    let pairs = recs[0].pairs();
    assert!(pairs.len() > 3, "{pairs:?}");
    for (name, value) in &pairs {
        let line = format!("process {}: sending {name}={value}", t.pid);
        assert!(err.contains(&line), "missing '{line}' in: {err}");
    }
    let sent = err.matches(": sending ").count();
    assert_eq!(sent, pairs.len(), "one line per pair sent: {err}");
    assert!(err.contains("sending ROCP_USER_SETTING=kept"), "{err}");
    assert!(
        !err.contains("returned 0 in"),
        "-v does not show debug events: {err}"
    );
}

#[test]
fn very_verbose_adds_the_steps() {
    let t = Target::spawn(TargetOpts::default());
    let (code, _out, err) = session(&t, &["-vv"], &[]);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(
        err.contains("attach returned 0 in") && err.contains("detach returned 0 in"),
        "-vv shows each injection's outcome: {err}"
    );
    assert!(err.contains("DEBUG"), "{err}");
    // Every ptrace step of both injections, each with its duration.
    for job in ["attach", "detach"] {
        for step in [
            "seize",
            "interrupt-stop",
            "save registers",
            "patch site",
            "call",
        ] {
            let line = format!("{job}: {step} took ");
            let timed = |l: &str| {
                l.split_once(&line)
                    .and_then(|(_, rest)| rest.split_once(" µs"))
                    .is_some_and(|(n, _)| n.parse::<f64>().is_ok())
            };
            assert!(err.lines().any(timed), "-vv shows `{line}N µs`: {err}");
        }
    }
}

#[test]
fn quiet_keeps_stderr_empty_on_success() {
    let t = Target::spawn(TargetOpts::default());
    let (code, out, err) = session(&t, &["-q"], &[]);
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(
        err, "",
        "-q prints nothing on stderr for a successful session"
    );
    assert!(
        out.contains("rocprof-attach: wrote 1 file:"),
        "stdout: {out}"
    );
    assert_eq!(records(&t).len(), 2);
}

#[test]
fn quiet_still_prints_errors() {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let gone = child.id().to_string();
    child.wait().expect("reap true");
    let (code, out, err) =
        rocprof_attach(&["-q", "--attach", &gone, "--kernel-trace"], &[]).finish();
    assert_eq!(code, 3, "stderr: {err}");
    assert_eq!(
        err,
        format!("rocprof-attach: error: process {gone} does not exist (it may have exited); check the PID with `ps -p {gone}`")
    );
    assert!(out.is_empty(), "stdout: {out}");
}

#[test]
fn log_filter_from_the_environment() {
    let t = Target::spawn(TargetOpts::default());
    let (code, _out, err) = session(&t, &[], &[("ROCPROF_ATTACH_LOG", "rocprof_attach=debug")]);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(err.contains("attach returned 0 in"), "{err}");
}

#[test]
fn bad_log_filter_is_a_usage_error_and_touches_nothing() {
    let t = Target::spawn(TargetOpts::default());
    for bad in ["rocprof_attach=loud", "[unclosed", "a=b=c"] {
        let (code, out, err) = session(&t, &[], &[("ROCPROF_ATTACH_LOG", bad)]);
        assert_eq!(code, 2, "{bad}: stderr {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{bad}: one line: {err}");
        assert!(
            lines[0].starts_with("rocprof-attach: error: ROCPROF_ATTACH_LOG=")
                && lines[0].contains("not a valid log filter")
                && lines[0].contains("unset ROCPROF_ATTACH_LOG"),
            "{bad}: {err}"
        );
        assert!(out.is_empty(), "{bad}: stdout {out}");
    }
    assert!(records(&t).is_empty(), "the target was not touched");
    assert_eq!(tracer_pid(t.pid, t.listener()), 0);
    t.assert_heartbeat();
}
