//! Values of the command line and its environment fallbacks: PIDs and durations.

use crate::cli::error::{Error, Result};
use std::time::Duration;

/// Longest accepted duration (`--attach-duration-msec`, `--stopped-timeout`).
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where a value came from, for error messages.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// A command-line option (its name).
    Cli(&'static str),
    /// An environment variable (its name).
    Env(&'static str),
}

impl Source {
    /// The option or variable, for messages.
    pub fn describe(self) -> String {
        match self {
            Source::Cli(opt) => opt.to_string(),
            Source::Env(var) => format!("{var} (environment)"),
        }
    }
}

/// Parse one PID token: a positive decimal integer that fits a Linux PID.
pub fn parse_pid(tok: &str, src: Source) -> Result<i32> {
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
pub fn parse_pid_list(text: &str, src: Source, out: &mut Vec<i32>) -> Result<()> {
    for tok in text.split(',') {
        let pid = parse_pid(tok, src)?;
        if !out.contains(&pid) {
            out.push(pid);
        }
    }
    Ok(())
}

/// Parse a duration: a number with a unit (`500ms`, `10s`, `2m`, `1h`, `1.5s`), or a bare whole
/// number of milliseconds (as rocprofv3's `--attach-duration-msec`); at least 1 ms, at most
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str, src: Source) -> Result<Duration> {
    let t = text.trim();
    let from = src.describe();
    let example = "e.g. 5000 or 5s (units: ms, s, m, h; a bare number is milliseconds)";
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    if num.starts_with('-') {
        return Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: the duration must be positive, {example}"
        )));
    }
    let num = num.strip_prefix('+').unwrap_or(num);
    let ms_per_unit: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" | "msec" => 1.0,
        "s" | "sec" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        _ => {
            return Err(Error::usage(format!(
                "invalid duration '{t}' in {from}: unknown unit '{unit}'; {example}"
            )))
        }
    };
    let valid = !num.is_empty()
        && num.bytes().filter(|b| *b == b'.').count() <= 1
        && num.bytes().any(|b| b.is_ascii_digit())
        && (unit.is_empty() || !num.is_empty());
    if !valid || (unit.is_empty() && num.contains('.')) {
        return Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: {example} (leave it out to detach on Enter or Ctrl-C)"
        )));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| Error::usage(format!("invalid duration '{t}' in {from}: {example}")))?;
    let ms = value * ms_per_unit;
    if ms < 1.0 {
        return Err(Error::usage(format!(
            "invalid duration '{t}' in {from}: it must be at least 1 ms (leave it out to detach on Enter or Ctrl-C)"
        )));
    }
    if ms > MAX_DURATION.as_millis() as f64 {
        return Err(Error::usage(format!(
            "duration '{t}' in {from} is too long (at most 30 days, {} ms): give a shorter one, {example}",
            MAX_DURATION.as_millis()
        )));
    }
    Ok(Duration::from_millis(ms.round() as u64))
}

/// `--output-timeout`: a duration as [`parse_duration`] reads it, or 0 (do not wait); the
/// default when absent.
pub fn parse_output_timeout(text: Option<&str>) -> Result<Duration> {
    match text {
        None => Ok(crate::attach::session::DEFAULT_OUTPUT_WAIT),
        Some(t)
            if t.trim()
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .trim()
                == "0" =>
        {
            Ok(Duration::ZERO)
        }
        Some(t) => parse_duration(t, Source::Cli("--output-timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn output_timeout() {
        assert_eq!(parse_output_timeout(None).unwrap(), Duration::from_secs(30));
        assert_eq!(parse_output_timeout(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(parse_output_timeout(Some("0s")).unwrap(), Duration::ZERO);
        assert_eq!(
            parse_output_timeout(Some("200ms")).unwrap(),
            Duration::from_millis(200)
        );
        assert_eq!(
            parse_output_timeout(Some("2m")).unwrap(),
            Duration::from_secs(120)
        );
        assert!(parse_output_timeout(Some("-1s")).is_err());
        assert!(parse_output_timeout(Some("soon")).is_err());
    }

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
        for (text, ms) in [
            ("500ms", 500),
            ("5s", 5000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("1.5s", 1500),
            (" 7 ", 7),
        ] {
            assert_eq!(
                parse_duration(text, s).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
        for bad in [
            "",
            "x",
            "-1",
            "0",
            "1.5",
            "99999999999999999999999",
            "18446744073709551615",
            "5 parsecs",
            "s",
            "0.1ms",
            "31d",
        ] {
            let e = parse_duration(bad, s).unwrap_err().to_string();
            assert!(e.contains("ROCPROF_ATTACH_DURATION"), "{e}");
        }
    }
}
