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

/// Install the subscriber for our own logs on stderr.
pub fn init(filter: EnvFilter) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
