//! Jobs of stand-in ranks on the test cluster, started with `srun` or `mpirun`, and the
//! documented per-node attach lines, for tests/nodes.rs.

use super::{wait_until, Cluster};
use crate::common::{self, listener_tid, records_in};
use crate::rocpd_common;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const NODES: usize = 2;
pub const RANKS_PER_NODE: usize = 2;

/// The stand-in binaries, copied into the cluster's world-readable `bin/`.
pub struct Bins {
    pub attach: PathBuf,
    pub target: PathBuf,
    pub register: PathBuf,
    pub tool: PathBuf,
}

pub fn install_bins(c: &Cluster) -> Bins {
    Bins {
        attach: c.install(&common::bin()),
        target: c.install(&common::target_bin()),
        register: c.install(&common::register_lib()),
        tool: c.install(&common::tool_lib()),
    }
}

/// A cluster with Slurm running and the binaries installed.
pub fn slurm_cluster() -> (Cluster, Bins) {
    let mut c = Cluster::new(NODES);
    let bins = install_bins(&c);
    c.start_slurm();
    (c, bins)
}

/// One rank of a job: its number, node and PID (in the node's PID namespace).
#[derive(Debug, Clone)]
pub struct Rank {
    pub rank: usize,
    pub node: String,
    pub pid: i32,
}

/// A job of stand-in ranks started with `srun` or `mpirun` (in the background, as a user's job
/// would run).
pub struct Job {
    pub launcher: Child,
    pub id: String,
    pub ranks: Vec<Rank>,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
    }
}

/// Lines of a background command, read on a thread.
pub fn line_reader(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// How a launcher names a rank's number, node and job in the rank's environment.
pub struct Launcher {
    pub rank: &'static str,
    pub node: &'static str,
    pub job: &'static str,
}

pub const SRUN: Launcher = Launcher {
    rank: "$SLURM_PROCID",
    node: "$SLURMD_NODENAME",
    job: "$SLURM_JOB_ID",
};

pub const MPIRUN: Launcher = Launcher {
    rank: "$OMPI_COMM_WORLD_RANK",
    node: "$(hostname)",
    job: "$OMPI_MCA_ess_base_jobid",
};

/// The shell line each rank runs: ranks on the nodes in `no_listener` start without
/// `ROCP_TOOL_ATTACH` (they load rocprofiler-register but start no listener). Each rank's
/// stand-in tool copies `db/rank<R>.db` as its rocpd output (made here, one per rank); each node
/// has its own stand-in call log (`standin-<node>.log`).
pub fn rank_script(c: &Cluster, bins: &Bins, l: &Launcher, no_listener: &[&str]) -> String {
    let db_dir = c.path("db");
    std::fs::create_dir_all(&db_dir).unwrap();
    for r in 0..NODES * RANKS_PER_NODE {
        let db = db_dir.join(format!("rank{r}.db"));
        if !db.exists() {
            rocpd_common::full_db(&db, 1000 + r as i64, r as u64 + 1);
        }
    }
    format!(
        "node={node}; \
         export ROCPROF_STANDIN_LOG={dir}/standin-$node.log; \
         export STANDIN_TOOL_COPY_DB={db}/rank{rank}.db; \
         case ' {skip} ' in *\" $node \"*) unset ROCP_TOOL_ATTACH;; esac; \
         echo \"rank {rank} $node {job} $$\"; \
         exec {target} --workers 1 --stay",
        node = l.node,
        rank = l.rank,
        job = l.job,
        dir = c.dir.path().display(),
        db = db_dir.display(),
        skip = no_listener.join(" "),
        target = bins.target.display(),
    )
}

/// Start `RANKS_PER_NODE` ranks of the stand-in target per node with srun.
pub fn start_job(c: &Cluster, bins: &Bins, no_listener: &[&str]) -> Job {
    let mut cmd = c.slurm_command("srun");
    cmd.args(["-N", &NODES.to_string()])
        .arg(format!("--ntasks-per-node={RANKS_PER_NODE}"))
        .args(["-J", "ranks"])
        .arg(format!(
            "--export=ALL,ROCP_TOOL_ATTACH=1,STANDIN_REGISTER_LIB={}",
            bins.register.display()
        ))
        .args(["sh", "-c", &rank_script(c, bins, &SRUN, no_listener)]);
    wait_for_ranks(c, cmd, "srun", no_listener)
}

/// Start `RANKS_PER_NODE` ranks of the stand-in target per node with mpirun.
pub fn start_mpi_job(c: &Cluster, bins: &Bins, no_listener: &[&str]) -> Job {
    let hosts: Vec<String> = c
        .nodes
        .iter()
        .map(|n| format!("{}:{RANKS_PER_NODE}", n.name))
        .collect();
    let mut cmd = c.mpirun();
    cmd.args(["--host", &hosts.join(",")])
        .args(["-np", &(NODES * RANKS_PER_NODE).to_string()])
        .args(["-x", "ROCP_TOOL_ATTACH=1", "-x"])
        .arg(format!("STANDIN_REGISTER_LIB={}", bins.register.display()))
        .args(["sh", "-c", &rank_script(c, bins, &MPIRUN, no_listener)]);
    wait_for_ranks(c, cmd, "mpirun", no_listener)
}

/// Start the launcher and wait (bounded) until every rank has reported and is ready, and every
/// rank that should have a listener has one.
pub fn wait_for_ranks(c: &Cluster, mut cmd: Command, name: &str, no_listener: &[&str]) -> Job {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(c.path(&format!("log/job-{name}.err"))).unwrap());
    let mut launcher = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
    let lines = line_reader(launcher.stdout.take().unwrap());
    let mut job = Job {
        launcher,
        id: String::new(),
        ranks: Vec::new(),
    };
    let want = NODES * RANKS_PER_NODE;
    let mut ready = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready < want || job.ranks.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            panic!(
                "{name} did not start {want} ranks within 60 s (got {:?}, {ready} ready).\n{}",
                job.ranks,
                c.log_tails()
            );
        };
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["rank", r, node, id, pid] => {
                job.id = id.to_string();
                job.ranks.push(Rank {
                    rank: r.parse().unwrap(),
                    node: node.to_string(),
                    pid: pid.parse().unwrap(),
                });
            }
            ["ready", _] => ready += 1,
            _ => {}
        }
    }
    job.ranks.sort_by_key(|r| r.rank);
    for r in &job.ranks {
        if no_listener.contains(&r.node.as_str()) {
            continue;
        }
        let host = c.node(&r.node);
        wait_until(
            Duration::from_secs(20),
            &format!("the listener of rank {} ({r:?})", r.rank),
            || {
                host.host_pid(r.pid)
                    .is_some_and(|p| listener_tid(p).is_some())
            },
        );
    }
    job
}

/// The documented per-node step, with `-l` so that each node's lines are told apart:
/// `srun --jobid=J --overlap -N 2 --ntasks-per-node=1 -l rocprof-attach --job J ...`.
pub fn attach_step(c: &Cluster, bins: &Bins, job: &Job, duration_ms: Option<u32>) -> Command {
    let mut cmd = c.slurm_command("srun");
    cmd.arg(format!("--jobid={}", job.id))
        .args([
            "--overlap",
            "-N",
            &NODES.to_string(),
            "--ntasks-per-node=1",
            "-l",
        ])
        .arg(&bins.attach)
        .args(["--job", &job.id, "--kernel-trace", "-t"])
        .arg(&bins.tool)
        .arg("-d")
        .arg(c.path("prof"))
        .args(["-o", "%hostname%/%pid%"]);
    if let Some(ms) = duration_ms {
        cmd.args(["--attach-duration-msec", &ms.to_string()]);
    }
    cmd
}

/// Output lines split by the launcher's label: srun's `-l` (`N: line`) or mpirun's
/// `--tag-output` (`[J,N]<stdout>:line`). Task/rank N is the rocprof-attach of node `n<N+1>`.
pub fn by_node(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in text.lines() {
        let labelled = if let Some(rest) = l.strip_prefix('[') {
            rest.split_once(']').and_then(|(ids, rest)| {
                let task = ids.split(',').nth(1)?;
                Some((task, rest.split_once(">:")?.1))
            })
        } else {
            l.split_once(": ")
        };
        if let Some((task, rest)) = labelled {
            if let Ok(t) = task.trim().parse::<usize>() {
                out.entry(format!("n{}", t + 1))
                    .or_default()
                    .push(rest.to_string());
            }
        }
    }
    out
}

/// The row of `pid` in a node's per-process table: (status, first FILES cell).
pub fn row(lines: &[String], pid: i32) -> Option<(String, String)> {
    let start = lines.iter().position(|l| l.contains(" processes: "))?;
    lines[start..].iter().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&pid.to_string().as_str()))
            .then(|| (f[1].to_string(), f.get(2).unwrap_or(&"").to_string()))
    })
}

/// `kind=status` of the stand-in calls made in the rank `pid` of `node`.
pub fn calls(c: &Cluster, node: &str, pid: i32) -> Vec<String> {
    records_in(&c.path(&format!("standin-{node}.log")))
        .iter()
        .filter(|r| r.get("pid") == pid.to_string())
        .map(|r| format!("{}={}", r.kind, r.get("status")))
        .collect()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// The rocpd file a rank's tool writes for `-o %hostname%/%pid%`.
pub fn rank_db(c: &Cluster, r: &Rank) -> PathBuf {
    c.path("prof")
        .join(&r.node)
        .join(format!("{}_results.db", r.pid))
}

/// A cluster without Slurm (the nodes and their namespaces) and the binaries, for mpirun.
pub fn mpi_cluster() -> (Cluster, Bins) {
    let c = Cluster::new(NODES);
    super::program("mpirun");
    let bins = install_bins(&c);
    (c, bins)
}

/// The documented per-node launch with mpirun, with `--tag-output` so that each node's lines
/// are told apart: `mpirun --host n1,n2 --map-by ppr:1:node -np 2 --tag-output rocprof-attach
/// --job J ... -o 'rank%rank%'`.
pub fn mpirun_attach(c: &Cluster, bins: &Bins, job: &Job) -> std::process::Output {
    let hosts: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut cmd = c.mpirun();
    cmd.args(["--host", &hosts.join(",")])
        .args([
            "--map-by",
            "ppr:1:node",
            "-np",
            &NODES.to_string(),
            "--tag-output",
        ])
        .arg(&bins.attach)
        .args(["--job", &job.id, "--kernel-trace", "-t"])
        .arg(&bins.tool)
        .args(["--attach-duration-msec", "300", "-d"])
        .arg(c.path("prof"))
        .args(["-o", "rank%rank%"]);
    super::run(&mut cmd, Duration::from_secs(120), false)
}

/// The file a rank's tool writes for `-o rank%rank%` (the stand-in appends `_<pid>`).
pub fn rank_file(c: &Cluster, r: &Rank) -> PathBuf {
    c.path("prof")
        .join(format!("rank{}_{}_results.db", r.rank, r.pid))
}
