//! The command-line front end: the only layer (with `main.rs`) that prints.
//!
//! * [`args`]: the command line, parsed into an [`Action`] by the pure [`parse_request`];
//! * [`session`]: composes the attach layer's plan → attach → wait → detach → collect;
//! * [`render`]: progress lines and warnings from the session's events, the status line, the
//!   file list and the per-process table;
//! * [`finish`]: `--detach -p PID`, which finishes a session left active;
//! * [`commands`]: the subcommands; [`rocpd_args`]: the command lines of `convert`, `summary`
//!   and `query`, which [`rocpd`] runs; [`docs`]: the manual pages and completion scripts;
//! * [`top`]: `rocprof-attach top`, the live view (docs/top.md);
//! * [`check`]: `--check` and `--list`; [`list_avail`]: `-L`, a CUDA process's metrics;
//! * [`early`]: what `main` decides from the raw arguments before parsing them;
//! * [`json`]: the `--json` documents (docs/json.md);
//! * [`logging`]: `-v`/`-q`/`ROCPROF_ATTACH_LOG` for the `tracing` diagnostics;
//! * [`error`]: usage errors and the errors of the layers below, with their exit codes;
//! * [`stdio`]: every write to standard output and error (a closed pipe ends output quietly);
//! * [`crash`]: the binary's panic hook (one line, exit code 1).

// Printing goes through `stdio`: std's print macros panic when the reader of a pipe goes away.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod args;
pub mod check;
pub mod commands;
pub mod crash;
pub mod docs;
pub mod early;
pub mod error;
pub mod fallbacks;
pub mod finish;
pub mod help;
pub mod install;
pub mod json;
pub mod list_avail;
pub mod logging;
pub mod render;
pub mod rocpd;
pub mod rocpd_args;
pub mod session;
pub mod stdio;
pub mod top;
pub mod values;

pub use args::{parse_request, Action, Cli, Command, Invocation};
pub use early::starts_a_session;
pub use error::{Error, Result};

use crate::attach::envbuf::EnvList;
use crate::exit::ExitCode;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Parse the process's arguments, run the command, return the process exit code. A panic
/// (reported by the hook [`crash::install`] puts in place) returns 1.
pub fn main() -> i32 {
    stdio::finish(crash::guard(|| run(std::env::args_os()))).code()
}

/// Print an error the way every error of ours is printed: one line.
fn print_error(e: &Error) {
    stdio::errln!(
        "rocprof-attach: error: {}",
        e.to_string().replace('\n', " ")
    );
}

/// Like [`main`] with explicit arguments (`args[0]` is the program name); used by the demo.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    stdio::finish(run(args)).code()
}

/// Run the command of a command line; its exit code.
fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let env = EnvList::from_process();
    let inv = match parse_request(args, &env, &cwd) {
        Ok(inv) => inv,
        Err(e) => {
            crate::engine::agent::discard_prestarted();
            print_error(&e);
            return e.exit_code();
        }
    };
    if !matches!(
        inv.action,
        Action::Attach(_) | Action::Detach { .. } | Action::ListAvail(_)
    ) {
        crate::engine::agent::discard_prestarted();
    }
    match logging::filter(inv.verbose, inv.quiet, env.get(logging::LOG_VARIABLE)) {
        Ok(f) => logging::init(
            f,
            logging::colour(std::io::stderr().is_terminal(), env.get("NO_COLOR")),
        ),
        Err(e) => {
            print_error(&e);
            return e.exit_code();
        }
    }
    let ui = render::Ui::new(inv.quiet, std::io::stderr().is_terminal());
    for w in &inv.warnings {
        ui.warn(w);
    }
    let code = match inv.action {
        Action::Print(text) => {
            stdio::out!("{text}");
            ExitCode::Success
        }
        Action::Convert(a) => rocpd::run_convert(*a),
        Action::Summary(a) => rocpd::run_summary(*a),
        Action::Top(cfg) => top::run(*cfg, &ui),
        Action::Query(a) => rocpd::run_query(*a),
        Action::InstallLibrary(a) => crate::cli::install::run(&a),
        Action::Check {
            selection,
            tool_library,
            output_dir,
            env,
        } => check::run_check(
            &selection,
            tool_library.as_deref(),
            output_dir.as_deref(),
            Some(&env),
            &ui,
            inv.json,
        ),
        Action::List(selection) => check::run_list(&selection, &ui, inv.verbose > 0, inv.json),
        Action::ListAvail(pid) => list_avail::run(pid, &ui, inv.json),
        Action::Attach(req) => session::run(*req, &ui, inv.json),
        Action::Detach {
            pids,
            stopped_wait,
            output_dir,
        } => finish::run(&pids, stopped_wait, output_dir.as_deref(), &ui, inv.json),
    };
    code
}
