//! A real launcher: Open MPI's `mpirun` starts four ranks of the stand-in target, and
//! rocprof-attach attaches to all of them, selected by `--job` (Open MPI's job id in each rank's
//! environment) or `--match`; then the same driven through `mpirun` as the per-node launcher.
//!
//! These tests need `mpirun` (Debian: `apt-get install -y openmpi-bin`, see tests/scripts/ci-deps.sh).
//! Without it they fail and say how to install it; they never pass silently. The same across
//! several nodes, and Slurm's `srun`, are in tests/nodes.rs.

use crate::common;

use common::{listener_tid, records_in, register_lib, rocprof_attach, target_bin, tool_lib};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RANKS: usize = 4;

/// Path of `mpirun`, or a test failure that says how to install it.
fn mpirun() -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "mpirun not found on PATH: these tests need Open MPI. Install it with \
                 `apt-get install -y openmpi-bin` (Debian/Ubuntu; tests/scripts/ci-deps.sh lists the CI packages)"
            )
        })
}

/// Common mpirun options: root is allowed (CI containers), more ranks than cores.
fn mpirun_cmd() -> Command {
    let mut c = Command::new(mpirun());
    c.args(["--allow-run-as-root", "--oversubscribe"]);
    c
}

/// Four ranks of the stand-in target under mpirun; everything is killed on drop.
struct MpiJob {
    mpirun: Child,
    /// PIDs by rank.
    ranks: Vec<i32>,
    /// The shared stand-in call log (records carry the PID).
    log: PathBuf,
    tag: String,
    _dir: tempfile::TempDir,
}

impl MpiJob {
    /// Start the ranks; `failing_rank` gets STANDIN_ATTACH_STATUS=6 (its attach is refused).
    fn start(failing_rank: Option<usize>) -> MpiJob {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("standin.log");
        let mpirun_err = dir.path().join("mpirun.stderr");
        let tag = format!(
            "mpi-{}-{}",
            std::process::id(),
            dir.path().file_name().unwrap().to_string_lossy()
        );
        let fail = failing_rank.map_or(String::from("-1"), |r| r.to_string());
        // Each rank reports its MPI rank next to its PID; one rank may be made to refuse.
        let script = format!(
            "if [ \"$OMPI_COMM_WORLD_RANK\" = {fail} ]; then export STANDIN_ATTACH_STATUS=6; fi; \
             echo \"rank $OMPI_COMM_WORLD_RANK $$\"; exec '{}' --workers 1 --stay --tag {tag}",
            target_bin().display()
        );
        let mut cmd = mpirun_cmd();
        cmd.args(["-np", &RANKS.to_string()])
            .arg("-x")
            .arg("ROCP_TOOL_ATTACH=1")
            .arg("-x")
            .arg(format!("STANDIN_REGISTER_LIB={}", register_lib().display()))
            .arg("-x")
            .arg(format!("ROCPROF_STANDIN_LOG={}", log.display()))
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&mpirun_err).unwrap());
        let mut child = cmd.spawn().expect("spawn mpirun");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut job = MpiJob {
            mpirun: child,
            ranks: vec![0; RANKS],
            log,
            tag,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut seen, mut ready) = (0, 0);
        while ready < RANKS || seen < RANKS {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "mpirun did not start {RANKS} ranks within 60 s; its stderr:\n{}",
                    std::fs::read_to_string(&mpirun_err).unwrap_or_default()
                )
            });
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["rank", r, pid] => {
                    job.ranks[r.parse::<usize>().unwrap()] = pid.parse().unwrap();
                    seen += 1;
                }
                ["ready", _] => ready += 1,
                _ => {}
            }
        }
        for &pid in &job.ranks {
            common::wait_until(Duration::from_secs(20), || listener_tid(pid).is_some());
        }
        job
    }

    /// `kind=status` of the calls made in the rank with this PID.
    fn calls(&self, pid: i32) -> Vec<String> {
        records_in(&self.log)
            .iter()
            .filter(|r| r.get("pid") == pid.to_string())
            .map(|r| format!("{}={}", r.kind, r.get("status")))
            .collect()
    }

    /// Open MPI's job id, read from rank 0's environment (what `--list` shows as JOB).
    fn job_id(&self) -> String {
        let env = std::fs::read(format!("/proc/{}/environ", self.ranks[0])).unwrap();
        env.split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok())
            .find_map(|kv| kv.strip_prefix("OMPI_MCA_ess_base_jobid="))
            .or_else(|| {
                env.split(|b| *b == 0)
                    .filter_map(|kv| std::str::from_utf8(kv).ok())
                    .find_map(|kv| kv.strip_prefix("PMIX_NAMESPACE="))
            })
            .expect("Open MPI sets OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE in each rank")
            .to_string()
    }
}

impl Drop for MpiJob {
    fn drop(&mut self) {
        for &pid in &self.ranks {
            if pid > 0 {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.mpirun.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.mpirun.kill();
        let _ = self.mpirun.wait();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The file the stand-in tool of `pid` writes for `-o rank%rank%`.
fn rank_file(out: &Path, rank: usize, pid: i32) -> PathBuf {
    out.join(format!("rank{rank}_{pid}_standin_trace.csv"))
}

fn assert_all_ranks_done(job: &MpiJob, out: &Path, stdout: &str) {
    assert!(
        stdout.contains(&format!("{RANKS} processes: {RANKS} attached")),
        "{stdout}"
    );
    for (rank, &pid) in job.ranks.iter().enumerate() {
        assert_eq!(job.calls(pid), ["attach=0", "detach=0"], "rank {rank}");
        let file = rank_file(out, rank, pid);
        assert!(file.exists(), "{}", file.display());
        // The report names each rank's file on the rank's own row.
        assert!(
            stdout.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 3
                    && f[0] == pid.to_string()
                    && f[1] == "attached"
                    && f[2] == file.display().to_string()
            }),
            "row for rank {rank} (PID {pid}): {stdout}"
        );
    }
}

#[test]
fn ranks_selected_by_open_mpi_job_id_are_all_attached_and_detached() {
    let job = MpiJob::start(None);
    let id = job.job_id();
    let (code, stdout, stderr) = rocprof_attach(&["--list", "--job", &id], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    for &pid in &job.ranks {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{pid} ")) && l.contains(&id)),
            "{stdout}"
        );
    }
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let args = [
        "--job",
        &id,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-o",
        "rank%rank%",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!("selected {RANKS} processes (--job {id})")),
        "{stderr}"
    );
    assert_all_ranks_done(&job, out.path(), &stdout);
}

#[test]
fn ranks_selected_by_match_are_all_attached_and_detached() {
    let job = MpiJob::start(None);
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let re = format!("[-]-tag {}$", job.tag);
    let args = [
        "--match",
        &re,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-o",
        "rank%rank%",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert_all_ranks_done(&job, out.path(), &stdout);
}

/// Run rocprof-attach through `mpirun -np 1`, as the per-node launcher of the cluster recipe
/// (no terminal, stdin not ours). Returns (mpirun's exit code, stdout, stderr).
fn through_mpirun(args: &[&str]) -> (i32, String, String) {
    let mut cmd = mpirun_cmd();
    cmd.args(["-np", "1"])
        .arg(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn mpirun");
    let pid = child.id() as i32;
    // Bounded: a watchdog kills mpirun if it hangs.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            if Instant::now() > deadline {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watchdog.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn mpirun_as_the_per_node_launcher_attaches_every_rank_and_passes_failure_on() {
    let job = MpiJob::start(None);
    let id = job.job_id();
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let args = [
        "--job",
        &id,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-o",
        "rank%rank%",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100",
    ];
    let (code, stdout, stderr) = through_mpirun(&args);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    // No terminal under the launcher: the window is the duration, stdin is never read.
    assert!(stderr.contains("profiling for 100 ms"), "{stderr}");
    assert_all_ranks_done(&job, out.path(), &stdout);

    // One rank refuses: rocprof-attach exits 8 (partial) and mpirun passes the failure on.
    let failing = MpiJob::start(Some(2));
    let id = failing.job_id();
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--job",
        &id,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-o",
        "rank%rank%",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100",
    ];
    let (code, stdout, stderr) = through_mpirun(&args);
    assert_ne!(code, 0, "a failed node must fail the launcher: {stderr}");
    assert_eq!(
        code, 8,
        "Open MPI passes the first non-zero exit code on: {stderr}"
    );
    assert!(stdout.contains("3 attached, 1 rejected"), "{stdout}");
    assert_eq!(failing.calls(failing.ranks[2]), ["attach=6"]);
    for r in [0, 1, 3] {
        assert_eq!(failing.calls(failing.ranks[r]), ["attach=0", "detach=0"]);
    }
}
