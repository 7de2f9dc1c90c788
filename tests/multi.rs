//! Many targets on one node: selection by PID list, `--match`, `--job`, `--all`/`--list`,
//! parallel attach and detach where one target is slow or refuses, the per-process report,
//! per-rank output templates and the aggregated exit status. Real processes throughout.

use crate::common;
use crate::rocpd_common;

use common::{records, rocprof_attach, tool_lib, wait_until, Record, Target, TargetOpts};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tag unique to this test process and `name`, for `--match` and `--job`.
fn unique(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
}

fn spawn(env: &[(&str, &str)], tag: Option<&str>) -> Target {
    Target::spawn(TargetOpts {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        tag: tag.map(str::to_string),
        ..Default::default()
    })
}

fn kinds(t: &Target) -> Vec<String> {
    records(t)
        .iter()
        .map(|r| format!("{}={}", r.kind, r.get("status")))
        .collect()
}

fn pair(r: &Record, name: &str) -> Option<String> {
    r.pairs()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// The row of the per-process table for `pid`: (status, first FILES cell).
fn row(stdout: &str, pid: i32) -> Option<(String, String)> {
    let table = stdout.split("processes:").nth(1)?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&pid.to_string().as_str()))
            .then(|| (f[1].to_string(), f.get(2).unwrap_or(&"").to_string()))
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// Arguments of a 50 ms kernel-trace session over `pids` writing into `out` with `tool`.
fn short_session<'a>(pids: &'a str, out: &'a Path, tool: &'a Path) -> Vec<&'a str> {
    vec![
        "--attach",
        pids,
        "--kernel-trace",
        "-d",
        s(out),
        "-t",
        s(tool),
        "--attach-duration-msec",
        "50",
    ]
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The (start, end) timestamps (ns) the stand-in tool wrote into a trace file.
fn window(file: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(file).unwrap();
    let cells: Vec<u64> = text
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .skip(2)
        .map(|c| c.parse().unwrap())
        .collect();
    (cells[0], cells[1])
}

#[test]
fn pid_list_and_repeated_flags_attach_all_with_templates_verbatim_and_a_table() {
    let ts: Vec<Target> = (0..3).map(|_| spawn(&[], None)).collect();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("%hostname%");
    let tool = tool_lib();
    let list = format!("{},{}", ts[0].pid, ts[1].pid);
    let third = ts[2].pid.to_string();
    let args = [
        "--attach",
        &list,
        "-p",
        &third,
        "--kernel-trace",
        "-d",
        s(&dir),
        "-o",
        "%pid%/trace",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "100",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!(
            "attached to 3 processes: {}, {}, {}",
            ts[0].pid, ts[1].pid, ts[2].pid
        )),
        "{stderr}"
    );
    assert!(stdout.contains("3 processes: 3 attached"), "{stdout}");
    for t in &ts {
        assert_eq!(kinds(t), ["attach=0", "detach=0"], "pid {}", t.pid);
        let rec = &records(t)[0];
        // The templates cross unchanged: each target's tool expands them itself.
        assert_eq!(pair(rec, "ROCPROF_OUTPUT_PATH").as_deref(), Some(s(&dir)));
        assert_eq!(
            pair(rec, "ROCPROF_OUTPUT_FILE_NAME").as_deref(),
            Some("%pid%/trace")
        );
        let file = out
            .path()
            .join(hostname())
            .join(t.pid.to_string())
            .join("trace_standin_trace.csv");
        assert!(file.exists(), "{}", file.display());
        assert_eq!(
            row(&stdout, t.pid),
            Some(("attached".into(), file.display().to_string())),
            "{stdout}"
        );
        t.assert_heartbeat();
    }
}

#[test]
fn match_selects_by_command_line_and_list_shows_the_same_selection() {
    let tag = unique("match");
    let tagged: Vec<Target> = (0..3).map(|_| spawn(&[], Some(&tag))).collect();
    let other = spawn(&[], None);
    // `[-]-` so the pattern is not taken for an option of rocprof-attach.
    let re = format!("[-]-tag {tag}$");

    let (code, stdout, stderr) = rocprof_attach(&["--list", "--match", &re], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    let listed: Vec<i32> = stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let mut want: Vec<i32> = tagged.iter().map(|t| t.pid).collect();
    want.sort();
    assert_eq!(listed, want, "{stdout}");

    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let args = [
        "--match",
        &re,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("selected 3 processes (--match"), "{stderr}");
    for t in &tagged {
        assert_eq!(kinds(t), ["attach=0", "detach=0"]);
        // Default name %hostname%/%pid%: each file is credited to its process.
        let file = out
            .path()
            .join(hostname())
            .join(format!("{}_standin_trace.csv", t.pid));
        assert_eq!(
            row(&stdout, t.pid),
            Some(("attached".into(), file.display().to_string())),
            "{stdout}"
        );
    }
    assert!(
        records(&other).is_empty(),
        "an unmatched process is untouched"
    );
}

#[test]
fn job_selects_slurm_open_mpi_pmix_and_flux_ids_and_rank_templates_expand_per_process() {
    let job = unique("job");
    let ts = [
        spawn(&[("SLURM_JOB_ID", &job), ("SLURM_PROCID", "0")], None),
        spawn(
            &[
                ("OMPI_MCA_ess_base_jobid", &job),
                ("OMPI_COMM_WORLD_RANK", "1"),
            ],
            None,
        ),
        spawn(
            &[
                ("PMIX_NAMESPACE", &job),
                ("PMIX_RANK", "2"),
                ("MPI_RANK", "2"),
            ],
            None,
        ),
        spawn(&[("FLUX_JOB_ID", &job), ("MPI_RANKID", "3")], None),
    ];
    let other_job = spawn(&[("SLURM_JOB_ID", &format!("{job}0"))], None);

    let (code, stdout, stderr) = rocprof_attach(&["--list", "--job", &job], &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    for t in &ts {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{} ", t.pid)) && l.contains(&job)),
            "row with the job id for {}: {stdout}",
            t.pid
        );
    }
    assert!(!stdout.contains(&format!("{} ", other_job.pid)), "{stdout}");

    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let args = [
        "--job",
        &job,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-o",
        "%env{FLUX_JOB_ID}%rank%rank%",
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
    ];
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    for (rank, t) in ts.iter().enumerate() {
        assert_eq!(kinds(t), ["attach=0", "detach=0"]);
        let flux = if rank == 3 { job.as_str() } else { "" };
        // The stand-in tool appends _<pid> when the name has no %pid%.
        let file = out
            .path()
            .join(format!("{flux}rank{rank}_{}_standin_trace.csv", t.pid));
        assert!(file.exists(), "{}", file.display());
        assert_eq!(
            row(&stdout, t.pid),
            Some(("attached".into(), file.display().to_string())),
            "{stdout}"
        );
    }
    assert!(records(&other_job).is_empty());
}

#[test]
fn list_all_shows_every_process_with_a_listener() {
    // Attaching with --all would touch other tests' targets on this machine; the selection
    // itself is the same scan, shown here by --list (which is --all without a selection).
    let ts: Vec<Target> = (0..2).map(|_| spawn(&[], None)).collect();
    let plain = Target::spawn(TargetOpts {
        register: false,
        ..Default::default()
    });
    for args in [&["--list"][..], &["--list", "--all"][..]] {
        let (code, stdout, stderr) = rocprof_attach(args, &[]).finish();
        assert_eq!(code, 0, "{stderr}");
        for t in &ts {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("{} ", t.pid)) && l.contains("yes")),
                "{stdout}"
            );
        }
        assert!(!stdout.contains(&format!("\n{} ", plain.pid)), "{stdout}");
    }
}

#[test]
fn processes_we_may_not_read_are_reported_not_skipped() {
    let job = unique("unreadable");
    let t = spawn(&[("SLURM_JOB_ID", &job)], None);
    let nobody = 65534;
    // Run a public copy: nobody may not enter the checkout (a clone in a 0700 home).
    let public = common::public_dir();
    let bin = common::public_copy(&common::bin(), public.path());
    let run = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let out = std::process::Command::new(&bin)
            .args(args)
            .env_clear()
            .uid(nobody)
            .gid(nobody)
            .current_dir("/")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // Nothing readable matches: "no process matched", with the unreadable ones in one line.
    let (code, stdout, stderr) = run(&["--list", "--job", &job]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("could not be examined"), "{stderr}");
    assert!(stderr.contains("-v lists them"), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.contains("warning")).count(),
        1,
        "one summary line: {stderr}"
    );
    assert!(!stdout.contains(&t.pid.to_string()), "{stdout}");
    // -v lists them.
    let (_, stdout, _) = run(&["--list", "--job", &job, "-v"]);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&format!("{} ", t.pid)) && l.contains("cannot read")),
        "the root-owned target is listed as unreadable with -v: {stdout}"
    );

    let (code, _, stderr) = run(&["--job", &job, "--kernel-trace", "-d", "/tmp"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!("no process matched --job {job}")),
        "{stderr}"
    );
    assert!(stderr.contains("as their owner or as root"), "{stderr}");
    assert!(!stderr.contains("cannot read /proc"), "{stderr}");
    let (_, _, stderr) = run(&["--job", &job, "--kernel-trace", "-d", "/tmp", "-v"]);
    assert!(
        stderr.contains(&format!("cannot examine process {}", t.pid)),
        "{stderr}"
    );
    assert!(records(&t).is_empty());
}

#[test]
fn slow_and_refusing_targets_hold_up_nothing_and_the_window_starts_after_the_last_attach() {
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("open");
    let gate_s = gate.to_str().unwrap().to_string();
    let fast = [spawn(&[], None), spawn(&[], None)];
    let slow = spawn(&[("STANDIN_ATTACH_GATE", &gate_s)], None);
    let refusing = spawn(&[("STANDIN_ATTACH_STATUS", "6")], None);
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pids = format!(
        "{},{},{},{}",
        slow.pid, fast[0].pid, refusing.pid, fast[1].pid
    );
    let duration_ms = 200u64;
    let dur = duration_ms.to_string();
    let args = [
        "--attach",
        &pids,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        &dur,
        "--parallel",
        "2",
    ];
    let run = rocprof_attach(&args, &[]);
    // With two workers, one held by the slow target, the other three still go through.
    wait_until(Duration::from_secs(20), || {
        fast.iter().all(|t| kinds(t) == ["attach=0"]) && kinds(&refusing) == ["attach=6"]
    });
    assert!(
        records(&slow).is_empty(),
        "the slow attach is still in progress"
    );
    // Nothing is detached while an attach is still running: the window has not started.
    assert!(fast.iter().all(|t| kinds(t) == ["attach=0"]));
    std::fs::write(&gate, b"").unwrap();
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 8, "partial: {stderr}\n{stdout}");
    assert!(
        stdout.contains("4 processes: 3 attached, 1 rejected"),
        "{stdout}"
    );
    assert_eq!(row(&stdout, refusing.pid).unwrap().0, "rejected");
    assert!(
        stdout.contains("(attach returned 6 (ROCP_REG_ROCPROFILER_ERROR))"),
        "{stdout}"
    );
    assert_eq!(
        kinds(&refusing),
        ["attach=6"],
        "a refused process is not detached"
    );
    let attached = [&slow, &fast[0], &fast[1]];
    let files: Vec<PathBuf> = attached
        .iter()
        .map(|t| {
            assert_eq!(kinds(t), ["attach=0", "detach=0"]);
            let f = out
                .path()
                .join(hostname())
                .join(format!("{}_standin_trace.csv", t.pid));
            assert_eq!(
                row(&stdout, t.pid).unwrap(),
                ("attached".into(), f.display().to_string())
            );
            f
        })
        .collect();
    // Every process gets the same window, which starts after the last attach (the slow one).
    let last_attach = window(&files[0]).0;
    for f in &files {
        let end = window(f).1;
        assert!(
            end >= last_attach + duration_ms * 1_000_000,
            "{}: detached {} ns after the last attach",
            f.display(),
            end.saturating_sub(last_attach)
        );
    }
    for t in [&slow, &refusing, &fast[0], &fast[1]] {
        t.assert_heartbeat();
    }
}

#[test]
fn parallelism_is_bounded() {
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("open");
    let gate_s = gate.to_str().unwrap().to_string();
    let held = [
        spawn(&[("STANDIN_ATTACH_GATE", &gate_s)], None),
        spawn(&[("STANDIN_ATTACH_GATE", &gate_s)], None),
    ];
    let queued = [spawn(&[], None), spawn(&[], None)];
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pids = format!(
        "{},{},{},{}",
        held[0].pid, held[1].pid, queued[0].pid, queued[1].pid
    );
    let args = [
        "--attach",
        &pids,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
        "--parallel",
        "2",
    ];
    let traced = |pid: i32| {
        let tid = common::listener_tid(pid).unwrap();
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
            .unwrap()
            .lines()
            .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
    };
    let run = rocprof_attach(&args, &[]);
    // Both workers are inside a held attach call...
    wait_until(Duration::from_secs(20), || {
        held.iter().all(|t| traced(t.pid))
    });
    // ...so the queued targets are not touched, however long we look.
    for _ in 0..50 {
        assert!(queued
            .iter()
            .all(|t| records(t).is_empty() && !traced(t.pid)));
        std::thread::sleep(Duration::from_millis(4));
    }
    std::fs::write(&gate, b"").unwrap();
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    for t in held.iter().chain(&queued) {
        assert_eq!(kinds(t), ["attach=0", "detach=0"]);
    }
}

#[test]
fn a_target_exiting_during_the_window_gives_partial_and_the_others_are_detached() {
    let mut ts: Vec<Target> = (0..3).map(|_| spawn(&[], None)).collect();
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pids = ts
        .iter()
        .map(|t| t.pid.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let args = [
        "--attach",
        &pids,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
    ];
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling until");
    // The first selected process: the one through whose root the output directory was first
    // read. The others' files must still be found after it is gone.
    let gone = ts[0].pid;
    ts[0].finish().expect("target exits when stdin closes");
    run.wait_for(&format!("process {gone} exited during the session"));
    run.signal(Signal::SIGTERM);
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 8, "{stderr}\n{stdout}");
    assert!(
        stdout.contains("3 processes: 2 attached, 1 exited"),
        "{stdout}"
    );
    assert_eq!(
        row(&stdout, gone),
        Some(("exited".into(), "(exited".into())),
        "{stdout}"
    );
    for t in &ts[1..] {
        assert_eq!(kinds(t), ["attach=0", "detach=0"]);
        let file = out
            .path()
            .join(hostname())
            .join(format!("{}_standin_trace.csv", t.pid));
        assert_eq!(
            row(&stdout, t.pid),
            Some(("attached".into(), file.display().to_string())),
            "{stdout}"
        );
    }
}

#[test]
fn every_target_refusing_is_not_a_success() {
    let ts: Vec<Target> = (0..2)
        .map(|_| spawn(&[("STANDIN_ATTACH_STATUS", "6")], None))
        .collect();
    let tool = tool_lib();
    let pids = format!("{},{}", ts[0].pid, ts[1].pid);
    let (code, stdout, stderr) =
        rocprof_attach(&["--attach", &pids, "--kernel-trace", "-t", s(&tool)], &[]).finish();
    // Every process failed the same way: that way's code (6, rejected), not "partial".
    assert_eq!(code, 6, "{stderr}");
    assert!(stdout.contains("2 processes: 2 rejected"), "{stdout}");
    assert_eq!(stderr.matches("rejected the attach").count(), 2, "{stderr}");
}

#[test]
fn a_refused_detach_is_reported_per_process_and_counts() {
    let ok = spawn(&[], None);
    let bad = spawn(&[("STANDIN_DETACH_STATUS", "2")], None);
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pids = format!("{},{}", ok.pid, bad.pid);
    let args = short_session(&pids, out.path(), &tool);
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 8, "{stderr}\n{stdout}");
    assert_eq!(
        row(&stdout, bad.pid).unwrap().0,
        "detach-failed",
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "(not detached: rocprofiler_register_detach returned 2, ROCP_REG_DEADLOCK (another attach or \
             detach was running in the target))"
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("process {} was not detached", bad.pid))
            && stderr.contains("the profiler may still be active in it"),
        "{stderr}"
    );
    assert_eq!(row(&stdout, ok.pid).unwrap().0, "attached");

    // That session stays recorded as active in `bad` (a new attach is refused until
    // `--detach`); alone, a process like it gives the detach failure's own exit code.
    let bad = spawn(&[("STANDIN_DETACH_STATUS", "2")], None);
    let alone = bad.pid.to_string();
    let args = [
        "--attach",
        &alone,
        "--kernel-trace",
        "-d",
        s(out.path()),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50",
    ];
    let (code, _, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 11, "{stderr}");
}

#[test]
fn a_selected_process_that_is_also_a_descendant_is_attached_once() {
    let t = Target::spawn(TargetOpts {
        exec_child: true,
        ..Default::default()
    });
    let child = t.exec_child.unwrap();
    let out = tempfile::tempdir().unwrap();
    let tool = tool_lib();
    let pids = format!("{},{child}", t.pid);
    let args = short_session(&pids, out.path(), &tool);
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("2 processes: 2 attached"), "{stdout}");
    let child_kinds: Vec<String> = records(&t)
        .iter()
        .filter(|r| r.get("pid") == child.to_string())
        .map(|r| r.kind.clone())
        .collect();
    assert_eq!(child_kinds, ["attach", "detach"]);
}

/// `rocprof-attach convert -i` over the per-rank databases gives one merged result: every
/// rank's dispatches in one kernel trace. The databases stand in for what each rank's tool
/// writes after an attach session (`<dir>/<hostname>/<pid>_results.db`).
#[test]
fn convert_merges_per_rank_databases() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for rank in 0..3u64 {
        let pid = 4000 + rank as i64;
        let db = dir.path().join(format!("node{rank}/{pid}_results.db"));
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        rocpd_common::full_db(&db, pid, rank + 1);
        inputs.push(db);
    }
    let single = dir.path().join("single");
    let merged = dir.path().join("merged");
    let convert = |inputs: &[PathBuf], out: &Path| {
        let mut args: Vec<String> = vec!["convert".into(), "-i".into()];
        args.extend(inputs.iter().map(|p| p.display().to_string()));
        args.extend(["-f", "csv", "-d", s(out), "-o", "all"].map(String::from));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = rocprof_attach(&refs, &[]).finish();
        assert_eq!(code, 0, "convert: {stderr}\n{stdout}");
        std::fs::read_to_string(out.join("all_kernel_trace.csv")).expect("kernel trace")
    };
    let one = convert(&inputs[..1], &single);
    let all = convert(&inputs, &merged);
    let rows = |csv: &str| csv.lines().count() - 1;
    assert!(rows(&one) > 0, "{one}");
    assert_eq!(
        rows(&all),
        3 * rows(&one),
        "one merged trace with every rank's rows: {all}"
    );
    assert_eq!(all.lines().next(), one.lines().next(), "same header");
}

/// A plan over many processes checks the tool once per mount namespace and root directory, not
/// once per session: a target whose mount namespace hides the tool is refused, alone, after one
/// that sees it passed the check (`--parallel 1` keeps that order).
#[test]
fn a_tool_hidden_in_one_targets_mount_namespace_is_refused_for_that_target_alone() {
    let tool = tool_lib();
    let hidden_dir = tool.parent().unwrap().to_str().unwrap().to_string();
    let sees = spawn(&[], None);
    let hides = Target::spawn(TargetOpts {
        // Its own mount namespace, with an empty tmpfs over the tool's directory.
        wrap: [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs \"$0\" && exec \"$@\"",
            &hidden_dir,
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    });
    let in_root =
        |pid: i32| PathBuf::from(format!("/proc/{pid}/root")).join(tool.strip_prefix("/").unwrap());
    assert!(in_root(sees.pid).exists());
    assert!(
        !in_root(hides.pid).exists(),
        "the tool is hidden from {}",
        hides.pid
    );
    let out = tempfile::tempdir().unwrap();
    let pids = format!("{},{}", sees.pid, hides.pid);
    let mut args = short_session(&pids, out.path(), &tool);
    args.extend(["--parallel", "1"]);
    let (code, stdout, stderr) = rocprof_attach(&args, &[]).finish();
    assert_ne!(code, 0, "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!(
            "does not exist as seen by the target (checked {} inside its root",
            s(&tool)
        )),
        "{stderr}"
    );
    assert_eq!(kinds(&sees), ["attach=0", "detach=0"], "{stderr}");
    assert!(kinds(&hides).is_empty(), "{stderr}");
    assert_eq!(row(&stdout, sees.pid).unwrap().0, "attached", "{stdout}");
}

#[test]
fn list_shows_state_and_whether_each_process_can_be_attached_in_aligned_columns() {
    let job = unique("liststate");
    let running = spawn(&[("SLURM_JOB_ID", &job)], None);
    let stopped = spawn(&[("SLURM_JOB_ID", &job)], None);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(stopped.pid), Signal::SIGSTOP).unwrap();
    let listener = stopped.listener();
    wait_until(Duration::from_secs(10), || {
        common::thread_state(stopped.pid, stopped.pid) == Some('T')
            && common::thread_state(stopped.pid, listener) == Some('T')
    });
    let (code, stdout, stderr) = rocprof_attach(&["--list", "--job", &job, "-v"], &[]).finish();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(stopped.pid), Signal::SIGCONT).unwrap();
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines[0];
    let row = |pid: i32| {
        *lines
            .iter()
            .find(|l| l.starts_with(&format!("{pid} ")))
            .unwrap_or_else(|| panic!("no row for {pid}: {stdout}"))
    };
    let cells = |l: &str| {
        l.split_whitespace()
            .take(4)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        cells(row(running.pid))[1..],
        ["S".to_string(), "rocm".to_string(), "yes".to_string()],
        "{stdout}"
    );
    let r = row(stopped.pid);
    assert_eq!(cells(r)[1], "T", "{stdout}");
    assert!(r.contains("no: stopped"), "{stdout}");
    // -v: the whole reason, with the fix, under the row that says no.
    let reason = lines[lines.iter().position(|l| *l == r).unwrap() + 1];
    assert!(
        reason.contains(&format!("kill -CONT {}", stopped.pid)),
        "{stdout}"
    );
    // Aligned: every row's JOB and COMMAND start under their headers.
    for col in ["JOB", "COMMAND"] {
        let at = header.find(col).unwrap();
        for l in [row(running.pid), r] {
            assert!(
                l[..at].ends_with("  ") && !l[at..].starts_with(' '),
                "{col} misaligned in {l:?}: {stdout}"
            );
        }
    }
}
