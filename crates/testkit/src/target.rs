//! The stand-in target (tests/fixtures/target.c) run as a real process, and what the tests read
//! of a process in /proc, independently of the engine's own readers.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::standins::{register_lib, target_bin, DEFAULT_TOOL_NAME};

/// Options for [`Target::spawn`] (the command-line options of tests/fixtures/target.c).
#[derive(Debug, Clone)]
pub struct TargetOpts {
    /// Worker threads with a heartbeat (`--workers`, at most [`MAX_WORKERS`]).
    pub workers: u32,
    /// `ROCP_TOOL_ATTACH=1`: registering starts the `rocp-bg-attach` listener.
    pub attach_enabled: bool,
    /// Load and register with the register library (off: `--no-register`, no listener).
    pub register: bool,
    /// After registering, fork a child that does not exec (`--fork-child`).
    pub fork_child: bool,
    /// After registering, fork and exec a copy of the target, with its own listener.
    pub exec_child: bool,
    /// Route SIGUSR1 only to the worker threads (`--signal-workers`).
    pub signal_workers: bool,
    /// Install a SIGTRAP handler, which an injector must not reset (`--sigtrap-handler`).
    pub sigtrap_handler: bool,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Run the target as this uid (and gid of the same number); its directory becomes public.
    pub uid: Option<u32>,
    /// Extra text on the command line (`--tag TEXT`), for `--match` selection.
    pub tag: Option<String>,
    /// A command that execs the target (its arguments follow), e.g. `unshare` into its own mount
    /// namespace; the process keeps its PID. Not combined with `uid`.
    pub wrap: Vec<String>,
}

impl Default for TargetOpts {
    fn default() -> Self {
        TargetOpts {
            workers: 2,
            attach_enabled: true,
            register: true,
            fork_child: false,
            exec_child: false,
            signal_workers: false,
            sigtrap_handler: false,
            env: Vec::new(),
            uid: None,
            tag: None,
            wrap: Vec::new(),
        }
    }
}

/// A running stand-in target; killed when dropped.
pub struct Target {
    /// The process.
    pub child: Child,
    /// Its PID.
    pub pid: i32,
    /// Its own temporary directory, its working directory.
    pub dir: tempfile::TempDir,
    /// The stand-in register library's log ([`crate::records`](mod@crate::records)).
    pub log: PathBuf,
    /// The heartbeat page ([`Target::beats`]).
    pub heartbeat: PathBuf,
    /// The PID of the child of [`TargetOpts::fork_child`].
    pub fork_child: Option<i32>,
    /// The PID of the child of [`TargetOpts::exec_child`].
    pub exec_child: Option<i32>,
    stdin: Option<ChildStdin>,
}

/// Layout of the target's heartbeat page (see target.c).
pub const MAX_WORKERS: usize = 16;

/// A snapshot of the heartbeat page.
#[derive(Debug, Clone)]
pub struct Beats {
    /// SIGUSR1 signals received.
    pub sigusr1: u64,
    /// Heartbeats per worker.
    pub beats: Vec<u64>,
    /// Longest gap between two heartbeats, per worker.
    pub max_gap_ns: Vec<u64>,
    /// Thread ids of the workers.
    pub tids: Vec<i32>,
}

impl Target {
    /// Starts the target and waits (bounded) until it is ready and, if it registers with
    /// attach enabled, its listener thread is up.
    // Long because: one command line per option of the stand-in, then one bounded wait.
    pub fn spawn(opts: TargetOpts) -> Target {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("standin.log");
        let heartbeat = dir.path().join("heartbeat");
        let mut cmd = match opts.wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(target_bin());
                c
            }
            None => Command::new(target_bin()),
        };
        cmd.arg("--workers")
            .arg(opts.workers.to_string())
            .arg("--heartbeat")
            .arg(&heartbeat);
        if !opts.register {
            cmd.arg("--no-register");
        }
        if opts.fork_child {
            cmd.arg("--fork-child");
        }
        if opts.exec_child {
            cmd.arg("--exec-child");
        }
        if opts.signal_workers {
            cmd.arg("--signal-workers");
        }
        if opts.sigtrap_handler {
            cmd.arg("--sigtrap-handler");
        }
        if let Some(tag) = &opts.tag {
            cmd.arg("--tag").arg(tag);
        }
        cmd.env("STANDIN_REGISTER_LIB", register_lib())
            .env("ROCPROF_STANDIN_LOG", &log)
            .env_remove("ROCP_TOOL_ATTACH");
        if opts.attach_enabled {
            cmd.env("ROCP_TOOL_ATTACH", "1");
        }
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        if let Some(uid) = opts.uid {
            use std::os::unix::fs::PermissionsExt;
            use std::os::unix::process::CommandExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
                .expect("chmod target dir");
            // The checkout may lie in a directory that user cannot enter (a clone in /root): run
            // copies from the target's own world-readable directory.
            let bin = public_copy(&target_bin(), dir.path());
            let lib = public_copy(&register_lib(), dir.path());
            public_copy(
                &register_lib().with_file_name(DEFAULT_TOOL_NAME),
                dir.path(),
            );
            cmd = Command::new(bin);
            cmd.arg("--workers")
                .arg(opts.workers.to_string())
                .arg("--heartbeat")
                .arg(&heartbeat);
            for (flag, on) in [
                ("--no-register", !opts.register),
                ("--fork-child", opts.fork_child),
                ("--exec-child", opts.exec_child),
                ("--signal-workers", opts.signal_workers),
                ("--sigtrap-handler", opts.sigtrap_handler),
            ] {
                if on {
                    cmd.arg(flag);
                }
            }
            if let Some(tag) = &opts.tag {
                cmd.arg("--tag").arg(tag);
            }
            cmd.env("STANDIN_REGISTER_LIB", lib)
                .env("ROCPROF_STANDIN_LOG", &log)
                .env_remove("ROCP_TOOL_ATTACH");
            if opts.attach_enabled {
                cmd.env("ROCP_TOOL_ATTACH", "1");
            }
            for (k, v) in &opts.env {
                cmd.env(k, v);
            }
            cmd.uid(uid).gid(uid);
        }
        // The target works in its own temporary directory, so a tool writing to its default
        // output path (relative to the target's cwd) never litters the repository.
        cmd.current_dir(dir.path());
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn target");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut t = Target {
            pid: child.id() as i32,
            child,
            dir,
            log,
            heartbeat,
            fork_child: None,
            exec_child: None,
            stdin,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("target did not print 'ready' within 20 s");
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("ready"), Some(pid), _) if pid.parse::<i32>().ok() == Some(t.pid) => break,
                (Some("child"), Some("fork"), Some(p)) => t.fork_child = p.parse().ok(),
                (Some("child"), Some("exec"), Some(p)) => t.exec_child = p.parse().ok(),
                _ => {}
            }
        }
        if opts.attach_enabled && opts.register {
            wait_until(Duration::from_secs(20), || listener_tid(t.pid).is_some());
        }
        if let Some(c) = t.exec_child {
            wait_until(Duration::from_secs(20), || listener_tid(c).is_some());
        }
        t
    }

    /// Listener thread id.
    pub fn listener(&self) -> i32 {
        listener_tid(self.pid).expect("target has a rocp-bg-attach thread")
    }

    /// Read the heartbeat page.
    pub fn beats(&self) -> Beats {
        let b = std::fs::read(&self.heartbeat).expect("heartbeat page");
        let u = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let workers = u(2) as usize;
        let beats = (0..workers).map(|w| u(4 + w)).collect();
        let max_gap_ns = (0..workers).map(|w| u(4 + MAX_WORKERS + w)).collect();
        let tids = (0..workers)
            .map(|w| u(4 + 3 * MAX_WORKERS + w) as i32)
            .collect();
        Beats {
            sigusr1: u(3),
            beats,
            max_gap_ns,
            tids,
        }
    }

    /// Wait (bounded) until every worker has beaten again: the target is alive and running.
    pub fn assert_heartbeat(&self) {
        let before = self.beats();
        wait_until(Duration::from_secs(10), || {
            let now = self.beats();
            now.beats.iter().zip(&before.beats).all(|(a, b)| a > b)
        });
    }

    /// The stand-in's call log (one line per attach/detach call).
    pub fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// True while the process is alive (not exited or zombie).
    pub fn alive(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(s) => !matches!(
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next()),
                Some("Z") | Some("X")
            ),
            Err(_) => false,
        }
    }

    /// Kill with SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Close stdin so the target exits by itself; returns its exit status (bounded wait).
    pub fn finish(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        for p in [self.fork_child, self.exec_child].into_iter().flatten() {
            // SAFETY-free: plain kill(2) through nix.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        self.kill();
    }
}

/// A world-readable temporary directory outside the checkout (which may lie in a 0700 home).
pub fn public_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("rocprof-public")
        .tempdir_in(std::env::temp_dir())
        .expect("public tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

/// Copy `src` (a binary or library of the checkout) into `dir`, readable and executable by
/// everyone, for processes that run as another user.
pub fn public_copy(src: &Path, dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(src.file_name().expect("file name"));
    std::fs::copy(src, &p).expect("copy into public dir");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}

/// TID of the `rocp-bg-attach` thread of `pid`, if any.
pub fn listener_tid(pid: i32) -> Option<i32> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for e in dir.flatten() {
        let tid: i32 = e.file_name().to_str()?.parse().ok()?;
        if let Ok(c) = std::fs::read_to_string(e.path().join("comm")) {
            if c.trim_end() == "rocp-bg-attach" {
                return Some(tid);
            }
        }
    }
    None
}

/// What the benchmarks report when gdb ran but did not make its call: gdb's last error line
/// (some gdb builds cannot write the FPU state of some CPUs: "Couldn't write extended state
/// status").
pub fn gdb_failure(stderr: &str) -> String {
    let last = stderr.lines().last().unwrap_or("no error message").trim();
    format!("gdb did not make the call ({last})")
}

/// Poll `cond` until true, failing the test after `limit` (test-side waiting only).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// State letter of a thread (third field of /proc/PID/task/TID/stat).
pub fn thread_state(pid: i32, tid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    s.rsplit(')')
        .next()?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Address of a symbol in a library mapped by `pid`, computed from our own ELF parse of the
/// fixture (independent of the crate's lookup code): base of the first mapping + st_value.
pub fn maps_text(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps")
}

/// Program entry point (AT_ENTRY) read directly from /proc/PID/auxv.
pub fn at_entry(pid: i32) -> u64 {
    let b = std::fs::read(format!("/proc/{pid}/auxv")).expect("auxv");
    for c in b.chunks_exact(16) {
        let t = u64::from_ne_bytes(c[..8].try_into().unwrap());
        let v = u64::from_ne_bytes(c[8..].try_into().unwrap());
        if t == 9 {
            return v;
        }
    }
    panic!("no AT_ENTRY");
}

/// Address of `sym` in `pid`, computed independently of the crate's lookup: the base of the
/// file's offset-0 mapping plus the symbol's value from the file's dynamic symbol table.
pub fn symbol_addr(pid: i32, lib: &Path, sym: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(lib).expect("read library");
    let file = object::File::parse(&*data).expect("parse ELF");
    let value = file
        .dynamic_symbols()
        .find(|s| s.name().ok() == Some(sym))
        .unwrap_or_else(|| panic!("{sym} not in {}", lib.display()))
        .address();
    let canon = std::fs::canonicalize(lib).unwrap();
    for line in maps_text(pid).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 6 && Path::new(f[5]) == canon && u64::from_str_radix(f[2], 16).unwrap() == 0 {
            let start = u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap();
            return start + value;
        }
    }
    panic!("{} not mapped in {pid}", lib.display());
}

/// Assert two /proc/PID/maps snapshots are identical, showing only the differing lines.
pub fn assert_maps_eq(before: &str, after: &str) {
    let b: Vec<&str> = before.lines().collect();
    let a: Vec<&str> = after.lines().collect();
    let gone: Vec<&&str> = b.iter().filter(|l| !a.contains(l)).collect();
    let new: Vec<&&str> = a.iter().filter(|l| !b.contains(l)).collect();
    assert!(
        gone.is_empty() && new.is_empty(),
        "mappings changed\n  gone: {gone:#?}\n  new: {new:#?}"
    );
}

/// A hex mask field (SigBlk, SigCgt, ...) of /proc/PID/task/TID/status.
pub fn status_mask(pid: i32, tid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).expect("status");
    let line = s.lines().find(|l| l.starts_with(field)).expect("field");
    u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
}

/// Read `len` bytes at `addr` of `pid` through /proc/PID/mem (independent of the crate's reader).
pub fn mem_read(pid: i32, addr: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).expect("open /proc/PID/mem");
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, addr).expect("read /proc/PID/mem");
    buf
}

/// Registers of a thread that must be back exactly as they were after an injection.
pub fn regs_tuple(r: &libc::user_regs_struct) -> Vec<u64> {
    vec![
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base, r.gs_base,
    ]
}

/// TracerPid of thread `tid` of `pid` (0 when nobody traces it).
pub fn tracer_pid(pid: i32, tid: i32) -> i32 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .expect("TracerPid")
        .trim()
        .parse()
        .expect("TracerPid number")
}

/// A numeric kB field (VmRSS, VmHWM, ...) of /proc/PID/status.
pub fn status_kb(pid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
        .split_whitespace()
        .next()
        .expect("value")
        .parse()
        .expect("kB number")
}

/// Number of open file descriptors of `pid`.
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count()
}

/// True while `pid` exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => false,
    }
}
