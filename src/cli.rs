//! Command-line front end: parse and validate the command line, build the [`AttachRequest`] and
//! hand it to the session (or run `--check`, `--list`, `convert`, `summary`).
//!
//! Parsing is a pure function, [`parse_request`], of the arguments, the environment and the working
//! directory, so tests can check the whole option mapping without touching any process. [`main`]
//! adds logging, prints warnings and errors, and dispatches.
//!
//! Every command-line problem is an [`Error::Usage`] (exit code 2) with a one-line message that
//! says how to fix it, printed as `rocprof-attach: error: <message>`.

use crate::envbuf::EnvList;
use crate::error::{Error, ExitCode, Result};
use crate::options::{self, parse_bool, ProfilerOptions, DEFAULT_OUTPUT_FILE};
use crate::session::{AttachRequest, TargetSelection};
use clap::builder::TypedValueParser;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

const H_ATTACH: &str = "Attach";
const H_TARGET: &str = "Target selection";

/// Default number of processes attached or detached at the same time.
pub const DEFAULT_PARALLEL: usize = 16;

const AFTER_HELP: &str = "\
Examples:
  rocprof-attach -p 1234 --kernel-trace                    trace kernels until Enter or Ctrl-C
  rocprof-attach -p 1234 -s --attach-duration-msec 10000   10 s of system trace, then detach
  rocprof-attach --attach 1234,1240 --hip-trace -f csv json -d /tmp/prof
  rocprof-attach --match 'python.*train' --pmc SQ_WAVES GRBM_COUNT --attach-duration-msec 5000
  rocprof-attach --check -p 1234                           can 1234 be attached? (changes nothing)
  rocprof-attach --list                                    processes that can be attached
  rocprof-attach summary --help                            summarise a rocpd database

The target must have been started with ROCP_TOOL_ATTACH=1 (its 'rocp-bg-attach' thread must exist).
rocprofv3 options keep their rocprofv3 meaning and set the same ROCPROF_* variables, which are sent
to the target; see docs/options.md. Boolean options accept y/yes/t/true/on/1 and n/no/f/false/off/0.

Environment: ROCPROF_ATTACH_PID, ROCPROF_ATTACH_DURATION, ROCPROF_ATTACH_CHILDREN and
ROCPROF_ATTACH_TOOL_LIBRARY stand in for -p, --attach-duration-msec, --attach-children and -t;
ROCPROF_ATTACH_LOG sets rocprof-attach's own log filter (e.g. ROCPROF_ATTACH_LOG=debug).

Exit codes: 0 success, 1 failure, 2 usage error, 3 no such process, 4 not attachable,
5 permission denied, 6 rejected by the target, 7 target exited, 8 partial, 9 no output,
10 bad input file. Details: docs/exit-codes.md";

/// The command line of `rocprof-attach`.
#[derive(Debug, Parser)]
#[command(
    name = "rocprof-attach",
    version,
    about = "Attach AMD's GPU profiler (rocprofv3) to running processes, profile them, and detach",
    after_help = AFTER_HELP,
    args_override_self = true,
    max_term_width = 110
)]
pub struct Cli {
    /// Post-processing subcommands.
    #[command(subcommand)]
    pub command: Option<Command>,

    // ------------------------------------------------------------------ attach
    /// Only print the processes that can be attached (all of them without a selection)
    #[arg(long, help_heading = H_ATTACH, conflicts_with = "check")]
    pub list: bool,
    /// Only check whether the process can be attached; changes nothing in it
    #[arg(long, help_heading = H_ATTACH)]
    pub check: bool,
    /// Detach after this many milliseconds (default: when Enter or Ctrl-C is pressed)
    /// [env: ROCPROF_ATTACH_DURATION]
    #[arg(long, value_name = "MSEC", allow_hyphen_values = true, help_heading = H_ATTACH)]
    pub attach_duration_msec: Option<String>,
    /// Also attach to the descendants of each process [default: true]
    /// [env: ROCPROF_ATTACH_CHILDREN]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, help_heading = H_ATTACH)]
    pub attach_children: Option<bool>,
    /// Write the output files before detaching returns, so they are complete when rocprof-attach
    /// exits [default: true, unlike rocprofv3]; false lets the target write them in the background
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, help_heading = H_ATTACH)]
    pub attach_sync_output: Option<bool>,
    /// Tool library (or colon-separated list) the target loads, as seen by the target
    /// (default: the target installation's librocprofiler-sdk-tool.so) [env: ROCPROF_ATTACH_TOOL_LIBRARY]
    #[arg(short = 't', long, value_name = "PATH[:PATH...]", help_heading = H_ATTACH)]
    pub attach_tool_library: Option<String>,

    // ------------------------------------------------------------------ target selection
    /// Process(es) to attach to; repeat the option or give a comma-separated list
    /// [env: ROCPROF_ATTACH_PID]
    #[arg(short = 'p', long = "pid", visible_alias = "attach", value_name = "PID[,PID...]",
          allow_hyphen_values = true, help_heading = H_TARGET)]
    pub pid: Vec<String>,
    /// Every process of ours whose command line matches this regular expression
    #[arg(long = "match", value_name = "REGEX", help_heading = H_TARGET)]
    pub match_regex: Option<String>,
    /// Every process whose environment carries this job id (SLURM_JOB_ID, ...)
    #[arg(long, value_name = "ID", help_heading = H_TARGET)]
    pub job: Option<String>,
    /// Every attachable process on this node
    #[arg(long, help_heading = H_TARGET)]
    pub all: bool,

    /// rocprofv3 options.
    #[command(flatten)]
    pub profiler: ProfilerOptions,

    // ------------------------------------------------------------------ our own
    /// How many processes are attached or detached at the same time
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PARALLEL,
          value_parser = clap::value_parser!(u16).range(1..).map(usize::from), help_heading = options::H_ADVANCED)]
    pub parallel: usize,
    /// More log output from rocprof-attach itself (-v info, -vv debug, -vvv trace)
    #[arg(short = 'v', long, action = ArgAction::Count, help_heading = options::H_ADVANCED)]
    pub verbose: u8,
    /// Only errors from rocprof-attach itself (no warnings, no progress)
    #[arg(short = 'q', long, conflicts_with = "verbose", help_heading = options::H_ADVANCED)]
    pub quiet: bool,
}

/// Subcommands working on rocpd databases; their arguments are handed over unparsed.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Convert rocpd databases to csv, json, pftrace or otf2 (see `rocprof-attach convert --help`)
    #[command(disable_help_flag = true)]
    Convert {
        /// Arguments of the subcommand.
        #[arg(num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Print a summary of rocpd databases (see `rocprof-attach summary --help`)
    #[command(disable_help_flag = true)]
    Summary {
        /// Arguments of the subcommand.
        #[arg(num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

/// What to do, as decided from the command line.
#[derive(Debug)]
pub enum Action {
    /// Print this text on stdout and exit 0 (`--help`, `--version`).
    Print(String),
    /// Run `convert` or `summary`: the arguments starting at the subcommand name.
    Delegate(Vec<OsString>),
    /// `--check`: preflight these processes only.
    Check {
        /// Processes to check.
        pids: Vec<i32>,
        /// Tool library given with `-t` or `ROCPROF_ATTACH_TOOL_LIBRARY`.
        tool_library: Option<String>,
    },
    /// `--list`: print attachable processes matching the selection.
    List(TargetSelection),
    /// Attach, profile, detach.
    Attach(Box<AttachRequest>),
}

/// The parsed command line.
#[derive(Debug)]
pub struct Invocation {
    /// What to do.
    pub action: Action,
    /// Warnings to show the user before doing it.
    pub warnings: Vec<String>,
    /// `-v` count.
    pub verbose: u8,
    /// `-q`.
    pub quiet: bool,
}

/// Turn a clap error into one line: the message, the possible values and the tip, without the
/// usage block.
fn condense_clap_error(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        parts.push(l.strip_prefix("error: ").unwrap_or(l).to_string());
    }
    let mut msg = parts.join("; ");
    if msg.is_empty() {
        msg = "invalid command line".to_string();
    }
    format!("{msg} (see `rocprof-attach --help`)")
}

/// Where a value came from, for error messages.
#[derive(Clone, Copy)]
enum Source {
    Cli(&'static str),
    Env(&'static str),
}

impl Source {
    fn describe(self) -> String {
        match self {
            Source::Cli(opt) => opt.to_string(),
            Source::Env(var) => format!("{var} (environment)"),
        }
    }
}

/// Parse one PID token: a positive decimal integer that fits a Linux PID.
fn parse_pid(tok: &str, src: Source) -> Result<i32> {
    let t = tok.trim();
    let from = src.describe();
    if t.is_empty() {
        return Err(Error::usage(format!(
            "empty PID in {from}: give positive process ids separated by commas, e.g. -p 1234,1240"
        )));
    }
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::usage(format!(
            "invalid PID '{t}' in {from}: a PID is a positive whole number such as 1234 (find it with `pgrep -f NAME`, or select processes with --match REGEX)"
        )));
    }
    if t.starts_with('-') && digits.bytes().any(|b| b != b'0') {
        return Err(Error::usage(format!(
            "invalid PID '{t}' in {from}: PIDs are positive; give the process id shown by `ps` or `pgrep`"
        )));
    }
    match digits.parse::<u64>() {
        Ok(0) => Err(Error::usage(format!(
            "invalid PID '{t}' in {from}: PID 0 is not a process; give the process id shown by `ps` or `pgrep`"
        ))),
        Ok(v) if v <= i32::MAX as u64 => Ok(v as i32),
        _ => Err(Error::usage(format!(
            "PID '{t}' in {from} is out of range (at most {}): check the number with `ps -p PID`",
            i32::MAX
        ))),
    }
}

/// Parse a PID list (comma-separated) into `out`, skipping duplicates.
fn parse_pid_list(text: &str, src: Source, out: &mut Vec<i32>) -> Result<()> {
    for tok in text.split(',') {
        let pid = parse_pid(tok, src)?;
        if !out.contains(&pid) {
            out.push(pid);
        }
    }
    Ok(())
}

/// Parse the attach duration: a positive whole number of milliseconds.
fn parse_duration(text: &str, src: Source) -> Result<Duration> {
    let t = text.trim();
    let from = src.describe();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: give a whole number of milliseconds, e.g. 5000 for 5 s (leave it out to detach on Enter or Ctrl-C)"
        )));
    }
    if t.starts_with('-') && digits.bytes().any(|b| b != b'0') {
        return Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: the duration must be positive, e.g. 5000 for 5 s"
        )));
    }
    match digits.parse::<u64>() {
        Ok(0) => Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: it must be at least 1 ms (leave it out to detach on Enter or Ctrl-C)"
        ))),
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => Err(Error::usage(format!(
            "duration '{t}' in {from} is too large (at most {} ms): give a smaller number of milliseconds",
            u64::MAX
        ))),
    }
}

/// Parse a boolean environment fallback strictly.
fn env_bool(env: &EnvList, var: &'static str) -> Result<Option<bool>> {
    match env.get(var).map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse_bool(v)
            .map(Some)
            .map_err(|e| Error::usage(format!("{var} (environment): {e}"))),
    }
}

/// A non-empty environment value.
fn env_nonempty<'a>(env: &'a EnvList, var: &str) -> Option<&'a str> {
    env.get(var).filter(|v| !v.trim().is_empty())
}

/// Validate a tool library string (`-t` or `ROCPROF_ATTACH_TOOL_LIBRARY`).
fn check_tool_library(t: &str, src: Source) -> Result<()> {
    if t.split(':').all(|p| p.trim().is_empty()) {
        return Err(Error::usage(format!(
            "{} is empty: give the tool library path, e.g. /opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so, or leave it out to use the target's own",
            src.describe()
        )));
    }
    Ok(())
}

/// Parse the command line (`args[0]` is the program name) against `env` (the environment we run
/// in; fallbacks are read from it and the request's environment starts from it) and `cwd` (the
/// default output directory). Pure: touches no process and no file except `-E` and the output
/// directory check.
pub fn parse_request<I, T>(args: I, env: &EnvList, cwd: &Path) -> Result<Invocation>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let quick = |action| Invocation {
        action,
        warnings: Vec::new(),
        verbose: 0,
        quiet: false,
    };
    // Subcommands first: their arguments are not ours to parse.
    if let Some(first) = args.get(1) {
        if first == "convert" || first == "summary" {
            return Ok(quick(Action::Delegate(args[1..].to_vec())));
        }
    }
    let matches = match Cli::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    Ok(quick(Action::Print(e.render().to_string())))
                }
                _ => Err(Error::usage(condense_clap_error(&e))),
            };
        }
    };
    let mut cli =
        Cli::from_arg_matches(&matches).map_err(|e| Error::usage(condense_clap_error(&e)))?;
    cli.profiler.fill_pmc_groups(&matches);
    if let Some(cmd) = cli.command.take() {
        let (name, rest) = match cmd {
            Command::Convert { args } => ("convert", args),
            Command::Summary { args } => ("summary", args),
        };
        let mut v = vec![OsString::from(name)];
        v.extend(rest);
        return Ok(quick(Action::Delegate(v)));
    }
    let mut inv = build(cli, env, cwd)?;
    if inv.quiet {
        inv.warnings.clear();
    }
    Ok(inv)
}

fn build(cli: Cli, base_env: &EnvList, cwd: &Path) -> Result<Invocation> {
    let mut warnings = Vec::new();
    let done = |action, warnings| Invocation {
        action,
        warnings,
        verbose: cli.verbose,
        quiet: cli.quiet,
    };

    // ---------------------------------------------------------------- target selection
    let mut pids = Vec::new();
    for v in &cli.pid {
        parse_pid_list(v, Source::Cli("-p/--pid/--attach"), &mut pids)?;
    }
    let given = [
        !pids.is_empty(),
        cli.match_regex.is_some(),
        cli.job.is_some(),
        cli.all,
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(Error::usage(
            "-p/--pid, --match, --job and --all select processes in different ways: use only one of them",
        ));
    }
    let mut selection = if !pids.is_empty() {
        Some(TargetSelection::Pids(pids.clone()))
    } else if let Some(re) = &cli.match_regex {
        if let Err(e) = regex::Regex::new(re) {
            let detail = e.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string();
            return Err(Error::usage(format!(
                "--match '{re}' is not a valid regular expression ({}): quote it for the shell and escape special characters",
                last.strip_prefix("error: ").unwrap_or(&last)
            )));
        }
        Some(TargetSelection::Match(re.clone()))
    } else if let Some(job) = &cli.job {
        if job.trim().is_empty() {
            return Err(Error::usage(
                "--job is empty: give the job id, e.g. --job $SLURM_JOB_ID",
            ));
        }
        Some(TargetSelection::Job(job.trim().to_string()))
    } else if cli.all {
        Some(TargetSelection::All)
    } else {
        None
    };
    if selection.is_none() && !cli.list {
        if let Some(v) = env_nonempty(base_env, "ROCPROF_ATTACH_PID") {
            parse_pid_list(v, Source::Env("ROCPROF_ATTACH_PID"), &mut pids)?;
            selection = Some(TargetSelection::Pids(pids.clone()));
        }
    }

    let tool_library = match &cli.attach_tool_library {
        Some(t) => {
            check_tool_library(t, Source::Cli("-t/--attach-tool-library"))?;
            Some(t.clone())
        }
        None => env_nonempty(base_env, "ROCPROF_ATTACH_TOOL_LIBRARY").map(str::to_string),
    };

    if cli.list {
        return Ok(done(
            Action::List(selection.unwrap_or(TargetSelection::All)),
            warnings,
        ));
    }
    let Some(selection) = selection else {
        return Err(Error::usage(
            "no target process given: pass -p PID (or --match REGEX, --job ID, --all), or set ROCPROF_ATTACH_PID",
        ));
    };
    if cli.check {
        let TargetSelection::Pids(pids) = selection else {
            return Err(Error::usage(
                "--check works on explicit processes: pass -p PID (use --list to see what --match/--job/--all select)",
            ));
        };
        return Ok(done(Action::Check { pids, tool_library }, warnings));
    }

    // ---------------------------------------------------------------- attach settings
    let duration = match &cli.attach_duration_msec {
        Some(d) => Some(parse_duration(d, Source::Cli("--attach-duration-msec"))?),
        None => match env_nonempty(base_env, "ROCPROF_ATTACH_DURATION") {
            Some(d) => Some(parse_duration(d, Source::Env("ROCPROF_ATTACH_DURATION"))?),
            None => None,
        },
    };
    let children = match cli.attach_children {
        Some(c) => c,
        None => env_bool(base_env, "ROCPROF_ATTACH_CHILDREN")?.unwrap_or(true),
    };
    let sync_output = match cli.attach_sync_output {
        Some(s) => s,
        None => env_bool(base_env, "ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC")?.unwrap_or(true),
    };

    // ---------------------------------------------------------------- environment
    let mut env = base_env.clone();
    if let Some(v) = env.remove("ROCP_TOOL_LIBRARIES") {
        warnings.push(format!(
            "ignoring ROCP_TOOL_LIBRARIES={v} in attach mode. Use --attach-tool-library or ROCPROF_ATTACH_TOOL_LIBRARY to attach a custom tool library"
        ));
    }
    warnings.extend(cli.profiler.apply_in(&mut env, cwd)?);
    let output_dir = env
        .get("ROCPROF_OUTPUT_PATH")
        .unwrap_or_default()
        .to_string();
    options::check_output_dir(&output_dir)?;
    env.set(
        "ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC",
        if sync_output { "1" } else { "0" },
    );
    if let TargetSelection::Pids(p) = &selection {
        let list: Vec<String> = p.iter().map(i32::to_string).collect();
        env.set("ROCPROF_ATTACH_PID", &list.join(","));
    }
    if let Some(d) = duration {
        env.set("ROCPROF_ATTACH_DURATION", &d.as_millis().to_string());
    }
    env.set("ROCPROF_ATTACH_CHILDREN", if children { "1" } else { "0" });
    if let Some(t) = &tool_library {
        env.set("ROCPROF_ATTACH_TOOL_LIBRARY", t);
    }

    let output_file = env
        .get("ROCPROF_OUTPUT_FILE_NAME")
        .filter(|f| !f.is_empty())
        .unwrap_or(DEFAULT_OUTPUT_FILE)
        .to_string();
    let formats = options::formats_of(env.get("ROCPROF_OUTPUT_FORMAT").unwrap_or(""))
        .map_err(|e| Error::usage(format!("-f/--output-format: {e}")))?;
    let request = AttachRequest {
        targets: selection,
        children,
        duration,
        sync_output,
        tool_library,
        output_dir: PathBuf::from(output_dir),
        output_file,
        formats,
        summary: cli.profiler.summary == Some(true),
        parallelism: cli.parallel,
        env,
    };
    Ok(done(Action::Attach(Box::new(request)), warnings))
}

/// Install the tracing subscriber for our own logs on stderr: `ROCPROF_ATTACH_LOG` (an env-filter
/// directive such as `debug`) wins, else `-q` means errors only and each `-v` adds a level above
/// the default `warn`.
pub fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = std::env::var("ROCPROF_ATTACH_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Parse the process's arguments, run the command, return the process exit code.
pub fn main() -> i32 {
    main_with_args(std::env::args_os())
}

/// Like [`main`] with explicit arguments (`args[0]` is the program name); used by the demo.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let env = EnvList::from_process();
    let inv = match parse_request(args, &env, &cwd) {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!(
                "rocprof-attach: error: {}",
                e.to_string().replace('\n', " ")
            );
            return e.exit_code() as i32;
        }
    };
    init_logging(inv.verbose, inv.quiet);
    for w in &inv.warnings {
        eprintln!("rocprof-attach: warning: {w}");
    }
    let code = match inv.action {
        Action::Print(text) => {
            print!("{text}");
            ExitCode::Success
        }
        Action::Delegate(args) => crate::rocpd::cli_main(&args),
        Action::Check { pids, tool_library } => {
            let mut worst = ExitCode::Success;
            for pid in pids {
                let c = crate::preflight::run_check(pid, tool_library.as_deref());
                if worst == ExitCode::Success {
                    worst = c;
                }
            }
            worst
        }
        Action::List(selection) => crate::preflight::run_list(&selection),
        Action::Attach(req) => crate::session::run(*req),
    };
    code as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_tokens() {
        let s = Source::Cli("-p");
        assert_eq!(parse_pid("1234", s).unwrap(), 1234);
        assert_eq!(parse_pid(" 7 ", s).unwrap(), 7);
        for bad in [
            "",
            "abc",
            "-5",
            "0",
            "-0",
            "99999999999",
            "2147483648",
            "12x",
        ] {
            assert!(parse_pid(bad, s).is_err(), "{bad}");
        }
        assert_eq!(parse_pid("2147483647", s).unwrap(), i32::MAX);
    }

    #[test]
    fn durations() {
        let s = Source::Env("ROCPROF_ATTACH_DURATION");
        assert_eq!(
            parse_duration("1500", s).unwrap(),
            Duration::from_millis(1500)
        );
        for bad in ["", "x", "-1", "0", "1.5", "99999999999999999999999"] {
            let e = parse_duration(bad, s).unwrap_err().to_string();
            assert!(e.contains("ROCPROF_ATTACH_DURATION"), "{e}");
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
