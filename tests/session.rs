//! The whole product against the C stand-ins: `rocprof-attach --attach PID ...` end to end.

use crate::common;

use common::{hex, records, rocprof_attach, tool_lib, Target, TargetOpts};
use nix::sys::signal::Signal;

/// Output directory of a test and the strings its command lines use: (out, pid, out, tool).
fn setup(t: &Target) -> (std::path::PathBuf, String, String, String) {
    let out = t.dir.path().join("out");
    let s = (
        t.pid.to_string(),
        out.to_str().unwrap().to_string(),
        tool_lib().to_str().unwrap().to_string(),
    );
    (out, s.0, s.1, s.2)
}

/// Arguments for a short session writing into `out` with the stand-in tool.
fn args<'a>(pid: &'a str, out: &'a str, tool: &'a str) -> Vec<&'a str> {
    vec![
        "--attach",
        pid,
        "--kernel-trace",
        "-d",
        out,
        "-o",
        "run",
        "-t",
        tool,
    ]
}

fn tracer_of(pid: i32) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with("TracerPid:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string()
}

#[test]
fn attach_detach_sends_exact_pairs_and_tool_path_and_reports_files() {
    let t = Target::spawn(TargetOpts::default());
    let (out, pid, out_s, tool_s) = setup(&t);
    let mut a = args(&pid, &out_s, &tool_s);
    a.extend(["--attach-duration-msec", "300"]);
    let env = [
        ("ROCP_USER_SETTING", "kept"),
        ("MY_SECRET_TOKEN", "must-not-leak"),
        ("ROCPROFILER_REGISTER_LIBRARY", "/host/only.so"),
        ("ROCP_TOOL_LIBRARIES", "/dropped.so"),
    ];
    let (code, stdout, stderr) = rocprof_attach(&a, &env).finish();
    assert_eq!(code, 0, "stderr: {stderr}");
    let recs = records(&t);
    assert_eq!(
        recs.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
        ["attach", "detach"],
        "{recs:?}"
    );
    assert_eq!(recs[0].get("tool"), hex(&tool_s), "tool path byte for byte");
    assert_eq!(recs[0].get("comm"), hex("rocp-bg-attach"));
    let pairs = recs[0].pairs();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("ROCP_USER_SETTING"), Some("kept"));
    assert_eq!(get("ROCPROF_KERNEL_TRACE"), Some("1"));
    assert_eq!(get("ROCPROF_OUTPUT_PATH"), Some(out_s.as_str()));
    assert_eq!(get("ROCPROF_OUTPUT_FILE_NAME"), Some("run"));
    assert_eq!(get("ROCPROF_OUTPUT_FORMAT"), Some("rocpd"));
    assert_eq!(get("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC"), Some("1"));
    assert_eq!(get("ROCPROF_ATTACH_TOOL_LIBRARY"), Some(tool_s.as_str()));
    assert_eq!(get("ROCPROFILER_LIBRARY_CTOR"), Some("1"));
    assert_eq!(get("ROCPROFILER_REGISTER_LIBRARY"), None);
    assert_eq!(get("ROCP_TOOL_LIBRARIES"), None);
    assert!(
        pairs.iter().all(|(n, _)| n.starts_with("ROCP")),
        "only ROCP* variables cross: {pairs:?}"
    );
    assert!(!format!("{pairs:?}").contains("must-not-leak"));
    // The file the tool wrote is reported with its size.
    let written = out.join(format!("run_{}_standin_trace.csv", t.pid));
    assert!(written.exists());
    let size = std::fs::metadata(&written).unwrap().len();
    assert!(stdout.contains(&written.display().to_string()), "{stdout}");
    assert!(stdout.contains(&format!("{size} B")), "{stdout}");
    assert!(
        stderr.contains("ignoring ROCP_TOOL_LIBRARIES") || stderr.contains("ROCP_TOOL_LIBRARIES"),
        "{stderr}"
    );
    assert_eq!(tracer_of(t.pid), "0");
    t.assert_heartbeat();
}

#[test]
fn reattach_works_and_numbers_the_second_session() {
    let t = Target::spawn(TargetOpts::default());
    let (_, pid, out_s, tool_s) = setup(&t);
    for round in 0..2 {
        let mut a = args(&pid, &out_s, &tool_s);
        a.extend(["--attach-duration-msec", "100"]);
        let (code, stdout, stderr) = rocprof_attach(&a, &[]).finish();
        assert_eq!(code, 0, "round {round}: {stderr}");
        let expect = if round == 0 {
            format!("run_{pid}_standin_trace.csv")
        } else {
            format!("run_{pid}_1_standin_trace.csv")
        };
        assert!(stdout.contains(&expect), "round {round}: {stdout}");
        assert_eq!(
            stdout.matches("standin_trace.csv").count(),
            1,
            "only this session's file: {stdout}"
        );
    }
    let kinds: Vec<String> = records(&t)
        .iter()
        .map(|r| format!("{}={}", r.kind, r.get("status")))
        .collect();
    assert_eq!(kinds, ["attach=0", "detach=0", "attach=0", "detach=0"]);
}

#[test]
fn tree_attach_skips_fork_only_child_and_attaches_exec_child() {
    let t = Target::spawn(TargetOpts {
        fork_child: true,
        exec_child: true,
        ..Default::default()
    });
    let (fork_child, exec_child) = (t.fork_child.unwrap(), t.exec_child.unwrap());
    let (_, pid, out_s, tool_s) = setup(&t);
    let mut a = args(&pid, &out_s, &tool_s);
    a.extend(["--attach-duration-msec", "200"]);
    let (code, stdout, stderr) = rocprof_attach(&a, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "skipping descendant process {fork_child} because it has no 'rocp-bg-attach' thread"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("attached to 2 processes: {}, {exec_child}", t.pid)),
        "{stderr}"
    );
    let attach_pids: Vec<String> = records(&t)
        .iter()
        .filter(|r| r.kind == "attach")
        .map(|r| r.get("pid").to_string())
        .collect();
    assert_eq!(attach_pids, [t.pid.to_string(), exec_child.to_string()]);
    assert!(stdout.contains(&format!("PID {exec_child}:")), "{stdout}");
}

#[test]
fn root_without_listener_fails_and_descendants_stay_untouched() {
    // The root never registers (no listener) but its exec'd child does.
    let t = Target::spawn(TargetOpts {
        register: false,
        exec_child: true,
        ..Default::default()
    });
    let exec_child = t.exec_child.unwrap();
    let (_, pid, out_s, tool_s) = setup(&t);
    let (code, _, stderr) = rocprof_attach(&args(&pid, &out_s, &tool_s), &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("rocp-bg-attach"), "{stderr}");
    assert!(records(&t).is_empty(), "nothing injected anywhere");
    assert_eq!(tracer_of(exec_child), "0");
}

#[test]
fn each_way_of_ending_the_session_detaches() {
    for how in ["sigint", "sigterm", "sighup", "target-exit"] {
        let mut t = Target::spawn(TargetOpts::default());
        let (_, pid, out_s, tool_s) = setup(&t);
        let mut run = rocprof_attach(&args(&pid, &out_s, &tool_s), &[]);
        run.wait_for("profiling until");
        match how {
            "sigint" => run.signal(Signal::SIGINT),
            "sigterm" => run.signal(Signal::SIGTERM),
            "sighup" => run.signal(Signal::SIGHUP),
            _ => {
                t.finish().expect("target exits when its stdin closes");
            }
        }
        let (code, _, stderr) = run.finish();
        let kinds: Vec<String> = records(&t).iter().map(|r| r.kind.clone()).collect();
        if how == "target-exit" {
            // No detach possible and the stand-in tool writes only on detach: the specific cause
            // (7, target exited) is reported, not the generic "no output" (9).
            assert_eq!(code, 7, "{stderr}");
            assert!(stderr.contains("exited during the session"), "{stderr}");
            assert_eq!(kinds, ["attach"]);
        } else {
            assert_eq!(code, 0, "{how}: {stderr}");
            assert!(stderr.contains("received: detaching"), "{how}: {stderr}");
            assert_eq!(kinds, ["attach", "detach"], "{how}");
            t.assert_heartbeat();
        }
    }
}

#[test]
fn duration_ends_the_session() {
    let t = Target::spawn(TargetOpts::default());
    let (_, pid, out_s, tool_s) = setup(&t);
    let mut a = args(&pid, &out_s, &tool_s);
    a.extend(["--attach-duration-msec", "50"]);
    let (code, _, stderr) = rocprof_attach(&a, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("profiling for 50 ms"), "{stderr}");
    assert_eq!(records(&t).len(), 2);
}

#[test]
fn sigkill_while_waiting_leaves_the_target_running_and_attachable() {
    let t = Target::spawn(TargetOpts::default());
    let (_, pid, out_s, tool_s) = setup(&t);
    let mut run = rocprof_attach(&args(&pid, &out_s, &tool_s), &[]);
    run.wait_for("profiling until");
    run.signal(Signal::SIGKILL);
    let (code, _, _) = run.finish();
    assert_eq!(code, 128 + 9);
    assert_eq!(
        tracer_of(t.pid),
        "0",
        "nothing of ours is attached during the window"
    );
    t.assert_heartbeat();
    let mut a = args(&pid, &out_s, &tool_s);
    a.extend(["--attach-duration-msec", "50"]);
    // Its agent finished the killed session (detach, claim released): a plain session works.
    let (code, _, stderr) = rocprof_attach(&a, &[]).finish();
    assert_eq!(code, 0, "reattach after a killed front end: {stderr}");
    let kinds: Vec<String> = records(&t).iter().map(|r| r.kind.clone()).collect();
    assert_eq!(kinds, ["attach", "detach", "attach", "detach"]);
}

#[test]
fn rejected_attach_reports_the_register_status() {
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_ATTACH_STATUS".into(), "6".into())],
        ..Default::default()
    });
    let (_, pid, out_s, tool_s) = setup(&t);
    let (code, _, stderr) = rocprof_attach(&args(&pid, &out_s, &tool_s), &[]).finish();
    assert_eq!(code, 6, "{stderr}");
    assert!(
        stderr.contains("ROCP_REG_ROCPROFILER_ERROR") && stderr.contains("keeps running"),
        "{stderr}"
    );
    t.assert_heartbeat();
}

#[test]
fn no_output_is_an_error_not_a_success() {
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_NO_OUTPUT".into(), "1".into())],
        ..Default::default()
    });
    let (_, pid, out_s, tool_s) = setup(&t);
    let mut a = args(&pid, &out_s, &tool_s);
    a.extend(["--attach-duration-msec", "50"]);
    let (code, stdout, stderr) = rocprof_attach(&a, &[]).finish();
    assert_eq!(code, 9, "{stderr}");
    assert!(stderr.contains("no output file appeared"), "{stderr}");
    assert!(!stdout.contains("wrote"), "{stdout}");
}

#[test]
fn bad_targets_are_refused_before_any_ptrace() {
    let tool = tool_lib();
    let tool_s = tool.to_str().unwrap();
    // A zombie: a child of this test that exited and was not reaped.
    let mut zombie = std::process::Command::new("true").spawn().unwrap();
    common::wait_until(std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{}/stat", zombie.id()))
            .is_ok_and(|s| s.contains(") Z"))
    });
    let zpid = zombie.id().to_string();
    let gone = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let p = c.id();
        c.wait().unwrap();
        p.to_string()
    };
    let cases: Vec<(String, i32, &str)> = vec![
        (zpid.clone(), 4, "zombie"),
        ("2".into(), 4, "kernel thread"),
        (gone, 3, "does not exist"),
    ];
    for (pid, want, says) in cases {
        let (code, _, stderr) =
            rocprof_attach(&["--attach", &pid, "--kernel-trace", "-t", tool_s], &[]).finish();
        assert_eq!(code, want, "pid {pid}: {stderr}");
        assert!(stderr.to_lowercase().contains(says), "pid {pid}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.contains("error")).count(),
            1,
            "one error line: {stderr}"
        );
    }
    zombie.wait().unwrap();
    // Ourselves: `exec` keeps the shell's PID, so `$$` is rocprof-attach's own PID.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec '{}' --attach $$ --kernel-trace -t '{tool_s}'",
            env!("CARGO_BIN_EXE_rocprof-attach")
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("itself") || stderr.contains("ourselves") || stderr.contains("own"),
        "{stderr}"
    );
}

#[test]
fn absolute_tool_path_missing_in_the_target_root_is_refused() {
    let t = Target::spawn(TargetOpts::default());
    let pid = t.pid.to_string();
    let (code, _, stderr) = rocprof_attach(
        &[
            "--attach",
            &pid,
            "--kernel-trace",
            "-t",
            "/definitely/not/here/libtool.so",
        ],
        &[],
    )
    .finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("/definitely/not/here/libtool.so"),
        "{stderr}"
    );
    assert!(records(&t).is_empty());
}
