//! Security checks (issue 5): what crosses into the target, secure-execution handling of the
//! tool-library override, and refusals that must leave the target untouched.
//!
//! The privilege tests need `setcap` (Debian libcap2-bin), `setpriv` and `unshare` (util-linux),
//! which tests/scripts/ci-deps.sh installs, and root. CI has both, so a missing one fails the test
//! with what to install or do; `ROCPROF_ATTACH_TEST_ALLOW_SKIP=1` skips it instead, on a machine
//! that cannot run it (tests/prereq).

use crate::common;
use crate::prereq;

use common::{records, rocprof_attach, tool_lib, Target, TargetOpts};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// True if `needle` occurs anywhere in the target's writable memory (read via /proc/PID/mem).
fn in_target_memory(pid: i32, needle: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    for line in common::maps_text(pid).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f[1].starts_with("rw") || f.get(5) == Some(&"[vvar]") {
            continue;
        }
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.read_exact_at(&mut buf, a).is_err() {
            continue;
        }
        if buf.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
    }
    false
}

fn session_args(t: &Target, tool: &str) -> Vec<String> {
    let out = t.dir.path().join("out");
    [
        "--attach",
        &t.pid.to_string(),
        "--kernel-trace",
        "-d",
        out.to_str().unwrap(),
        "-o",
        "run",
        "-t",
        tool,
        "--attach-duration-msec",
        "50",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run(args: &[String], env: &[(&str, &str)]) -> (i32, String, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    rocprof_attach(&a, env).finish()
}

#[test]
fn only_rocp_variables_cross_and_a_secret_never_reaches_the_target() {
    let t = Target::spawn(TargetOpts::default());
    let secret = format!("s3cr3t-{}-{}", std::process::id(), t.pid);
    let marker = format!("rocp-marker-{}-{}", std::process::id(), t.pid);
    let tool = tool_lib();
    let env = [
        ("MY_SECRET_TOKEN", secret.as_str()),
        ("AWS_SECRET_ACCESS_KEY", secret.as_str()),
        ("rocp_lowercase", secret.as_str()),
        ("XROCP_NOT_PREFIX", secret.as_str()),
        ("ROCP_USER_MARKER", marker.as_str()),
    ];
    let (code, _, stderr) = run(&session_args(&t, tool.to_str().unwrap()), &env);
    assert_eq!(code, 0, "{stderr}");
    let recs = records(&t);
    assert_eq!(recs.len(), 2, "{recs:?}");
    let pairs = recs[0].pairs();
    assert!(
        pairs.iter().all(|(n, _)| n.starts_with("ROCP")),
        "only ROCP* names cross: {pairs:?}"
    );
    assert!(
        pairs.iter().all(|(_, v)| !v.contains(&secret)),
        "secret in the pairs: {pairs:?}"
    );
    assert!(pairs
        .iter()
        .any(|(n, v)| n == "ROCP_USER_MARKER" && *v == marker));
    // Not in the target's process environment, nor anywhere in its writable memory; the ROCP*
    // marker, which the stand-in applied with setenv, is: the scan finds what did cross.
    let environ = std::fs::read(format!("/proc/{}/environ", t.pid)).unwrap();
    assert!(!environ
        .windows(secret.len())
        .any(|w| w == secret.as_bytes()));
    assert!(
        in_target_memory(t.pid, marker.as_bytes()),
        "control: the ROCP* marker is in the target"
    );
    assert!(
        !in_target_memory(t.pid, secret.as_bytes()),
        "the secret reached the target's memory"
    );
    assert!(!std::fs::read_to_string(&t.log)
        .unwrap()
        .contains(&common::hex(&secret)));
    t.assert_heartbeat();
}

/// A world-readable scratch directory (the tests below run binaries as `nobody`).
fn public_dir() -> tempfile::TempDir {
    common::public_dir()
}

fn copy_exec(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(common::bin(), &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn tracer_of(pid: i32) -> i32 {
    common::tracer_pid(pid, pid)
}

#[test]
fn tool_override_is_ignored_in_secure_execution() {
    if !prereq::programs(&["setcap"], "libcap2-bin")
        || !prereq::programs(&["setpriv"], "util-linux")
        || !prereq::root("to give a file capability and to switch to nobody")
    {
        return;
    }
    // A copy of rocprof-attach with a file capability runs with AT_SECURE=1 when a user without
    // that capability starts it: the kernel treats it like a setuid program, and so must we.
    let dir = public_dir();
    let bin = copy_exec(dir.path(), "rocprof-attach-caps");
    let set = Command::new("setcap")
        .arg("cap_sys_ptrace+ep")
        .arg(&bin)
        .output()
        .unwrap();
    if !set.status.success() {
        return prereq::missing(
            &format!(
                "setcap cap_sys_ptrace+ep {} failed ({})",
                bin.display(),
                String::from_utf8_lossy(&set.stderr).trim()
            ),
            "run the tests on a filesystem with file capabilities (security.capability extended \
             attributes: ext4, xfs, btrfs, tmpfs; not overlayfs without xattrs or NFS); the copy is \
             made under the system temporary directory, so point TMPDIR at such a filesystem",
        );
    }
    // The target runs as nobody too, so the attacher's only extra privilege is the capability.
    let t = Target::spawn(TargetOpts {
        uid: Some(65534),
        ..Default::default()
    });
    // The override a user would pass: a library of their choosing.
    let evil = dir.path().join("libmine.so");
    std::fs::copy(tool_lib(), &evil).unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut args = vec![
        "--reuid=65534".to_string(),
        "--regid=65534".into(),
        "--clear-groups".into(),
        bin.to_str().unwrap().into(),
    ];
    args.extend(session_args(&t, evil.to_str().unwrap()));
    // -d must be writable by nobody for our own output checks; the target writes as root.
    let out = Command::new("setpriv")
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ROCPROF_ATTACH_TOOL_LIBRARY", evil.to_str().unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ignoring the tool library override")
            && stderr.contains("secure-execution"),
        "{stderr}"
    );
    let evil_hex = common::hex(evil.to_str().unwrap());
    let recs = records(&t);
    assert_eq!(
        recs.first().map(|r| r.kind.as_str()),
        Some("attach"),
        "the session went ahead with the automatic choice: {stderr}"
    );
    for r in &recs {
        assert_ne!(
            r.get("tool"),
            evil_hex,
            "the override reached the target: {r:?}"
        );
        assert!(
            !r.pairs().iter().any(|(_, v)| v.contains("libmine.so")),
            "the override travelled in the environment: {r:?}"
        );
    }
    assert!(
        !common::maps_text(t.pid).contains("libmine.so"),
        "the override was loaded"
    );
    assert_eq!(tracer_of(t.pid), 0);
    t.assert_heartbeat();

    // Control: the same copy without the capability (AT_SECURE=0), same user, same target
    // kind: the override is honoured, so the capability is what made the difference above.
    let plain = copy_exec(dir.path(), "rocprof-attach-plain");
    let t2 = Target::spawn(TargetOpts {
        uid: Some(65534),
        ..Default::default()
    });
    let mut args = args[..3].to_vec();
    args.push(plain.to_str().unwrap().into());
    args.extend(session_args(&t2, evil.to_str().unwrap()));
    let out = Command::new("setpriv")
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "control: {stderr}");
    assert!(
        !stderr.contains("ignoring the tool library override"),
        "{stderr}"
    );
    assert_eq!(
        records(&t2)[0].get("tool"),
        evil_hex,
        "control: override used"
    );
}

#[test]
fn unprivileged_attacher_against_another_users_process_is_refused_untouched() {
    if !prereq::programs(&["setpriv"], "util-linux")
        || !prereq::root("to run the target as another user than the attacher")
    {
        return;
    }
    let dir = public_dir();
    let bin = copy_exec(dir.path(), "rocprof-attach");
    let t = Target::spawn(TargetOpts::default());
    let mut args = vec![
        "--reuid=65534".to_string(),
        "--regid=65534".into(),
        "--clear-groups".into(),
        "--inh-caps=-all".into(),
        bin.to_str().unwrap().into(),
    ];
    args.extend(session_args(&t, tool_lib().to_str().unwrap()));
    let out = Command::new("setpriv")
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("permission denied"),
        "{stderr}"
    );
    assert!(
        stderr.contains("CAP_SYS_PTRACE") && stderr.contains("as root"),
        "the message names the fix: {stderr}"
    );
    assert!(records(&t).is_empty(), "nothing was injected");
    assert_eq!(tracer_of(t.pid), 0);
    assert_eq!(common::tracer_pid(t.pid, t.listener()), 0);
    t.assert_heartbeat();
}

#[test]
fn target_outside_our_pid_namespace_is_reported_missing_untouched() {
    if !prereq::programs(&["unshare"], "util-linux") || !prereq::root("for a new PID namespace") {
        return;
    }
    let t = Target::spawn(TargetOpts::default());
    // rocprof-attach in a fresh PID namespace with its own /proc: the host PID does not exist
    // there (the new namespace numbers from 1).
    let mut args = vec![
        "--pid".to_string(),
        "--fork".into(),
        "--mount-proc".into(),
        common::bin().to_str().unwrap().into(),
    ];
    args.extend(session_args(&t, tool_lib().to_str().unwrap()));
    let out = Command::new("unshare")
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unshare failed") {
        return prereq::missing(
            &format!("cannot create a PID namespace here: {}", stderr.trim()),
            "run the tests where root may unshare PID and mount namespaces (a container needs \
             CAP_SYS_ADMIN, e.g. docker run --privileged)",
        );
    }
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("does not exist") && stderr.contains(&t.pid.to_string()),
        "{stderr}"
    );
    assert!(records(&t).is_empty(), "nothing was injected");
    assert_eq!(tracer_of(t.pid), 0);
    t.assert_heartbeat();
}
