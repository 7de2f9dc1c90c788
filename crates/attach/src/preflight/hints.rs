//! Why the kernel may refuse ptrace or `/proc` access to a process, with the exact fixes.

use rocprof_engine::procfs;
use std::path::Path;

/// CAP_SYS_PTRACE bit in CapEff.
pub const CAP_SYS_PTRACE: u32 = 19;

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn has_cap_sys_ptrace() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim()
        .to_string();
    let caps = u64::from_str_radix(&hex, 16).ok()?;
    Some(caps & (1 << CAP_SYS_PTRACE) != 0)
}

fn in_container() -> bool {
    if Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists() {
        return true;
    }
    read_trimmed("/proc/1/cgroup").is_some_and(|c| {
        ["docker", "kubepods", "containerd", "lxc", "libpod"]
            .iter()
            .any(|k| c.contains(k))
    })
}

fn yama_hint() -> Option<String> {
    let scope = read_trimmed("/proc/sys/kernel/yama/ptrace_scope")?;
    Some(match scope.as_str() {
        "0" => "Yama ptrace_scope is 0 (classic ptrace permissions).".to_string(),
        "1" => "Yama ptrace_scope is 1: only a parent may trace its children. Fix: \
                `sudo sysctl kernel.yama.ptrace_scope=0`, or run rocprof-attach as root / with CAP_SYS_PTRACE."
            .to_string(),
        "2" => "Yama ptrace_scope is 2: only processes with CAP_SYS_PTRACE may trace. Fix: run rocprof-attach as \
                root (sudo) or grant it CAP_SYS_PTRACE."
            .to_string(),
        "3" => "Yama ptrace_scope is 3: ptrace is disabled until reboot. Fix: set kernel.yama.ptrace_scope=0 at boot \
                (sysctl.d) and reboot."
            .to_string(),
        other => format!("Yama ptrace_scope is {other}."),
    })
}

fn uid_hint(pid: i32) -> Option<String> {
    let target = procfs::status(pid).ok()?;
    let ours = nix::unistd::geteuid().as_raw();
    (ours != 0 && target.uid[1] != ours).then(|| {
        format!(
            "process {pid} runs as uid {} but rocprof-attach runs as uid {ours}. Fix: run as the target's owner or as root.",
            target.uid[1]
        )
    })
}

fn namespace_hint(pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    if let (Some(a), Some(b)) = (ns("self"), ns(&pid.to_string())) {
        if a != b {
            out.push(format!(
                "process {pid} is in a different PID namespace than rocprof-attach. Fix: run rocprof-attach in the \
                 target's container (`docker exec`) or on the host with the PID as the host sees it."
            ));
        }
    }
    if let Ok(st) = procfs::status(pid) {
        if st.ns_pid.len() > 1 {
            out.push(format!(
                "process {pid} lives in a nested PID namespace (it sees itself as PID {}); use PID {pid} from here, \
                 or the inner PID from inside its container.",
                st.ns_pid[st.ns_pid.len() - 1]
            ));
        }
    }
    out
}

/// Why the kernel will refuse `PTRACE_SEIZE` of `pid` by this process, when that can be told
/// without trying: another user's process without CAP_SYS_PTRACE, or Yama's ptrace_scope (1: only
/// ancestors may trace, unless the target named us with PR_SET_PTRACER, which cannot be read;
/// 2: CAP_SYS_PTRACE only; 3: nobody). Reading `/proc` is allowed in cases where ptrace is not, so
/// `--list` needs this to avoid saying "yes" for a process the caller cannot attach.
pub fn ptrace_refusal(pid: i32) -> Option<String> {
    let cap = has_cap_sys_ptrace().unwrap_or(false);
    let scope = read_trimmed("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope == "3" {
        return Some("Yama ptrace_scope is 3: ptrace is disabled until reboot".into());
    }
    if cap {
        return None;
    }
    if let Some(h) = uid_hint(pid) {
        return Some(h);
    }
    match scope.as_str() {
        "2" => Some("Yama ptrace_scope is 2 and rocprof-attach lacks CAP_SYS_PTRACE".into()),
        "1" if !is_our_descendant(pid) => Some(
            "Yama ptrace_scope is 1 and the process is not a child of rocprof-attach; run as root, \
             or `sudo sysctl kernel.yama.ptrace_scope=0`"
                .into(),
        ),
        _ => None,
    }
}

/// True when `pid` descends from this process (Yama scope 1 allows tracing it).
fn is_our_descendant(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut p = pid;
    for _ in 0..4096 {
        match procfs::status(p) {
            Ok(st) if st.ppid == me => return true,
            Ok(st) if st.ppid > 1 => p = st.ppid,
            _ => return false,
        }
    }
    false
}

fn seccomp_hint() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mode = status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))?
        .trim()
        .to_string();
    (mode == "2").then(|| {
        "rocprof-attach runs under a seccomp filter that may block ptrace. Fix: in Docker older than 19.03 add \
         `--security-opt seccomp=unconfined`."
            .to_string()
    })
}

/// Explain why ptrace or /proc access to `pid` may be refused, with the exact fixes.
pub fn permission_hint(pid: i32) -> String {
    let mut lines: Vec<String> = Vec::new();
    lines.extend(yama_hint());
    match has_cap_sys_ptrace() {
        Some(true) => lines.push("rocprof-attach has CAP_SYS_PTRACE.".into()),
        Some(false) => lines.push(
            "rocprof-attach lacks CAP_SYS_PTRACE (bit 19 of CapEff). Fix: run it as root (sudo) or with \
             CAP_SYS_PTRACE."
                .into(),
        ),
        None => {}
    }
    lines.extend(uid_hint(pid));
    if in_container() {
        lines.push(
            "rocprof-attach runs inside a container. Fix: start the container with `docker run --cap-add SYS_PTRACE` \
             (Kubernetes: securityContext.capabilities.add: [\"SYS_PTRACE\"])."
                .into(),
        );
    }
    lines.extend(seccomp_hint());
    lines.extend(namespace_hint(pid));
    lines
        .iter()
        .map(|l| format!("rocprof-attach: hint: {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
