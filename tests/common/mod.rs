//! Shared test support of the root package: running the real `rocprof-attach` binary, and
//! checks of a target after an attach or detach (faults, soak, storm). The stand-ins and the
//! rest of the process helpers are `rocprof_testkit`'s, re-exported here.

pub use rocprof_testkit::*;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `rocprof-attach` binary cargo built for the tests (`ROCPROF_ATTACH_BIN` overrides it).
pub fn bin() -> PathBuf {
    if let Some(b) = std::env::var_os("ROCPROF_ATTACH_BIN") {
        return PathBuf::from(b);
    }
    PathBuf::from(env!("CARGO_BIN_EXE_rocprof-attach"))
}

/// A running `rocprof-attach` whose stderr is collected line by line.
pub struct Run {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub stderr: Vec<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

/// A shared library another package of the workspace builds (`package`'s cdylib, `file` in
/// target/<profile>/), built now, once per test process: `cargo test` and `cargo nextest`
/// never build a cdylib-only crate, and a copy left from an earlier build could be stale.
pub fn built_library(package: &str, file: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let dir = bin().parent().expect("bin dir").to_path_buf();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if std::env::var_os("ROCPROF_ATTACH_BIN").is_none() && !built.iter().any(|p| p == package) {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", package])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo");
        assert!(status.success(), "cargo build -p {package}");
        built.push(package.to_string());
    }
    let path = dir.join(file);
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// Start the real binary with a clean environment plus `env`.
pub fn rocprof_attach(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn rocprof-attach");
    let err = child.stderr.take().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let stdout = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    Run {
        child,
        lines: rx,
        stderr: Vec::new(),
        stdout: Some(stdout),
    }
}

impl Run {
    /// Wait (bounded) for a stderr line containing `needle`.
    pub fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        if self.stderr.iter().any(|l| l.contains(needle)) {
            return;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    self.stderr.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!(
                    "no stderr line containing {needle:?} within 20 s; got {:#?}",
                    self.stderr
                ),
            }
        }
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Wait (bounded) for exit; returns (exit code, stdout, all stderr).
    pub fn finish(mut self) -> (i32, String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "rocprof-attach did not exit within 60 s; stderr so far: {:#?}",
                    self.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let out = self.stdout.take().unwrap().join().unwrap();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stderr.push(l);
        }
        use std::os::unix::process::ExitStatusExt;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        (code, out, self.stderr.join("\n"))
    }
}

// ---------------------------------------------------------------- fault, soak and storm helpers

/// The listener's registers, read with one bounded PTRACE_INTERRUPT once it is back in its
/// futex wait (state S). Must not be called while another tracer holds the thread.
pub fn listener_regs(pid: i32, tid: i32) -> Vec<u64> {
    wait_until(Duration::from_secs(10), || {
        thread_state(pid, tid) == Some('S')
    });
    let mut tr = rocprof_attach::engine::ptrace::Tracee::seize(pid, tid).expect("seize listener");
    tr.interrupt(Duration::from_secs(5))
        .expect("interrupt listener");
    let regs = tr.getregs().expect("listener registers");
    tr.cont(0).expect("resume listener");
    tr.detach(Duration::from_secs(5)).expect("detach listener");
    regs_tuple(&regs)
}

/// Everything about a target that an attach or detach must leave exactly as it found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pristine {
    pub maps: String,
    pub code: Vec<u8>,
    pub regs: Vec<u64>,
    pub sigblk: u64,
}

impl Pristine {
    /// Snapshot of `t`: maps, 16 bytes at AT_ENTRY, listener registers and blocked mask.
    pub fn take(t: &Target) -> Pristine {
        let l = t.listener();
        let regs = listener_regs(t.pid, l);
        Pristine {
            maps: maps_text(t.pid),
            code: mem_read(t.pid, at_entry(t.pid), 16),
            regs,
            sigblk: status_mask(t.pid, l, "SigBlk:"),
        }
    }

    /// Assert `t` is back to this snapshot, and nothing traces it.
    pub fn assert_same(&self, t: &Target, context: &str) {
        let l = t.listener();
        assert_eq!(tracer_pid(t.pid, l), 0, "{context}: listener still traced");
        assert_eq!(tracer_pid(t.pid, t.pid), 0, "{context}: main thread traced");
        assert_eq!(
            mem_read(t.pid, at_entry(t.pid), 16),
            self.code,
            "{context}: bytes at the injection site (AT_ENTRY)"
        );
        assert_eq!(
            status_mask(t.pid, l, "SigBlk:"),
            self.sigblk,
            "{context}: listener's blocked-signal mask"
        );
        assert_eq!(
            listener_regs(t.pid, l),
            self.regs,
            "{context}: listener registers"
        );
        let now = maps_text(t.pid);
        if now != self.maps {
            eprintln!("{context}: mappings differ");
            assert_maps_eq(&self.maps, &now);
        }
    }
}

/// A 1 MiB tmpfs mounted on `dir` (root only), unmounted when dropped.
pub struct Tmpfs(pub std::path::PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path) -> Option<Tmpfs> {
        Self::mount_sized(dir, "1m")
    }

    /// A tmpfs of `size` (`mount -o size=`) on `dir`.
    pub fn mount_sized(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    /// Fill it until `leave` bytes are free.
    pub fn fill(&self, leave: u64) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            let s = nix::sys::statvfs::statvfs(&self.0).unwrap();
            let free = s.blocks_available() * s.fragment_size();
            if free <= leave || f.write_all(&chunk).is_err() {
                break;
            }
            f.flush().unwrap();
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
