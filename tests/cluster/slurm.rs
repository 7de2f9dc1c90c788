//! A real Slurm on the [`Cluster`]'s hosts, from Debian's packages: munged with a generated key
//! and its own socket, slurmctld on `ctl`, one slurmd per node. The configuration needs neither
//! cgroups nor systemd (proctrack/linuxproc, task/none, cgroup/v1 named explicitly so that no
//! cgroup file system is looked for), and every path is in the cluster's directory.

use super::{program, run, wait_until, Cluster};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long the daemons get to come up (they take about a second).
const START_LIMIT: Duration = Duration::from_secs(60);

impl Cluster {
    /// Generate the munge key and the Slurm configuration, start munged, slurmctld and every
    /// slurmd, and wait until every node is idle. Panics with the daemons' log tails when Slurm
    /// does not come up.
    pub fn start_slurm(&mut self) {
        for p in ["munged", "slurmctld", "slurmd", "srun", "sinfo"] {
            program(p);
        }
        self.start_munge();
        let conf = self.write_slurm_conf();
        let ctld = {
            let mut c = self.ctl.command(program("slurmctld"));
            c.args(["-D", "-i", "-f"]).arg(&conf);
            c
        };
        self.daemon("slurmctld", ctld);
        for i in 0..self.nodes.len() {
            let name = self.nodes[i].name.clone();
            std::fs::create_dir_all(self.path("spool").join(&name)).unwrap();
            let mut c = self.nodes[i].command(program("slurmd"));
            c.args(["-D", "-N", &name, "-f"]).arg(&conf);
            self.daemon(&format!("slurmd-{name}"), c);
        }
        let want: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{} idle", n.name))
            .collect();
        let deadline = Instant::now() + START_LIMIT;
        loop {
            self.check_daemons();
            let out = run(
                self.slurm_command("sinfo")
                    .args(["-h", "-N", "-o", "%N %t"]),
                Duration::from_secs(30),
                false,
            );
            let last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let mut got: Vec<String> = last.lines().map(|l| l.trim().to_string()).collect();
            got.sort();
            got.dedup();
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Slurm did not come up within {START_LIMIT:?}: `sinfo -N` says {last:?}, want every node \
                 idle ({want:?}).\n{}",
                self.log_tails()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_munge(&mut self) {
        let dir = self.path("munge");
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        // munged wants its key private and the socket's directory searchable by all.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .expect("random bytes for the munge key");
        std::fs::write(&key, &bytes).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        let socket = self.munge_socket();
        let mut c = self.ctl.command(program("munged"));
        c.arg("--foreground")
            .arg(format!("--origin={}", self.ctl.addr))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
            .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
            .arg(format!(
                "--log-file={}",
                self.path("log").join("munged.log").display()
            ));
        self.daemon("munged", c);
        wait_until(START_LIMIT, "munged's socket", || {
            self.check_daemons();
            socket.exists()
        });
    }

    /// The munge socket every daemon and client of this cluster uses.
    pub fn munge_socket(&self) -> PathBuf {
        self.path("munge").join("munge.socket")
    }

    /// Path of the generated slurm.conf.
    pub fn slurm_conf(&self) -> PathBuf {
        self.path("etc").join("slurm.conf")
    }

    fn write_slurm_conf(&self) -> PathBuf {
        let etc = self.path("etc");
        std::fs::create_dir_all(&etc).unwrap();
        for d in ["state", "spool"] {
            std::fs::create_dir_all(self.path(d)).unwrap();
        }
        let p = |rel: &str| self.path(rel).display().to_string();
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "NodeName={} NodeAddr={} CPUs=4 RealMemory=1000 State=UNKNOWN",
                    n.name, n.addr
                )
            })
            .collect();
        let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        let conf = format!(
            "# Generated by tests/cluster/slurm.rs for one test run.
ClusterName=rpa
SlurmctldHost={ctl}({ctl_addr})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}
CredType=cred/munge
StateSaveLocation={state}
SlurmdSpoolDir={spool}/%n
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={spool}/slurmd-%n.pid
SlurmctldLogFile={log}/slurmctld.log
SlurmdLogFile={log}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups, no systemd: processes are tracked through /proc, tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# The nodes' CPU count is what this file says, not what the 2-core machine has.
SlurmdParameters=config_overrides
# srun talks to every node directly (no forwarding between slurmds).
TreeWidth=65533
MailProg=/bin/true
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
",
            ctl = self.ctl.name,
            ctl_addr = self.ctl.addr,
            munge = self.munge_socket().display(),
            state = p("state"),
            spool = p("spool"),
            log = p("log"),
            nodes = nodes.join("\n"),
            names = names.join(","),
        );
        let path = self.slurm_conf();
        std::fs::write(&path, conf).unwrap();
        // Slurm 22.05's slurmd always loads a cgroup plugin; naming v1 keeps it from looking for
        // a cgroup file system (none is mounted in a network namespace's /sys).
        std::fs::write(etc.join("cgroup.conf"), "CgroupPlugin=cgroup/v1\n").unwrap();
        path
    }

    /// A Slurm client command (`srun`, `squeue`, `scancel`, ...) run on the login host `ctl`
    /// with this cluster's configuration.
    pub fn slurm_command(&self, prog: &str) -> Command {
        let mut c = self.ctl.command(program(prog));
        c.env("SLURM_CONF", self.slurm_conf());
        c
    }

    /// Run a Slurm client command to completion (bounded), panicking with the daemons' logs when
    /// it fails and `check` is set.
    pub fn slurm(&self, prog: &str, args: &[&str], check: bool) -> Output {
        let out = run(
            self.slurm_command(prog).args(args),
            Duration::from_secs(60),
            false,
        );
        if check && !out.status.success() {
            panic!(
                "{prog} {args:?} failed ({}):\n{}\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log_tails()
            );
        }
        out
    }
}
