//! What a session says about the tool's output, against the C stand-ins: templates expanded as
//! the tool does (issue 19 item 3), incomplete output (item 4), asynchronous output (item 6) and
//! the facts in the report (item 7).

use crate::common;
use crate::rocpd_common;

use common::{rocprof_attach, tool_lib, Target, TargetOpts, Tmpfs};

/// `--attach PID -t TOOL --attach-duration-msec 50` and the rest.
fn session(t: &Target, rest: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let mut args = vec![
        "--attach",
        &pid,
        "-t",
        tool.to_str().unwrap(),
        "--attach-duration-msec",
        "50",
    ];
    args.extend(rest);
    rocprof_attach(&args, env).finish()
}

/// The files the report lists (the lines after "wrote N files").
fn listed(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|l| !l.contains("wrote"))
        .skip(1)
        .take_while(|l| l.starts_with("  ") && !l.trim_start().starts_with("PID"))
        // "  SIZE UNIT  PATH" and, for a database, "  (N rows)" or "  (INCOMPLETE: ...)".
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

#[test]
fn cwd_template_names_only_the_targets_own_output() {
    let t = Target::spawn(TargetOpts::default());
    // The target runs in its temporary directory: %cwd% is that directory, not ours.
    let (code, stdout, stderr) = session(
        &t,
        &["--kernel-trace", "-d", "%cwd%/out", "-o", "r%ppid%/run"],
        &[],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let ppid = std::process::id();
    let expect = t
        .dir
        .path()
        .join(format!("out/r{ppid}/run_{}_standin_trace.csv", t.pid));
    assert!(expect.exists(), "{stdout}\n{stderr}");
    assert_eq!(
        listed(&stdout),
        vec![expect.display().to_string()],
        "exactly the tool's file, nothing of / scanned: {stdout}"
    );
}

#[test]
fn a_pid_that_does_not_exist_is_not_found_in_a_session_as_in_check() {
    let t = Target::spawn(TargetOpts::default());
    let gone = "2147483000";
    let list = format!("{},{gone}", t.pid);
    let out = t.dir.path().join("out");
    let tool = tool_lib();
    let common = [
        "--attach",
        &list,
        "-t",
        tool.to_str().unwrap(),
        "-d",
        out.to_str().unwrap(),
    ];
    let mut s = common.to_vec();
    s.extend(["--kernel-trace", "--attach-duration-msec", "50", "--json"]);
    let (code, stdout, stderr) = rocprof_attach(&s, &[]).finish();
    assert_eq!(code, 8, "one attached, one not found: {stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let row = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 2147483000)
        .unwrap()
        .clone();
    assert_eq!(row["status"], "not_found", "{row}");
    assert_eq!(row["exit_code"], 3, "{row}");
    let mut c = common.to_vec();
    c.extend(["--check", "--json"]);
    let (check_code, check_out, check_err) = rocprof_attach(&c, &[]).finish();
    assert_eq!(
        check_code, code,
        "--check predicts the session's code: {check_err}"
    );
    let check: serde_json::Value = serde_json::from_str(&check_out).expect("json");
    let gone_row = check["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 2147483000)
        .unwrap()
        .clone();
    assert_eq!(gone_row["exit_code"], 3);
    let words = "process 2147483000 does not exist";
    assert!(check_err.contains(words), "{check_err}");
    assert!(
        row["reason"].as_str().unwrap().contains(words),
        "same words in both: {row}"
    );
}

#[test]
fn converted_files_have_plain_paths_and_directories_their_real_size() {
    let scratch = tempfile::tempdir().unwrap();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let mut formats = vec!["csv", "rocpd"];
    if cfg!(have_otf2) {
        formats.push("otf2");
    }
    let mut rest = vec![
        "--kernel-trace",
        "-d",
        out.to_str().unwrap(),
        "-o",
        "run",
        "--json",
        "--output-format",
    ];
    rest.extend(&formats);
    let (code, stdout, stderr) = session(&t, &rest, &[]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let files = doc["files"].as_array().unwrap();
    assert!(files.len() >= 3, "{doc}");
    for f in files {
        let path = f["path"].as_str().unwrap();
        assert!(
            path.starts_with(out.to_str().unwrap()),
            "as the user typed it: {path}"
        );
        assert!(!path.contains("/proc/"), "{path}");
        assert!(!f["host_path"].as_str().unwrap().contains("/proc/"), "{f}");
    }
    if cfg!(have_otf2) {
        let archive = files
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with("_results"))
            .expect("the OTF2 archive directory");
        let real: u64 = walk(std::path::Path::new(archive["path"].as_str().unwrap()));
        assert_eq!(archive["size"].as_u64().unwrap(), real, "{archive}");
        let dir_entry = std::fs::metadata(archive["path"].as_str().unwrap())
            .unwrap()
            .len();
        assert!(
            real != dir_entry,
            "not the directory entry's own size: {real}"
        );
    }
    // Valid paths, not through the target's /proc entry (dead once it exits).
    for f in files {
        assert!(std::path::Path::new(f["path"].as_str().unwrap()).exists());
    }
}

fn walk(p: &std::path::Path) -> u64 {
    let m = std::fs::metadata(p).unwrap();
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| walk(&e.unwrap().path()))
        .sum()
}

#[test]
fn hints_follow_what_was_observed() {
    // The tool loads but writes nothing: not "did not load".
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_NO_OUTPUT".into(), "1".into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let (code, _, stderr) = session(&t, &["--kernel-trace", "-d", out.to_str().unwrap()], &[]);
    assert_eq!(code, 9, "{stderr}");
    assert!(stderr.contains("is loaded in the target"), "{stderr}");
    assert!(!stderr.contains("did not load"), "{stderr}");
    // rocpd was asked for: the exit-12 hint does not say "add rocpd".
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    let (code, _, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "-d",
            out.to_str().unwrap(),
            "-f",
            "pftrace",
            "rocpd",
        ],
        &[],
    );
    assert_eq!(code, 12, "{stderr}");
    assert!(stderr.contains("rocpd was asked for"), "{stderr}");
    assert!(!stderr.contains("add rocpd"), "{stderr}");
}

#[test]
fn an_empty_capture_is_a_warning_naming_the_option() {
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("empty.db");
    let mut w = rocpd_common::writer(&path, 4242, 3);
    rocpd_common::agents(&mut w, (0, 0), (1, 1));
    w.finish().unwrap();
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), path.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let (code, _, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "--memory-copy-trace",
            "-d",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--kernel-trace collected nothing") && stderr.contains("kernel dispatches"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--memory-copy-trace collected nothing"),
        "{stderr}"
    );
    // What an umbrella turned on is named as implied by it, never as if typed (a fresh target:
    // a reattach must ask for what the first attach did).
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), path.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let (code, _, stderr) = session(&t, &["-r", "-d", out.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    for implied in [
        "--hip-runtime-trace (implied by --runtime-trace) collected nothing",
        "--marker-trace (implied by --runtime-trace) collected nothing",
    ] {
        assert!(stderr.contains(implied), "{implied}: {stderr}");
    }
    for typed in [
        "--hip-trace collected",
        "--marker-trace collected",
        "--rccl-trace collected",
    ] {
        assert!(!stderr.contains(typed), "{typed}: {stderr}");
    }
    // A database with events gives no such warning.
    let full = rocpd_common::full_db(&scratch.path().join("full.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), full.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let (code, _, stderr) = session(&t, &["--kernel-trace", "-d", out.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("collected nothing"), "{stderr}");
}

#[test]
fn a_full_disk_is_a_failure_that_names_enospc_and_the_files() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    for (leave, state) in [(0u64, "empty (0 bytes)"), (16 * 1024, "truncated")] {
        let t = Target::spawn(TargetOpts {
            env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
            ..Default::default()
        });
        let out = t.dir.path().join("out");
        let Some(fs) = Tmpfs::mount(&out) else {
            panic!("mount -t tmpfs failed although we are root");
        };
        fs.fill(leave);
        let (code, stdout, stderr) = session(
            &t,
            &[
                "--kernel-trace",
                "-d",
                out.to_str().unwrap(),
                "-o",
                "run",
                "-f",
                "csv",
                "rocpd",
            ],
            &[],
        );
        assert_eq!(code, 9, "never success: {stdout}\n{stderr}");
        assert!(stderr.contains("ENOSPC"), "{stderr}");
        assert!(stderr.contains("the output is incomplete"), "{stderr}");
        assert!(stderr.contains(state), "{state}: {stderr}");
        assert!(stdout.contains("INCOMPLETE"), "{stdout}");
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.ends_with(".csv") || n.starts_with('.')),
            "no conversion of a truncated database, no temporaries left: {names:?}"
        );
    }
}

/// A database that holds no process (what a tool leaves when SQLite rolled its write back on a
/// full disk, issue 29 item 4) is INCOMPLETE and exit 9, never success; when the file system
/// was full during the session but has room again after the rollback, ENOSPC is named all the
/// same.
#[test]
fn a_rolled_back_database_is_incomplete_and_a_disk_full_during_the_session_is_named() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    // The schema and metadata committed, the data rolled back: no process row.
    let db = scratch.path().join("rolled_back.db");
    let guid = rocprof_attach::rocpd::guid::Guid::from_parts(1_700_000_000_000, 4242);
    rocprof_attach::rocpd::Writer::create(&db, &guid)
        .unwrap()
        .finish()
        .unwrap();
    // The stand-in tool writes a copy of it as the session's database.
    let opts = || TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    };
    // Room enough: incomplete, exit 9, and no claim of a full disk.
    let t = Target::spawn(opts());
    let out = t.dir.path().join("out");
    let args = ["--kernel-trace", "-d", out.to_str().unwrap(), "-o", "run"];
    let (code, stdout, stderr) = session(&t, &args, &[]);
    assert_eq!(code, 9, "never success: {stdout}\n{stderr}");
    assert!(stdout.contains("INCOMPLETE"), "{stdout}");
    assert!(stderr.contains("holds no process"), "{stderr}");
    assert!(!stderr.contains("was full"), "{stderr}");
    // A tmpfs full during the window and free again before the detach, as after a rollback.
    let t = Target::spawn(opts());
    let out = t.dir.path().join("out");
    let Some(fs) = Tmpfs::mount(&out) else {
        panic!("mount -t tmpfs failed although we are root");
    };
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let mut run = rocprof_attach(
        &[
            "--attach",
            &pid,
            "-t",
            tool.to_str().unwrap(),
            "--kernel-trace",
            "-d",
            out.to_str().unwrap(),
            "-o",
            "run",
        ],
        &[],
    );
    run.wait_for("profiling");
    fs.fill(0);
    // Held full until the session has seen it (it samples every few ms), then freed.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    std::fs::remove_file(out.join("filler")).unwrap();
    run.signal(nix::sys::signal::Signal::SIGINT);
    let (code, stdout, stderr) = run.finish();
    assert_eq!(code, 9, "never success: {stdout}\n{stderr}");
    assert!(stdout.contains("INCOMPLETE"), "{stdout}");
    assert!(
        stderr.contains("was full while the tool wrote (ENOSPC"),
        "{stderr}"
    );
}

/// The database fits, its conversions do not (issue 29 item 4: exit 12 without ENOSPC before):
/// the output is incomplete, exit 9, and the full file system is named.
#[test]
fn conversions_that_do_not_fit_are_incomplete_output_naming_enospc() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let db = rocpd_common::full_db(&scratch.path().join("source.db"), 4242, 7);
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_TOOL_COPY_DB".into(), db.to_str().unwrap().into())],
        ..Default::default()
    });
    let out = t.dir.path().join("out");
    let fs = Tmpfs::mount(&out).expect("mount a tmpfs as root");
    // Room for the database and one page more.
    let size = std::fs::metadata(&db).unwrap().len();
    fs.fill(size.div_ceil(4096) * 4096 + 4096);
    let args = [
        "--kernel-trace",
        "-d",
        out.to_str().unwrap(),
        "-o",
        "run",
        "-f",
        "csv",
        "json",
        "rocpd",
    ];
    let (code, stdout, stderr) = session(&t, &args, &[]);
    assert_eq!(
        code, 9,
        "never success, nor only 'format missing': {stdout}\n{stderr}"
    );
    assert!(stderr.contains("could not be written"), "{stderr}");
    assert!(stderr.contains("ENOSPC"), "{stderr}");
}

/// Asynchronous output (issue 19 item 6): the stand-in tool writes its files from a thread 300 ms
/// after the detach; the session waits for them (inotify and the target's pidfd, bounded by
/// `--output-timeout`) and lists them, exit code 0, not 9.
#[test]
fn async_output_is_awaited_and_listed() {
    let t = Target::spawn(TargetOpts::default());
    let out = t.dir.path().join("out");
    // The default template (%hostname%/%pid%): the tool creates the subdirectory as it writes.
    let (code, stdout, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "-d",
            out.to_str().unwrap(),
            "--attach-sync-output=false",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!stderr.contains("no output"), "{stderr}");
    assert!(!stderr.contains("not yet written"), "{stderr}");
    let files = listed(&stdout);
    let want = format!("{}_standin_trace.csv", t.pid);
    assert_eq!(files.len(), 1, "{stdout}\n{stderr}");
    assert!(files[0].ends_with(&want), "{files:?}");
    assert!(files[0].starts_with(out.to_str().unwrap()), "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("the listed file");
    assert!(text.ends_with('\n'), "listed only once complete: {text:?}");
}

/// A tool slower than `--output-timeout`: a warning says the output is not written yet and
/// where it will appear; no "no output" blame and no exit code 9, and the session returns once
/// the timeout passes.
#[test]
fn async_output_later_than_the_timeout_is_a_warning_naming_where() {
    let mut opts = TargetOpts::default();
    opts.env
        .push(("STANDIN_TOOL_ASYNC_DELAY_MS".into(), "5000".into()));
    let t = Target::spawn(opts);
    let out = t.dir.path().join("late");
    let start = std::time::Instant::now();
    let (code, stdout, stderr) = session(
        &t,
        &[
            "--kernel-trace",
            "-d",
            out.to_str().unwrap(),
            "-o",
            "run",
            "--attach-sync-output=false",
            "--output-timeout",
            "200ms",
        ],
        &[],
    );
    let took = start.elapsed();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!stderr.contains("no output"), "{stderr}");
    assert!(stderr.contains("output not yet written"), "{stderr}");
    assert!(stderr.contains("--output-timeout 200 ms"), "{stderr}");
    let place = format!("{}*", out.join("run").display());
    assert!(stderr.contains(&place), "names {place}: {stderr}");
    assert!(listed(&stdout).is_empty(), "{stdout}");
    assert!(
        took < std::time::Duration::from_secs(4),
        "bounded by the timeout, not the tool: {took:?}"
    );
}

#[test]
fn output_timeout_is_parsed_like_the_other_durations() {
    let t = Target::spawn(TargetOpts::default());
    let (code, _, stderr) = session(&t, &["--output-timeout", "soon"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("invalid duration 'soon' in --output-timeout"),
        "{stderr}"
    );
}
