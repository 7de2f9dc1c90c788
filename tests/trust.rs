//! When things go wrong: stopped targets, failed detaches, output directories and tool libraries
//! that cannot work, formats nothing produced, selections that skip or match nothing, and the
//! `--json` report. Every bad input is one error line with the fix, and the target is untouched:
//! nothing traces it and it keeps running.

use crate::common;
use crate::prereq;

use common::{records, rocprof_attach, tool_lib, tracer_pid, Target, TargetOpts};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::time::Duration;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn spawn(opts: TargetOpts) -> Target {
    Target::spawn(opts)
}

fn signal(pid: i32, sig: Signal) {
    kill(Pid::from_raw(pid), sig).unwrap();
}

/// The target was never attached (or is attached no more), nothing traces it, and it runs.
fn assert_untouched(t: &Target, attaches: usize, what: &str) {
    let n = records(t).iter().filter(|r| r.kind == "attach").count();
    assert_eq!(n, attaches, "{what}: attach calls in the target");
    assert_eq!(tracer_pid(t.pid, t.pid), 0, "{what}: traced");
    assert_eq!(
        tracer_pid(t.pid, t.listener()),
        0,
        "{what}: listener traced"
    );
    assert!(t.alive(), "{what}: target died");
    t.assert_heartbeat();
}

/// Exactly one `rocprof-attach: error:` line, mentioning each needle.
fn one_error(stderr: &str, needles: &[&str], what: &str) {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rocprof-attach: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{what}: one error line expected: {stderr}");
    for n in needles {
        assert!(errors[0].contains(n), "{what}: '{n}' in {}", errors[0]);
    }
}

fn session<'a>(pid: &'a str, out: &'a Path, tool: &'a Path) -> Vec<&'a str> {
    vec![
        "-p",
        pid,
        "--kernel-trace",
        "-d",
        s(out),
        "-t",
        s(tool),
        "--attach-duration-msec",
        "50ms",
    ]
}

#[test]
fn a_stopped_target_is_refused_before_attaching_with_the_fix() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pid = t.pid.to_string();
    signal(t.pid, Signal::SIGSTOP);
    common::wait_until(Duration::from_secs(10), || {
        common::thread_state(t.pid, t.pid) == Some('T')
    });
    let (code, stdout, stderr) = rocprof_attach(&session(&pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    one_error(
        &stderr,
        &["is stopped", &format!("kill -CONT {pid}")],
        "stopped",
    );
    assert_eq!(tracer_pid(t.pid, t.pid), 0);
    signal(t.pid, Signal::SIGCONT);
    assert_untouched(&t, 0, "stopped before attach");
}

/// Start a session that waits for a signal, and stop the target during the window.
fn stopped_during_window(t: &Target, out: &Path, extra: &[&str]) -> common::Run {
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let mut args = vec!["-p", &pid, "--kernel-trace", "-d", s(out), "-t", s(&tool)];
    args.extend_from_slice(extra);
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling until");
    signal(t.pid, Signal::SIGSTOP);
    // Every thread, the listener too, is in its group-stop before the detach starts (a stop that
    // lands later is tests/faults.rs's `job_control_*`).
    let listener = t.listener();
    common::wait_until(Duration::from_secs(10), || {
        common::thread_state(t.pid, t.pid) == Some('T')
            && common::thread_state(t.pid, listener) == Some('T')
    });
    run.signal(Signal::SIGINT);
    run.wait_for("is stopped (state T)");
    run
}

#[test]
fn a_target_stopped_during_the_window_is_a_detach_failure_after_a_bounded_wait() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let run = stopped_during_window(&t, out.path(), &["--stopped-timeout", "300ms"]);
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 11, "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!("kill -CONT {}", t.pid)),
        "{stderr}"
    );
    assert!(stderr.contains("within 300 ms"), "{stderr}");
    assert!(
        stderr.contains("the profiler may still be active"),
        "{stderr}"
    );
    assert!(
        stderr.contains(s(out.path())),
        "names where the output goes: {stderr}"
    );
    assert!(!stderr.contains("no output file appeared"), "{stderr}");
    assert_eq!(tracer_pid(t.pid, t.pid), 0);
    signal(t.pid, Signal::SIGCONT);
    // Attached once, never detached: the profiler is still active, as we said.
    let kinds: Vec<String> = records(&t).iter().map(|r| r.kind.clone()).collect();
    assert_eq!(kinds, ["attach"], "{stderr}");
    assert_untouched(&t, 1, "stopped during the window");
}

#[test]
fn a_second_ctrl_c_gives_up_on_a_stopped_target_and_says_so() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let mut run = stopped_during_window(&t, out.path(), &["--stopped-timeout", "10m"]);
    run.signal(Signal::SIGINT);
    run.wait_for("giving up on detaching stopped process");
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 11, "{stderr}");
    assert!(!stderr.contains("writing its output"), "{stderr}");
    assert!(
        stderr.contains("before rocprof-attach was interrupted"),
        "{stderr}"
    );
    signal(t.pid, Signal::SIGCONT);
    assert_untouched(&t, 1, "given up");
}

#[test]
fn a_stopped_target_that_continues_is_detached() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let mut run = stopped_during_window(&t, out.path(), &["--stopped-timeout", "1m"]);
    signal(t.pid, Signal::SIGCONT);
    run.wait_for("continued; detaching");
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let kinds: Vec<String> = records(&t).iter().map(|r| r.kind.clone()).collect();
    assert_eq!(kinds, ["attach", "detach"]);
    assert_untouched(&t, 1, "continued");
}

#[test]
fn output_directories_that_cannot_work_are_refused_before_any_ptrace() {
    let t = spawn(TargetOpts::default());
    let tool = tool_lib();
    let pid = t.pid.to_string();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("sub");
    for (dir, needle) in [
        (under_file.to_str().unwrap(), "is not a directory"),
        ("/proc/x/y", "kernel filesystem"),
    ] {
        let dir_path = Path::new(dir);
        let (code, stdout, stderr) = rocprof_attach(&session(&pid, dir_path, &tool), &[]).finish();
        assert_eq!(code, 2, "{dir}: {stderr}\n{stdout}");
        one_error(&stderr, &[needle, "Fix: pass -d"], dir);
        assert_untouched(&t, 0, dir);
    }
    // --check sees it too.
    let (code, _, stderr) = rocprof_attach(
        &["--check", "-p", &pid, "-d", under_file.to_str().unwrap()],
        &[],
    )
    .finish();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is not a directory"), "{stderr}");
}

#[test]
fn an_output_directory_the_targets_user_cannot_write_is_refused() {
    if !prereq::root("to run the target as another user") {
        return;
    }
    let t = spawn(TargetOpts {
        uid: Some(65534),
        ..Default::default()
    });
    let tmp = common::public_dir();
    let ro = tmp.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pid = t.pid.to_string();
    let tool_dir = common::public_dir();
    let tool = common::public_copy(&tool_lib(), tool_dir.path());
    // We (root) could write there; the target (nobody) cannot create ro/sub.
    let (code, stdout, stderr) =
        rocprof_attach(&session(&pid, &ro.join("sub"), &tool), &[]).finish();
    assert_eq!(code, 2, "{stderr}\n{stdout}");
    one_error(
        &stderr,
        &["not writable by the target's user", "uid 65534"],
        "ro",
    );
    assert_untouched(&t, 0, "read-only for the target");
}

#[test]
fn a_tool_library_that_is_not_a_shared_object_is_refused() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let text = out.path().join("libtext.so");
    std::fs::write(&text, "this is not a library\n").unwrap();
    let (code, stdout, stderr) = rocprof_attach(&session(&pid, out.path(), &text), &[]).finish();
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    one_error(
        &stderr,
        &["is a text file, not an ELF shared object", "Fix:"],
        "text",
    );
    assert_untouched(&t, 0, "text tool");
}

#[test]
fn a_reattach_with_another_tool_is_refused_with_the_tool_to_pass() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    // A name of its own: the loaded tool is found by its exports, not by rocprofv3's file name.
    let named = |dir: &Path| {
        let p = dir.join("libmy-profiler.so");
        std::fs::copy(tool_lib(), &p).unwrap();
        p
    };
    let first_dir = tempfile::tempdir().unwrap();
    let tool = named(first_dir.path());
    let pid = t.pid.to_string();
    let (code, _, stderr) = rocprof_attach(&session(&pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    // The same tool again is fine: a reattach.
    let (code, _, stderr) = rocprof_attach(&session(&pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let other_dir = tempfile::tempdir().unwrap();
    let other = named(other_dir.path());
    let (code, stdout, stderr) = rocprof_attach(&session(&pid, out.path(), &other), &[]).finish();
    assert_eq!(code, 4, "{stderr}\n{stdout}");
    let canon = std::fs::canonicalize(&tool).unwrap();
    one_error(
        &stderr,
        &[
            "already loaded the tool library",
            &format!("pass -t {}", canon.display()),
        ],
        "other tool",
    );
    // --check sees the loaded tool too.
    let (code, _, stderr) = rocprof_attach(&["--check", "-p", &pid, "-t", s(&other)], &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("already loaded the tool library"),
        "{stderr}"
    );
    assert_untouched(&t, 2, "reattach refused");
}

/// The same tool file by another string (a symlink, a `..` path) and other services or filters
/// than the first attach asked for: rocprofiler-register and the SDK would refuse them (status 8
/// and 6, exit 6); the preflight and `--check` refuse them first (exit 4), naming the exact string
/// of the first attach and each setting, as read from the target's live environment.
#[test]
fn a_reattach_by_another_path_or_with_other_settings_is_refused_in_preflight() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    let tool = dir.join("libmy-profiler.so");
    std::fs::copy(tool_lib(), &tool).unwrap();
    let link = dir.join("link.so");
    std::os::unix::fs::symlink(&tool, &link).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let dotdot = dir.join("sub/../libmy-profiler.so");
    let pid = t.pid.to_string();
    let (code, _, stderr) = rocprof_attach(&session(&pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    for other in [&link, &dotdot] {
        let (code, _, stderr) = rocprof_attach(&session(&pid, out.path(), other), &[]).finish();
        assert_eq!(code, 4, "{}: {stderr}", other.display());
        one_error(
            &stderr,
            &[
                &format!("sent as '{}'", tool.display()),
                &format!("Fix: pass -t {}", tool.display()),
            ],
            "another path",
        );
        let (code, _, stderr) =
            rocprof_attach(&["--check", "-p", &pid, "-t", s(other)], &[]).finish();
        assert_eq!(code, 4, "--check {}: {stderr}", other.display());
    }
    // Other services, another filter: named with both values, in a session and in --check.
    let (code, _, stderr) = rocprof_attach(
        &[
            "--check",
            "-p",
            &pid,
            "-t",
            s(&tool),
            "--kernel-trace",
            "--hip-runtime-trace",
        ],
        &[],
    )
    .finish();
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("ROCPROF_HIP_RUNTIME_API_TRACE: not set then, '1' now"),
        "{stderr}"
    );
    let mut args = session(&pid, out.path(), &tool);
    args.extend(["--kernel-include-regex", "gemm"]);
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    one_error(
        &stderr,
        &["ROCPROF_KERNEL_FILTER_INCLUDE_REGEX: '.*' then, 'gemm' now"],
        "another filter",
    );
    // The same string and settings: attachable, and a reattach works.
    let (code, _, stderr) = rocprof_attach(
        &["--check", "-p", &pid, "-t", s(&tool), "--kernel-trace"],
        &[],
    )
    .finish();
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = rocprof_attach(&session(&pid, out.path(), &tool), &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert_untouched(&t, 2, "reattach refusals");
}

#[test]
fn a_requested_format_nothing_produced_is_a_warning_and_exit_12() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pid = t.pid.to_string();
    let mut args = session(&pid, out.path(), &tool);
    args.extend(["-f", "json"]);
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 12, "{stderr}\n{stdout}");
    assert!(
        stdout.contains("_standin_trace.csv"),
        "the files are listed: {stdout}"
    );
    assert!(
        stderr.contains("warning: no json output was produced")
            && stderr.contains("add rocpd to --output-format"),
        "{stderr}"
    );
}

fn unique(what: &str) -> String {
    format!("trust-{what}-{}", std::process::id())
}

#[test]
fn selections_skip_processes_without_a_listener_and_attach_the_rest() {
    let tag = unique("skip");
    let with = spawn(TargetOpts {
        tag: Some(tag.clone()),
        ..Default::default()
    });
    let without = spawn(TargetOpts {
        tag: Some(tag.clone()),
        attach_enabled: false,
        ..Default::default()
    });
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let args = [
        "--match",
        &tag,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50ms",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let skips: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("skipping selected process"))
        .collect();
    assert_eq!(skips.len(), 1, "{stderr}");
    assert!(skips[0].contains(&without.pid.to_string()), "{stderr}");
    assert_eq!(
        records(&with).iter().filter(|r| r.kind == "attach").count(),
        1
    );
    assert!(records(&without).is_empty());

    // --check works with the selection, the same way (with the tool of the first attach, which
    // a reattach must name again).
    let (code, stdout, stderr) =
        rocprof_attach(&["--check", "--match", &tag, "--json", "-t", s(&tool)], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(doc["command"], "check");
    assert_eq!(doc["processes"][0]["pid"], with.pid);
    assert_eq!(doc["processes"][0]["attachable"], true);
    assert_eq!(doc["skipped_without_listener"][0], without.pid);

    // Only listener-less processes: nothing attachable, exit 4, one error.
    let lonely_tag = unique("lonely");
    let lonely = spawn(TargetOpts {
        tag: Some(lonely_tag.clone()),
        attach_enabled: false,
        ..Default::default()
    });
    let (code, _, stderr) =
        rocprof_attach(&["--match", &lonely_tag, "--kernel-trace"], &[]).finish();
    assert_eq!(code, 4, "{stderr}");
    one_error(
        &stderr,
        &["none of the 1 process selected", "ROCP_TOOL_ATTACH=1"],
        "lonely",
    );
    assert!(records(&lonely).is_empty());
}

#[test]
fn a_selection_that_matches_nothing_is_one_error_with_exit_3() {
    for args in [
        vec![
            "--match",
            "no-such-process-matches-this-xyz",
            "--kernel-trace",
        ],
        vec!["--job", "no-such-job-12345", "--kernel-trace"],
        vec!["--check", "--match", "no-such-process-matches-this-xyz"],
    ] {
        let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
        assert_eq!(code, 3, "{args:?}: {stderr}");
        one_error(&stderr, &["no process matched", "--list"], "no match");
        assert!(!stderr.contains("process 0"), "{stderr}");
        assert!(!stderr.contains("cannot read /proc"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
}

#[test]
fn json_reports_a_session_with_timings_reason_and_files() {
    let t = spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pid = t.pid.to_string();
    let mut args = session(&pid, out.path(), &tool);
    args.push("--json");
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("attached to PID"),
        "progress stays on stderr: {stderr}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["command"], "attach");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["exit_name"], "success");
    assert_eq!(doc["end"]["reason"], "duration");
    assert_eq!(doc["duration_ms"], 50);
    let p = &doc["processes"][0];
    assert_eq!(p["pid"], t.pid);
    assert_eq!(p["status"], "attached");
    assert!(p["attach_ms"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["detach_ms"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["listener_stopped_us"].as_u64().is_some(), "{p}");
    let file = p["files"][0].as_str().unwrap();
    assert!(file.ends_with("_standin_trace.csv"), "{file}");
    assert_eq!(doc["files"][0]["path"], file);

    // --list --json: the target with its listener.
    let (code, stdout, stderr) = rocprof_attach(&["--list", "-p", &pid, "--json"], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(doc["command"], "list");
    assert_eq!(doc["processes"][0]["pid"], t.pid);
    assert_eq!(doc["processes"][0]["listener"], true);

    // A refused session is a document too.
    let (code, stdout, _) =
        rocprof_attach(&["-p", "2147483647", "--kernel-trace", "--json"], &[]).finish();
    assert_eq!(code, 3);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(doc["exit_code"], 3);
    assert_eq!(doc["messages"][0]["severity"], "error");
}

#[test]
fn quiet_check_prints_no_warnings() {
    let t = spawn(TargetOpts::default());
    let pid = t.pid.to_string();
    let env = [("ROCP_TOOL_LIBRARIES", "/x.so")];
    let (code, stdout, stderr) = rocprof_attach(&["--check", "-p", &pid], &env).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: ignoring ROCP_TOOL_LIBRARIES"),
        "{stderr}"
    );
    assert!(stdout.contains("is attachable"), "{stdout}");
    let (code, stdout, stderr) = rocprof_attach(&["--check", "-q", "-p", &pid], &env).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "-q: {stderr}");
    assert!(stdout.contains("is attachable"), "{stdout}");
}

#[test]
fn completions_and_man_page_are_generated() {
    let bin = common::bin();
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(&bin)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains("attach-duration-msec"), "{shell}");
        assert!(script.contains("kernel-trace"), "{shell}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("c.bash");
    let out = std::process::Command::new(&bin)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    std::fs::write(&bash, &out.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&bash)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let out = std::process::Command::new(&bin)
        .arg("man")
        .output()
        .unwrap();
    assert!(out.status.success());
    let man = String::from_utf8_lossy(&out.stdout).to_string();
    for needle in [
        ".TH rocprof-attach 1",
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH OPTIONS",
        "kernel\\-trace",
    ] {
        assert!(man.contains(needle), "{needle}");
    }
    let page = dir.path().join("rocprof-attach.1");
    std::fs::write(&page, &man).unwrap();
    // Render it with groff (groff-base, installed by tests/scripts/ci-deps.sh): no warnings.
    if prereq::programs(&["groff"], "groff-base") {
        let out = std::process::Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&page)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn short_and_long_help_and_help_for_subcommands() {
    let bin = common::bin();
    let run = |args: &[&str]| {
        let o = std::process::Command::new(&bin)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let short = run(&["-h"]);
    let long = run(&["--help"]);
    assert!(
        short.lines().count() * 3 / 2 < long.lines().count(),
        "-h is short"
    );
    assert!(short.contains("Examples:") && short.contains("--help"));
    assert!(long.contains("--kernel-include-regex") && !short.contains("--kernel-include-regex"));
    for sub in ["convert", "summary"] {
        let help = run(&["help", sub]);
        assert_eq!(help, run(&[sub, "--help"]), "help {sub}");
        assert!(help.contains("Examples:"), "{sub}");
    }
    for sub in ["completions", "man"] {
        assert!(run(&[sub, "--help"]).contains("Examples:"), "{sub}");
    }
    assert!(
        !long.contains("pftrace or otf2"),
        "help names only what exists"
    );
}

#[test]
fn a_second_ctrl_c_during_a_slow_detach_stops_waiting_and_the_detach_still_finishes() {
    // The stand-in register sleeps 3 s in its detach call (a tool writing a large trace).
    let t = spawn(TargetOpts {
        env: vec![("STANDIN_DETACH_SLEEP_MS".into(), "3000".into())],
        ..TargetOpts::default()
    });
    let out = tempfile::tempdir().unwrap();
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let args = [
        "-p",
        &pid,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
    ];
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling until");
    run.signal(Signal::SIGINT);
    run.wait_for("detaching");
    run.signal(Signal::SIGINT);
    run.wait_for("Press Ctrl-C again to stop waiting");
    // The detach call is under way once an agent traces the listener (it was handed over first).
    let listener = t.listener();
    common::wait_until(Duration::from_secs(20), || tracer_pid(t.pid, listener) != 0);
    run.signal(Signal::SIGINT);
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 11, "{stderr}");
    one_error(
        &stderr,
        &[
            &format!("received again: no longer waiting for the detach; the detach call of process {} finishes in the target", t.pid),
            s(out.path()),
        ],
        "abandoned detach",
    );
    // The call was never cut short: it returns, the agent restores the thread and leaves.
    common::wait_until(Duration::from_secs(20), || {
        records(&t).iter().any(|r| r.kind == "detach")
    });
    common::wait_until(Duration::from_secs(20), || {
        tracer_pid(t.pid, t.listener()) == 0
    });
    let kinds: Vec<String> = records(&t).iter().map(|r| r.kind.clone()).collect();
    assert_eq!(kinds, ["attach", "detach"]);
    assert_untouched(&t, 1, "abandoned detach");
}
