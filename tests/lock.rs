//! One process, one lock, whatever id is passed, and locks no other user can take (issue 29,
//! item 1): a thread id is mapped to its process by every front end (`-p`, `--check`, the C
//! ABI); claims live where only the target's owner and root can write, so an unprivileged user
//! can neither block root's attach nor forge a record, while root and the target's owner still
//! exclude each other.

use crate::capi_common;
use crate::common;
use crate::prereq;

use capi_common::{host, status_of, Layout};
use common::{records, rocprof_attach, tool_lib, Target, TargetOpts};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn kinds(t: &Target) -> Vec<String> {
    records(t).iter().map(|r| r.kind.clone()).collect()
}

/// A thread of `pid` other than its main thread.
fn worker_tid(pid: i32) -> i32 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|&t| t != pid)
        .expect("the stand-in has threads")
}

/// Field 22 of /proc/PID/stat.
fn start_time(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// The claim file of `pid` in `dir`.
fn claim_in(dir: &str, pid: i32) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .unwrap()
        .ino();
    Path::new(dir).join(format!("{ns}-{pid}-{}.claim", start_time(pid)))
}

/// A session of `t` that stays in its window until signalled, with `extra` arguments.
fn window(t: &Target, out: &Path, extra: &[&str]) -> common::Run {
    let pid = t.pid.to_string();
    let tool = tool_lib();
    let mut args = vec!["-p", &pid, "--kernel-trace", "-d", s(out), "-t", s(&tool)];
    args.extend_from_slice(extra);
    let mut run = rocprof_attach(&args, &[]);
    run.wait_for("profiling until");
    run
}

/// A 50 ms session on `id` (a PID or a thread id).
fn short(id: i32, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let id = id.to_string();
    let tool = tool_lib();
    let mut args = vec![
        "-p",
        &id,
        "--kernel-trace",
        "-d",
        s(out),
        "-t",
        s(&tool),
        "--attach-duration-msec",
        "50ms",
    ];
    args.extend_from_slice(extra);
    rocprof_attach(&args, &[]).finish()
}

/// Run `argv` as uid/gid `uid` (no supplementary groups); (exit code, stdout, stderr).
fn as_user(uid: u32, argv: &[&str]) -> (i32, String, String) {
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .args(argv)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn can_switch_users() -> bool {
    prereq::programs(&["setpriv", "flock"], "util-linux")
        && prereq::root("to run commands as other users")
}

#[test]
fn a_thread_id_is_its_process_for_the_cli_check_and_the_c_abi() {
    let t = Target::spawn(TargetOpts::default());
    let tid = worker_tid(t.pid);
    let out = tempfile::tempdir().unwrap();

    // Session A holds the process; session B on a thread of it is refused, naming A.
    let a = window(&t, out.path(), &[]);
    let holder = a.child.id();
    let (code, _, stderr) = short(tid, out.path(), &["-v"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains(&format!("thread {tid} belongs to process {}", t.pid)),
        "-v says so: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "process {} already has an active profiling session",
            t.pid
        )) && stderr.contains(&format!("rocprof-attach (pid {holder}"))
            && stderr.contains("lock file /run/rocprof-attach/claims/"),
        "{stderr}"
    );
    // The C ABI with the thread id: the same refusal (status 2).
    let layout = Layout::install();
    let tid_s = tid.to_string();
    let (_, lines, err) = host(&layout.lib(), &["attach", &tid_s], &[]).finish();
    assert_eq!(status_of(&lines, &format!("attach {tid_s}")), 2, "{err}");
    assert!(
        err.contains(&format!("rocprof-attach (pid {holder}")),
        "{err}"
    );
    assert_eq!(
        kinds(&t),
        ["attach"],
        "neither B nor the library sent anything"
    );
    a.signal(Signal::SIGINT);
    let (code, _, stderr) = a.finish();
    assert_eq!(code, 0, "{stderr}");

    // --check on the thread id reports the process.
    let (code, stdout, stderr) = rocprof_attach(
        &["--check", "-p", &tid_s, "--json", "-t", s(&tool_lib())],
        &[],
    )
    .finish();
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let pids: Vec<i64> = doc["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}"))
        .iter()
        .map(|p| p["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(pids, [i64::from(t.pid)], "{stdout}");

    // The C ABI attaches and detaches the process by a thread id.
    let (_, lines, err) = host(
        &layout.lib(),
        &["attach", &tid_s, "detach", &tid_s],
        &[("ROCPROF_OUTPUT_PATH", Some(s(out.path())))],
    )
    .finish();
    assert_eq!(status_of(&lines, &format!("attach {tid_s}")), 0, "{err}");
    assert_eq!(status_of(&lines, &format!("detach {tid_s}")), 0, "{err}");
    assert_eq!(kinds(&t), ["attach", "detach", "attach", "detach"]);
}

#[test]
fn another_user_can_neither_block_nor_forge_roots_claims() {
    if !can_switch_users() {
        return;
    }
    let t = Target::spawn(TargetOpts::default());
    let out = tempfile::tempdir().unwrap();
    let claim = claim_in("/run/rocprof-attach/claims", t.pid);
    let a = window(&t, out.path(), &[]);
    assert!(claim.is_file());
    // Nobody cannot open (so cannot lock or rewrite) the claim of a live session...
    let (code, _, stderr) = as_user(65534, &["flock", "-n", "-x", s(&claim), "true"]);
    assert_ne!(code, 0, "nobody locked root's claim: {stderr}");
    let (code, _, _) = as_user(
        65534,
        &["sh", "-c", &format!("echo forged > {}", s(&claim))],
    );
    assert_ne!(code, 0, "nobody rewrote root's claim");
    a.signal(Signal::SIGINT);
    let (code, _, stderr) = a.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(!claim.exists());
    // ...nor create one ahead of root, here or in the old world-writable place.
    let (code, _, _) = as_user(65534, &["flock", "-n", "-x", s(&claim), "true"]);
    assert_ne!(code, 0, "nobody created a claim in root's directory");
    let old = std::fs::create_dir_all("/tmp/rocprof-attach-claims")
        .map(|_| claim_in("/tmp/rocprof-attach-claims", t.pid));
    let _ = Command::new("chmod")
        .args(["1777", "/tmp/rocprof-attach-claims"])
        .status();
    let mut squatter = old.as_ref().ok().map(|old| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["flock", "--no-fork", "-x", s(old), "sleep", "60"]);
        c.spawn().unwrap()
    });
    // Bounded: until the squatter holds its lock.
    if let Ok(old) = &old {
        common::wait_until(std::time::Duration::from_secs(10), || {
            Command::new("flock")
                .args(["-n", "-x", s(old), "true"])
                .status()
                .is_ok_and(|st| !st.success())
        });
    }
    let (code, _, stderr) = short(t.pid, out.path(), &[]);
    assert_eq!(code, 0, "root's attach is not blocked: {stderr}");
    if let Some(c) = squatter.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    if let Ok(old) = old {
        let _ = std::fs::remove_file(old);
    }
}

#[test]
fn root_and_the_targets_owner_share_its_lock_and_nobody_else_can_squat_it() {
    if !can_switch_users() {
        return;
    }
    // A user of its own, so no other test uses its claims directory.
    let uid = 4242u32;
    let dir = format!("/tmp/rocprof-attach-{uid}");
    let _ = std::fs::remove_dir_all(&dir);
    // Another user makes the directory first: root moves it aside and makes its own.
    let (code, _, stderr) = as_user(4343, &["mkdir", "-m", "777", &dir]);
    assert_eq!(code, 0, "{stderr}");
    let t = Target::spawn(TargetOpts {
        uid: Some(uid),
        ..Default::default()
    });
    let out = common::public_dir();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(out.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let a = window(&t, out.path(), &[]);
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (uid, 0o700), "{dir}");
        let c = std::fs::metadata(claim_in(&dir, t.pid)).unwrap();
        assert_eq!(c.uid(), 0, "root's claim");
    }
    // The target's owner is refused while root holds it, with the holder and the lock file.
    let bin = common::bin();
    let pid = t.pid.to_string();
    let (code, _, stderr) = as_user(
        uid,
        &[
            s(&bin),
            "-p",
            &pid,
            "-d",
            "/tmp",
            "--attach-duration-msec",
            "50ms",
        ],
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains(&format!("rocprof-attach (pid {}", a.child.id()))
            && stderr.contains(&format!("lock file {dir}/")),
        "{stderr}"
    );
    // A third user cannot even look.
    let (code, _, _) = as_user(4343, &["ls", &dir]);
    assert_ne!(code, 0);
    a.signal(Signal::SIGINT);
    let (code, _, stderr) = a.finish();
    assert_eq!(code, 0, "{stderr}");
    for e in std::fs::read_dir("/tmp").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("rocprof-attach-{uid}")) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
