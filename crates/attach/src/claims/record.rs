//! What a claim file holds ([`Record`]), and the sentences that tell a user about it.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a session is: whether the profiler may be active in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Claimed, nothing sent to the target (or its session ended): nothing is active in it.
    Claimed,
    /// The attach call is being sent.
    Attaching,
    /// Attached: the profiler is active in the target (the profiling window).
    Attached,
    /// The detach call is being sent.
    Detaching,
    /// The detach failed: the profiler may still be active; `rocprof-attach --detach -p PID`
    /// finishes the session.
    Stranded,
}

impl State {
    /// Whether the profiler may be active in the target in this state.
    pub fn active(self) -> bool {
        !matches!(self, State::Claimed)
    }

    fn phrase(self) -> &'static str {
        match self {
            State::Claimed => "before its attach",
            State::Attaching => "attaching it",
            State::Attached => "in its profiling window",
            State::Detaching => "detaching it",
            State::Stranded => "its detach failed",
        }
    }
}

/// The contents of a claim file (JSON, padded with spaces).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Format version.
    pub version: u32,
    /// The target's process id.
    pub target_pid: i32,
    /// The target's start time (field 22 of `/proc/PID/stat`, clock ticks after boot).
    pub target_start: u64,
    /// The front end holding the claim: `rocprof-attach` or `the rocattach library`.
    pub front_end: String,
    /// Process id of the holder.
    pub holder_pid: i32,
    /// Start time of the holder (same clock as `target_start`).
    pub holder_start: u64,
    /// The inode of the holder's PID namespace (whether `holder_pid` can be checked from here).
    #[serde(default)]
    pub holder_ns: Option<u64>,
    /// Real user id of the holder.
    pub uid: u32,
    /// The holder's command line (shortened).
    pub command: String,
    /// When the claim was taken, seconds since the epoch.
    pub since: u64,
    /// When the state last changed, seconds since the epoch.
    pub changed: u64,
    /// Where the session is.
    pub state: State,
    /// Where the session's output goes: output directory and file name template.
    pub output: Option<String>,
    /// Whether the tool writes its output before the detach call returns.
    #[serde(default)]
    pub sync_output: Option<bool>,
    /// The output directory template alone (`-d`), and the file name template alone, so that
    /// `--detach` can find the files (records of older versions have only `output`).
    #[serde(default)]
    pub output_dir: Option<String>,
    /// The output file name template (`-o`).
    #[serde(default)]
    pub output_file: Option<String>,
    /// Why the session was left active (the failed detach's reason).
    pub note: Option<String>,
    /// The front end died and its agent (this pid) is finishing the session: detach, output,
    /// claim released ([`crate::session::will`]).
    #[serde(default)]
    pub finishing_by: Option<i32>,
}

/// Seconds since the epoch now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `2026-05-01 12:00:03 UTC`.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `12 s`, `5 min`, `3 h`, `2 days`.
fn ago(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        7200..=172_799 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86_400),
    }
}

/// A user name for `uid` (`uid 1000` when it has none).
fn user(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("user {} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// Printable: control characters (a command line could carry terminal escapes) become '?'.
pub fn printable(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(max)
        .collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

impl Record {
    /// `rocprof-attach (pid 123, user alice (uid 1000), command 'rocprof-attach -p 42 ...')`;
    /// `uid` is the claim file's owner, which nobody but root can forge.
    pub fn holder(&self, owner: u32) -> String {
        format!(
            "{} (pid {}, {}, command '{}')",
            printable(&self.front_end, 64),
            self.holder_pid,
            user(owner),
            printable(&self.command, 160)
        )
    }

    /// `since 2026-05-01 12:00:03 UTC (12 s ago)`.
    pub fn since(&self) -> String {
        format!(
            "since {} ({} ago)",
            utc(self.since),
            ago(now().saturating_sub(self.since))
        )
    }

    /// `its output goes to DIR/FILE`, or nothing known.
    pub fn output_clause(&self) -> String {
        match &self.output {
            Some(o) => format!("its output goes to {}", printable(o, 300)),
            None => "where its output goes was not recorded".into(),
        }
    }

    /// Whether the agent of a dead front end is finishing this session right now (the lock is
    /// then held by that agent).
    pub fn finishing(&self) -> bool {
        self.finishing_by.is_some() && self.state.active()
    }

    /// What the live holder is doing.
    pub fn doing(&self) -> &'static str {
        self.state.phrase()
    }

    /// Why a session nobody holds any more is still active.
    pub fn why_left(&self) -> String {
        match (&self.state, &self.note) {
            (State::Stranded, Some(note)) => {
                format!("its detach failed ({})", printable(note, 300))
            }
            (State::Stranded, None) => "its detach failed".into(),
            (state, _) => format!(
                "that front end ended while {} without detaching",
                state.phrase()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_825_600), "2000-02-29 12:00:00 UTC");
        assert_eq!(utc(1_767_225_599), "2025-12-31 23:59:59 UTC");
    }

    #[test]
    fn control_characters_are_not_printed() {
        assert_eq!(printable("a\x1b[2Jb", 10), "a?[2Jb");
        assert_eq!(printable("abcdef", 3), "abc…");
    }
}
