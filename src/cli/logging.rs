//! Our own diagnostics: a `tracing` subscriber on stderr. The attach layer and the engine emit
//! events (`info`: the plan, every `ROCP*` pair sent; `debug`: the steps and their counters;
//! `trace`: the ptrace steps); `-v`, `-vv` and `-vvv` show them, `ROCPROF_ATTACH_LOG` takes an
//! `EnvFilter` directive string instead.

use crate::cli::error::{Error, Result};
use tracing_subscriber::EnvFilter;

/// The variable holding a log filter directive string (e.g. `debug`, `rocprof_attach=trace`).
pub const LOG_VARIABLE: &str = "ROCPROF_ATTACH_LOG";

/// The filter for `-v`/`-q` and the value of [`LOG_VARIABLE`] (which wins when set and not
/// empty): `-q` errors only, none `warn`, `-v` info, `-vv` debug (trace for the engine's
/// per-step events), `-vvv` trace.
pub fn filter(verbose: u8, quiet: bool, directives: Option<&str>) -> Result<EnvFilter> {
    if let Some(d) = directives.filter(|d| !d.trim().is_empty()) {
        return EnvFilter::try_new(d).map_err(|e| {
            Error::usage(format!(
                "{LOG_VARIABLE}={d} is not a valid log filter ({e}): give a level such as `debug` or directives \
                 such as `rocprof_attach=debug`, or unset {LOG_VARIABLE}"
            ))
        });
    }
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        // The engine's per-step events (trace level) belong to -vv too.
        (false, 2) => "debug,rocprof_attach::engine=trace",
        _ => "trace",
    };
    Ok(EnvFilter::new(level))
}

/// Whether our log lines may carry ANSI colours: only when stderr is a terminal and `NO_COLOR`
/// (<https://no-color.org>) is unset or empty. `-v 2> file` gets plain text.
pub fn colour(stderr_is_terminal: bool, no_color: Option<&str>) -> bool {
    stderr_is_terminal && no_color.is_none_or(str::is_empty)
}

/// Install the subscriber for our own logs on stderr, with ANSI colours when `ansi` is true
/// (see [`colour`]).
pub fn init(filter: EnvFilter, ansi: bool) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("")));
        assert!(!colour(true, Some("1")));
        assert!(!colour(false, None));
        assert!(!colour(false, Some("")));
    }
}
