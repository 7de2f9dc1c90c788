//! The attach session: select targets, preflight, attach, wait, detach, report.

use crate::envbuf::EnvList;
use crate::format::OutputFormat;
use std::path::PathBuf;
use std::time::Duration;

/// Which processes to attach to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSelection {
    /// Explicit PIDs (`--attach 1234,1240`, repeated flags, `ROCPROF_ATTACH_PID`).
    Pids(Vec<i32>),
    /// Processes on this node whose command line matches this regular expression (`--match`).
    Match(String),
    /// Processes whose environment carries this job id (`--job`).
    Job(String),
    /// Every attachable process on this node (`--all`).
    All,
}

/// Everything the front end decided; built by [`crate::cli`], executed by [`run`].
#[derive(Debug, Clone)]
pub struct AttachRequest {
    /// Target selection.
    pub targets: TargetSelection,
    /// Attach descendants too (tree attach, default true).
    pub children: bool,
    /// Detach automatically after this long (`--attach-duration-msec`).
    pub duration: Option<Duration>,
    /// Ask the tool to write output before the detach call returns (default true).
    pub sync_output: bool,
    /// Tool library string given with `-t` / `ROCPROF_ATTACH_TOOL_LIBRARY` (None: choose one).
    pub tool_library: Option<String>,
    /// The environment to send: our process environment with the option variables applied.
    /// Filtering to `ROCP*` happens when it is encoded.
    pub env: EnvList,
    /// Absolute output directory (`ROCPROF_OUTPUT_PATH`).
    pub output_dir: PathBuf,
    /// Output file name template (`ROCPROF_OUTPUT_FILE_NAME`).
    pub output_file: String,
    /// Formats the user asked for.
    pub formats: Vec<OutputFormat>,
    /// Print a summary after detach (`-S/--summary`).
    pub summary: bool,
    /// Maximum number of processes attached or detached at the same time.
    pub parallelism: usize,
}

/// Run an attach session to completion and return the exit code (implemented by the session work).
pub fn run(req: AttachRequest) -> crate::ExitCode {
    let _ = req;
    crate::ExitCode::Failure
}
