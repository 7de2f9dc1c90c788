//! Open MPI's `mpirun` across the [`Cluster`]'s nodes. There is no ssh server on the nodes;
//! Open MPI's own hook for that, the remote-shell agent (`--mca plm_rsh_agent`), is a small
//! script that does what `ssh HOST COMMAND` would: run COMMAND with `sh -c` on HOST, here by
//! joining the host's namespaces with `nsenter`. Open MPI then starts its `orted` daemons on
//! the nodes through it, and they connect back to mpirun over the cluster network.

use super::{program, Cluster};
use std::path::PathBuf;
use std::process::Command;

impl Cluster {
    /// The remote-shell agent script (`AGENT HOST COMMAND...`), written once per cluster.
    pub fn rsh_agent(&self) -> PathBuf {
        let path = self.path("bin").join("rsh-agent");
        if !path.exists() {
            let script = format!(
                "#!/bin/sh\n\
                 # Open MPI's plm_rsh_agent for the test cluster: like `ssh HOST COMMAND...`.\n\
                 host=$1; shift\n\
                 pidfile={hosts}/$host.pid\n\
                 [ -r \"$pidfile\" ] || {{ echo \"rsh-agent: no host $host in the test cluster\" >&2; exit 255; }}\n\
                 exec {nsenter} -t \"$(cat \"$pidfile\")\" --net --pid --uts --mount -- sh -c \"$*\"\n",
                hosts = self.path("hosts").display(),
                nsenter = program("nsenter").display(),
            );
            std::fs::write(&path, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    }

    /// `mpirun` on the login host `ctl` (its network and host name; our PID namespace and
    /// /proc, which the agent needs to find the nodes), set up to reach the nodes: the agent,
    /// the cluster network for Open MPI's own traffic, root allowed, and a private session
    /// directory.
    pub fn mpirun(&self) -> Command {
        let tmp = self.path("ompi-tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut c = super::tied(&program("nsenter"));
        c.arg("-t")
            .arg(self.ctl.init.to_string())
            .args(["--net", "--uts", "--"])
            .arg(program("mpirun"))
            .args(["--allow-run-as-root", "--oversubscribe"])
            .arg("--mca")
            .arg("plm_rsh_agent")
            .arg(self.rsh_agent())
            .args(["--mca", "oob_tcp_if_include"])
            .arg(format!("{}.0/24", super::SUBNET))
            .arg("--mca")
            .arg("orte_tmpdir_base")
            .arg(&tmp);
        c
    }
}
