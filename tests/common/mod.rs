//! Shared test support: build the C stand-ins with gcc and run them as real processes.
#![allow(dead_code)]

pub mod cuda;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Directory of the C sources.
pub fn fixture_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn hash_files(files: &[&Path], extra: &str) -> String {
    // FNV-1a over the sources and flags: a changed source gets a fresh build directory.
    let mut h: u64 = 0xcbf29ce484222325;
    for f in files {
        for b in std::fs::read(f)
            .expect("fixture source")
            .iter()
            .chain(extra.as_bytes())
        {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016x}")
}

/// Compile with gcc into `target/tmp/fixtures/<hash>/<out>` once; parallel test processes race
/// safely because each writes a temporary file and renames it into place.
///
/// `ROCPROF_FIXTURES_DIR` names a folder of fixtures built beforehand (benchmarks run on a
/// machine without a compiler): `build` then returns `<dir>/<out>` as is.
pub fn build(out: &str, sources: &[&str], flags: &[&str]) -> PathBuf {
    if let Some(dir) = std::env::var_os("ROCPROF_FIXTURES_DIR") {
        let prebuilt = PathBuf::from(dir).join(out);
        assert!(prebuilt.exists(), "{} is missing", prebuilt.display());
        return prebuilt;
    }
    let src = fixture_src();
    let paths: Vec<PathBuf> = sources.iter().map(|s| src.join(s)).collect();
    let mut all: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let header = src.join("standin.h");
    all.push(&header);
    // Tests get CARGO_TARGET_TMPDIR; examples that include this module fall back to target/tmp.
    let tmp = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp"));
    let dir = tmp
        .join("fixtures")
        .join(hash_files(&all, &flags.join(" ")));
    let dest = dir.join(out);
    if dest.exists() {
        return dest;
    }
    std::fs::create_dir_all(&dir).expect("fixture dir");
    // Unique per process *and* call: test threads of one binary build the same fixture at once.
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{out}.{}.{seq}", std::process::id()));
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-Wall", "-I"])
        .arg(&src)
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .args(&paths)
        .arg("-ldl")
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {out}");
    // Never replace a file another test process already built (and a running target may have
    // mapped: replacing it would show up as "(deleted)" in that target's maps): link, and keep
    // the first one if it exists by now.
    match std::fs::hard_link(&tmp, &dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("link fixture {}: {e}", dest.display()),
    }
    let _ = std::fs::remove_file(&tmp);
    dest
}

/// The stand-in `librocprofiler-register.so.0` (with a GNU Build ID), with an inert
/// `librocprofiler-sdk-tool.so.1` beside it ([`DEFAULT_TOOL_NAME`]): a session that names no
/// tool finds the default one where the target's loader looks, as on a real installation.
pub fn register_lib() -> PathBuf {
    let lib = build(
        "librocprofiler-register.so.0",
        &["register_standin.c"],
        &[
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-Wl,-soname,librocprofiler-register.so.0",
        ],
    );
    let beside = lib.with_file_name(DEFAULT_TOOL_NAME);
    if !beside.exists() {
        let inert = build("libinert-tool.so", &["inert_tool.c"], &["-fPIC", "-shared"]);
        match std::fs::hard_link(&inert, &beside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("link {}: {e}", beside.display()),
        }
    }
    lib
}

/// The default tool's name (`toolpath::DEFAULT_TOOL`).
pub const DEFAULT_TOOL_NAME: &str = "librocprofiler-sdk-tool.so.1";

/// The stand-in multi-threaded target.
pub fn target_bin() -> PathBuf {
    build("target", &["target.c"], &[])
}

/// Options for [`Target::spawn`].
#[derive(Debug, Clone)]
pub struct TargetOpts {
    pub workers: u32,
    pub attach_enabled: bool,
    pub register: bool,
    pub fork_child: bool,
    pub exec_child: bool,
    pub signal_workers: bool,
    pub sigtrap_handler: bool,
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
    pub child: Child,
    pub pid: i32,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    pub heartbeat: PathBuf,
    pub fork_child: Option<i32>,
    pub exec_child: Option<i32>,
    stdin: Option<ChildStdin>,
}

/// Layout of the target's heartbeat page (see target.c).
pub const MAX_WORKERS: usize = 16;

/// A snapshot of the heartbeat page.
#[derive(Debug, Clone)]
pub struct Beats {
    pub sigusr1: u64,
    pub beats: Vec<u64>,
    pub max_gap_ns: Vec<u64>,
    pub tids: Vec<i32>,
}

impl Target {
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

/// Encode an environment buffer by hand (independent oracle of docs/protocol.md section 5.10).
pub fn env_buffer(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut b = (pairs.len() as u32).to_le_bytes().to_vec();
    for (k, v) in pairs {
        b.extend_from_slice(k.as_bytes());
        b.push(0);
        b.extend_from_slice(v.as_bytes());
        b.push(0);
    }
    b
}

/// Hex as the stand-in logs strings.
pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One parsed stand-in log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub kind: String,
    pub fields: std::collections::BTreeMap<String, String>,
}

impl Record {
    pub fn get(&self, k: &str) -> &str {
        self.fields.get(k).map(String::as_str).unwrap_or("")
    }
    /// Decoded (name, value) pairs of an attach record.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let p = self.get("pairs");
        if p.is_empty() {
            return Vec::new();
        }
        p.split(',')
            .map(|kv| {
                let (k, v) = kv.split_once(':').unwrap();
                (unhex(k), unhex(v))
            })
            .collect()
    }
}

pub fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// Parse the stand-in's log.
/// The pairs of the `n`th attach record of `t` (what the register received), as a map.
pub fn attach_pairs(t: &Target, n: usize) -> std::collections::BTreeMap<String, String> {
    let recs: Vec<_> = records(t)
        .into_iter()
        .filter(|r| r.kind == "attach")
        .collect();
    recs.get(n)
        .unwrap_or_else(|| panic!("no attach record {n}: {recs:?}"))
        .pairs()
        .into_iter()
        .collect()
}

pub fn records(t: &Target) -> Vec<Record> {
    records_in(&t.log)
}

/// Parse a stand-in log file (several processes may share one; records carry `pid=`).
pub fn records_in(log: &Path) -> Vec<Record> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            let kind = it.next().unwrap().to_string();
            let fields = it
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Record { kind, fields }
        })
        .collect()
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

/// The minimal stand-in tool library (writes one CSV per session on detach).
pub fn tool_lib() -> PathBuf {
    build("libstandin-tool.so", &["tool.c"], &["-fPIC", "-shared"])
}

/// The `rocprof-attach` binary: cargo's for tests, the release build for examples
/// (`ROCPROF_ATTACH_BIN` overrides it for benchmarks run elsewhere).
pub fn bin() -> PathBuf {
    if let Some(b) = std::env::var_os("ROCPROF_ATTACH_BIN") {
        return PathBuf::from(b);
    }
    option_env!("CARGO_BIN_EXE_rocprof-attach")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/rocprof-attach")
        })
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
