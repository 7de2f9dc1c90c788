//! `rocprof-attach top`: what the GPU of running processes does right now, refreshed every
//! interval (docs/top.md).
//!
//! * this module: the command line ([`TopArgs`] → [`TopConfig`]) and the refresh loop;
//! * [`watch`]: the sessions (one long one for CUDA, one per refresh for ROCm) and their reads;
//! * [`model`]: the statistics per process, interval and since the start, and the sorted rows;
//! * [`view`]: the full-screen view (ratatui), [`term`]: its terminal;
//! * [`batch`]: the plain table (`--batch`, no terminal) and the JSON lines (`--json`).

pub mod batch;
pub mod model;
pub mod spm;
pub mod term;
pub mod view;
pub mod watch;

use crate::attach::envbuf::EnvList;
use crate::attach::session::{AttachRequest, Event};
use crate::attach::targets::TargetSelection;
use crate::cli::error::{Error, Result};
use crate::cli::render::Ui;
use crate::cli::stdio;
use crate::cli::values::{parse_duration, parse_pid_list, Source};
use crate::exit::ExitCode;
use model::Model;
use ratatui::crossterm::event::{self, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use watch::{Messages, Watch};

/// The shortest refresh interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Examples shown after `rocprof-attach top --help`.
pub const TOP_EXAMPLES: &str = "Examples:
  rocprof-attach top -p 1234                    watch one process (q or Ctrl-C detaches)
  rocprof-attach top --match train.py           every rank of a job, a row per rank
  rocprof-attach top -p 1234 --api              also the slowest API calls
  rocprof-attach top -p 1234 --spm              also SM activity sampled every 1 ms (CUDA)
  rocprof-attach top -p 1234 --batch -n 10      ten plain tables, one a second, then detach
  rocprof-attach top -p 1234 --json -d prof     JSON lines; keep the database under prof/";

/// The command line of `rocprof-attach top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Process(es) to watch; repeat the option or give a comma-separated list
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PID[,PID...]",
        allow_hyphen_values = true
    )]
    pub pid: Vec<String>,
    /// Every process of ours whose command line matches this regular expression
    #[arg(long = "match", value_name = "REGEX")]
    pub match_regex: Option<String>,
    /// Every process whose environment carries this job id (SLURM_JOB_ID, ...)
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// Every attachable process on this node
    #[arg(long)]
    pub all: bool,
    /// Refresh this often: 500ms, 1s, 2s; a bare number is milliseconds
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    /// Stop (and detach) after this many refreshes
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// A plain table each interval, as `top -b` (the default when stdout is not a terminal)
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// One JSON object per interval on stdout (docs/json.md)
    #[arg(long, conflicts_with = "batch")]
    pub json: bool,
    /// Also trace the runtime API calls (HIP, CUDA) and show the slowest
    #[arg(long)]
    pub api: bool,
    /// Also sample GPU counters over time (CUDA: PM sampling, SM activity by default; names as
    /// for --spm of a session) and show each interval's mean, min, max and last value
    #[arg(long, value_name = "COUNTER", num_args = 0.., value_delimiter = ',')]
    pub spm: Option<Vec<String>>,
    /// Kernel rows of each batch table
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Full kernel names instead of shortened ones (without templates and parameters)
    #[arg(long)]
    pub full_names: bool,
    /// Keep the whole database of the watched time under this directory (for convert, summary)
    #[arg(short = 'd', long = "output-directory", value_name = "DIR")]
    pub output_directory: Option<PathBuf>,
    /// The kept database's file name template (rocprofv3's placeholders: %pid%, %hostname%, ...)
    #[arg(short = 'o', long = "output-file", value_name = "NAME")]
    pub output_file: Option<String>,
    /// Which profiler each process gets: auto, rocm or cuda
    #[arg(long, value_name = "BACKEND", value_enum)]
    pub backend: Option<crate::attach::cuda::Backend>,
    /// Tool library the target loads, as seen by the target
    #[arg(short = 't', long, value_name = "PATH")]
    pub attach_tool_library: Option<String>,
}

/// How the refreshes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The full-screen view.
    Screen,
    /// A plain table per interval.
    Batch,
    /// A JSON object per interval.
    Json,
}

/// `top`, checked: what [`run`] needs.
#[derive(Debug)]
pub struct TopConfig {
    /// The processes.
    pub selection: TargetSelection,
    /// The refresh interval.
    pub interval: Duration,
    /// Stop after this many refreshes.
    pub iterations: Option<u64>,
    /// How the refreshes are shown.
    pub mode: Mode,
    /// Trace API calls too.
    pub api: bool,
    /// Sampled counters (`--spm`): the names asked for (empty: the tool's default set).
    pub spm: Option<Vec<String>>,
    /// Kernel rows of a batch table.
    pub top: usize,
    /// Full kernel names.
    pub full_names: bool,
    /// Where to keep the databases (None: a temporary directory, removed at the end).
    pub keep: Option<PathBuf>,
    /// The file name template.
    pub output_file: Option<String>,
    /// The tool library.
    pub tool_library: Option<String>,
    /// The environment the sessions start from.
    pub env: EnvList,
    /// The working directory.
    pub cwd: PathBuf,
}

impl TopArgs {
    /// Checks the command line (usage errors, exit code 2).
    pub fn config(self, env: &EnvList, cwd: &Path) -> Result<TopConfig> {
        let mut pids = Vec::new();
        for v in &self.pid {
            parse_pid_list(v, Source::Cli("-p/--pid"), &mut pids)?;
        }
        let given = [
            !pids.is_empty(),
            self.match_regex.is_some(),
            self.job.is_some(),
            self.all,
        ];
        let selection = match given.iter().filter(|g| **g).count() {
            0 => return Err(Error::usage(
                "top needs the processes to watch: pass -p PID (or --match REGEX, --job ID, --all), e.g. `rocprof-attach top -p 1234`",
            )),
            1 if !pids.is_empty() => TargetSelection::Pids(pids),
            1 if self.match_regex.is_some() => {
                let re = self.match_regex.unwrap_or_default();
                crate::cli::args::check_match_regex(&re)?;
                TargetSelection::Match(re)
            }
            1 if self.all => TargetSelection::All,
            1 => TargetSelection::Job(self.job.unwrap_or_default().trim().to_string()),
            _ => return Err(Error::usage(
                "-p/--pid, --match, --job and --all select processes in different ways: use only one of them",
            )),
        };
        if let Some(b) = self.backend {
            crate::attach::preflight::backend::set_backend(b);
        }
        let mode = if self.json {
            Mode::Json
        } else if self.batch || !std::io::stdout().is_terminal() {
            Mode::Batch
        } else {
            Mode::Screen
        };
        let keep = match (&self.output_directory, &self.output_file) {
            (Some(d), _) => Some(cwd.join(d)),
            (None, Some(_)) => Some(cwd.to_path_buf()),
            (None, None) => None,
        };
        let interval = parse_duration(&self.interval, Source::Cli("--interval"))?;
        if interval < MIN_INTERVAL {
            return Err(Error::usage(format!(
                "--interval {} is too short: the views refresh at most every 100ms (e.g. --interval 500ms)",
                self.interval
            )));
        }
        Ok(TopConfig {
            selection,
            interval,
            iterations: self.iterations,
            mode,
            api: self.api,
            spm: self.spm,
            top: self.top.max(1),
            full_names: self.full_names,
            keep,
            output_file: self.output_file,
            tool_library: self
                .attach_tool_library
                .map(|t| crate::attach::toolsearch::absolutize(&t, cwd, "-t/--attach-tool-library"))
                .transpose()?,
            env: env.clone(),
            cwd: cwd.to_path_buf(),
        })
    }
}

/// The attach request of every session of `top`: kernels and copies (and the runtime API with
/// `--api`), rocpd output under `dir`.
fn request(cfg: &TopConfig, dir: &Path) -> AttachRequest {
    let mut env = cfg.env.clone();
    env.remove("ROCP_TOOL_LIBRARIES");
    env.set("ROCPROF_KERNEL_TRACE", "1");
    env.set("ROCPROF_MEMORY_COPY_TRACE", "1");
    if cfg.api {
        env.set("ROCPROF_HIP_RUNTIME_API_TRACE", "1");
    }
    if let Some(names) = &cfg.spm {
        spm::request(&mut env, names);
    }
    env.set("ROCPROF_OUTPUT_FORMAT", "rocpd");
    env.set("ROCPROF_OUTPUT_PATH", &dir.display().to_string());
    if let Some(f) = &cfg.output_file {
        env.set("ROCPROF_OUTPUT_FILE_NAME", f);
    }
    if let Some(t) = &cfg.tool_library {
        env.set("ROCPROF_ATTACH_TOOL_LIBRARY", t);
    }
    AttachRequest::new(cfg.selection.clone(), env, &cfg.cwd)
}

/// A private directory for the databases when none is kept (removed at the end). The targets'
/// tools write into it: when every process given with `-p` belongs to one other user, it is
/// theirs (mode 0700 either way).
fn temp_dir(selection: &TargetSelection) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = std::env::temp_dir().join(format!("rocprof-attach-top.{}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    if let TargetSelection::Pids(pids) = selection {
        let uids: Vec<u32> = pids
            .iter()
            .filter_map(|p| {
                std::fs::metadata(format!("/proc/{p}"))
                    .ok()
                    .map(|m| m.uid())
            })
            .collect();
        let me = nix::unistd::geteuid().as_raw();
        if let Some(&uid) = uids.first() {
            if uid != me && uids.iter().all(|u| *u == uid) {
                let _ = nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(uid)), None);
            }
        }
    }
    Ok(dir)
}

/// Runs `top` to its end; the exit code.
pub fn run(cfg: TopConfig, ui: &Ui) -> ExitCode {
    let (dir, temp) = match &cfg.keep {
        Some(d) => (d.clone(), false),
        None => match temp_dir(&cfg.selection) {
            Ok(d) => (d, true),
            Err(e) => {
                ui.error(format!(
                    "cannot create a temporary directory for the databases: {e}; pass -d DIR"
                ));
                return ExitCode::Failure;
            }
        },
    };
    let code = watch_all(&cfg, &dir, ui);
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    code
}

/// Our own CPU time since `started` (this process, every thread), in words.
fn own_cpu(started: Instant) -> String {
    let cpu = crate::engine::ptrace::process_cpu_us() as f64 / 1e3;
    let wall = started.elapsed().as_secs_f64();
    format!(
        "top's own CPU: {cpu:.1} ms over {wall:.1} s ({:.2} % of one core)",
        cpu / 10.0 / wall.max(1e-3)
    )
}

fn watch_all(cfg: &TopConfig, dir: &Path, ui: &Ui) -> ExitCode {
    let started = Instant::now();
    // Each refresh reads the new rows; the memory one read frees serves the next.
    crate::rocpd::report::live::keep_freed_memory();
    let messages: Messages = Messages::default();
    let events = |ev: Event| {
        if let Some(m) = watch::describe(&ev) {
            if let Ok(mut v) = messages.lock() {
                v.push(m);
            }
        }
    };
    let mut w = match Watch::start(request(cfg, dir), cfg.keep.is_some(), &events) {
        Ok(w) => w,
        Err(r) => {
            for m in messages.lock().map(|v| v.clone()).unwrap_or_default() {
                ui.warn(m);
            }
            for l in r.lines {
                ui.error(l);
            }
            return r.code;
        }
    };
    let mut model = Model::new(&w.pids(), w.sampling(cfg.interval));
    model.spm = w.spm_shown();
    if let Some(m) = w.spm_not_shown() {
        if let Ok(mut v) = messages.lock() {
            v.push(m);
        }
    }
    let mut out = match Output::open(cfg) {
        Ok(o) => o,
        Err(e) => {
            ui.error(format!("cannot set up the terminal: {e}; use --batch"));
            let _ = w.stop(&events);
            return ExitCode::Failure;
        }
    };
    let why = refresh_loop(cfg, &mut w, &mut model, &mut out, &messages, &events);
    let (last, kept) = w.stop(&events);
    model.begin_interval();
    for (pid, d) in last {
        model.add(pid, d);
    }
    drain(&messages, &mut model);
    model.messages.push(own_cpu(started));
    let secs = cfg.interval.as_secs_f64();
    match out {
        Output::Screen(s, _) => drop(s),
        Output::Batch => stdio::out!("{}", batch::text(&model, secs, layout(cfg), true)),
        Output::Json => stdio::outln!("{}", batch::json(&model, secs, "final")),
    }
    if cfg.mode != Mode::Json {
        ui.info(format!(
            "top: {why}; detached after {} refreshes",
            model.iteration - 1
        ));
        for k in &kept {
            ui.info(format!("kept {}", k.display()));
        }
    }
    ExitCode::Success
}

fn layout(cfg: &TopConfig) -> batch::Layout {
    batch::Layout {
        top: cfg.top,
        full_names: cfg.full_names,
        width: if std::io::stdout().is_terminal() {
            crate::rocpd::summary::terminal_width()
        } else {
            usize::MAX
        },
    }
}

/// Where the refreshes go.
enum Output {
    Screen(Box<term::Screen>, view::ViewState),
    Batch,
    Json,
}

impl Output {
    fn open(cfg: &TopConfig) -> std::io::Result<Output> {
        Ok(match cfg.mode {
            Mode::Batch => Output::Batch,
            Mode::Json => Output::Json,
            Mode::Screen => {
                let v = view::ViewState {
                    full_names: cfg.full_names,
                    color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
                    ..view::ViewState::default()
                };
                Output::Screen(Box::new(term::Screen::enter()?), v)
            }
        })
    }

    fn show(&mut self, cfg: &TopConfig, m: &mut Model) {
        let secs = cfg.interval.as_secs_f64();
        match self {
            Output::Screen(s, v) => {
                let _ = s.term.draw(|f| view::draw(f, m, v, secs));
            }
            Output::Batch => {
                stdio::out!("{}", batch::text(m, secs, layout(cfg), false));
                m.messages.clear();
            }
            Output::Json => {
                stdio::outln!("{}", batch::json(m, secs, "interval"));
                m.messages.clear();
            }
        }
    }
}

/// Moves the sessions' messages into the model (the last few stay on the screen).
fn drain(messages: &Messages, m: &mut Model) {
    if let Ok(mut v) = messages.lock() {
        m.messages.append(&mut v);
    }
    let n = m.messages.len();
    if n > 5 {
        m.messages.drain(..n - 5);
    }
}

/// What ended a wait.
enum Wake {
    Tick,
    Redraw,
    Quit(&'static str),
}

/// Refreshes until a key, a signal, the iterations or the targets' exit ends it; why.
fn refresh_loop(
    cfg: &TopConfig,
    w: &mut Watch,
    m: &mut Model,
    out: &mut Output,
    messages: &Messages,
    events: crate::attach::session::Events,
) -> &'static str {
    let mut next = Instant::now() + cfg.interval;
    let mut cpu = (Instant::now(), crate::engine::ptrace::process_cpu_us());
    drain(messages, m);
    if matches!(out, Output::Screen(..)) {
        out.show(cfg, m);
    }
    loop {
        match wait(w, out, m, next) {
            Wake::Quit(why) => return why,
            Wake::Redraw => {
                drain(messages, m);
                out.show(cfg, m);
                continue;
            }
            Wake::Tick => {}
        }
        next = (next + cfg.interval).max(Instant::now());
        if matches!(out, Output::Screen(_, v) if v.paused) {
            continue;
        }
        m.begin_interval();
        for (pid, d) in w.read(events) {
            m.add(pid, d);
        }
        let now = (Instant::now(), crate::engine::ptrace::process_cpu_us());
        let cpu_pct =
            (now.1 - cpu.1) as f64 / 1e4 / now.0.duration_since(cpu.0).as_secs_f64().max(1e-3);
        cpu = now;
        m.sampling = format!("{}; top's own CPU {cpu_pct:.1} %", w.sampling(cfg.interval));
        drain(messages, m);
        out.show(cfg, m);
        if cfg.iterations.is_some_and(|n| m.iteration >= n) {
            return "the iterations are done";
        }
        if w.all_exited() {
            return "every watched process exited";
        }
    }
}

/// Waits for the next refresh, handling keys, resizes, signals and exits meanwhile.
fn wait(w: &mut Watch, out: &mut Output, m: &mut Model, deadline: Instant) -> Wake {
    loop {
        let left = watch::until(deadline);
        if left.is_zero() {
            return Wake::Tick;
        }
        let slice = left.min(Duration::from_millis(200));
        let mut wake = None;
        if let Output::Screen(_, v) = out {
            // A terminal that went away (its window closed, tmux's server killed) fails every
            // poll at once: the view ends, detaching, rather than spin.
            let ms = u16::try_from(slice.as_millis()).unwrap_or(200);
            wake = match term::wait_input(w.waiter.signal_fd(), ms) {
                term::Input::Gone => Some(Wake::Quit("the terminal went away")),
                term::Input::Idle => None,
                term::Input::Ready => match event::poll(Duration::ZERO) {
                    Err(_) => Some(Wake::Quit("the terminal went away")),
                    Ok(false) => None,
                    Ok(true) => match event::read() {
                        Ok(event::Event::Key(k)) if k.kind != KeyEventKind::Release => {
                            Some(key(k, v, m))
                        }
                        Ok(event::Event::Resize(..)) => Some(Wake::Redraw),
                        Err(_) => Some(Wake::Quit("the terminal went away")),
                        _ => None,
                    },
                },
            };
        } else {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            let mut fds = [PollFd::new(w.waiter.signal_fd(), PollFlags::POLLIN)];
            let ms = u16::try_from(slice.as_millis()).unwrap_or(200);
            let _ = poll(&mut fds, PollTimeout::from(ms));
        }
        if w.waiter.interrupted() {
            return Wake::Quit("a signal asked to stop");
        }
        let gone = w.newly_exited();
        for pid in &gone {
            m.exited(*pid);
        }
        if !gone.is_empty() {
            return if w.all_exited() {
                Wake::Tick
            } else {
                Wake::Redraw
            };
        }
        if let Some(x) = wake {
            return x;
        }
    }
}

/// What a key does.
fn key(k: KeyEvent, v: &mut view::ViewState, m: &mut Model) -> Wake {
    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) && !(v.help || v.name_popup) {
        return Wake::Quit("quit");
    }
    if v.help || v.name_popup {
        v.help = false;
        v.name_popup = false;
        return Wake::Redraw;
    }
    match k.code {
        KeyCode::Char('s') => m.sort = m.sort.next(),
        KeyCode::Char('p') | KeyCode::Char(' ') => v.paused = !v.paused,
        KeyCode::Char('r') => v.ranks = !v.ranks,
        KeyCode::Char('f') => v.full_names = !v.full_names,
        KeyCode::Char('?') | KeyCode::Char('h') => v.help = true,
        KeyCode::Up | KeyCode::Char('k') => v.selected = v.selected.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => {
            v.selected = (v.selected + 1).min(v.rows.saturating_sub(1))
        }
        KeyCode::Enter => v.name_popup = true,
        _ => {}
    }
    Wake::Redraw
}
