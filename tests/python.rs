//! The pip-installed package (`pip install .` into a fresh venv by tests/scripts/python-venv.sh,
//! which tests/scripts/test.sh runs before the suite and points ROCPROF_ATTACH_TEST_VENV at):
//! the `rocprof-attach` command, the module's `attach`/`detach`/`main` and the library it
//! ships, against a stand-in target.

mod common;

use common::{records, Target, TargetOpts};
use std::path::PathBuf;
use std::process::Command;

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
}
