//! Shared helpers for the lookup and preflight tests: C fixtures compiled with gcc into a
//! per-source-hash directory, and child processes that are killed when dropped.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// How long any wait for a fixture may take.
pub const WAIT: Duration = Duration::from_secs(20);

fn fixture_source(name: &str) -> PathBuf {
    crate::checkout().join("tests/fixtures/lookup").join(name)
}

fn fixtures_root() -> PathBuf {
    crate::target_tmp()
        .parent()
        .map(|p| p.join("fixtures"))
        .expect("target dir")
}

/// Compile `source` (under tests/fixtures/lookup) with gcc into `<target>/fixtures/<hash>/<output>`.
///
/// The output is written under a temporary name and renamed, so parallel test processes never see
/// a half-written file.
pub fn build(source: &str, output: &str, args: &[&str]) -> PathBuf {
    let src = fixture_source(source);
    let text = std::fs::read(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
    let mut h = DefaultHasher::new();
    (text, output, args).hash(&mut h);
    let dir = fixtures_root().join(format!("lookup-{:016x}", h.finish()));
    let out = dir.join(output);
    if out.exists() {
        return out;
    }
    std::fs::create_dir_all(&dir).expect("create fixture dir");
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{output}.{}.{seq}.tmp", std::process::id()));
    let status = Command::new("gcc")
        .args(["-O1", "-g0", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&src)
        .args(args)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {source}");
    std::fs::rename(&tmp, &out).expect("rename fixture");
    out
}

/// The register stand-in: `variant` changes code layout; `extra` adds gcc flags.
pub fn register_lib(variant: u32, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "-shared".to_string(),
        "-fPIC".to_string(),
        "-Wl,--build-id".to_string(),
        "-Wl,-soname,librocprofiler-register.so.0".to_string(),
        format!("-DVARIANT={variant}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    build("register.c", "librocprofiler-register.so.0.5.0", &refs)
}

/// A library exporting `rocprofiler_configure` (PyTorch stand-in).
pub fn configure_lib() -> PathBuf {
    build(
        "configure.c",
        "libtorch_cpu.so",
        &["-shared", "-fPIC", "-Wl,--build-id"],
    )
}

/// An attach tool: exports `rocprofiler_configure` and `rocprofiler_configure_attach`.
pub fn attach_tool_lib() -> PathBuf {
    build(
        "configure.c",
        "libattach-tool.so",
        &["-shared", "-fPIC", "-Wl,--build-id", "-DATTACH_TOOL"],
    )
}

/// The target program.
pub fn target_bin() -> PathBuf {
    build("target.c", "target", &["-pthread", "-ldl"])
}

/// The tracer program.
pub fn tracer_bin() -> PathBuf {
    build("tracer.c", "tracer", &[])
}

/// Copy `file` into `dir` under `name` (a new inode).
pub fn copy_into(file: &Path, dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("create dir");
    let dest = dir.join(name);
    std::fs::copy(file, &dest).expect("copy fixture");
    dest
}

/// A child process killed (SIGKILL) and reaped on drop, with its stdout lines on a channel.
pub struct Proc {
    child: Child,
    lines: Receiver<String>,
    /// Extra PIDs to kill on drop (e.g. grandchildren).
    pub also_kill: Vec<i32>,
}

impl Proc {
    /// Spawn `cmd` with stdin/stdout piped.
    pub fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn fixture");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            lines: rx,
            also_kill: Vec::new(),
        }
    }

    /// Process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Wait (bounded) for a line starting with `prefix`; returns the rest of the line.
    pub fn wait_for(&self, prefix: &str) -> String {
        loop {
            match self.lines.recv_timeout(WAIT) {
                Ok(l) => {
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return rest.to_string();
                    }
                    assert!(!l.starts_with("error="), "fixture failed: {l}");
                }
                Err(e) => panic!("fixture {} did not print '{prefix}': {e}", self.pid()),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        for &p in &self.also_kill {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the target with `args` and environment `env`; waits for "ready".
/// Returns the process and the address printed for `rocprofiler_register_attach` (if any).
pub fn start_target(args: &[&str], env: &[(&str, &str)]) -> (Proc, Option<u64>) {
    let mut cmd = Command::new(target_bin());
    cmd.args(args).env_remove("ROCP_TOOL_ATTACH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let proc_ = Proc::spawn(cmd);
    let loads_lib = args.iter().any(|a| a.contains(".so"));
    let addr = if loads_lib {
        let a = proc_.wait_for("attach=");
        u64::from_str_radix(&a, 16).ok()
    } else {
        None
    };
    proc_.wait_for("ready");
    (proc_, addr)
}

/// Start the target and wait for "child=" (with --fork) and "ready"; returns (proc, child pid).
pub fn start_forking_target(args: &[&str], env: &[(&str, &str)]) -> (Proc, i32) {
    let mut cmd = Command::new(target_bin());
    cmd.arg("--fork").args(args).env_remove("ROCP_TOOL_ATTACH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut proc_ = Proc::spawn(cmd);
    if args.iter().any(|a| a.contains(".so")) {
        proc_.wait_for("attach=");
    }
    let child: i32 = proc_.wait_for("child=").parse().expect("child pid");
    proc_.also_kill.push(child);
    proc_.wait_for("ready");
    (proc_, child)
}
