//! Help texts and the messages for common command-line mistakes (a bare PID, rocprofv3 options
//! that mean nothing when attaching).

/// After `-h`: a few examples and where to find more.
pub const AFTER_HELP: &str = "\
Examples:
  rocprof-attach -p 1234 --kernel-trace                  trace kernels until Enter or Ctrl-C
  rocprof-attach -p 1234 -s --attach-duration-msec 10s   10 s of system trace, then detach
  rocprof-attach --check -p 1234                         can 1234 be attached? (changes nothing)
  rocprof-attach --detach -p 1234                        finish a session left active (after exit 11)
  rocprof-attach --list                                  processes that can be attached

`rocprof-attach --help` shows every option, the environment variables and the exit codes.";

/// After `--help`: examples, environment, exit codes (`{fallbacks}` is filled in by
/// [`crate::cli::fallbacks::name_in_help`]).
pub const AFTER_LONG_HELP: &str = "\
Examples:
  rocprof-attach -p 1234 --kernel-trace                    trace kernels until Enter or Ctrl-C
  rocprof-attach -p 1234 -s --attach-duration-msec 10s     10 s of system trace, then detach
  rocprof-attach --attach 1234,1240 --hip-trace -f csv,json -d /tmp/prof
  rocprof-attach --match 'python.*train' --pmc SQ_WAVES GRBM_COUNT --attach-duration-msec 5000
  rocprof-attach --job $SLURM_JOB_ID --kernel-trace --attach-duration-msec 2m --json > report.json
  rocprof-attach --check -p 1234                           can 1234 be attached? (changes nothing)
  rocprof-attach --detach -p 1234                          finish a session left active (after exit 11)
  rocprof-attach --list                                    processes that can be attached
  rocprof-attach -L -p 1234                                the metrics a CUDA process's GPUs offer
  rocprof-attach summary -i results.db                     summarise a rocpd database
  rocprof-attach convert -i out/*/*.db -f pftrace          a Perfetto trace of every process
  rocprof-attach query -i a.db --query 'SELECT * FROM top_kernels'
  rocprof-attach completions bash > /etc/bash_completion.d/rocprof-attach

A ROCm target must have been started with ROCP_TOOL_ATTACH=1 (its 'rocp-bg-attach' thread must
exist); a CUDA process (one that maps libcuda.so.1) needs nothing (docs/cuda.md).
rocprofv3 options keep their rocprofv3 meaning and set the same ROCPROF_* variables, which are sent
to the target; see docs/options.md. Boolean options accept y/yes/t/true/on/1 and n/no/f/false/off/0.
Durations take a unit: 500ms, 10s, 2m, 1h (a bare number is milliseconds, as in rocprofv3).

Environment: {fallbacks} stand in for the options when they are not given;
ROCPROF_ATTACH_LOG sets rocprof-attach's own log filter (e.g. ROCPROF_ATTACH_LOG=debug). For CUDA
processes: ROCPROF_ATTACH_CUDA_TOOL (our tool library), ROCPROF_ATTACH_CUPTI (the libcupti to
load when the process maps none) and ROCPROF_ATTACH_BUFFER_BYTES (the largest CUPTI buffer, default
8 MiB; the tool picks smaller ones when records come slowly).

Exit codes: 0 success, 1 failure, 2 usage error, 3 no such process (or nothing matched),
4 not attachable, 5 permission denied, 6 rejected by the target, 7 target exited, 8 partial,
9 no output, 10 bad input file, 11 detach failed, 12 requested format missing.
Details: docs/exit-codes.md; the --json report: docs/json.md";

/// rocprofv3 options that have no meaning when attaching, with why.
const ROCPROFV3_ONLY: [(&str, &str); 10] = [
    ("--input", "reads a run configuration for launching an application; pass the options on the command line"),
    ("-i", "reads a run configuration for launching an application; pass the options on the command line"),
    ("--preload", "preloads libraries into an application it launches; a running process cannot be preloaded"),
    ("--rocm-root", "chooses the ROCm of an application it launches; the target already runs its own (rocprof-attach uses the target's installation)"),
    ("--sdk-soversion", "chooses the SDK of an application it launches; the target already loaded its own"),
    ("--sdk-version", "chooses the SDK of an application it launches; the target already loaded its own"),
    ("--profile-mpi-ranks", "chooses ranks of an MPI job it launches; select processes with -p, --match or --job"),
    ("--suppress-marker-preload", "concerns the preload of a launched application; nothing is preloaded when attaching"),
    ("--echo", "prints the launch command; there is no launch when attaching"),
    ("--collection-period-unit", "belongs to --collection-period, which attach mode does not support (use --attach-duration-msec)"),
];

/// The message for a rocprofv3 option that has no meaning when attaching, if `arg` is one.
fn rocprofv3_only(arg: &str) -> Option<String> {
    let name = arg.split('=').next().unwrap_or(arg);
    ROCPROFV3_ONLY.iter().find(|(o, _)| *o == name).map(|(o, why)| {
        format!(
            "{o} is a rocprofv3 option with no meaning when attaching to a running process: rocprofv3 {why}. \
             Remove it (docs/options.md lists what is accepted)"
        )
    })
}

/// Examples of `completions`.
pub const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  rocprof-attach completions bash > ~/.local/share/bash-completion/completions/rocprof-attach
  rocprof-attach completions zsh > ~/.zfunc/_rocprof-attach
  rocprof-attach completions fish > ~/.config/fish/completions/rocprof-attach.fish";

/// Examples of `man`.
pub const MAN_EXAMPLES: &str = "\
Examples:
  rocprof-attach man > rocprof-attach.1 && man -l rocprof-attach.1
  rocprof-attach man | gzip > /usr/local/share/man/man1/rocprof-attach.1.gz
  rocprof-attach man convert > /usr/local/share/man/man1/rocprof-attach-convert.1";

/// Examples of `install-library`.
pub const INSTALL_EXAMPLES: &str = "\
Examples:
  rocprof-attach install-library --prefix $HOME/.local
  ROCPROF_ATTACH_LIBRARY=$HOME/.local/lib/librocprofiler-sdk-rocattach.so.1 rocprofv3 --attach 1234 ...";

/// A clearer message than clap's for two common mistakes: a bare PID (`rocprof-attach 1234`) and
/// a rocprofv3 option that has no meaning when attaching.
pub fn known_mistake(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        err.kind(),
        ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
    ) {
        return None;
    }
    let arg = match err
        .get(ContextKind::InvalidArg)
        .or_else(|| err.get(ContextKind::InvalidSubcommand))?
    {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    if let Some(m) = rocprofv3_only(&arg) {
        return Some(m);
    }
    let pids = arg
        .split(',')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    pids.then(|| {
        format!(
            "'{arg}' looks like a process id: pass it with -p, e.g. `rocprof-attach -p {arg} --kernel-trace` \
             (see `rocprof-attach -h`)"
        )
    })
}
