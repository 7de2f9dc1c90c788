//! Preflight checks against real processes: each failure is its own error with the fix.

use crate::prereq;
use rocprof_testkit::lookup;

use lookup::{
    attach_tool_lib, configure_lib, copy_into, register_lib, start_forking_target, start_target,
    Proc,
};
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use rocprof_attach::attach::targets::TargetSelection;
use rocprof_attach::attach::toolpath::{self, ToolSource};
use rocprof_attach::attach::Error;
use rocprof_attach::attach::{preflight, reattach, targets};
use rocprof_attach::cli::check;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn reason(err: Error) -> String {
    match err {
        Error::NotAttachable { reason, .. } => reason,
        other => panic!("expected NotAttachable, got {other:?}"),
    }
}

/// A target with a listener and a register stand-in (in its own directory).
fn attachable(dir: &Path, env: &[(&str, &str)]) -> (Proc, Option<u64>) {
    let lib = copy_into(
        &register_lib(1, &[]),
        dir,
        "librocprofiler-register.so.0.5.0",
    );
    // The default tool, where the target's loader finds it (beside its register: $ORIGIN).
    copy_into(&configure_lib(), dir, toolpath::DEFAULT_TOOL);
    start_target(&["--listeners", "1", s(&lib)], env)
}

#[test]
fn attachable_target_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, addr) = attachable(dir.path(), &[("ROCP_TOOL_ATTACH", "1")]);
    let report = preflight::check(target.pid(), None).expect("attachable");
    assert_eq!(report.pid, target.pid());
    let tids = rocprof_attach::engine::procfs::threads_named(target.pid(), "rocp-bg-attach")
        .expect("tids");
    assert_eq!(vec![report.listener_tid], tids);
    assert_eq!(Some(report.register_attach_addr), addr);
    assert!(report
        .register_path
        .ends_with("librocprofiler-register.so.0.5.0"));
    assert_eq!(report.tool.string, toolpath::DEFAULT_TOOL);
    assert_eq!(report.tool.source, ToolSource::Default);
    assert!(report.attach_library.is_none());
    assert_eq!(report.sdk_libraries.len(), 1);
    assert_eq!(report.sdk_libraries[0].version(), Some("0.5.0"));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(report.to_string().contains("attachable"));
    assert_eq!(
        check::run_check(
            &TargetSelection::Pids(vec![target.pid()]),
            None,
            None,
            None,
            &rocprof_attach::cli::render::Ui::new(false, false),
            false
        ),
        rocprof_attach::ExitCode::Success
    );
}

#[test]
fn several_listeners_and_empty_opt_in_are_warned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    copy_into(&configure_lib(), dir.path(), toolpath::DEFAULT_TOOL);
    let (target, _) = start_target(&["--listeners", "2", s(&lib)], &[("ROCP_TOOL_ATTACH", "")]);
    let report = preflight::check(target.pid(), None).expect("attachable");
    let all = report.warnings.join("\n");
    assert!(all.contains("2 'rocp-bg-attach' threads"), "{all}");
    assert!(all.contains("empty string"), "{all}");
}

#[test]
fn zombie_is_refused() {
    let child = Command::new("true").spawn().expect("spawn");
    let pid = child.id() as i32;
    // Wait for the exit without reaping, so the process stays a zombie.
    waitid(
        Id::Pid(Pid::from_raw(pid)),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
    )
    .expect("waitid");
    let r = reason(preflight::check(pid, None).unwrap_err());
    assert!(r.contains("zombie"), "{r}");
    let mut child = child;
    child.wait().expect("reap");
}

#[test]
fn ourselves_is_refused() {
    let r = reason(preflight::check(std::process::id() as i32, None).unwrap_err());
    assert!(r.contains("rocprof-attach itself"), "{r}");
}

#[test]
fn kernel_thread_is_refused() {
    let kthread = rocprof_attach::engine::procfs::list_pids()
        .expect("pids")
        .into_iter()
        .find(|&p| rocprof_attach::engine::procfs::is_kernel_thread(p).unwrap_or(false));
    let Some(pid) = kthread else {
        return prereq::missing(
            "no kernel thread is visible in this PID namespace",
            "run the tests in the host's PID namespace (a container: docker run --pid=host)",
        );
    };
    let r = reason(preflight::check(pid, None).unwrap_err());
    assert!(r.contains("kernel thread"), "{r}");
}

#[test]
fn gone_and_invalid_pids() {
    let mut child = Command::new("true").spawn().expect("spawn");
    let pid = child.id() as i32;
    child.wait().expect("wait");
    let err = preflight::check(pid, None).unwrap_err();
    assert!(
        matches!(err, Error::ProcessGone { pid: p } if p == pid),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), rocprof_attach::ExitCode::NoSuchProcess);
    assert!(matches!(preflight::check(0, None), Err(Error::Usage(_))));
    assert!(matches!(preflight::check(-5, None), Err(Error::Usage(_))));
}

#[test]
fn no_listener_without_opt_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let (target, _) = start_target(&[s(&lib)], &[]);
    let err = preflight::check(target.pid(), None).unwrap_err();
    assert_eq!(err.exit_code(), rocprof_attach::ExitCode::NotAttachable);
    let r = reason(err);
    assert!(r.contains("'rocp-bg-attach' thread not found"), "{r}");
    assert!(r.contains("ROCP_TOOL_ATTACH=1"), "{r}");
    assert!(r.contains("librocprofiler-register: loaded"), "{r}");
    assert!(r.contains("librocprofiler-sdk-attach: not loaded"), "{r}");
}

#[test]
fn no_listener_with_empty_opt_in() {
    let (target, _) = start_target(&[], &[("ROCP_TOOL_ATTACH", "")]);
    let r = reason(preflight::check(target.pid(), None).unwrap_err());
    assert!(r.contains("empty string"), "{r}");
}

#[test]
fn no_listener_because_a_library_exports_rocprofiler_configure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let torch = copy_into(&configure_lib(), dir.path(), "libtorch_cpu.so");
    let (target, _) = start_target(&[s(&reg), s(&torch)], &[("ROCP_TOOL_ATTACH", "1")]);
    let r = reason(preflight::check(target.pid(), None).unwrap_err());
    assert!(r.contains("rocprofiler_configure"), "{r}");
    assert!(r.contains(s(&torch)), "{r}");
    assert!(r.contains("start-up profiling"), "{r}");
}

#[test]
fn no_listener_in_a_fork_only_child() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let (target, child) =
        start_forking_target(&["--listeners", "1", s(&lib)], &[("ROCP_TOOL_ATTACH", "1")]);
    let r = reason(preflight::check(child, None).unwrap_err());
    assert!(r.contains("fork()"), "{r}");
    assert!(r.contains(&format!("PID {}", target.pid())), "{r}");
}

#[test]
fn no_listener_before_runtime_registration() {
    let (target, _) = start_target(&[], &[("ROCP_TOOL_ATTACH", "1")]);
    let r = reason(preflight::check(target.pid(), None).unwrap_err());
    assert!(r.contains("librocprofiler-register is not loaded"), "{r}");
}

#[test]
fn already_traced_names_the_tracer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, _) = attachable(dir.path(), &[("ROCP_TOOL_ATTACH", "1")]);
    let mut cmd = Command::new(lookup::tracer_bin());
    cmd.arg(target.pid().to_string());
    let tracer = Proc::spawn(cmd);
    tracer.wait_for("seized");
    let r = reason(preflight::check(target.pid(), None).unwrap_err());
    assert!(
        r.contains(&format!("already traced by PID {} (tracer)", tracer.pid())),
        "{r}"
    );
    assert!(r.contains("detach"), "{r}");
}

#[test]
fn missing_register_library() {
    let (target, _) = start_target(&["--listeners", "1"], &[("ROCP_TOOL_ATTACH", "1")]);
    let r = reason(preflight::check(target.pid(), None).unwrap_err());
    assert!(r.contains("librocprofiler-register is not mapped"), "{r}");
    assert!(
        r.contains("librocprofiler-sdk-attach is not mapped either"),
        "{r}"
    );
}

#[test]
fn missing_attach_symbol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &["-DNO_ATTACH"]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let (target, _) = start_target(&["--listeners", "1", s(&lib)], &[]);
    let err = preflight::check(target.pid(), None).unwrap_err();
    assert_eq!(err.exit_code(), rocprof_attach::ExitCode::NotAttachable);
    assert!(
        err.to_string().contains("rocprofiler_register_attach"),
        "{err}"
    );
}

#[test]
fn tool_path_checks_in_the_target_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, _) = attachable(dir.path(), &[]);
    let pid = target.pid();
    let missing = "/nonexistent/rocprofiler-sdk/librocprofiler-sdk-tool.so";
    let r = reason(preflight::check(pid, Some(missing)).unwrap_err());
    assert!(
        r.contains(missing) && r.contains(&format!("/proc/{pid}/root")),
        "{r}"
    );

    let tool_a = copy_into(
        &configure_lib(),
        &dir.path().join("tools"),
        "librocprofiler-sdk-tool.so.1",
    );
    let link = dir.path().join("tools/librocprofiler-sdk-tool.so");
    std::os::unix::fs::symlink(&tool_a, &link).expect("symlink");
    let list = format!("{}:{}:librelative.so", s(&tool_a), s(&link));
    let report = preflight::check(pid, Some(&list)).expect("colon list");
    assert_eq!(report.tool.string, list);
    assert_eq!(report.tool.source, ToolSource::Explicit);
    assert!(report
        .tool
        .notes
        .iter()
        .any(|n| n.contains("librelative.so") && n.contains("dynamic loader")));

    let r = reason(preflight::check(pid, Some(&format!("{}:{missing}", s(&tool_a)))).unwrap_err());
    assert!(r.contains(missing), "{r}");
    let r = reason(preflight::check(pid, Some(s(dir.path()))).unwrap_err());
    assert!(r.contains("not a regular file"), "{r}");
    for empty in ["", ":", " : "] {
        assert!(
            matches!(preflight::check(pid, Some(empty)), Err(Error::Usage(_))),
            "{empty:?}"
        );
    }
}

#[test]
fn tool_override_ignored_under_at_secure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, _) = attachable(dir.path(), &[]);
    assert!(!toolpath::at_secure());
    let choice =
        toolpath::choose(target.pid(), Some("/nonexistent/tool.so"), true).expect("choose");
    assert_eq!(choice.string, toolpath::DEFAULT_TOOL);
    assert!(choice
        .warnings
        .iter()
        .any(|w| w.contains("secure-execution")));
}

#[test]
fn tool_from_the_targets_install() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib_dir = dir.path().join("rocm/lib");
    let reg = copy_into(
        &register_lib(1, &[]),
        &lib_dir,
        "librocprofiler-register.so.0.5.0",
    );
    // Any ELF will do as the SDK core library stand-in; only its path matters here.
    let core = copy_into(&configure_lib(), &lib_dir, "librocprofiler-sdk.so.1.2.0");
    let tool = copy_into(
        &configure_lib(),
        &lib_dir.join("rocprofiler-sdk"),
        "librocprofiler-sdk-tool.so.1",
    );
    let (target, _) = start_target(&["--listeners", "1", s(&reg), s(&core)], &[]);
    let report = preflight::check(target.pid(), None).expect("attachable");
    assert_eq!(report.tool.source, ToolSource::TargetInstall);
    assert_eq!(report.tool.string, s(&tool));
}

#[test]
fn a_loaded_tool_is_recognised_by_its_attach_export_whatever_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = std::fs::canonicalize(dir.path()).expect("canonical");
    let reg = copy_into(
        &register_lib(1, &[]),
        &dir,
        "librocprofiler-register.so.0.5.0",
    );
    // Mapped as an earlier attach leaves it: a tool under a name of its own.
    let loaded = copy_into(&attach_tool_lib(), &dir.join("first"), "libmy-profiler.so");
    let other = copy_into(&attach_tool_lib(), &dir.join("second"), "libmy-profiler.so");
    let (target, _) = start_target(&["--listeners", "1", s(&reg), s(&loaded)], &[]);
    let pid = target.pid();
    let r = reason(preflight::check(pid, Some(s(&other))).unwrap_err());
    assert!(
        r.contains(&format!("already loaded the tool library {}", s(&loaded))),
        "{r}"
    );
    assert!(r.contains(&format!("Fix: pass -t {}", s(&loaded))), "{r}");
    // The same file again is a reattach; a bare name is left to the target's loader.
    preflight::check(pid, Some(s(&loaded))).expect("same tool");
    preflight::check(pid, Some("libmy-profiler.so")).expect("bare name");
}

#[test]
fn an_unrelated_library_is_not_a_loaded_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    // Exports rocprofiler_configure (as libtorch_cpu.so does) but not the attach entry point.
    let torch = copy_into(&configure_lib(), dir.path(), "libtorch_cpu.so");
    let tool = copy_into(
        &attach_tool_lib(),
        &dir.path().join("tools"),
        "libmy-profiler.so",
    );
    let (target, _) = start_target(&["--listeners", "1", s(&reg), s(&torch)], &[]);
    let pid = target.pid();
    let maps = rocprof_attach::engine::procfs::maps(pid).expect("maps");
    assert!(reattach::loaded_tools(pid, &maps).is_empty());
    let report = preflight::check(pid, Some(s(&tool))).expect("no tool loaded yet");
    assert_eq!(report.tool.string, s(&tool));
}

#[test]
fn selection_by_pid_match_job_and_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let job = format!("job-{}", std::process::id());
    let (with, _) = start_target(&["--listeners", "1", s(&lib)], &[("SLURM_JOB_ID", &job)]);
    let (without, _) = start_target(&[s(&lib)], &[("PMIX_NAMESPACE", &job)]);
    let (plain, _) = start_target(&[], &[("SLURM_JOB_ID", &job)]);

    let sel = targets::select(&TargetSelection::Pids(vec![
        with.pid(),
        with.pid(),
        plain.pid(),
    ]))
    .expect("pids");
    assert_eq!(sel.pids, vec![with.pid(), plain.pid()]);

    let unique = s(dir.path()).to_string();
    let sel = targets::select(&TargetSelection::Match(regex_escape(&unique))).expect("match");
    assert_eq!(sel.pids, vec![with.pid(), without.pid()]);
    assert!(matches!(
        targets::select(&TargetSelection::Match("(".into())),
        Err(Error::Usage(_))
    ));

    let sel = targets::select(&TargetSelection::Job(job.clone())).expect("job");
    assert_eq!(
        sel.pids,
        vec![with.pid(), without.pid()],
        "plain has no ROCm: not selected"
    );

    let sel = targets::select(&TargetSelection::All).expect("all");
    assert!(sel.pids.contains(&with.pid()) && !sel.pids.contains(&without.pid()));

    let listing = targets::list(&TargetSelection::All).expect("list");
    let row = |pid: i32| listing.entries.iter().find(|e| e.pid == pid).cloned();
    assert!(row(with.pid()).expect("with").listener);
    let no = row(without.pid()).expect("without listed");
    assert!(!no.listener && no.libraries[0].version() == Some("0.5.0"));
    assert!(row(plain.pid()).is_none());
    assert_eq!(
        check::run_list(
            &TargetSelection::Job(job),
            &rocprof_attach::cli::render::Ui::new(false, false),
            false,
            false
        ),
        rocprof_attach::ExitCode::Success
    );

    let mut gone = Command::new("true").spawn().expect("spawn");
    let gone_pid = gone.id() as i32;
    gone.wait().expect("wait");
    let listing = targets::list(&TargetSelection::Pids(vec![gone_pid])).expect("list");
    assert!(listing.entries.is_empty() && listing.unreadable[0].0 == gone_pid);
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn permission_hint_mentions_capabilities_and_container() {
    let hint = preflight::permission_hint(std::process::id() as i32);
    assert!(hint.contains("CAP_SYS_PTRACE"), "{hint}");
    if Path::new("/.dockerenv").exists() {
        assert!(hint.contains("docker run --cap-add SYS_PTRACE"), "{hint}");
    }
}
