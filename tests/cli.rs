//! The built binary on bad command lines: exit code 2, one error line that says how to fix it, and
//! nothing attached. Plus `--help` content.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocprof-attach");

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run the binary with a clean environment plus `env`, stdin closed, killed after 30 s.
/// One refused command line: arguments, environment, a word the error must contain.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

fn run_with(args: &[&str], env: &[(&str, &str)], uid: Option<u32>) -> Output {
    // Another user may not enter the checkout (a clone in a 0700 home): run a public copy.
    let public = uid.map(|_| common::public_dir());
    let bin = match &public {
        Some(d) => common::public_copy(std::path::Path::new(BIN), d.path()),
        None => std::path::PathBuf::from(BIN),
    };
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid).current_dir("/");
    }
    let mut child = cmd.spawn().expect("spawn rocprof-attach");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Output {
        code: status.and_then(|s| s.code()),
        stdout,
        stderr,
    }
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_with(args, env, None)
}

/// A process to point bad command lines at; killed on drop.
struct Victim(Child);

impl Victim {
    fn new() -> Self {
        Victim(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
    fn tracer_pid(&self) -> String {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .map(|v| v.trim().to_string())
            .unwrap()
    }
    fn assert_untouched(&self, what: &str) {
        assert_eq!(self.tracer_pid(), "0", "{what}: the victim is being traced");
        let env = std::fs::read(format!("/proc/{}/environ", self.0.id())).unwrap();
        assert!(
            !env.windows(4).any(|w| w == b"ROCP"),
            "{what}: ROCP variables appeared in the victim"
        );
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn assert_usage(out: &Output, needle: &str, what: &str) {
    assert_eq!(
        out.code,
        Some(2),
        "{what}: exit code, stderr: {}",
        out.stderr
    );
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: expected one stderr line, got {:?}",
        out.stderr
    );
    assert!(
        lines[0].starts_with("rocprof-attach: error: "),
        "{what}: {}",
        lines[0]
    );
    assert!(
        lines[0].contains(needle),
        "{what}: '{}' should mention '{needle}'",
        lines[0]
    );
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
}

#[test]
fn bad_command_lines_are_refused_without_touching_the_target() {
    let v = Victim::new();
    let pid = v.pid();
    let p = pid.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    let list = format!("{p},abc");
    let cases: Vec<Case> = vec![
        (vec![], vec![], "pass -p PID"),
        (vec!["--kernel-trace"], vec![], "ROCPROF_ATTACH_PID"),
        (vec!["-p", "abc"], vec![], "positive whole number"),
        (vec!["--pid", "12ab"], vec![], "pgrep"),
        (vec!["-p", "-5"], vec![], "positive"),
        (vec!["--attach", "0"], vec![], "PID 0"),
        (vec!["-p", "99999999999"], vec![], "out of range"),
        (vec!["-p", "2147483648"], vec![], "out of range"),
        (vec!["--attach", list.as_str()], vec![], "'abc'"),
        (vec!["--attach", "1,,2"], vec![], "empty PID"),
        (
            vec![],
            vec![("ROCPROF_ATTACH_PID", "abc")],
            "ROCPROF_ATTACH_PID",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "-5"],
            vec![],
            "positive",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "0"],
            vec![],
            "at least 1 ms",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "soon"],
            vec![],
            "milliseconds",
        ),
        (
            vec!["-p", p, "--attach-duration-msec=1.5"],
            vec![],
            "a bare number is milliseconds",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "99999999999999999999999"],
            vec![],
            "too long",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "18446744073709551615"],
            vec![],
            "at most 30 days",
        ),
        (
            vec!["-p", p, "--attach-duration-msec", "5 parsecs"],
            vec![],
            "unknown unit 'parsecs'",
        ),
        (
            vec!["-p", p, "--stopped-timeout", "-1s"],
            vec![],
            "--stopped-timeout",
        ),
        (vec![p, "--kernel-trace"], vec![], "pass it with -p"),
        (
            vec!["-p", p, "--list-avail"],
            vec![],
            "no meaning when attaching",
        ),
        (
            vec!["-p", p, "-i", "input.yaml"],
            vec![],
            "no meaning when attaching",
        ),
        (
            vec!["-p", p, "--preload", "libx.so"],
            vec![],
            "a running process cannot be preloaded",
        ),
        (
            vec!["-p", p, "--rocm-root=/opt/rocm"],
            vec![],
            "no meaning when attaching",
        ),
        (
            vec!["-p", p],
            vec![("ROCPROF_ATTACH_DURATION", "x")],
            "ROCPROF_ATTACH_DURATION",
        ),
        (
            vec!["-p", p, "-f", "xml"],
            vec![],
            "choose from csv, json, pftrace, otf2, rocpd",
        ),
        (
            vec!["-p", p, "--output-format", "csv", "parquet"],
            vec![],
            "choose from",
        ),
        (
            vec!["-p", p, "--pmc", "SQ_WAVES", "--pmc", "GRBM_COUNT"],
            vec![],
            "single --pmc group",
        ),
        (
            vec!["-p", p, "-P", "1:1:0"],
            vec![],
            "--attach-duration-msec",
        ),
        (vec!["-p", p, "-t", ""], vec![], "tool library path"),
        (
            vec!["-p", p, "--attach-tool-library", "::"],
            vec![],
            "tool library path",
        ),
        (vec!["-p", p, "-d", file], vec![], "not a directory"),
        (
            vec!["-p", p, "--kernel-trace=maybe"],
            vec![],
            "y, yes, t, true, on, 1",
        ),
        (
            vec!["-p", p, "--attach-children=perhaps"],
            vec![],
            "not a boolean",
        ),
        (
            vec!["-p", p],
            vec![("ROCPROF_ATTACH_CHILDREN", "perhaps")],
            "ROCPROF_ATTACH_CHILDREN",
        ),
        (vec!["-p", p, "--kernel-tarce"], vec![], "--kernel-trace"),
        (vec!["-p", p, "--match", "x"], vec![], "only one of them"),
        (vec!["--match", "(unclosed"], vec![], "regular expression"),
        (vec!["-p", p, "--parallel", "0"], vec![], "--parallel"),
        (
            vec!["-p", p, "--log-level", "loud"],
            vec![],
            "possible values",
        ),
    ];
    for (args, env, needle) in &cases {
        let what = format!("{args:?} {env:?}");
        let out = run(args, env);
        assert_usage(&out, needle, &what);
        v.assert_untouched(&what);
    }
}

#[test]
fn read_only_output_directory_is_refused() {
    let v = Victim::new();
    let tmp = tempfile::tempdir().unwrap();
    let ro = tmp.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // root may write anywhere: check as an unprivileged user then.
    let uid = if nix::unistd::geteuid().is_root() {
        Some(65534)
    } else {
        None
    };
    let out = run_with(
        &["-p", &v.pid(), "--kernel-trace", "-d", ro.to_str().unwrap()],
        &[],
        uid,
    );
    assert_usage(&out, "not writable", "read-only -d");
    v.assert_untouched("read-only -d");
}

#[test]
fn help_groups_options_and_teaches() {
    let out = run(&["--help"], &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let h = &out.stdout;
    let headings = [
        "Attach:",
        "Target selection:",
        "Basic tracing:",
        "Extended tracing:",
        "Counter collection:",
        "Filtering:",
        "Summary:",
        "Output:",
        "Advanced:",
    ];
    let mut last = 0;
    for head in headings {
        let pos = h
            .find(&format!("\n{head}\n"))
            .unwrap_or_else(|| panic!("missing heading {head}"));
        assert!(pos > last, "heading {head} out of order");
        last = pos;
    }
    for needle in [
        "Examples:",
        "rocprof-attach -p 1234 --kernel-trace",
        "docs/exit-codes.md",
        "--attach-sync-output",
        "default: true, unlike rocprofv3",
        "ROCPROF_ATTACH_PID",
        "ROCPROF_ATTACH_DURATION",
        "ROCPROF_ATTACH_CHILDREN",
        "ROCPROF_ATTACH_TOOL_LIBRARY",
        "ROCPROF_ATTACH_LOG",
        "--attach",
        "--sys-trace",
        "--pmc",
        "--kernel-include-regex",
        "--summary-groups",
        "--output-directory",
        "--perfetto-buffer-fill-policy",
        "--pc-sampling-method",
        "--att-target-cu",
        "convert",
        "summary",
    ] {
        assert!(h.contains(needle), "--help lacks {needle}");
    }
    // -d is the output directory, as in rocprofv3, not the duration.
    assert!(h.contains("-d, --output-directory"));
    assert_eq!(run(&["-h"], &[]).code, Some(0));
    let v = run(&["--version"], &[]);
    assert_eq!(v.code, Some(0));
    assert!(v.stdout.starts_with("rocprof-attach "));
}
