//! rocattach's log: glog-style lines with the `ROCATTACH` component on stderr, filtered by
//! `ROCATTACH_LOG_LEVEL` (read at every call, like the rest of the host's environment).
//!
//! A line looks like `E0612 14:03:07.123456 4242 rocattach] ROCATTACH: <message>`: severity
//! letter, month and day, UTC time, thread id. The engine's and the session's own `tracing`
//! diagnostics are shown too at `info` and `trace`, through a subscriber set for the duration of
//! the call on the calling thread only: a host with its own `tracing` setup is left alone.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// The variable that sets the level.
pub const LEVEL_VARIABLE: &str = "ROCATTACH_LOG_LEVEL";

/// Log levels, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Every step, including the engine's.
    Trace,
    /// What is attached and sent.
    Info,
    /// Things to know; the call still works (the default shows these and above).
    Warning,
    /// Why a call failed and how to fix it.
    Error,
    /// Only fatal errors (none today): effectively silent.
    Fatal,
    /// Nothing at all.
    Off,
}

impl Level {
    fn letter(self) -> char {
        match self {
            Level::Trace | Level::Info => 'I',
            Level::Warning => 'W',
            Level::Error => 'E',
            Level::Fatal | Level::Off => 'F',
        }
    }
}

/// Parse a `ROCATTACH_LOG_LEVEL` value: a name (trace, debug, info, warning, error, fatal, off) or
/// a glog number (0 info, 1 warning, 2 error, 3 fatal).
pub fn parse_level(v: &str) -> Option<Level> {
    Some(match v.trim().to_ascii_lowercase().as_str() {
        "trace" | "debug" | "verbose" => Level::Trace,
        "info" | "0" => Level::Info,
        "warning" | "warn" | "1" => Level::Warning,
        "error" | "2" => Level::Error,
        "fatal" | "3" => Level::Fatal,
        "off" | "none" | "quiet" => Level::Off,
        _ => return None,
    })
}

/// The logger of one C ABI call.
#[derive(Debug, Clone, Copy)]
pub struct Log {
    level: Level,
}

impl Log {
    /// Read `ROCATTACH_LOG_LEVEL` now; an unknown value is reported (once per call) and the
    /// default (warning) is used.
    pub fn from_env() -> Log {
        let raw = std::env::var(LEVEL_VARIABLE).ok();
        match raw.as_deref().map(|v| (v, parse_level(v))) {
            None | Some(("", _)) => Log {
                level: Level::Warning,
            },
            Some((_, Some(level))) => Log { level },
            Some((v, None)) => {
                let log = Log {
                    level: Level::Warning,
                };
                log.warn(&format!(
                    "ignoring {LEVEL_VARIABLE}={v}: use one of trace, info, warning, error, fatal, off \
                     (or a glog number 0-3); using warning"
                ));
                log
            }
        }
    }

    /// Whether `level` is shown.
    pub fn enabled(&self, level: Level) -> bool {
        level >= self.level && self.level != Level::Off
    }

    /// Write one line at `level`.
    pub fn line(&self, level: Level, msg: &str) {
        if self.enabled(level) {
            write_line(level.letter(), msg);
        }
    }

    /// An error line: why the call failed and what to do.
    pub fn error(&self, msg: &str) {
        self.line(Level::Error, msg);
    }

    /// A warning line.
    pub fn warn(&self, msg: &str) {
        self.line(Level::Warning, msg);
    }

    /// An info line.
    pub fn info(&self, msg: &str) {
        self.line(Level::Info, msg);
    }

    /// Run `f` with the crate's `tracing` diagnostics shown as rocattach lines when the level is
    /// info or trace (on this thread only, for the duration of `f`).
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let max = match self.level {
            Level::Trace => tracing::Level::TRACE,
            Level::Info => tracing::Level::INFO,
            _ => return f(),
        };
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(max)
            .with_writer(std::io::stderr)
            .event_format(Glog)
            .finish();
        tracing::subscriber::with_default(subscriber, f)
    }
}

/// One line, written with a single `write` so lines of concurrent calls never interleave.
fn write_line(letter: char, msg: &str) {
    let line = format!("{} ROCATTACH: {}\n", prefix(letter), msg.replace('\n', " "));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `Lmmdd hh:mm:ss.uuuuuu tid rocattach]`.
fn prefix(letter: char) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (_, month, day) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{letter}{month:02}{day:02} {:02}:{:02}:{:02}.{:06} {} rocattach]",
        s / 3600,
        s / 60 % 60,
        s % 60,
        now.subsec_micros(),
        nix::unistd::gettid()
    )
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `tracing` events formatted as rocattach lines.
struct Glog;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Glog
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let letter = match *event.metadata().level() {
            tracing::Level::ERROR => 'E',
            tracing::Level::WARN => 'W',
            _ => 'I',
        };
        write!(writer, "{} ROCATTACH: ", prefix(letter))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(parse_level("WARNING"), Some(Level::Warning));
        assert_eq!(parse_level("2"), Some(Level::Error));
        assert_eq!(parse_level("loud"), None);
        assert!(Level::Error > Level::Warning);
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }
}
