//! The pip-installed package (`pip install .` into a fresh venv by tests/scripts/python-venv.sh,
//! which tests/scripts/test.sh runs before the suite and points ROCPROF_ATTACH_TEST_VENV at):
//! the `rocprof-attach` command, the module's `attach`/`detach`/`main` and the library it
//! ships, against a stand-in target; `python -m rocprof_attach`'s usage and errors; the reason
//! of a failed attach (`last_error`, the CLI's cause and message); the files `main()` reports;
//! `convert`, `summary` and `query` through the packaged command.

use rocprof_testkit as common;

use common::{records, Target, TargetOpts};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn venv() -> PathBuf {
    let v = std::env::var_os("ROCPROF_ATTACH_TEST_VENV")
        .expect("set ROCPROF_ATTACH_TEST_VENV to a venv with the package installed (tests/scripts/python-venv.sh)");
    PathBuf::from(v)
}

fn kinds(t: &Target) -> Vec<String> {
    records(t)
        .iter()
        .map(|r| format!("{}={}", r.kind, r.get("status")))
        .collect()
}

#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn venv_installed_module_and_command() {
    let venv = venv();
    let python = venv.join("bin/python");
    let t = Target::spawn(TargetOpts::default());
    let tool = common::tool_lib();
    // The module: attach/detach status codes, then main() with its environment defaults.
    let script = format!(
        r#"
import os, rocprof_attach as r
assert os.path.isfile(r.library_path()), r.library_path()
print(r.attach({pid}), r.attach({pid}), r.detach({pid}), r.detach({pid}), r.status_name(2))
print("main", r.main())
"#,
        pid = t.pid
    );
    let out = Command::new(&python)
        .arg("-c")
        .arg(&script)
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", &tool)
        .env("ROCPROF_ATTACH_PID", t.pid.to_string())
        .env("ROCPROF_ATTACH_DURATION", "50")
        .env_remove("ROCATTACH_AGENT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0], "0 2 0 2 ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT",
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("Attaching to PID {} using library", t.pid)),
        "{stdout}"
    );
    assert!(
        stdout.contains(":: success") && stdout.contains("Attaching for 50 msec"),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"main 0"), "{stdout}");
    assert_eq!(kinds(&t), ["attach=0", "detach=0", "attach=0", "detach=0"]);

    // The command installed in the venv's bin/.
    let out_dir = t.dir.path().join("out");
    let out = Command::new(venv.join("bin/rocprof-attach"))
        .args([
            "-p",
            &t.pid.to_string(),
            "--attach-duration-msec",
            "50",
            "-d",
        ])
        .arg(&out_dir)
        .arg("-t")
        .arg(&tool)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(kinds(&t)[4..], ["attach=0", "detach=0"]);

    // And install-library from the pip install finds the packaged library.
    let prefix = tempfile::tempdir().unwrap();
    let out = Command::new(venv.join("bin/rocprof-attach"))
        .args(["install-library", "--prefix"])
        .arg(prefix.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(prefix
        .path()
        .join("lib/librocprofiler-sdk-rocattach.so.1")
        .is_file());
    assert!(
        prefix
            .path()
            .join("lib/rocprof-attach/librocprof_cuda_tool.so")
            .is_file(),
        "and the packaged CUDA tool, where the installed command looks for it"
    );
}

/// Run `python -c script` from the venv, without the test's own agent override.
fn python(venv: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(venv.join("bin/python"));
    c.arg("-c").arg(script).env_remove("ROCATTACH_AGENT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn python_m_usage_and_one_line_errors() {
    let venv = venv();
    let run = |env: &[(&str, &str)]| {
        let mut c = Command::new(venv.join("bin/python"));
        c.args(["-m", "rocprof_attach"])
            .env_remove("ROCPROF_ATTACH_PID")
            .env_remove("ROCPROF_ATTACH_DURATION")
            .env_remove("ROCATTACH_AGENT");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };
    // No PID: the usage and the reason, exit 2, no traceback.
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("usage: python -m rocprof_attach"), "{err}");
    assert!(
        err.lines()
            .last()
            .unwrap_or("")
            .starts_with("rocprof_attach: error: no PID to attach to"),
        "{err}"
    );
    assert!(!err.contains("Traceback"), "{err}");
    let (code, _, err) = run(&[("ROCPROF_ATTACH_PID", "12x")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("rocprof_attach: error: invalid PID"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");

    // A process without a listener: one line with the library's reason (the CLI's diagnosis),
    // exit 1.
    let silent = Target::spawn(TargetOpts {
        attach_enabled: false,
        ..TargetOpts::default()
    });
    let pid = silent.pid.to_string();
    let (code, out, err) = run(&[
        ("ROCPROF_ATTACH_PID", &pid),
        ("ROCPROF_ATTACH_DURATION", "10"),
    ]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(!err.contains("Traceback"), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("rocprof_attach: error: Calling attach in ")
            && last.contains("returned non-zero status 1 (ROCATTACH_STATUS_ERROR): ")
            && last.contains("'rocp-bg-attach' thread not found")
            && last.contains("ROCP_TOOL_ATTACH=1"),
        "{err}"
    );
    assert!(
        out.contains(&format!("Attaching to PID {pid} using library")),
        "{out}"
    );
    assert!(records(&silent).is_empty());
}

#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn attach_as_another_user_reports_the_clis_cause() {
    let have_setpriv = Command::new("sh")
        .args(["-c", "command -v setpriv"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_setpriv || !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root and setpriv (util-linux) to run the module as nobody");
        return;
    }
    let venv = venv();
    // nobody may not enter the checkout (a clone in /root): the package and the command are
    // copied into a world-readable directory, and the system Python runs them from there.
    let public = common::public_dir();
    let site = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import rocprof_attach, os; print(os.path.dirname(rocprof_attach.__file__))",
        ])
        .output()
        .unwrap();
    let pkg = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    let dest = public.path().join("rocprof_attach");
    std::fs::create_dir(&dest).unwrap();
    for e in std::fs::read_dir(&pkg).unwrap() {
        let e = e.unwrap();
        if e.path().is_file() {
            common::public_copy(&e.path(), &dest);
        }
    }
    let agent = common::public_copy(&venv.join("bin/rocprof-attach"), public.path());
    let tool = common::public_copy(&common::tool_lib(), public.path());
    let t = Target::spawn(TargetOpts::default());
    // Without a listener too, the cause is the permission, not the missing thread (which nobody
    // could not diagnose).
    let silent = Target::spawn(TargetOpts {
        attach_enabled: false,
        ..TargetOpts::default()
    });
    let nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PYTHONPATH", public.path())
            .env("ROCATTACH_AGENT", &agent)
            .env("ROCPROF_ATTACH_TOOL_LIBRARY", &tool)
            .current_dir(public.path())
            .output()
            .unwrap()
    };
    let script = format!(
        r#"
import rocprof_attach as r
s = r.attach({pid})
print("status", s, r.status_name(s))
print("reason", r.last_error())
s = r.attach({silent})
print("silent", s, "Permission denied" in r.last_error(), "thread not found" in r.last_error())
try:
    r.main(pid={pid}, duration=10)
except r.AttachError as e:
    print("main", e.status, isinstance(e, RuntimeError), e.reason == r.last_error())
"#,
        pid = t.pid,
        silent = silent.pid
    );
    // An interpreter nobody may run (the venv's may live under /root): the module needs no
    // particular one (ctypes and the standard library only).
    let real = std::fs::canonicalize(venv.join("bin/python")).unwrap();
    let candidates = [
        real.to_str().unwrap(),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    ];
    let Some(py) = candidates
        .into_iter()
        .find(|p| nobody(&[p, "-c", "import ctypes"]).status.success())
    else {
        eprintln!("SKIPPED: no Python interpreter that nobody may run ({candidates:?})");
        return;
    };
    let o = nobody(&[py, "-c", &script]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("status 5 ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED"),
        "{out}\n{err}"
    );
    let reason = out
        .lines()
        .find_map(|l| l.strip_prefix("reason "))
        .unwrap_or("")
        .to_string();
    assert!(
        reason.contains("Permission denied")
            && reason.contains("CAP_SYS_PTRACE")
            && reason.contains("as root"),
        "the reason names the cause and the fix: {out}\n{err}"
    );
    assert!(out.contains("main 5 True True"), "{out}\n{err}");
    assert!(out.contains("silent 5 True False"), "{out}\n{err}");
    // The CLI, as the same user, stops for the same cause with the same message (exit 5).
    let cli = nobody(&[
        agent.to_str().unwrap(),
        "-p",
        &t.pid.to_string(),
        "--attach-duration-msec",
        "10",
        "-d",
        public.path().join("out").to_str().unwrap(),
    ]);
    let (_, cli_err) = text(&cli);
    assert_eq!(cli.status.code(), Some(5), "{cli_err}");
    assert!(
        cli_err.contains(&format!("rocprof-attach: error: {reason}")),
        "CLI: {cli_err}\nlibrary: {reason}"
    );
    // python -m: one line, exit 1.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            py,
            "-m",
            "rocprof_attach",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PYTHONPATH", public.path())
        .env("ROCATTACH_AGENT", &agent)
        .env("ROCPROF_ATTACH_PID", t.pid.to_string())
        .env("ROCPROF_ATTACH_DURATION", "10")
        .current_dir(public.path())
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("rocprof_attach: error: ")
            && last.contains("status 5 (ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED)")
            && last.contains("Permission denied"),
        "{err}"
    );
    assert!(!err.contains("Traceback"), "{err}");
    assert!(records(&t).is_empty(), "nothing was injected");
    assert!(records(&silent).is_empty());
    assert_eq!(common::tracer_pid(t.pid, t.pid), 0);
    t.assert_heartbeat();
}

#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn main_lists_the_files_written_and_convert_summary_query_run_the_command() {
    let venv = venv();
    let scratch = tempfile::tempdir().unwrap();
    let db = rocprof_testkit::rocpd::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let out_dir = t.dir.path().join("out");
    let conv = scratch.path().join("conv");
    let stats = scratch.path().join("stats");
    let script = format!(
        r#"
import json, os, sys, rocprof_attach as r
s = r.main(pid={pid}, attach_library={tool:?}, duration=20)
print("main", s, s == 0, isinstance(s, int), s.status)
print("files", json.dumps(s.files))
assert all(os.path.isfile(f) for f in s.files), s.files
db = s.files[0]
print("convert", json.dumps(r.convert(db, formats=["csv", "json"], output_dir={conv:?}, output_name="run", stats=True)))
text = r.summary(db, top=5)
print("summary-text", "add<float>" in text, text.files)
doc = r.summary(db, json=True)
print("summary-json", sorted(doc)[:3] if isinstance(doc, dict) else type(doc).__name__)
md = r.summary(db, formats=["md"], output_dir={stats:?})
print("summary-files", json.dumps(md.files))
print("query", json.dumps(r.query([db], "select count(*) as n from kernels")))
csv = r.query(db, "select count(*) as n from kernels", format="csv")
print("query-csv", json.dumps(str(csv)))
for bad in (lambda: r.query(db, "select * from no_such_view"), lambda: r.convert(os.path.join({conv:?}, "missing.db"))):
    try:
        bad()
        print("no error")
    except r.CommandError as e:
        print("error", e.returncode, isinstance(e, RuntimeError), json.dumps(str(e)))
"#,
        pid = t.pid,
        tool = common::tool_lib().to_str().unwrap(),
        conv = conv.to_str().unwrap(),
        stats = stats.to_str().unwrap(),
    );
    let o = python(
        &venv,
        &script,
        &[
            ("ROCPROF_OUTPUT_PATH", out_dir.to_str().unwrap()),
            ("ROCPROF_OUTPUT_FILE_NAME", "run"),
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let field = |name: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line: {out}\n{err}"))
            .to_string()
    };
    assert_eq!(field("main"), "0 True True 0", "{out}");
    // The files the tool wrote during the session, complete when main() returns: the tool was
    // asked to write them before the detach call returned.
    let db_out = out_dir.join(format!("run_{}_results.db", t.pid));
    let files: Vec<String> = serde_json::from_str(&field("files")).unwrap();
    assert_eq!(files, [db_out.to_str().unwrap()], "{out}");
    assert_eq!(std::fs::read(&db_out).unwrap(), std::fs::read(&db).unwrap());
    let attach = records(&t)
        .into_iter()
        .find(|r| r.kind == "attach")
        .unwrap();
    assert!(
        attach
            .pairs()
            .contains(&("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC".into(), "1".into())),
        "{attach:?}"
    );
    // convert: the files written.
    let converted: Vec<String> = serde_json::from_str(&field("convert")).unwrap();
    for want in [
        "run_kernel_trace.csv",
        "run_results.json",
        "run_kernel_stats.csv",
    ] {
        let p = conv.join(want);
        assert!(
            converted.contains(&p.to_str().unwrap().to_string()) && p.is_file(),
            "{want}: {converted:?}"
        );
    }
    assert!(
        converted.iter().all(|f| Path::new(f).is_file()),
        "{converted:?}"
    );
    // summary: the tables as printed, the JSON document, the files of a file format.
    assert_eq!(field("summary-text"), "True []", "{out}");
    assert!(field("summary-json").starts_with('['), "{out}");
    let md: Vec<String> = serde_json::from_str(&field("summary-files")).unwrap();
    assert_eq!(
        md,
        [stats.join("out_summary.md").to_str().unwrap()],
        "{out}"
    );
    assert!(stats.join("out_summary.md").is_file());
    // query: rows as dicts, or the text of a format.
    assert_eq!(field("query"), r#"[{"n": 3}]"#, "{out}");
    let csv: String = serde_json::from_str(&field("query-csv")).unwrap();
    assert_eq!(csv.lines().collect::<Vec<_>>(), ["n", "3"], "{csv}");
    // Failures raise CommandError with the command's message.
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error ")).collect();
    assert_eq!(errors.len(), 2, "{out}");
    assert!(
        errors[0].contains("no_such_view") && errors[0].contains("True"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("missing.db") && errors[1].contains("rocprof-attach convert failed"),
        "{}",
        errors[1]
    );
}

/// The package ships the CUDA tool library: the command pip installed and the module's
/// `attach`/`detach` (the rocattach library) find it with no setting and trace a CUDA process.
#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn the_package_ships_the_cuda_tool() {
    let venv = venv();
    let s = common::cuda::build_standins();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(&s.target)
        .arg("--with-cupti")
        .arg(&s.libcupti)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open to the end: the target dies of SIGPIPE when its stdout has no reader.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.id().to_string();
    let check = Command::new(venv.join("bin/rocprof-attach"))
        .args(["--check", "-p", &pid])
        .env_remove("ROCPROF_ATTACH_CUDA_TOOL")
        .output()
        .unwrap();
    let (out, err) = text(&check);
    assert!(check.status.success(), "{out}{err}");
    assert!(
        out.contains("site-packages/rocprof_attach/librocprof_cuda_tool"),
        "the packaged tool: {out}"
    );
    let script = format!(
        "import rocprof_attach as r, time\nprint(r.attach({pid}))\ntime.sleep(0.2)\nprint(r.detach({pid}))\n"
    );
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(&script)
        .env_remove("ROCPROF_ATTACH_CUDA_TOOL")
        .env("ROCPROF_KERNEL_TRACE", "1")
        .env("ROCPROF_OUTPUT_PATH", dir.path())
        .env("ROCPROF_OUTPUT_FILE_NAME", "k")
        .output()
        .unwrap();
    let (out, err) = text(&out);
    let _ = child.kill();
    let _ = child.wait();
    drop(stdout);
    assert_eq!(out.trim(), "0\n0", "{out}{err}");
    assert!(
        dir.path().join("k_results.db").is_file(),
        "the module's attach traced the CUDA process: {err}"
    );
}

/// `main()`'s file list follows the output templates as the command does: it reads only the
/// directories the templates can name (here `<target cwd>/<hostname>/`), however large the
/// target's working directory is, and reports only the files they name.
#[test]
#[ignore = "needs ROCPROF_ATTACH_TEST_VENV (tests/scripts/test.sh runs it after tests/scripts/python-venv.sh)"]
fn main_follows_the_output_template_not_the_working_directory() {
    let venv = venv();
    let t = Target::spawn(TargetOpts::default());
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", t.pid)).unwrap();
    // A working directory full of unrelated files, which must not be read.
    for d in ["many", "many/sub", "many/sub/deeper"] {
        std::fs::create_dir_all(cwd.join(d)).unwrap();
        for i in 0..200 {
            std::fs::write(cwd.join(d).join(format!("f{i}")), "x").unwrap();
        }
    }
    let script = format!(
        r#"
import os, socket, rocprof_attach as r
pid = {pid}
calls = []
orig = os.scandir
os.scandir = lambda d: (calls.append(d), orig(d))[1]
s = r._Snapshot(pid)
cwd = os.readlink("/proc/%d/cwd" % pid)
host = os.path.join(cwd, socket.gethostname())
os.makedirs(host, exist_ok=True)
for name in ("%d_results.db" % pid, "%d_1_kernel_trace.csv" % pid, "%d0_results.db" % pid, "other.db"):
    open(os.path.join(host, name), "w").write("x")
open(os.path.join(cwd, "many", "new.db"), "w").write("x")
print("base", s.target)
print("changes", "|".join(s.changes()))
print("read", len(calls), "|".join(sorted(set(calls))))
"#,
        pid = t.pid
    );
    let mut c = Command::new(venv.join("bin/python"));
    c.arg("-c")
        .arg(&script)
        .env("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/python"))
        .env_remove("ROCPROF_OUTPUT_PATH")
        .env_remove("ROCPROF_OUTPUT_FILE_NAME");
    let o = c.output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let line = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line: {out}\n{err}"))
            .to_string()
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let dir = format!("{}/{}", cwd.display(), host.trim());
    assert_eq!(line("base"), dir, "{out}");
    assert_eq!(
        line("changes"),
        format!(
            "{dir}/{pid}_1_kernel_trace.csv|{dir}/{pid}_results.db",
            pid = t.pid
        ),
        "{out}"
    );
    // The host directory, once before and once after: nothing else.
    let read = line("read");
    assert!(!read.contains("many"), "{read}");
    let count: usize = read.split(' ').next().unwrap().parse().unwrap();
    assert!(count <= 4, "{read}");
}
