//! Issue 19, item 2: every session stands alone: nothing an earlier session sent to the target
//! applies to a later one.

use crate::common;

use common::{attach_pairs, rocprof_attach, tool_lib, Target, TargetOpts};
use std::collections::BTreeMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn sessions_in_sequence_on_one_target_each_stand_alone() {
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    let session = |extra: &[&str]| {
        let mut args = vec!["--attach", &pid, "-d", s(&out), "-t", s(&tool)];
        args.extend_from_slice(extra);
        args.extend(["--attach-duration-msec", "100"]);
        let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
        assert_eq!(code, 0, "{extra:?}: {stderr}\n{stdout}");
        stdout
    };
    // The variables of the target after each session: the register keeps every pair it sets.
    let mut target_env: BTreeMap<String, String> = BTreeMap::new();
    let mut apply = |n: usize| {
        let pairs = attach_pairs(&t, n);
        target_env.extend(pairs.clone());
        (pairs, target_env.clone())
    };

    // 1: HIP trace into a templated name.
    let stdout = session(&["--hip-trace", "-o", "a/%pid%/b"]);
    let first = out.join(format!("a/{pid}/b_standin_trace.csv"));
    assert!(first.is_file(), "{stdout}");
    let (sent, env) = apply(0);
    assert_eq!(env["ROCPROF_HIP_RUNTIME_API_TRACE"], "1");
    assert_eq!(env["ROCPROF_OUTPUT_FILE_NAME"], "a/%pid%/b");
    assert_eq!(env["ROCPROF_KERNEL_TRACE"], "0", "{sent:?}");

    // 2: the same services (a reattach must ask for what the first attach did: the preflight
    // refuses others, as rocprofiler-sdk would), no -o: the default name again.
    let stdout = session(&["--hip-trace"]);
    let (sent2, env) = apply(1);
    assert_eq!(env["ROCPROF_HIP_RUNTIME_API_TRACE"], "1");
    assert_eq!(env["ROCPROF_KERNEL_TRACE"], "0");
    assert_eq!(env["ROCPROF_OUTPUT_FILE_NAME"], "%hostname%/%pid%");
    // Nothing of session 1 is left to chance: the target holds, after session 2, exactly what
    // the same session makes a fresh target hold (which gets every variable), for every
    // variable session 1 sent. Session 2 sends only what differs from what session 1 left (the
    // register would `setenv` the rest to what it is).
    let fresh = Target::spawn(TargetOpts::default());
    let fresh_pid = fresh.pid.to_string();
    let mut args = vec!["--attach", &fresh_pid, "-d", s(&out), "-t", s(&tool)];
    args.extend(["--hip-trace", "--attach-duration-msec", "100"]);
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let whole = attach_pairs(&fresh, 0);
    for name in sent.keys().filter(|n| n.starts_with("ROCPROF_")) {
        assert!(whole.contains_key(name), "{name} not sent: {whole:?}");
    }
    for (name, value) in whole.iter().filter(|(n, _)| *n != "ROCPROF_ATTACH_PID") {
        assert_eq!(
            env.get(name),
            Some(value),
            "{name} after session 2 (which sent {sent2:?})"
        );
    }
    assert!(sent2.contains_key("ROCPROF_OUTPUT_FILE_NAME"), "{sent2:?}");
    assert!(!sent2.contains_key("ROCPROF_KERNEL_TRACE"), "{sent2:?}");
    // No empty boolean (fatal in the tool): every trace switch is 0 or 1.
    for (name, value) in &sent2 {
        if name.ends_with("_TRACE") {
            assert!(value == "0" || value == "1", "{name}={value:?}");
        }
    }
    let second = out.join(format!("{}/{pid}_1_standin_trace.csv", hostname()));
    assert!(
        second.is_file(),
        "session 2 writes under the default name: {stdout}"
    );
    assert!(stdout.contains(s(&second)), "{stdout}");
    assert!(!out.join(format!("a/{pid}/b_1_standin_trace.csv")).exists());
    // 3: other services are refused before any ptrace, naming what differs.
    let mut args = vec![
        "--attach",
        &pid,
        "-d",
        s(&out),
        "-t",
        s(&tool),
        "--kernel-trace",
    ];
    args.extend(["--attach-duration-msec", "100"]);
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("ROCPROF_KERNEL_TRACE: not set then, '1' now"),
        "{stderr}"
    );
    t.assert_heartbeat();

    // 4: counters and a filter on one process, 5: plain on another: the plain session sends
    // the counters and the filter as "none", whatever the process was sent before it.
    let t = Target::spawn(TargetOpts::default());
    let pid = t.pid.to_string();
    let session = |extra: &[&str]| {
        let mut args = vec!["--attach", &pid, "-d", s(&out), "-t", s(&tool)];
        args.extend_from_slice(extra);
        args.extend(["--attach-duration-msec", "100"]);
        let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
        assert_eq!(code, 0, "{extra:?}: {stderr}\n{stdout}");
    };
    session(&[
        "--pmc",
        "SQ_WAVES",
        "--kernel-include-regex",
        "^gemm",
        "-o",
        "c",
    ]);
    let env = attach_pairs(&t, 0);
    assert_eq!(env["ROCPROF_COUNTERS"], "pmc: SQ_WAVES");
    assert_eq!(env["ROCPROF_COUNTER_COLLECTION"], "1");
    assert_eq!(env["ROCPROF_KERNEL_TRACE"], "0");
    assert_eq!(env["ROCPROF_KERNEL_FILTER_INCLUDE_REGEX"], "^gemm");
    assert!(out.join(format!("c_{pid}_standin_trace.csv")).is_file());
    let t = Target::spawn(TargetOpts::default());
    let pid = t.pid.to_string();
    let mut args = vec!["--attach", &pid, "-d", s(&out), "-t", s(&tool)];
    args.extend(["--memory-copy-trace", "--attach-duration-msec", "100"]);
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let env = attach_pairs(&t, 0);
    assert_eq!(
        env["ROCPROF_COUNTERS"], "",
        "empty means no counters to the tool"
    );
    assert_eq!(env["ROCPROF_COUNTER_COLLECTION"], "0");
    assert_eq!(env["ROCPROF_KERNEL_FILTER_INCLUDE_REGEX"], ".*");
    assert_eq!(env["ROCPROF_PC_SAMPLING_METHOD"], "none");
    assert_eq!(env["ROCPROF_MEMORY_COPY_TRACE"], "1");
    assert_eq!(env["ROCPROF_HIP_RUNTIME_API_TRACE"], "0");
    assert!(out
        .join(format!("{}/{pid}_standin_trace.csv", hostname()))
        .is_file());
    t.assert_heartbeat();
}

#[test]
fn a_variable_exported_by_the_user_is_kept() {
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    let args = [
        "--attach",
        &pid,
        "-d",
        s(&out),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[("ROCPROF_KERNEL_TRACE", "1")]).finish();
    assert_eq!(code, 0, "{stderr}");
    let env = attach_pairs(&t, 0);
    assert_eq!(env["ROCPROF_KERNEL_TRACE"], "1");
    assert_eq!(env["ROCPROF_MARKER_API_TRACE"], "0");
}

/// `--replay-mode iteration` is iteration multiplexing of our CUDA tool: a ROCm process is
/// refused with the reason and the fix, and nothing is sent to it.
#[test]
fn iteration_replay_is_refused_for_a_rocm_process_before_anything_is_sent() {
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    let (pid, tool) = (t.pid.to_string(), tool_lib());
    let args = [
        "--attach",
        &pid,
        "-d",
        s(&out),
        "-t",
        s(&tool),
        "--pmc",
        "SQ_WAVES",
        "--pmc",
        "GRBM_COUNT",
        "--replay-mode",
        "iteration",
        "--attach-duration-msec",
        "50",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 2, "a usage error: {stderr}");
    assert!(
        stderr.contains("--replay-mode iteration is for CUDA processes")
            && stderr.contains("--replay-mode kernel"),
        "{stderr}"
    );
    let attaches = common::records(&t)
        .into_iter()
        .filter(|r| r.kind == "attach")
        .count();
    assert_eq!(attaches, 0, "nothing was sent");
}
