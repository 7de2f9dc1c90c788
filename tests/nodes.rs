//! The cross-node recipes under a real cluster on this machine (tests/cluster): Slurm from
//! Debian's packages (munged, slurmctld, one slurmd per node, each node in its own network, PID
//! and UTS namespaces), a job of stand-in ranks on two nodes, and the documented
//!
//! ```sh
//! srun --jobid=$J --overlap -N 2 --ntasks-per-node=1 -l rocprof-attach --job $J ...
//! ```
//!
//! as one rocprof-attach per node. A rank on one node is invisible to the rocprof-attach on the
//! other, as on real hardware; both write into one shared directory under `%hostname%`.
//!
//! Needs root and the packages of tests/scripts/ci-deps.sh (slurm-wlm, munge, iproute2, util-linux).
//! When Slurm cannot start, the test fails with the daemons' log tails; nothing is skipped.

use crate::cluster;
use crate::common;

use cluster::jobs::*;
use cluster::{Cluster, Host};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn slurm_srun_overlap_step_attaches_every_rank_on_every_node_and_convert_merges_them() {
    let (c, bins) = slurm_cluster();
    let job = start_job(&c, &bins, &[]);
    let out = cluster::run(
        &mut attach_step(&c, &bins, &job, Some(300)),
        Duration::from_secs(120),
        false,
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", c.log_tails());
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    let nodes_out = by_node(&stdout);
    let nodes_err = by_node(&stderr);
    for node in &c.nodes {
        let name = &node.name;
        let lines = nodes_out
            .get(name)
            .unwrap_or_else(|| panic!("no output from {name}: {ctx}"));
        let err = nodes_err[name].join("\n");
        let mine: Vec<&Rank> = job.ranks.iter().filter(|r| &r.node == name).collect();
        assert_eq!(mine.len(), RANKS_PER_NODE);
        assert!(
            err.contains(&format!(
                "selected {RANKS_PER_NODE} processes (--job {})",
                job.id
            )),
            "{name} selects only its own ranks: {ctx}"
        );
        assert!(
            lines.iter().any(|l| l
                == &format!(
                    "rocprof-attach: {RANKS_PER_NODE} processes: {RANKS_PER_NODE} attached"
                )),
            "{name}: {ctx}"
        );
        for r in mine {
            assert_eq!(
                calls(&c, name, r.pid),
                ["attach=0", "detach=0"],
                "{r:?}: {ctx}"
            );
            let db = rank_db(&c, r);
            assert!(db.exists(), "{}: {ctx}", db.display());
            assert_eq!(
                row(lines, r.pid),
                Some(("attached".into(), db.display().to_string())),
                "{name} credits rank {} with its file: {ctx}",
                r.rank
            );
        }
        // Each node reports its own files only, although every node writes into one directory.
        let other = c.path("prof").join(if name == "n1" { "n2" } else { "n1" });
        assert!(
            !lines
                .iter()
                .any(|l| l.contains(&other.display().to_string())),
            "{name} lists another node's files: {ctx}"
        );
    }

    // One merged result from every node's databases.
    let dbs: Vec<PathBuf> = job.ranks.iter().map(|r| rank_db(&c, r)).collect();
    let convert = |inputs: &[PathBuf], out: &Path| {
        let mut args: Vec<String> = vec!["convert".into(), "-i".into()];
        args.extend(inputs.iter().map(|p| p.display().to_string()));
        args.extend(["-f", "csv", "-d"].map(String::from));
        args.push(out.display().to_string());
        args.extend(["-o", "all"].map(String::from));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = common::rocprof_attach(&refs, &[]).finish();
        assert_eq!(code, 0, "convert: {stderr}\n{stdout}");
        std::fs::read_to_string(out.join("all_kernel_trace.csv")).expect("kernel trace")
    };
    let one = convert(&dbs[..1], &c.path("merged-one"));
    let all = convert(&dbs, &c.path("merged"));
    let rows = |csv: &str| csv.lines().count() - 1;
    assert!(rows(&one) > 0, "{one}");
    assert_eq!(
        rows(&all),
        dbs.len() * rows(&one),
        "every rank's rows: {all}"
    );
}

#[test]
fn slurm_node_whose_ranks_lack_the_listener_fails_that_node_and_the_step() {
    let (c, bins) = slurm_cluster();
    let job = start_job(&c, &bins, &["n2"]);
    let out = cluster::run(
        &mut attach_step(&c, &bins, &job, Some(200)),
        Duration::from_secs(120),
        false,
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", c.log_tails());
    // n1 attached both ranks (0); n2 could attach none, for one reason: not attachable (4).
    // srun exits with the highest code of its tasks.
    assert_eq!(out.status.code(), Some(4), "{ctx}");
    let nodes_out = by_node(&stdout);
    let nodes_err = by_node(&stderr);
    assert!(
        nodes_out["n1"]
            .iter()
            .any(|l| l == "rocprof-attach: 2 processes: 2 attached"),
        "{ctx}"
    );
    // A job selection skips processes without a listener (one warning each); with none left,
    // n2 fails with one error.
    let n2_err = nodes_err["n2"].join("\n");
    assert!(
        n2_err.contains("none of the 2 processes selected by --job"),
        "{ctx}"
    );
    for r in job.ranks.iter().filter(|r| r.node == "n2") {
        assert!(
            n2_err.contains(&format!("skipping selected process {}", r.pid)),
            "{ctx}"
        );
        assert!(
            n2_err.contains(&r.pid.to_string()) && n2_err.contains("ROCP_TOOL_ATTACH=1"),
            "n2 says why rank {} cannot be attached: {ctx}",
            r.rank
        );
        assert!(calls(&c, "n2", r.pid).is_empty(), "{ctx}");
    }
    for r in job.ranks.iter().filter(|r| r.node == "n1") {
        assert_eq!(calls(&c, "n1", r.pid), ["attach=0", "detach=0"], "{ctx}");
    }
}

#[test]
fn slurm_rank_exiting_during_the_window_is_reported_by_its_node_and_fails_the_step() {
    let (c, bins) = slurm_cluster();
    let job = start_job(&c, &bins, &[]);
    // No duration: the window ends when the step gets SIGINT (`scancel --signal=INT J.<step>`).
    let mut cmd = attach_step(&c, &bins, &job, None);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut step = cmd.spawn().expect("start the attach step");
    let stdout_rx = line_reader(step.stdout.take().unwrap());
    let stderr_rx = line_reader(step.stderr.take().unwrap());
    let mut err_lines: Vec<String> = Vec::new();
    let mut wait_err = |needle: &dyn Fn(&str) -> bool, what: &str, c: &Cluster| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if err_lines.iter().any(|l| needle(l)) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match stderr_rx.recv_timeout(left) {
                Ok(l) => err_lines.push(l),
                Err(_) => panic!(
                    "no {what} within 60 s; step stderr: {err_lines:#?}\n{}",
                    c.log_tails()
                ),
            }
        }
    };
    for task in 0..NODES {
        wait_err(
            &|l: &str| l.starts_with(&format!("{task}: rocprof-attach: profiling until SIGINT")),
            "window start on every node",
            &c,
        );
    }
    // Rank 0 (on n1) dies inside the window.
    let victim = job.ranks.iter().find(|r| r.node == "n1").unwrap().clone();
    let host: &Host = c.node("n1");
    let host_pid = host.host_pid(victim.pid).expect("victim's host PID");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let gone = format!(
        "0: rocprof-attach: warning: process {} exited during the session",
        victim.pid
    );
    wait_err(&|l: &str| l.starts_with(&gone), "exit notice from n1", &c);
    // End the window on every node the documented way.
    let steps = c.slurm("squeue", &["-h", "-s", "-j", &job.id, "-o", "%i %j"], true);
    let step_id = text(&steps.stdout)
        .lines()
        .find(|l| l.ends_with(" rocprof-attach"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .unwrap_or_else(|| panic!("the attach step in {:?}", text(&steps.stdout)));
    c.slurm("scancel", &["--signal=INT", &step_id], true);
    let status = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = step.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = step.kill();
                panic!(
                    "the attach step did not end after SIGINT; stderr: {err_lines:#?}\n{}",
                    c.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The readers end when srun's pipes close; bounded, in case a stray process keeps them open.
    let drain = |rx: &mpsc::Receiver<String>| {
        let mut v = Vec::new();
        while let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
            v.push(l);
        }
        v
    };
    let stdout = drain(&stdout_rx);
    err_lines.extend(drain(&stderr_rx));
    let stdout = stdout.join("\n");
    let stderr = err_lines.join("\n");
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", c.log_tails());
    // n1: one rank attached and detached, one exited: partial (8); n2: both (0). srun: 8.
    assert_eq!(status.code(), Some(8), "{ctx}");
    let nodes_out = by_node(&stdout);
    assert!(
        nodes_out["n1"]
            .iter()
            .any(|l| l == "rocprof-attach: 2 processes: 1 attached, 1 exited"),
        "{ctx}"
    );
    assert!(
        nodes_out["n2"]
            .iter()
            .any(|l| l == "rocprof-attach: 2 processes: 2 attached"),
        "{ctx}"
    );
    assert_eq!(
        row(&nodes_out["n1"], victim.pid).map(|r| r.0),
        Some("exited".into()),
        "{ctx}"
    );
    assert_eq!(calls(&c, "n1", victim.pid), ["attach=0"], "{ctx}");
    for r in job
        .ranks
        .iter()
        .filter(|r| r.pid != victim.pid || r.node != "n1")
    {
        assert_eq!(
            calls(&c, &r.node, r.pid),
            ["attach=0", "detach=0"],
            "{r:?}: {ctx}"
        );
        assert_eq!(
            row(&nodes_out[&r.node], r.pid),
            Some(("attached".into(), rank_db(&c, r).display().to_string())),
            "{ctx}"
        );
    }
}

#[test]
fn mpirun_across_nodes_attaches_every_rank_on_every_node() {
    let (c, bins) = mpi_cluster();
    let job = start_mpi_job(&c, &bins, &[]);
    let nodes_of_ranks: Vec<&str> = job.ranks.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(nodes_of_ranks, ["n1", "n1", "n2", "n2"], "{:?}", job.ranks);
    let out = mpirun_attach(&c, &bins, &job);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", c.log_tails());
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    let nodes_out = by_node(&stdout);
    for node in &c.nodes {
        let name = &node.name;
        let lines = nodes_out
            .get(name)
            .unwrap_or_else(|| panic!("no output from {name}: {ctx}"));
        assert!(
            lines
                .iter()
                .any(|l| l == "rocprof-attach: 2 processes: 2 attached"),
            "{name}: {ctx}"
        );
        for r in job.ranks.iter().filter(|r| &r.node == name) {
            assert_eq!(
                calls(&c, name, r.pid),
                ["attach=0", "detach=0"],
                "{r:?}: {ctx}"
            );
            let file = rank_file(&c, r);
            assert!(file.exists(), "{}: {ctx}", file.display());
            assert_eq!(
                row(lines, r.pid),
                Some(("attached".into(), file.display().to_string())),
                "{name} credits rank {} with its file: {ctx}",
                r.rank
            );
        }
        // Both nodes write into one directory; each lists only its own ranks' files.
        let others = job.ranks.iter().filter(|r| &r.node != name);
        for r in others {
            let file = rank_file(&c, r).display().to_string();
            assert!(!lines.iter().any(|l| l.contains(&file)), "{name}: {ctx}");
        }
    }
}

#[test]
fn mpirun_across_nodes_with_a_node_lacking_listeners_fails_and_leaves_no_rank_attached() {
    let (c, bins) = mpi_cluster();
    let job = start_mpi_job(&c, &bins, &["n2"]);
    let out = mpirun_attach(&c, &bins, &job);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", c.log_tails());
    // n2's rocprof-attach skips every rank (no listener) and exits 4 at once; mpirun passes that code on
    // and stops the job's other process, n1's rocprof-attach, which may be attaching or inside
    // its window then: it detaches what it attached (SIGTERM ends the window).
    assert_eq!(out.status.code(), Some(4), "{ctx}");
    let nodes_err = by_node(&stderr);
    assert!(
        nodes_err.get("n2").is_some_and(|l| l
            .iter()
            .any(|l| l.contains("none of the 2 processes selected by"))),
        "{ctx}"
    );
    for r in &job.ranks {
        let host_pid = c.node(&r.node).host_pid(r.pid);
        assert!(
            host_pid.is_some_and(common::pid_alive),
            "rank {} survives: {ctx}",
            r.rank
        );
        let calls = calls(&c, &r.node, r.pid);
        if r.node == "n2" {
            assert!(calls.is_empty(), "{r:?}: {ctx}");
        } else {
            // Never left attached: either untouched or attached and detached.
            assert!(
                calls.is_empty() || calls == ["attach=0", "detach=0"],
                "{r:?}: {calls:?}: {ctx}"
            );
        }
    }
}
