//! The built binary on bad command lines: exit code 2, one error line that says how to fix it, and
//! nothing attached. Plus `--help` content, and what a reader that closes the pipe early or a
//! panic looks like (docs/exit-codes.md, "Closed pipes", "Internal errors").

use crate::common;
use crate::rocpd_common;

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
        // Every environment value with a fixed form is a usage error, before any preflight.
        (
            vec!["-p", p, "--kernel-trace"],
            vec![("ROCPROF_ATTACH_BUFFER_BYTES", "abc")],
            "ROCPROF_ATTACH_BUFFER_BYTES='abc'",
        ),
        (
            vec!["-p", p, "--check"],
            vec![("ROCPROF_ATTACH_BACKEND", "gpu")],
            "ROCPROF_ATTACH_BACKEND='gpu'",
        ),
        (
            vec!["-p", p],
            vec![("ROCPROF_MEMORY_COPY_TRACE", "maybe")],
            "ROCPROF_MEMORY_COPY_TRACE='maybe'",
        ),
        (
            vec!["-p", p, "--kernel-trace"],
            vec![("ROCPROF_ATTACH_CUDA_DRIVER_API", "perhaps")],
            "ROCPROF_ATTACH_CUDA_DRIVER_API",
        ),
        // Kernel filters are checked in the grammar the tool compiles them with.
        (
            vec![
                "-p",
                p,
                "--kernel-trace",
                "--kernel-include-regex",
                "a{2,1}",
            ],
            vec![],
            "bounds out of order",
        ),
        (
            vec![
                "-p",
                p,
                "--kernel-trace",
                "--kernel-exclude-regex",
                "(?<=x)gemm",
            ],
            vec![],
            "look-behind",
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

/// How the test's end of a pipe into the binary's stdout behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reader {
    /// Read everything.
    All,
    /// Read the first line, then close the pipe (`| head -1`).
    FirstLine,
    /// Closed before the binary starts: its first write fails.
    Gone,
    /// No pipe: stdout is /dev/full, where every write fails with ENOSPC.
    Full,
}

/// What the binary did: exit code, what the test read of its stdout, all of its stderr.
struct Piped {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run the binary with a clean environment plus `env`, its stdout a one-page pipe read as `reader`
/// says. Waits on the pipes and the child in a thread, for at most 60 s (then kills it).
fn run_piped(args: &[&str], env: &[(&str, &str)], reader: Reader) -> Piped {
    use std::io::BufRead;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors that we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The smallest pipe (one page), so that long output cannot fit in it before the reader closes.
    // SAFETY: plain fcntl on a descriptor we own.
    unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    let rd = matches!(reader, Reader::All | Reader::FirstLine).then_some(rd);
    let stdout = match reader {
        Reader::Full => Stdio::from(std::fs::File::create("/dev/full").expect("/dev/full")),
        _ => Stdio::from(wr),
    };
    let mut child = Command::new(BIN)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rocprof-attach");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = String::new();
        if let Some(rd) = rd {
            let mut r = std::io::BufReader::with_capacity(64, std::fs::File::from(rd));
            let _ = match reader {
                Reader::All => r.read_to_string(&mut stdout),
                _ => r.read_line(&mut stdout),
            };
        }
        let mut stderr = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
        let status = child.wait().expect("wait rocprof-attach");
        let _ = tx.send(Piped {
            code: status.code(),
            stdout,
            stderr,
        });
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            // SAFETY: kill(2) on our own child, not yet reaped (the thread is still waiting on it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("rocprof-attach {args:?} did not finish within 60 s");
        })
}

/// A reader that goes away is no error: exit code 0, nothing on stderr, whether it leaves before
/// the first write or in the middle of the output.
fn assert_quiet_when_closed(args: &[&str], first_line: &str) {
    let all = run_piped(args, &[], Reader::All);
    assert_eq!(all.code, Some(0), "{args:?}: {}", all.stderr);
    // More than the pipe and the test's read can hold: the binary is still writing at the close.
    assert!(
        all.stdout.len() > 3 * 4096,
        "{args:?}: output too short to test a closed pipe: {}",
        all.stdout.len()
    );
    for reader in [Reader::FirstLine, Reader::Gone] {
        let out = run_piped(args, &[], reader);
        assert_eq!(
            out.code,
            Some(0),
            "{args:?} {reader:?}: stderr {:?}",
            out.stderr
        );
        assert_eq!(out.stderr, "", "{args:?} {reader:?}: stderr");
        if reader == Reader::FirstLine {
            assert!(
                out.stdout.starts_with(first_line),
                "{args:?}: first line {:?}",
                out.stdout
            );
        }
    }
}

#[test]
fn long_help_man_page_and_completions_end_quietly_in_a_closed_pipe() {
    assert_quiet_when_closed(&["--help"], "Attach AMD's GPU profiler");
    assert_quiet_when_closed(&["man"], ".ie");
    assert_quiet_when_closed(&["completions", "bash"], "_rocprof__attach() {");
}

#[test]
fn short_outputs_end_quietly_when_the_reader_is_gone() {
    let tmp = rocpd_common::tempdir();
    let db = rocpd_common::full_db(&tmp.path().join("a.db"), 1, 1);
    let db = db.to_str().unwrap();
    let out_dir = tmp.path().join("out");
    let out_dir = out_dir.to_str().unwrap();
    let cases: [&[&str]; 7] = [
        &["query", "--help"],
        &["convert", "--help"],
        &["summary", "--help"],
        &["-h"],
        &["--version"],
        &["summary", "-i", db],
        // Twice into one directory: the second replaces the first's files.
        &["convert", "-i", db, "-d", out_dir, "--force"],
    ];
    for args in cases {
        for reader in [Reader::FirstLine, Reader::Gone] {
            let out = run_piped(args, &[], reader);
            assert_eq!(
                out.code,
                Some(0),
                "{args:?} {reader:?}: stderr {:?}",
                out.stderr
            );
            assert_eq!(out.stderr, "", "{args:?} {reader:?}: stderr");
        }
    }
    // convert did its work; only the list of files went nowhere.
    assert!(rocpd_common::listing(std::path::Path::new(out_dir))
        .iter()
        .any(|f| f.ends_with(".csv")));
}

#[test]
fn query_rows_end_quietly_in_a_closed_pipe() {
    let tmp = rocpd_common::tempdir();
    let db = rocpd_common::full_db(&tmp.path().join("a.db"), 1, 1);
    let db = db.to_str().unwrap();
    let sql = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) \
               SELECT x AS row_number, 'some text to make the rows longer' AS filler FROM n";
    assert_quiet_when_closed(&["query", "-i", db, "--query", sql], "");
    assert_quiet_when_closed(
        &["query", "-i", db, "--query", sql, "--format", "csv"],
        "row_number,filler",
    );
}

#[test]
fn a_full_disk_on_stdout_is_an_error() {
    for args in [&["--help"][..], &["query", "--help"]] {
        let out = run_piped(args, &[], Reader::Full);
        assert_eq!(out.code, Some(1), "{args:?}: {:?}", out.stderr);
        assert_eq!(
            out.stderr.trim_end(),
            "rocprof-attach: error: cannot write to standard output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_panic_is_one_line_and_exit_code_1() {
    let env = [("ROCPROF_ATTACH_FAULT_PANIC", "boom\nsecond line")];
    let out = run_piped(&["--version"], &env, Reader::All);
    assert_eq!(out.code, Some(1), "stderr {:?}", out.stderr);
    assert_eq!(out.stdout, "");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    assert!(
        lines[0].starts_with("rocprof-attach: internal error: boom second line at src/cli/")
            && lines[0].ends_with("; please report it"),
        "{}",
        lines[0]
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    // RUST_BACKTRACE=0 asks for none; RUST_BACKTRACE=1 gets the line and then the backtrace.
    let zero = run_piped(
        &["--version"],
        &[env[0], ("RUST_BACKTRACE", "0")],
        Reader::All,
    );
    assert_eq!(zero.stderr.lines().count(), 1, "{:?}", zero.stderr);
    let bt = run_piped(
        &["--version"],
        &[env[0], ("RUST_BACKTRACE", "1")],
        Reader::All,
    );
    assert_eq!(bt.code, Some(1));
    assert_eq!(bt.stderr.lines().next(), Some(lines[0]));
    assert!(
        bt.stderr.lines().count() > 3,
        "no backtrace: {:?}",
        bt.stderr
    );
}
