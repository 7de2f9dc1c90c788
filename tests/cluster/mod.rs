//! A small cluster on one machine, for the cross-node tests: a login/controller host `ctl` and
//! nodes `n1`, `n2`, ..., each in its own network, PID, UTS (host name) and mount namespaces.
//! The network namespaces are made with `ip netns` (iproute2); each node has a veth into a bridge
//! in `ctl`'s namespace, so every host reaches every other one (10.77.0.0/24) and nothing else.
//! Every host is held by a small process that is PID 1 of the host's PID namespace: killing it
//! kills everything that ran on that host. Daemons and commands join a host with `nsenter`.
//!
//! Names are unique (`rpa-<test pid>-<n>-...`), so parallel or interrupted runs never collide;
//! namespaces and directories left behind by a killed test process are deleted by the next run.
//! [`Cluster`]'s `Drop` kills every host and deletes the namespaces and the directory, whether
//! the test passed or panicked. As a second line, every process started here gets
//! `setpriv --pdeathsig KILL`, so it dies with the test thread even when the test process is
//! killed.
//!
//! Needs root (namespaces), `ip`, `unshare`, `nsenter` and `setpriv`: a missing piece fails the
//! test with what to install; nothing is skipped.
#![allow(dead_code)]

pub mod jobs;
pub mod mpi;
pub mod slurm;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Prefix of every network namespace made here: `rpa-<pid>-<seq>-<host>`.
const NETNS_PREFIX: &str = "rpa-";
/// Prefix of every cluster directory: `<base>/rpa-cluster-<pid>-XXXXXX`.
const DIR_PREFIX: &str = "rpa-cluster-";
/// The cluster's subnet (private to the cluster's own namespaces).
pub const SUBNET: &str = "10.77.0";

/// Path of `prog`: PATH first, then the sbin directories (daemons live there), or a test failure
/// that says which Debian package provides it.
pub fn program(prog: &str) -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            let pkg = match prog {
                "ip" => "iproute2",
                "munged" | "munge" => "munge",
                "slurmctld" => "slurmctld",
                "slurmd" => "slurmd",
                "srun" | "sinfo" | "squeue" | "scancel" | "scontrol" => "slurm-client",
                "mpirun" => "openmpi-bin",
                _ => "util-linux",
            };
            panic!(
                "{prog} not found (PATH, /usr/sbin, /sbin): the cluster tests need it. Install it with \
                 `apt-get install -y {pkg}` (tests/scripts/ci-deps.sh installs every package the tests use)"
            )
        })
}

/// Run `cmd` to completion with a bound; panics (with its output) on a non-zero exit when
/// `check` is set, or when it outlives `limit` (then it is killed).
pub fn run(cmd: &mut Command, limit: Duration, check: bool) -> Output {
    let shown = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let out = wait_output(child, limit).unwrap_or_else(|partial| {
        panic!(
            "{shown} did not finish within {limit:?}; output so far:\n{}\n{}",
            String::from_utf8_lossy(&partial.stdout),
            String::from_utf8_lossy(&partial.stderr)
        )
    });
    if check && !out.status.success() {
        panic!(
            "{shown} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Wait for a child with piped stdout/stderr, at most `limit`; on timeout it is killed and what
/// it printed is returned as the error.
pub fn wait_output(mut child: Child, limit: Duration) -> Result<Output, Output> {
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A grandchild may hold the pipes open after a kill: do not wait for it forever.
    let join = |h: std::thread::JoinHandle<Vec<u8>>| {
        let until = Instant::now() + Duration::from_secs(5);
        while !h.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            Vec::new()
        }
    };
    let (stdout, stderr) = (join(out), join(err));
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(9),
            stdout,
            stderr,
        }),
    }
}

/// `setpriv --pdeathsig KILL <prog>`: the process dies when the test thread that started it
/// ends, even if the test process is killed before its guards run.
fn tied(prog: &Path) -> Command {
    let mut c = Command::new(program("setpriv"));
    c.arg("--pdeathsig").arg("KILL").arg(prog);
    c
}

/// One host of the cluster: its namespaces, held by PID 1 of its PID namespace.
pub struct Host {
    /// Host name (its UTS namespace's), also the Slurm node name.
    pub name: String,
    /// Network namespace name (`ip netns`).
    pub netns: String,
    /// IPv4 address on the cluster network.
    pub addr: String,
    /// `unshare` (with `--kill-child`): killing it kills the host's PID 1 and so every process
    /// of the host.
    holder: Child,
    /// Host-side PID of the host's PID 1 (what `nsenter -t` joins).
    pub init: i32,
}

impl Host {
    /// A command run on this host: in its network, PID, UTS and mount namespaces.
    pub fn command(&self, prog: impl AsRef<Path>) -> Command {
        let mut c = tied(&program("nsenter"));
        c.arg("-t")
            .arg(self.init.to_string())
            .args(["--net", "--pid", "--uts", "--mount", "--"])
            .arg(prog.as_ref());
        c
    }

    /// Host-side PID of the process that is `ns_pid` in this host's PID namespace.
    pub fn host_pid(&self, ns_pid: i32) -> Option<i32> {
        let ns = std::fs::read_link(format!("/proc/{}/ns/pid", self.init)).ok()?;
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let last = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|f| f.split_whitespace().last()?.parse::<i32>().ok());
            if last == Some(ns_pid)
                && std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                    .ok()
                    .as_ref()
                    == Some(&ns)
            {
                return Some(pid);
            }
        }
        None
    }
}

/// Hosts `ctl` and `n1..nN` in their own namespaces, plus a world-readable working directory.
pub struct Cluster {
    /// Unique tag of this cluster (`rpa-<pid>-<seq>`).
    pub tag: String,
    /// Working directory (mode 0755: daemons and jobs read it whatever user they run as).
    pub dir: tempfile::TempDir,
    /// The controller / login host.
    pub ctl: Host,
    /// The compute nodes.
    pub nodes: Vec<Host>,
    /// Network namespaces to delete on drop (made so far).
    netns: Vec<String>,
    /// Daemons started on the hosts: (name, process, log file).
    pub(crate) daemons: Vec<(String, Child, PathBuf)>,
}

impl Cluster {
    /// Make the namespaces, the network and one host process per host. Panics (after tearing
    /// down what was made) with the reason when something cannot be set up.
    pub fn new(nodes: usize) -> Cluster {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the cluster tests make network and PID namespaces and start Slurm's daemons: run them \
             as root (CI does; locally: sudo -E cargo nextest run ...)"
        );
        for p in ["ip", "unshare", "nsenter", "setpriv"] {
            program(p);
        }
        sweep_stale();
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let tag = format!(
            "{NETNS_PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        // In /tmp rather than $TMPDIR (cluster_base): short paths for the daemons' Unix sockets
        // (108 bytes at most), and a parent that munged accepts (root-owned, sticky).
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir_in(cluster_base())
            .expect("cluster temp dir");
        public(dir.path());
        for d in ["bin", "log", "hosts"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
            public(&dir.path().join(d));
        }
        // The host processes and the namespaces are made one by one; a failure part-way still
        // tears down what exists (the guard is complete from the first namespace on).
        let mut c = Cluster {
            tag,
            dir,
            ctl: placeholder(),
            nodes: Vec::new(),
            netns: Vec::new(),
            daemons: Vec::new(),
        };
        let ctl_ns = c.add_netns("ctl");
        let ip = program("ip");
        let ipn = |ns: &str, args: &[&str]| {
            run(
                Command::new(&ip).arg("-n").arg(ns).args(args),
                Duration::from_secs(20),
                true,
            );
        };
        ipn(&ctl_ns, &["link", "set", "lo", "up"]);
        ipn(&ctl_ns, &["link", "add", "br0", "type", "bridge"]);
        ipn(&ctl_ns, &["link", "set", "br0", "up"]);
        ipn(
            &ctl_ns,
            &["addr", "add", &format!("{SUBNET}.1/24"), "dev", "br0"],
        );
        for i in 1..=nodes {
            let ns = c.add_netns(&format!("n{i}"));
            let port = format!("p{i}");
            // Both ends are made directly inside the namespaces: nothing appears in ours.
            run(
                Command::new(&ip)
                    .args(["link", "add", "eth0", "netns", &ns, "type", "veth"])
                    .args(["peer", "name", &port, "netns", &ctl_ns]),
                Duration::from_secs(20),
                true,
            );
            ipn(&ctl_ns, &["link", "set", &port, "master", "br0"]);
            ipn(&ctl_ns, &["link", "set", &port, "up"]);
            ipn(&ns, &["link", "set", "lo", "up"]);
            ipn(&ns, &["link", "set", "eth0", "up"]);
            ipn(
                &ns,
                &[
                    "addr",
                    "add",
                    &format!("{SUBNET}.{}/24", 10 + i),
                    "dev",
                    "eth0",
                ],
            );
        }
        c.ctl = c.start_host("ctl", &ctl_ns, &format!("{SUBNET}.1"));
        for i in 1..=nodes {
            let ns = c.netns[i].clone();
            let host = c.start_host(&format!("n{i}"), &ns, &format!("{SUBNET}.{}", 10 + i));
            c.nodes.push(host);
        }
        c
    }

    fn add_netns(&mut self, host: &str) -> String {
        let name = format!("{}-{host}", self.tag);
        run(
            Command::new(program("ip")).args(["netns", "add", &name]),
            Duration::from_secs(20),
            true,
        );
        self.netns.push(name.clone());
        name
    }

    /// Start the process that holds `name`'s PID, UTS and mount namespaces (inside network
    /// namespace `netns`), and find its PID 1.
    fn start_host(&mut self, name: &str, netns: &str, addr: &str) -> Host {
        let mut cmd = tied(&program("ip"));
        cmd.args(["netns", "exec", netns])
            .arg(program("unshare"))
            .args([
                "--pid",
                "--fork",
                "--kill-child",
                "--uts",
                "--mount",
                "--mount-proc",
            ])
            .args(["--", "sh", "-c"])
            .arg(format!("hostname {name} && echo up && exec sleep 100000"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut holder = cmd
            .spawn()
            .expect("start a host (ip netns exec ... unshare)");
        let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(lines.next());
        });
        let up = rx.recv_timeout(Duration::from_secs(20));
        if !matches!(&up, Ok(Some(Ok(l))) if l == "up") {
            let _ = holder.kill();
            let out = wait_output(holder, Duration::from_secs(5)).unwrap_or_else(|o| o);
            panic!(
                "host {name} did not start (ip netns exec {netns} unshare --pid --uts --mount ...): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // PID 1 of the new PID namespace is unshare's only child.
        let unshare = holder.id() as i32;
        let mut init = 0;
        wait_until(
            Duration::from_secs(10),
            "the host's PID 1 to appear",
            || {
                init = child_of(unshare).unwrap_or(0);
                init > 0
            },
        );
        std::fs::write(
            self.dir.path().join("hosts").join(format!("{name}.pid")),
            init.to_string(),
        )
        .unwrap();
        Host {
            name: name.to_string(),
            netns: netns.to_string(),
            addr: addr.to_string(),
            holder,
            init,
        }
    }

    /// Path in the working directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A world-readable copy of `src` in `bin/` (the checkout may be private to its owner).
    pub fn install(&self, src: &Path) -> PathBuf {
        let dest = self.path("bin").join(src.file_name().unwrap());
        std::fs::copy(src, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", src.display(), dest.display()));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
        dest
    }

    /// Start a daemon on `host` (foreground; its stdout and stderr go to `log/<name>.out`).
    pub fn daemon(&mut self, name: &str, mut cmd: Command) {
        let log = self.path("log").join(format!("{name}.out"));
        let f = std::fs::File::create(&log).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.daemons.push((name.to_string(), child, log));
    }

    /// Panic if a daemon has exited (with its log).
    pub fn check_daemons(&mut self) {
        let mut dead = Vec::new();
        for (name, child, _) in &mut self.daemons {
            if let Ok(Some(s)) = child.try_wait() {
                dead.push(format!("{name} exited ({s})"));
            }
        }
        assert!(dead.is_empty(), "{}\n{}", dead.join("; "), self.log_tails());
    }

    /// The last lines of every log in `log/`, for failure messages.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.path("log"))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- {} (last 15 lines)\n", log.display()));
            for l in &lines[lines.len().saturating_sub(15)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// Node by name.
    pub fn node(&self, name: &str) -> &Host {
        self.nodes
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }
}

fn placeholder() -> Host {
    Host {
        name: String::new(),
        netns: String::new(),
        addr: String::new(),
        holder: Command::new("true").spawn().expect("spawn true"),
        init: 0,
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Killing a host's PID 1 kills every process of the host (daemons, jobs, steps). Their
        // parents (unshare, nsenter) then reap them and exit by themselves; they are killed
        // only if they do not within a few seconds.
        let hosts: Vec<&mut Host> = self
            .nodes
            .iter_mut()
            .chain(std::iter::once(&mut self.ctl))
            .collect();
        for h in &hosts {
            if h.init > 0 {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(h.init),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let reap = |child: &mut Child| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        };
        for h in hosts {
            reap(&mut h.holder);
        }
        for (_, child, _) in &mut self.daemons {
            reap(child);
        }
        if let Some(ip) = which("ip") {
            for ns in self.netns.iter().rev() {
                let _ = Command::new(&ip)
                    .args(["netns", "del", ns])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn which(prog: &str) -> Option<PathBuf> {
    std::panic::catch_unwind(|| program(prog)).ok()
}

/// Make a directory readable and searchable by everyone.
fn public(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The child of `pid` (its first, by /proc scan).
fn child_of(pid: i32) -> Option<i32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{p}/status")) else {
            continue;
        };
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<i32>().ok());
        if ppid == Some(pid) {
            return Some(p);
        }
    }
    None
}

/// Where cluster directories are made.
fn cluster_base() -> PathBuf {
    let tmp = Path::new("/tmp");
    if tmp.is_dir() {
        tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The test process that made `name` (`<prefix><pid>-...`), if `name` is one of ours.
fn owner_pid(name: &str, prefix: &str) -> Option<i32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Delete namespaces `rpa-<pid>-...` and directories `rpa-cluster-<pid>-...` whose test process
/// no longer exists (left by a test process that was killed before its guard ran).
fn sweep_stale() {
    let gone = |pid: i32| !Path::new(&format!("/proc/{pid}")).exists();
    if let Ok(rd) = std::fs::read_dir("/run/netns") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if owner_pid(&name, NETNS_PREFIX).is_some_and(gone) {
                let _ = Command::new(program("ip"))
                    .args(["netns", "del", &name])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(cluster_base()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if owner_pid(&name, DIR_PREFIX).is_some_and(gone) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Poll `cond` until true; panic after `limit` naming what was awaited.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
