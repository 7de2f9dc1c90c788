//! A CUDA target that ends during the window keeps its data (issue 29, docs/cuda.md "When the
//! target ends"): the stand-in target, attached and then told to run a known number of steps,
//! ends by each route (return from main, exit, _exit, abort, SIGTERM and SIGINT with their
//! default disposition, SIGKILL). Its database is then a valid rocpd file that convert and
//! summary read, holding every kernel it launched (SIGKILL and _exit: every kernel but those of
//! about its last second), and the session says exit 7 with the file listed and its rows.

use crate::common;
use crate::cuda::{count, query, start, Target};

use std::time::Duration;

const TRACE: [&str; 3] = ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"];

/// What the target said before it ended: the kernels it launched.
fn launched(t: &Target) -> i64 {
    loop {
        let line = t
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the target says how many kernels it launched");
        if let Some(n) = line.strip_prefix("launched ") {
            return n.parse().unwrap();
        }
    }
}

/// Like [`launched`], reading the target's database while it runs: the kernel counts committed
/// before the target ended, each time it grew (read every 20 ms, each read a moment long).
fn launched_watching(t: &Target) -> (i64, Vec<i64>) {
    let db = t.out().join("run_results.db");
    let mut seen: Vec<i64> = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        match t.lines.try_recv() {
            Ok(line) => match line.strip_prefix("launched ") {
                Some(n) => return (n.parse().unwrap(), seen),
                None => continue,
            },
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            Err(e) => panic!("the target ended without saying what it launched: {e}"),
        }
        assert!(
            std::time::Instant::now() < until,
            "the target says how many kernels it launched within 120 s"
        );
        let n = committed_kernels(&db);
        if n > seen.last().copied().unwrap_or(0) {
            seen.push(n);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The kernel rows committed in `db` so far (0 while it does not exist or is locked).
fn committed_kernels(db: &std::path::Path) -> i64 {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    rusqlite::Connection::open_with_flags(db, flags)
        .and_then(|c| {
            c.query_row("SELECT count(*) FROM rocpd_kernel_dispatch", [], |r| {
                r.get(0)
            })
        })
        .unwrap_or(0)
}

/// Attach with a long window, let the target run `steps` steps of 4 kernels `step_us` apart
/// and end by `how`; the session's (code, stdout, stderr), the kernels launched, the database.
fn end_during_window(how: &str, steps: &str, step_us: &str) -> (i32, String, String, i64, Target) {
    let (code, stdout, stderr, n, _, t) = end_during_window_watched(how, steps, step_us, false);
    (code, stdout, stderr, n, t)
}

/// [`end_during_window`], with the kernel counts committed while the target ran when `watch`.
fn end_during_window_watched(
    how: &str,
    steps: &str,
    step_us: &str,
    watch: bool,
) -> (i32, String, String, i64, Vec<i64>, Target) {
    let t = Target::spawn(
        &[
            "--wait-go",
            "--steps",
            steps,
            "--step-us",
            step_us,
            "--end",
            how,
        ],
        &[],
    );
    let mut args = TRACE.to_vec();
    args.extend(["-o", "run", "--attach-duration-msec", "120000"]);
    let run = start(&t, &args, &[]);
    common::wait_until(Duration::from_secs(60), || !t.enabled().is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(t.pid),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let (n, seen) = if watch {
        launched_watching(&t)
    } else {
        (launched(&t), Vec::new())
    };
    let (code, stdout, stderr) = run.finish();
    (code, stdout, stderr, n, seen, t)
}

/// The database validates, and convert (CSV) and summary read it.
fn readable(db: &std::path::Path, t: &Target) {
    let out = t.dir.path().join("csv");
    let db_s = db.to_str().unwrap();
    let (code, _, err) = common::rocprof_attach(
        &[
            "convert",
            "-i",
            db_s,
            "-f",
            "csv",
            "-d",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .finish();
    assert_eq!(code, 0, "convert reads {db_s}: {err}");
    let (code, sum, err) = common::rocprof_attach(&["summary", "-i", db_s], &[]).finish();
    assert_eq!(code, 0, "summary reads {db_s}: {err}");
    assert!(sum.contains("_Z10gemm_kerneli"), "{sum}");
}

/// Every route that runs code: every kernel launched is in the database, finished by the tool.
fn keeps_everything(how: &str, ended_by: &str) {
    let (code, stdout, stderr, n, mut t) = end_during_window(how, "150", "2000");
    println!("{stdout}\n{stderr}");
    // The process still ends as it would have: the same status, the same signal.
    let status = t.child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let want = match how {
        "term" => Some(libc::SIGTERM),
        "int" => Some(libc::SIGINT),
        "abort" => Some(libc::SIGABRT),
        _ => None,
    };
    assert_eq!(status.signal(), want, "{how}: {status:?}");
    if want.is_none() {
        assert_eq!(
            status.code(),
            Some(if how == "exit" { 3 } else { 0 }),
            "{how}"
        );
    }
    assert_eq!(code, 7, "exit 7 (target exited): {stdout}\n{stderr}");
    let db = t.out().join("run_results.db");
    assert!(
        stdout.contains("run_results.db") && stdout.contains(" rows)"),
        "the file listed with its rows: {stdout}"
    );
    assert!(!stdout.contains("INCOMPLETE"), "{stdout}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM rocpd_kernel_dispatch"),
        n,
        "every kernel launched up to the exit ({how})"
    );
    let ext = query(
        &db,
        "SELECT json_extract(extdata, '$.finished'), json_extract(extdata, '$.ended_by') FROM rocpd_info_process",
    );
    assert_eq!(ext[0], ["1", ended_by], "{how}");
    assert!(
        stderr.contains(&format!("finished the database at its {ended_by}")),
        "{stderr}"
    );
    readable(&db, &t);
}

#[test]
fn a_target_returning_from_main_keeps_every_record() {
    keeps_everything("return", "exit");
}

#[test]
fn a_target_calling_exit_keeps_every_record() {
    keeps_everything("exit", "exit");
}

#[test]
fn a_target_ended_by_sigterm_keeps_every_record_and_dies_of_it() {
    keeps_everything("term", "signal SIGTERM");
}

#[test]
fn a_target_ended_by_sigint_keeps_every_record() {
    keeps_everything("int", "signal SIGINT");
}

#[test]
fn a_target_that_aborts_keeps_every_record() {
    keeps_everything("abort", "signal SIGABRT");
}

/// SIGKILL and _exit run no code: the committed rows remain, a valid database that lacks at
/// most the rows of about the last second.
fn keeps_what_was_committed(how: &str) {
    // About 6 s of steps (2,000 of 3 ms), so that most of them are older than the lag.
    let (code, stdout, stderr, n, seen, t) = end_during_window_watched(how, "2000", "3000", true);
    println!("{stdout}\n{stderr}");
    // The rows are committed during the window, not only when it ends: kernels were in the
    // database, and more of them later, while the target still ran.
    assert!(
        seen.len() >= 2,
        "kernel rows committed while the target ran (counts seen: {seen:?}; {how})"
    );
    assert_eq!(code, 7, "exit 7 (target exited): {stdout}\n{stderr}");
    let db = t.out().join("run_results.db");
    assert!(!stdout.contains("INCOMPLETE"), "{stdout}");
    assert!(stdout.contains(" rows)"), "{stdout}");
    let kept = count(&db, "SELECT count(*) FROM rocpd_kernel_dispatch");
    assert!(kept > 0 && kept <= n, "{kept} of {n} kernels ({how})");
    // What is missing is the end: the newest kernel kept started at most 3 s (the 250 ms lag, a
    // tick, and a tool thread delayed on a loaded 2-core machine) before the last one the
    // target launched would have; half the run is kept at least.
    let span = query(
        &db,
        "SELECT max(K.start) - min(K.start), json_extract(P.extdata, '$.finished') FROM rocpd_kernel_dispatch K, rocpd_info_process P",
    );
    let kept_span: f64 = span[0][0].parse::<f64>().unwrap() / 1e9;
    let per_kernel = kept_span / (kept.max(2) - 1) as f64;
    let missing_s = (n - kept) as f64 * per_kernel;
    assert!(
        missing_s < 3.0,
        "{kept} of {n} kernels kept: about {missing_s:.2} s of the end missing ({how})"
    );
    assert_eq!(span[0][1], "0", "not finished: nothing ran at the end");
    assert!(stderr.contains("committed up to"), "{stderr}");
    readable(&db, &t);
}

#[test]
fn a_target_killed_by_sigkill_keeps_all_but_its_last_second() {
    keeps_what_was_committed("kill");
}

#[test]
fn a_target_calling_underscore_exit_keeps_all_but_its_last_second() {
    keeps_what_was_committed("_exit");
}

/// A full disk during a CUDA session (issue 29 item 4) is never success: the tool names ENOSPC,
/// the session exits 9, and the database keeps the rows committed before the disk filled.
#[test]
fn a_full_disk_during_a_cuda_session_is_exit_9_naming_enospc() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let t = Target::spawn(&[], &[]);
    let _fs = common::Tmpfs::mount_sized(&t.out(), "1m").expect("mount a tmpfs as root");
    let mut args = TRACE.to_vec();
    args.extend(["-o", "run", "--attach-duration-msec", "4000"]);
    let (code, stdout, stderr) = start(&t, &args, &[]).finish();
    assert_eq!(code, 9, "never success: {stdout}\n{stderr}");
    assert!(
        stderr.contains("ENOSPC") || stdout.contains("ENOSPC"),
        "ENOSPC named: {stdout}\n{stderr}"
    );
    let db = t.out().join("run_results.db");
    assert!(
        count(&db, "SELECT count(*) FROM rocpd_info_process") == 1
            && count(&db, "SELECT count(*) FROM rocpd_kernel_dispatch") > 0,
        "the committed rows stay"
    );
    // Not even room for the header: the attach fails, naming ENOSPC.
    let t = Target::spawn(&[], &[]);
    let _fs = common::Tmpfs::mount_sized(&t.out(), "48k").expect("mount a tmpfs as root");
    let (code, stdout, stderr) = start(&t, &args, &[]).finish();
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("ENOSPC"), "{stderr}");
}
