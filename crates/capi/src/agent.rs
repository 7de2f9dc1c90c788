//! The agent executable, and the library's spare [`Injector`]: an injection of a process that
//! has no agent server ([`super::will`]: none could be started) runs in a `rocprof-attach
//! __agent` process started with `exec` ([`rocprof_engine::agent::exec`]), never in a fork of
//! the host.
//!
//! The agent executable is found, in order: `ROCATTACH_AGENT` (ignored in a secure-execution
//! host), then `rocprof-attach` next to this library, in `../bin`, `../../bin` (for
//! `lib/rocprofiler-sdk/librocprofv3-attach.so`), in the parent directory (cargo's
//! `target/<profile>/deps`) and in `../../../../bin` (a pip install: the library lives in
//! `<venv>/lib/pythonX.Y/site-packages/rocprof_attach/`, the command in `<venv>/bin`).

use rocprof_attach_core::session::Injector;
use rocprof_engine::agent::{exec, CallTimeouts, Job, Outcome, Target};
use rocprof_engine::procfs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;

/// The variable naming the agent executable explicitly.
pub const AGENT_VARIABLE: &str = "ROCATTACH_AGENT";

/// The agent's file name.
const AGENT_NAME: &str = "rocprof-attach";

/// Runs each injection in a freshly spawned agent process.
#[derive(Debug)]
pub struct ExecInjector {
    program: PathBuf,
    timeouts: CallTimeouts,
    /// Agents whose injected call outlived its timeout: they stay until it returns; reaped by
    /// later calls so no zombie accumulates (no thread of ours waits for them).
    pending: Mutex<Vec<Child>>,
}

impl ExecInjector {
    /// An injector that starts `program`.
    pub fn new(program: PathBuf) -> ExecInjector {
        ExecInjector {
            program,
            timeouts: CallTimeouts::default(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The agent executable used.
    pub fn program(&self) -> &Path {
        &self.program
    }

    fn reap(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        }
    }
}

impl Injector for ExecInjector {
    fn inject(&self, target: &Target, job: &Job) -> rocprof_engine::Result<Outcome> {
        self.reap();
        let (result, leftover) = exec::run_exec(&self.program, target, job, self.timeouts);
        if let Some(child) = leftover {
            if let Ok(mut pending) = self.pending.lock() {
                pending.push(child);
            }
        }
        result
    }
}

/// Find the agent executable; the error says where we looked and how to fix it.
pub fn find(at_secure: bool, log: &super::log::Log) -> Result<PathBuf, String> {
    if let Some(v) = std::env::var_os(AGENT_VARIABLE).filter(|v| !v.is_empty()) {
        if at_secure {
            log.warn(&format!(
                "ignoring {AGENT_VARIABLE} because this process runs in a secure-execution context \
                 (setuid, setgid or file capabilities)"
            ));
        } else {
            let p = PathBuf::from(v);
            return if is_executable(&p) {
                Ok(p)
            } else {
                Err(format!(
                    "{AGENT_VARIABLE}={} is not an executable file: point it at the rocprof-attach binary \
                     or unset it",
                    p.display()
                ))
            };
        }
    }
    let candidates = candidates();
    candidates
        .iter()
        .find(|p| is_executable(p))
        .cloned()
        .ok_or_else(|| {
            format!(
                "cannot find the rocprof-attach agent executable (looked at {}). Install the library with \
                 `rocprof-attach install-library --prefix DIR` (it puts rocprof-attach in DIR/bin), or set \
                 {AGENT_VARIABLE} to the path of the rocprof-attach binary",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Where the agent may be, relative to the file this code was loaded from.
fn candidates() -> Vec<PathBuf> {
    let Some(dir) = own_file().and_then(|f| f.parent().map(Path::to_path_buf)) else {
        return Vec::new();
    };
    ["", "../bin", "../../bin", "..", "../../../../bin"]
        .iter()
        .map(|rel| dir.join(rel).join(AGENT_NAME))
        .collect()
}

/// The file (shared library or executable) this code runs from, found in `/proc/self/maps`.
pub fn own_file() -> Option<PathBuf> {
    let addr = own_file as *const () as usize as u64;
    let me = std::process::id() as i32;
    procfs::maps(me)
        .ok()?
        .into_iter()
        .find(|m| m.contains(addr))
        .and_then(|m| m.path)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
