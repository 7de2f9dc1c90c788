//! The rocattach C ABI (src/capi) through a C host that dlopens the installed library by path,
//! against the stand-in targets: exports, status table, bad input, sessions, trees, detach(0),
//! the older ABI, two host threads, and the Python ctypes client.

use crate::capi_common;
use crate::common;

use capi_common::{calls_of, host, log_lines, run, status_of, Layout};
use common::{records, wait_until, Pristine, Target, TargetOpts};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

#[test]
fn exports_exactly_the_rocattach_abi_with_its_soname() {
    let layout = Layout::install();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(layout.lib())
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success());
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    let want: BTreeSet<String> = [
        "attach",
        "detach",
        "rocattach_attach",
        "rocattach_attach_tree",
        "rocattach_detach",
        "rocattach_detach_tree",
        "rocattach_get_status_name",
        "rocattach_get_status_string",
        "rocattach_get_version",
        "rocattach_get_version_triplet",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, want);
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(layout.lib())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&dynamic.stdout)
            .contains("Library soname: [librocprofiler-sdk-rocattach.so.1]"),
        "{}",
        String::from_utf8_lossy(&dynamic.stdout)
    );
    // The names ROCm's tools load all lead to the same file.
    for name in [
        "lib/librocprofiler-sdk-rocattach.so",
        "lib/librocprofv3-attach.so",
        "lib/rocprofiler-sdk/librocprofv3-attach.so",
    ] {
        assert_eq!(
            std::fs::canonicalize(layout.path(name)).unwrap(),
            std::fs::canonicalize(layout.lib()).unwrap(),
            "{name}"
        );
    }
    let header =
        std::fs::read_to_string(layout.path("include/rocprofiler-sdk-rocattach/rocattach.h"))
            .unwrap();
    for f in &want {
        assert!(header.contains(&format!("{f}(")), "header lacks {f}");
    }
}

#[test]
fn status_table_and_version() {
    let layout = Layout::install();
    let (out, _) = run(&layout.lib(), &["names", "version"], &[]);
    let want = [
        "name -1 NULL NULL",
        "name 0 ROCATTACH_STATUS_SUCCESS Success",
        "name 1 ROCATTACH_STATUS_ERROR General error",
        "name 2 ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT Invalid function argument",
        "name 3 ROCATTACH_STATUS_ERROR_NOT_SUPPORTED Attachment not supported on this platform",
        "name 4 ROCATTACH_STATUS_ERROR_PTRACE_ERROR General ptrace error",
        "name 5 ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED ptrace returned EPERM, operation not permitted",
        "name 6 ROCATTACH_STATUS_ERROR_PTRACE_PROCESS_NOT_FOUND ptrace returned ESRCH, no such process",
        "name 7 NULL NULL",
        "name 8 NULL NULL",
        "version 1 0 0 1 0 0 0 0",
    ];
    assert_eq!(out, want);
}

/// An agent that only records that it was started: bad input must never get that far.
fn fake_agent(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let marker = dir.join("agent-started");
    let agent = dir.join("fake-agent");
    std::fs::write(
        &agent,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    (agent, marker)
}

#[test]
fn bad_input_gets_its_status_and_one_log_line_and_no_ptrace() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let silent = Target::spawn(TargetOpts {
        attach_enabled: false,
        ..TargetOpts::default()
    });
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        c.wait().unwrap();
        pid
    };
    let scratch = tempfile::tempdir().unwrap();
    let (agent, marker) = fake_agent(scratch.path());
    let text_file = scratch.path().join("not-a-library.so");
    std::fs::write(&text_file, "just text\n").unwrap();
    let (p, s) = (t.pid.to_string(), silent.pid.to_string());
    let g = gone.to_string();
    let text = text_file.to_str().unwrap();
    // (command, pid, tool override, status, what the one log line says)
    let cases: Vec<(&str, &str, Option<&str>, i32, &str)> = vec![
        ("attach", "0", None, 2, "invalid PID 0"),
        ("attach", "-5", None, 2, "invalid PID -5"),
        ("attach_tree", "-1", None, 2, "invalid PID -1"),
        ("attach", &g, None, 6, "does not exist"),
        ("attach", &s, None, 1, "'rocp-bg-attach' thread not found"),
        (
            "attach_tree",
            &s,
            None,
            1,
            "'rocp-bg-attach' thread not found",
        ),
        ("attach", &p, Some(""), 2, "is set but empty"),
        ("attach", &p, Some(":"), 2, "is set but empty"),
        (
            "attach",
            &p,
            Some("/nonexistent/libtool.so"),
            2,
            "does not exist",
        ),
        ("attach", &p, Some("/"), 2, "not a regular file"),
        ("attach", &p, Some(text), 2, "not an ELF"),
        ("detach", &p, None, 2, "no session for process"),
        ("detach", "-3", None, 2, "invalid PID -3"),
        ("detach_tree", &p, None, 2, "no tree session"),
    ];
    for (cmd, pid, tool, want, needle) in cases {
        let mut env = vec![("ROCATTACH_AGENT", Some(agent.to_str().unwrap()))];
        if let Some(tool) = tool {
            env.push(("ROCPROF_ATTACH_TOOL_LIBRARY", Some(tool)));
        }
        let (out, err) = run(&layout.lib(), &[cmd, pid], &env);
        let context = format!("{cmd} {pid} tool {tool:?}");
        assert_eq!(
            status_of(&out, &format!("{cmd} {pid}")),
            want,
            "{context}: {err}"
        );
        let lines = log_lines(&err);
        assert_eq!(lines.len(), 1, "{context}: one log line: {err}");
        assert!(lines[0].contains(needle), "{context}: {}", lines[0]);
        assert!(
            lines[0].starts_with('E') && lines[0].contains("rocattach] ROCATTACH: "),
            "{context}: glog-style error line: {}",
            lines[0]
        );
        assert!(!marker.exists(), "{context}: the agent was started");
    }
    assert!(records(&t).is_empty(), "{:?}", t.log_lines());
    assert!(records(&silent).is_empty());
    // Quiet when asked.
    let (out, err) = run(
        &layout.lib(),
        &["attach", "0"],
        &[("ROCATTACH_LOG_LEVEL", Some("off"))],
    );
    assert_eq!(status_of(&out, "attach 0"), 2);
    assert!(log_lines(&err).is_empty(), "{err}");
    // A bad level is reported once, with the values to use.
    let (_, err) = run(
        &layout.lib(),
        &["attach", "0"],
        &[("ROCATTACH_LOG_LEVEL", Some("loud"))],
    );
    assert!(
        err.contains("ignoring ROCATTACH_LOG_LEVEL=loud: use one of trace, info, warning"),
        "{err}"
    );
}

#[test]
fn attach_detach_reattach_sends_the_host_environment_and_leaves_nothing_behind() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let p = t.pid.to_string();
    let args = [
        "setenv",
        "ROCPROF_KERNEL_TRACE",
        "1",
        "tasks",
        "attach",
        &p,
        "tasks",
        "children",
        "attach",
        &p,
        "unsetenv",
        "ROCPROF_KERNEL_TRACE",
        "detach",
        &p,
        "tasks",
        "children",
        "detach",
        &p,
        "attach",
        &p,
        "detach",
        &p,
    ];
    let (out, err) = run(&layout.lib(), &args, &[]);
    let statuses: Vec<i32> = out
        .iter()
        .filter(|l| l.starts_with("attach ") || l.starts_with("detach "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(statuses, [0, 2, 0, 2, 0, 0], "{out:?}\n{err}");
    // No thread of ours stays behind between calls, and no child process: the session's agent
    // server (tests/capi_kill.rs) is not the host's child.
    assert_eq!(
        out.iter()
            .filter(|l| l.starts_with("tasks"))
            .collect::<Vec<_>>(),
        ["tasks 1", "tasks 1", "tasks 1"]
    );
    assert_eq!(
        out.iter()
            .filter(|l| l.starts_with("children"))
            .collect::<Vec<_>>(),
        ["children 0", "children 0"]
    );
    assert_eq!(
        calls_of(&t.log, t.pid),
        ["attach=0", "detach=0", "attach=0", "detach=0"]
    );
    let recs = records(&t);
    let tool = common::tool_lib().to_str().unwrap().to_string();
    assert_eq!(recs[0].get("tool"), common::hex(&tool));
    let first = recs[0].pairs();
    assert!(
        first.contains(&("ROCPROF_KERNEL_TRACE".into(), "1".into())),
        "{first:?}"
    );
    assert!(first.contains(&("ROCPROF_ATTACH_TOOL_LIBRARY".into(), tool.clone())));
    // Read at call time: the variable unset by the host is sent off the second time, so the
    // first session's value does not carry over in the target.
    assert!(
        recs[2]
            .pairs()
            .contains(&("ROCPROF_KERNEL_TRACE".into(), "0".into())),
        "{:?}",
        recs[2].pairs()
    );
    // The target is exactly as it was, and attachable again.
    let pristine = Pristine::take(&t);
    let p = t.pid.to_string();
    let (out, _) = run(&layout.lib(), &["attach", &p, "detach", &p], &[]);
    assert_eq!(status_of(&out, &format!("attach {p}")), 0);
    pristine.assert_same(&t, "after a library session");
    t.assert_heartbeat();
}

#[test]
fn tree_attach_skips_listenerless_descendants_and_detach_tree_uses_the_recorded_list() {
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts {
        fork_child: true,
        exec_child: true,
        ..TargetOpts::default()
    });
    let (fork_child, exec_child) = (t.fork_child.unwrap(), t.exec_child.unwrap());
    let (p, e) = (t.pid.to_string(), exec_child.to_string());
    let (out, err) = run(
        &layout.lib(),
        &[
            "attach_tree",
            &p,
            "attach",
            &e,
            "detach_tree",
            &p,
            "detach_tree",
            &p,
            "attach_tree",
            &p,
            "detach",
            "0",
            "detach",
            "0",
            "detach",
            &e,
        ],
        &[],
    );
    let statuses: Vec<&str> = out.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    // tree 0; the exec child is attached as part of it (2); detach_tree 0, again 2; tree 0,
    // detach(0) twice 0; the exec child was detached by detach(0) (2).
    assert_eq!(
        statuses,
        ["0", "2", "0", "2", "0", "0", "0", "2"],
        "{out:?}\n{err}"
    );
    let skipped = format!(
        "skipping descendant process {fork_child} because it has no 'rocp-bg-attach' thread"
    );
    let line = err.lines().find(|l| l.contains(&skipped));
    assert!(line.is_some_and(|l| l.starts_with('W')), "a warning: {err}");
    for pid in [t.pid, exec_child] {
        assert_eq!(
            calls_of(&t.log, pid),
            ["attach=0", "detach=0", "attach=0", "detach=0"],
            "process {pid}"
        );
    }
    assert!(calls_of(&t.log, fork_child).is_empty());

    // The root is mandatory: a listener-less root fails with 1 and its descendants stay untouched.
    let bare = Target::spawn(TargetOpts {
        register: false,
        exec_child: true,
        ..TargetOpts::default()
    });
    let b = bare.pid.to_string();
    let (out, err) = run(&layout.lib(), &["attach_tree", &b, "detach_tree", &b], &[]);
    assert_eq!(status_of(&out, &format!("attach_tree {b}")), 1, "{err}");
    assert_eq!(status_of(&out, &format!("detach_tree {b}")), 2);
    assert!(records(&bare).is_empty(), "{:?}", bare.log_lines());
}

#[test]
fn detach_zero_detaches_every_session_and_the_older_abi_works() {
    let layout = Layout::install();
    let a = Target::spawn(TargetOpts::default());
    let b = Target::spawn(TargetOpts::default());
    let (pa, pb) = (a.pid.to_string(), b.pid.to_string());
    let (out, err) = run(
        &layout.lib(),
        &[
            "attach", &pa, "attach", &pb, "detach", "0", "detach", "0", "detach", &pa,
        ],
        &[],
    );
    let statuses: Vec<&str> = out.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    assert_eq!(statuses, ["0", "0", "0", "0", "2"], "{err}");
    assert_eq!(calls_of(&a.log, a.pid), ["attach=0", "detach=0"]);
    assert_eq!(calls_of(&b.log, b.pid), ["attach=0", "detach=0"]);

    // The older ABI, loaded under its own name: void attach(uint32_t), void detach(void).
    let old = layout.path("lib/rocprofiler-sdk/librocprofv3-attach.so");
    let (out, err) = run(
        &old,
        &[
            "old_attach",
            &pa,
            "old_attach",
            &pb,
            "old_detach",
            "old_attach",
            "0",
        ],
        &[],
    );
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(calls_of(&a.log, a.pid)[2..], ["attach=0", "detach=0"]);
    assert_eq!(calls_of(&b.log, b.pid)[2..], ["attach=0", "detach=0"]);
    // The failure of attach(0) is logged (there is no return value).
    assert!(
        err.contains("invalid PID 0") && err.contains("attach(0) failed with status 2"),
        "{err}"
    );
}

#[test]
fn two_host_threads_attach_different_pids_at_once() {
    let layout = Layout::install();
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("open");
    // The first target's attach call blocks until the gate file exists...
    let slow = Target::spawn(TargetOpts {
        env: vec![("STANDIN_ATTACH_GATE".into(), gate.to_str().unwrap().into())],
        ..TargetOpts::default()
    });
    let fast = Target::spawn(TargetOpts::default());
    let (ps, pf) = (slow.pid.to_string(), fast.pid.to_string());
    let mut h = host(
        &layout.lib(),
        &["both", &ps, &pf, "both_detach", &ps, &pf],
        &[],
    );
    // ...and the second attaches meanwhile: no lock is held across the injection.
    wait_until(Duration::from_secs(30), || {
        calls_of(&fast.log, fast.pid) == ["attach=0"]
    });
    assert!(calls_of(&slow.log, slow.pid).is_empty());
    std::fs::write(&gate, "").unwrap();
    assert_eq!(h.expect("both "), "both 0 0");
    assert_eq!(h.expect("both_detach"), "both_detach 0 0");
    let (code, _, err) = h.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(calls_of(&slow.log, slow.pid), ["attach=0", "detach=0"]);
    assert_eq!(calls_of(&fast.log, fast.pid), ["attach=0", "detach=0"]);
}

#[test]
fn python_ctypes_client() {
    if Command::new("python3").arg("--version").output().is_err() {
        panic!("python3 is needed for this test (tests/scripts/ci-deps.sh installs it)");
    }
    let layout = Layout::install();
    let t = Target::spawn(TargetOpts::default());
    let script = format!(
        r#"
import ctypes
lib = ctypes.CDLL({lib:?})
for n in ("rocattach_attach", "rocattach_detach"):
    getattr(lib, n).argtypes = [ctypes.c_int]
lib.rocattach_get_status_name.restype = ctypes.c_char_p
a = lib.rocattach_attach({pid})
again = lib.rocattach_attach({pid})
d = lib.rocattach_detach({pid})
print(a, again, d, lib.rocattach_get_status_name(again).decode())
"#,
        lib = layout.lib().to_str().unwrap(),
        pid = t.pid
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", common::tool_lib())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0 2 0 ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT"
    );
    assert_eq!(calls_of(&t.log, t.pid), ["attach=0", "detach=0"]);
}
