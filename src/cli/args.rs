//! The command line: parse and validate it into an [`Action`] (an [`AttachRequest`] for a
//! session).
//!
//! Parsing is a pure function, [`parse_request`], of the arguments, the environment and the working
//! directory, so tests can check the whole option mapping without touching any process.
//!
//! Every command-line problem is an [`Error::Usage`] (exit code 2) with a one-line message that
//! says how to fix it, printed as `rocprof-attach: error: <message>`.

use crate::attach::envbuf::EnvList;
use crate::attach::options::{self, parse_bool, ProfilerOptions, Switch, DEFAULT_OUTPUT_FILE};
use crate::attach::session::{AttachRequest, DEFAULT_PARALLEL};
use crate::attach::targets::TargetSelection;
use crate::attach::toolsearch::absolutize;
pub use crate::cli::commands::{Command, CompletionShell, SUBCOMMANDS};
pub use crate::cli::docs::{completions, man_page};
use crate::cli::error::{Error, Result};
use crate::cli::fallbacks::{self, Fallback};
use crate::cli::help::{known_mistake, AFTER_HELP, AFTER_LONG_HELP};
use crate::cli::install::InstallArgs;
use crate::cli::rocpd_args::{ConvertArgs, QueryArgs, SummaryArgs};
pub use crate::cli::values::{parse_duration, Source, MAX_DURATION};
use crate::cli::values::{parse_output_timeout, parse_pid_list};
use clap::builder::TypedValueParser;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const H_ATTACH: &str = "Attach";
const H_TARGET: &str = "Target selection";

/// The command line of `rocprof-attach`.
#[derive(Debug, Parser)]
#[command(
    name = "rocprof-attach",
    version,
    about = "Attach AMD's GPU profiler (rocprofv3) to running processes, profile them, and detach",
    long_about = "Attach AMD's GPU profiler (rocprofv3) to running processes, profile them, and detach.\n\n\
                  rocprof-attach is a drop-in replacement for `rocprofv3 --attach PID`: it sends the target the \
                  same ROCPROF_* settings, makes its tool library write the usual output, and leaves the target \
                  running exactly as it was.",
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
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
    /// Only check whether the selected processes can be attached; changes nothing in them
    #[arg(long, help_heading = H_ATTACH)]
    pub check: bool,
    /// Finish a session left active in the processes given with -p (after exit code 11, or when
    /// rocprof-attach was killed with its agent): detach them and list their files, e.g.
    /// `rocprof-attach --detach -p 1234`
    #[arg(long, help_heading = H_ATTACH, conflicts_with_all = ["check", "list"])]
    pub detach: bool,
    /// List the metrics the GPUs of a CUDA process offer (name, type, unit, description, the
    /// rocprofv3 names --pmc maps to each), e.g. `rocprof-attach -L -p 1234`; enables nothing.
    /// For a ROCm process run `rocprofv3 --list-avail`
    #[arg(short = 'L', long, help_heading = H_ATTACH, conflicts_with_all = ["check", "list", "detach"])]
    pub list_avail: bool,
    /// Print one JSON report on stdout at the end (session, --list, --check, -L); see docs/json.md
    #[arg(long, help_heading = H_ATTACH)]
    pub json: bool,
    /// Detach after this long: 500ms, 10s, 2m, 1h; a bare number is milliseconds (default: when
    /// Enter or Ctrl-C is pressed)
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, help_heading = H_ATTACH)]
    pub attach_duration_msec: Option<String>,
    /// Also attach to the descendants of each process [default: true]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, help_heading = H_ATTACH)]
    pub attach_children: Option<bool>,
    /// Write the output files before detaching returns, so they are complete when rocprof-attach
    /// exits [default: true, unlike rocprofv3]; false lets the target write them in the background
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, help_heading = H_ATTACH)]
    pub attach_sync_output: Option<bool>,
    /// Which profiler each process gets: auto (ROCm when it has the rocp-bg-attach listener, else
    /// CUDA through CUPTI when it maps libcuda.so.1), rocm or cuda; see docs/cuda.md
    /// [default: auto]
    #[arg(long, value_name = "BACKEND", value_enum, help_heading = H_ATTACH)]
    pub backend: Option<crate::attach::cuda::Backend>,
    /// Tool library (or colon-separated list) the target loads, as seen by the target
    /// (default: the target installation's librocprofiler-sdk-tool.so)
    #[arg(short = 't', long, value_name = "PATH[:PATH...]", help_heading = H_ATTACH)]
    pub attach_tool_library: Option<String>,

    // ------------------------------------------------------------------ target selection
    /// Process(es) to attach to; repeat the option or give a comma-separated list
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
    /// How long a detach waits for a stopped target (state T) to continue before giving up
    /// (the profiler then stays active in it) [default: 10s]
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, help_heading = options::H_ADVANCED)]
    pub stopped_timeout: Option<String>,
    /// With --attach-sync-output=false: how long to wait after the detach for the tool to write
    /// its output in the background (0: do not wait; the files then come later) [default: 30s]
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, help_heading = options::H_ADVANCED)]
    pub output_timeout: Option<String>,
    /// How many processes are attached or detached at the same time
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PARALLEL,
          value_parser = clap::value_parser!(u16).range(1..).map(usize::from), help_heading = options::H_ADVANCED)]
    pub parallel: usize,
    /// More log output from rocprof-attach itself: -v the plan and every ROCP* pair sent, -vv each
    /// step, -vvv everything
    #[arg(short = 'v', long, action = ArgAction::Count, help_heading = options::H_ADVANCED)]
    pub verbose: u8,
    /// Only errors on stderr (no warnings, no progress, no status line)
    #[arg(short = 'q', long, conflicts_with = "verbose", help_heading = options::H_ADVANCED)]
    pub quiet: bool,
}

/// What to do, as decided from the command line.
#[derive(Debug)]
pub enum Action {
    /// Print this text on stdout and exit 0 (`--help`, `--version`).
    Print(String),
    /// Run `convert`.
    Convert(Box<ConvertArgs>),
    /// Run `summary`.
    Summary(Box<SummaryArgs>),
    /// Run `top`.
    Top(Box<crate::cli::top::TopConfig>),
    /// Run `query`.
    Query(Box<QueryArgs>),
    /// Run `install-library`.
    InstallLibrary(InstallArgs),
    /// `--check`: preflight the selected processes only.
    Check {
        /// Processes to check.
        selection: TargetSelection,
        /// Tool library given with `-t` or `ROCPROF_ATTACH_TOOL_LIBRARY`.
        tool_library: Option<String>,
        /// The output directory a session would use (checked as each target's user).
        output_dir: Option<PathBuf>,
        /// The profiler's environment a session would send (a reattach must keep its settings).
        env: Box<EnvList>,
    },
    /// `--detach`: finish the sessions left active in these processes.
    Detach {
        /// Processes given with `-p`.
        pids: Vec<i32>,
        /// How long to wait for a stopped process to continue.
        stopped_wait: std::time::Duration,
        /// `-d`: where to look for the session's files instead of the directory it recorded.
        output_dir: Option<PathBuf>,
    },
    /// `--list`: print attachable processes matching the selection.
    List(TargetSelection),
    /// `-L`/`--list-avail`: list the metrics of this CUDA process's GPUs.
    ListAvail(i32),
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
    /// `--json`: one JSON document on stdout at the end.
    pub json: bool,
}

/// Turn a clap error into one line: the message, the possible values and the tip, without the
/// usage block, and the `--help` to read (the subcommand's for an error in a subcommand). The one
/// place where clap's errors are condensed, for rocprof-attach and every subcommand.
fn condense_clap_error(err: &clap::Error, args: &[OsString]) -> String {
    // The subcommand the error is in, as far as clap gets without the errors.
    let sub = command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_string));
    if sub.is_none() {
        if let Some(m) = known_mistake(err) {
            return m;
        }
    }
    if let Some(m) = crate::cli::commands::missing_shell(err) {
        return m;
    }
    let text = err.render().to_string();
    let mut msg = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if !msg.is_empty() {
            msg.push_str(if msg.ends_with(':') { " " } else { "; " });
        }
        msg.push_str(l.strip_prefix("error: ").unwrap_or(l));
    }
    if msg.is_empty() {
        msg = "invalid command line".to_string();
    }
    match sub {
        Some(sub) => format!("{msg} (see `rocprof-attach {sub} --help`)"),
        None => format!("{msg} (see `rocprof-attach --help`)"),
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
        json: false,
    };
    // What `command` adds changes only the help text: a command line that parses does without
    // it (about 130,000 instructions less per run); help, versions and errors are rendered by
    // the whole command.
    let parsed = Cli::command()
        .try_get_matches_from(&args)
        .or_else(|_| command().try_get_matches_from(&args));
    let matches = match parsed {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    Ok(quick(Action::Print(e.render().to_string())))
                }
                _ => Err(Error::usage(condense_clap_error(&e, &args))),
            };
        }
    };
    let mut cli = Cli::from_arg_matches(&matches)
        .map_err(|e| Error::usage(condense_clap_error(&e, &args)))?;
    if let Some(cmd) = cli.command.take() {
        let action = match cmd {
            Command::Convert(a) => Action::Convert(Box::new(a)),
            Command::Summary(a) => Action::Summary(Box::new(a)),
            Command::Top(a) => Action::Top(Box::new(a.config(env, cwd)?)),
            Command::Query(a) => Action::Query(Box::new(a)),
            Command::InstallLibrary(a) => Action::InstallLibrary(a),
            Command::Completions { shell } => Action::Print(completions(shell)),
            Command::Man { subcommand } => Action::Print(man_page(subcommand.as_deref())?),
        };
        return Ok(quick(action));
    }
    let mut inv = build(cli, env, cwd)?;
    if inv.quiet {
        inv.warnings.clear();
    }
    Ok(inv)
}

/// The clap command: `-h` shows the everyday options (the rest of rocprofv3's options are in
/// `--help`).
pub fn command() -> clap::Command {
    let long_only = [
        options::H_EXTENDED,
        options::H_FILTER,
        options::H_SUMMARY,
        options::H_ADVANCED,
    ];
    fallbacks::name_in_help(Cli::command()).mut_args(|a| {
        let hide = a.get_help_heading().is_some_and(|h| long_only.contains(&h));
        let everyday = matches!(a.get_id().as_str(), "verbose" | "quiet");
        a.hide_short_help(hide && !everyday)
    })
}

/// What the command line selects: `-p`, `--match`, `--job` or `--all` (at most one), else
/// `ROCPROF_ATTACH_PID` (not for `--list`).
fn select_targets(cli: &Cli, base_env: &EnvList) -> Result<Option<TargetSelection>> {
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
    let selection = if !pids.is_empty() {
        Some(TargetSelection::Pids(pids))
    } else if let Some(re) = &cli.match_regex {
        check_match_regex(re)?;
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
    if selection.is_some() || cli.list {
        return Ok(selection);
    }
    let var = Fallback::Pid.var();
    match env_nonempty(base_env, var) {
        Some(v) => {
            let mut pids = Vec::new();
            parse_pid_list(v, Source::Env(var), &mut pids)?;
            Ok(Some(TargetSelection::Pids(pids)))
        }
        None => Ok(None),
    }
}

/// Refuse a `--match` value that is not a regular expression, with the reason.
pub(crate) fn check_match_regex(re: &str) -> Result<()> {
    let Err(e) = regex::Regex::new(re) else {
        return Ok(());
    };
    let detail = e.to_string();
    let last = detail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    Err(Error::usage(format!(
        "--match '{re}' is not a valid regular expression ({}): quote it for the shell and escape special characters",
        last.strip_prefix("error: ").unwrap_or(&last)
    )))
}

/// `-t`, else its fallback, made absolute against `cwd`.
fn tool_library(cli: &Cli, base_env: &EnvList, cwd: &Path) -> Result<Option<String>> {
    match &cli.attach_tool_library {
        Some(t) => {
            check_tool_library(t, Source::Cli("-t/--attach-tool-library"))?;
            Ok(Some(absolutize(t, cwd, "-t/--attach-tool-library")?))
        }
        None => {
            let var = Fallback::ToolLibrary.var();
            Ok(env_nonempty(base_env, var)
                .map(|t| absolutize(t, cwd, var))
                .transpose()?)
        }
    }
}

/// The session settings of ours: `--attach-duration-msec`, `--attach-children` and
/// `--attach-sync-output`, each else its fallback.
struct Settings {
    duration: Option<std::time::Duration>,
    children: bool,
    sync_output: bool,
}

impl Settings {
    /// `--attach-duration-msec`, else its fallback.
    fn duration(cli: &Cli, base_env: &EnvList) -> Result<Option<std::time::Duration>> {
        let var = Fallback::Duration.var();
        match &cli.attach_duration_msec {
            Some(d) => Ok(Some(parse_duration(
                d,
                Source::Cli("--attach-duration-msec"),
            )?)),
            None => env_nonempty(base_env, var)
                .map(|d| parse_duration(d, Source::Env(var)))
                .transpose(),
        }
    }

    /// The settings, with the duration already read (the errors come in the order of the
    /// options: the duration, the two timeouts, then these).
    fn read(
        cli: &Cli,
        base_env: &EnvList,
        duration: Option<std::time::Duration>,
    ) -> Result<Settings> {
        let children = match cli.attach_children {
            Some(c) => c,
            None => env_bool(base_env, Fallback::Children.var())?.unwrap_or(true),
        };
        let sync_output = match cli.attach_sync_output {
            Some(s) => s,
            None => env_bool(base_env, Fallback::SyncOutput.var())?.unwrap_or(true),
        };
        Ok(Settings {
            duration,
            children,
            sync_output,
        })
    }

    /// Our own `ROCPROF_ATTACH_*` variables, sent with the options' variables.
    fn apply(&self, env: &mut EnvList, selection: &TargetSelection, tool_library: Option<&str>) {
        env.set(
            Fallback::SyncOutput.var(),
            if self.sync_output { "1" } else { "0" },
        );
        if let TargetSelection::Pids(p) = selection {
            let list: Vec<String> = p.iter().map(i32::to_string).collect();
            env.set(Fallback::Pid.var(), &list.join(","));
        }
        if let Some(d) = self.duration {
            env.set(Fallback::Duration.var(), &d.as_millis().to_string());
        }
        env.set(
            Fallback::Children.var(),
            if self.children { "1" } else { "0" },
        );
        if let Some(t) = tool_library {
            env.set(Fallback::ToolLibrary.var(), t);
        }
    }
}

/// The environment a session sends: ours without `ROCP_TOOL_LIBRARIES` (with a warning), with
/// the rocprofv3 options applied; and its output directory, checked.
fn profiler_env(
    profiler: &ProfilerOptions,
    base_env: &EnvList,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> Result<(EnvList, String)> {
    let mut env = base_env.clone();
    if let Some(v) = env.remove("ROCP_TOOL_LIBRARIES") {
        warnings.push(format!(
            "ignoring ROCP_TOOL_LIBRARIES={v} in attach mode. Use --attach-tool-library or ROCPROF_ATTACH_TOOL_LIBRARY to attach a custom tool library"
        ));
    }
    warnings.extend(profiler.apply_in(&mut env, cwd)?);
    let output_dir = env
        .get("ROCPROF_OUTPUT_PATH")
        .unwrap_or_default()
        .to_string();
    options::check_output_dir(&output_dir)?;
    Ok((env, output_dir))
}

/// `--detach`: finish the session left in the processes given with `-p`.
fn detach_action(cli: &Cli, selection: Option<TargetSelection>, cwd: &Path) -> Result<Action> {
    let Some(TargetSelection::Pids(pids)) = selection else {
        return Err(Error::usage(
            "--detach finishes the session left active in the processes given with -p: pass -p PID \
             (e.g. rocprof-attach --detach -p 1234)",
        ));
    };
    let stopped_wait = stopped_wait(cli)?;
    let output_dir = match cli.profiler.values.output_directory.as_deref() {
        Some("") => {
            return Err(Error::usage(
                "-d/--output-directory is empty: give the directory the session wrote to, or leave the \
                 option out to use the one it recorded",
            ))
        }
        Some(d) => Some(PathBuf::from(options::absolute_output_dir(d, cwd))),
        None => None,
    };
    Ok(Action::Detach {
        pids,
        stopped_wait,
        output_dir,
    })
}

/// `-L`/`--list-avail`: the one process given with `-p` whose GPUs' metrics to list.
fn list_avail_action(selection: Option<TargetSelection>) -> Result<Action> {
    match selection {
        Some(TargetSelection::Pids(pids)) if pids.len() == 1 => Ok(Action::ListAvail(pids[0])),
        Some(TargetSelection::Pids(_)) => Err(Error::usage(
            "-L/--list-avail lists the metrics of one process at a time: give one PID (processes on the \
             same GPUs offer the same metrics)",
        )),
        _ => Err(Error::usage(format!(
            "-L/--list-avail lists the metrics of a running CUDA process's GPUs: pass -p PID (e.g. \
             rocprof-attach -L -p 1234); without a process, {}",
            crate::attach::cuda::catalog::NOT_CUDA
        ))),
    }
}

/// `--stopped-timeout`: how long to wait for a stopped process to continue.
fn stopped_wait(cli: &Cli) -> Result<std::time::Duration> {
    match &cli.stopped_timeout {
        Some(d) => parse_duration(d, Source::Cli("--stopped-timeout")),
        None => Ok(crate::attach::session::DEFAULT_STOPPED_WAIT),
    }
}

/// The output file name and formats the profiler's environment asks for.
fn output_names(env: &EnvList) -> Result<(String, Vec<crate::format::OutputFormat>)> {
    let output_file = env
        .get("ROCPROF_OUTPUT_FILE_NAME")
        .filter(|f| !f.is_empty())
        .unwrap_or(DEFAULT_OUTPUT_FILE)
        .to_string();
    let formats = options::formats_of(env.get("ROCPROF_OUTPUT_FORMAT").unwrap_or(""))
        .map_err(|e| Error::usage(format!("-f/--output-format: {e}")))?;
    Ok((output_file, formats))
}

fn build(cli: Cli, base_env: &EnvList, cwd: &Path) -> Result<Invocation> {
    let mut warnings = Vec::new();
    if let Some(b) = cli.backend {
        // Every preflight of this run (session, --check, --list) follows it.
        crate::attach::preflight::backend::set_backend(b);
    }
    let done = |action, warnings| Invocation {
        action,
        warnings,
        verbose: cli.verbose,
        quiet: cli.quiet,
        json: cli.json,
    };
    let selection = select_targets(&cli, base_env)?;
    if cli.detach {
        return Ok(done(detach_action(&cli, selection, cwd)?, warnings));
    }
    if cli.list_avail {
        return Ok(done(list_avail_action(selection)?, warnings));
    }
    let tool_library = tool_library(&cli, base_env, cwd)?;
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
    let duration = Settings::duration(&cli, base_env)?;
    let stopped_wait = stopped_wait(&cli)?;
    let output_wait = parse_output_timeout(cli.output_timeout.as_deref())?;
    let settings = Settings::read(&cli, base_env, duration)?;

    let (mut env, output_dir) = profiler_env(&cli.profiler, base_env, cwd, &mut warnings)?;
    options::check_environment(&env)?;
    if cli.check {
        // Nothing is recorded by a check: what a session would record is not its concern.
        warnings.retain(|w| !w.starts_with("no tracing or counter option"));
        return Ok(done(
            Action::Check {
                selection,
                tool_library,
                output_dir: Some(PathBuf::from(output_dir)),
                env: Box::new(env),
            },
            warnings,
        ));
    }
    settings.apply(&mut env, &selection, tool_library.as_deref());
    let (output_file, formats) = output_names(&env)?;
    let request = AttachRequest {
        targets: selection,
        children: settings.children,
        duration: settings.duration,
        sync_output: settings.sync_output,
        tool_library,
        output_dir: PathBuf::from(output_dir),
        output_file,
        formats,
        summary: cli.profiler.switches.on(Switch::Summary),
        parallelism: cli.parallel,
        stopped_wait,
        output_wait,
        switches: cli.profiler.switches,
        env,
    };
    Ok(done(Action::Attach(Box::new(request)), warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }
}
