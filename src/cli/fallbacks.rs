//! The environment variables that stand in for options of ours when the option is not given:
//! one definition each ([`Fallback`]), read by [`crate::cli::args`] and named in `--help`
//! ([`name_in_help`]), so the two cannot drift apart.

use crate::attach::preflight::backend::BACKEND_ENV;
use clap::Command;

/// An option with an environment fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// `-p/--pid/--attach`.
    Pid,
    /// `--attach-duration-msec`.
    Duration,
    /// `--attach-children`.
    Children,
    /// `--attach-sync-output`.
    SyncOutput,
    /// `--backend` (read by the attach layer's preflight).
    Backend,
    /// `-t/--attach-tool-library`.
    ToolLibrary,
}

impl Fallback {
    /// Every fallback, in the order `--help` lists the options.
    pub const ALL: [Fallback; 6] = [
        Fallback::Duration,
        Fallback::Children,
        Fallback::SyncOutput,
        Fallback::Backend,
        Fallback::ToolLibrary,
        Fallback::Pid,
    ];

    /// The environment variable.
    pub fn var(self) -> &'static str {
        match self {
            Fallback::Pid => "ROCPROF_ATTACH_PID",
            Fallback::Duration => "ROCPROF_ATTACH_DURATION",
            Fallback::Children => "ROCPROF_ATTACH_CHILDREN",
            Fallback::SyncOutput => "ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC",
            Fallback::Backend => BACKEND_ENV,
            Fallback::ToolLibrary => "ROCPROF_ATTACH_TOOL_LIBRARY",
        }
    }

    /// The clap id of the option it stands in for.
    fn arg(self) -> &'static str {
        match self {
            Fallback::Pid => "pid",
            Fallback::Duration => "attach_duration_msec",
            Fallback::Children => "attach_children",
            Fallback::SyncOutput => "attach_sync_output",
            Fallback::Backend => "backend",
            Fallback::ToolLibrary => "attach_tool_library",
        }
    }
}

/// `cmd` with ` [env: VAR]` after the help of every option that has a fallback (in place: the
/// order of the options stays; a test checks that each fallback's option exists), and the
/// list of fallbacks in the `Environment:` paragraph of `--help`.
pub fn name_in_help(cmd: Command) -> Command {
    let list: Vec<String> = Fallback::ALL
        .into_iter()
        .filter_map(|f| {
            let a = cmd.get_arguments().find(|a| a.get_id() == f.arg())?;
            Some(format!(
                "{} ({})",
                f.var(),
                a.get_long().map(|l| format!("--{l}"))?
            ))
        })
        .collect();
    let after = crate::cli::help::AFTER_LONG_HELP.replace("{fallbacks}", &list.join(", "));
    cmd.after_long_help(after).mut_args(|a| {
        let Some(f) = Fallback::ALL.into_iter().find(|f| a.get_id() == f.arg()) else {
            return a;
        };
        let tag = |h: &clap::builder::StyledStr| format!("{h} [env: {}]", f.var());
        let long = a.get_long_help().map(tag);
        let short = a.get_help().map(tag).unwrap_or_default();
        let a = a.help(short);
        match long {
            Some(l) => a.long_help(l),
            None => a,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fallback_names_an_option_in_its_help() {
        let cmd = crate::cli::args::command();
        for f in Fallback::ALL {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == f.arg())
                .unwrap_or_else(|| panic!("{f:?}: no option {}", f.arg()));
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(help.ends_with(&format!("[env: {}]", f.var())), "{help}");
            let after = cmd
                .get_after_long_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                after.contains(f.var()),
                "--help's Environment names {}",
                f.var()
            );
        }
    }
}
