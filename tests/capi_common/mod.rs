//! Support for the C ABI tests: an install layout with ROCm's names, and the C host
//! (`tests/fixtures/capi_client.c`) that dlopens the library by path as ROCm's tools do.

use crate::common;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `<prefix>` laid out by `rocprof-attach install-library --prefix`: lib/ with ROCm's names,
/// bin/rocprof-attach (the agent), include/.
pub struct Layout {
    pub dir: tempfile::TempDir,
}

impl Layout {
    pub fn install() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let built = common::built_library("rocprof-rocattach", "librocattach.so");
        let out = Command::new(common::bin())
            .args(["install-library", "--prefix"])
            .arg(dir.path())
            .arg("--library")
            .arg(&built)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "install-library: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Layout { dir }
    }

    /// `lib/librocprofiler-sdk-rocattach.so.1`.
    pub fn lib(&self) -> PathBuf {
        self.dir
            .path()
            .join("lib/librocprofiler-sdk-rocattach.so.1")
    }

    /// A path under the prefix.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

/// The C host.
pub fn client_bin() -> PathBuf {
    common::build("capi_client", &["capi_client.c"], &[])
}

/// A running C host: stdout lines arrive on a channel; stderr goes to a file.
pub struct Host {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub out: Vec<String>,
    stdin: Option<ChildStdin>,
    stderr: tempfile::NamedTempFile,
}

/// Start the host on `lib` with `args`, a clean environment (PATH, the stand-in tool as
/// ROCPROF_ATTACH_TOOL_LIBRARY) plus `env` (a value of None removes the variable).
pub fn host(lib: &Path, args: &[&str], env: &[(&str, Option<&str>)]) -> Host {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(client_bin());
    cmd.arg(lib)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", common::tool_lib());
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr.reopen().unwrap());
    let mut child = cmd.spawn().expect("spawn capi_client");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    Host {
        child,
        lines: rx,
        out: Vec::new(),
        stdin,
        stderr,
    }
}

impl Host {
    /// Wait (bounded) for the next stdout line starting with `prefix`; returns it.
    pub fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.out.push(l.clone());
                    if l.starts_with(prefix) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no line starting with {prefix:?} within 60 s; stdout {:#?}; stderr {}",
                    self.out,
                    self.stderr_text()
                ),
            }
        }
    }

    /// Unblock a `wait` command.
    pub fn resume(&mut self) {
        use std::io::Write;
        if let Some(s) = self.stdin.as_mut() {
            let _ = s.write_all(b"go\n");
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }

    /// Wait (bounded) for exit; returns (exit code, stdout lines, stderr).
    pub fn finish(mut self) -> (i32, Vec<String>, String) {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "capi_client did not exit within 60 s: {}",
                    self.stderr_text()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.out.push(l);
        }
        use std::os::unix::process::ExitStatusExt;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        let err = self.stderr_text();
        (code, std::mem::take(&mut self.out), err)
    }
}

/// Run the host to completion; asserts it exited 0; returns (stdout lines, stderr).
pub fn run(lib: &Path, args: &[&str], env: &[(&str, Option<&str>)]) -> (Vec<String>, String) {
    let (code, out, err) = host(lib, args, env).finish();
    assert_eq!(code, 0, "capi_client {args:?} exited {code}: {err}");
    (out, err)
}

/// The status printed for the command line starting with `prefix` (e.g. "attach 123").
pub fn status_of(out: &[String], prefix: &str) -> i32 {
    out.iter()
        .find(|l| l.starts_with(&format!("{prefix} ")))
        .unwrap_or_else(|| panic!("no {prefix:?} in {out:#?}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// "kind=status" of each stand-in record of process `pid` in `log`.
pub fn calls_of(log: &Path, pid: i32) -> Vec<String> {
    common::records_in(log)
        .into_iter()
        .filter(|r| r.get("pid") == pid.to_string())
        .map(|r| format!("{}={}", r.kind, r.get("status")))
        .collect()
}

/// The `ROCATTACH:` lines of a host's stderr.
pub fn log_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("ROCATTACH:"))
        .collect()
}
