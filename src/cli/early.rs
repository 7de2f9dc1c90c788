//! What `main` decides from the raw arguments before clap parses them: whether to fork the agent
//! server first ([`crate::engine::agent::prestart`]), while the process has allocated almost
//! nothing.

use crate::cli::commands::SUBCOMMANDS;
use std::ffi::OsString;

/// Options that print or check and never attach.
const NO_SESSION: [&str; 6] = ["-h", "--help", "-V", "--version", "--list", "--check"];

/// Whether these arguments (without the program name) will most likely run an attach session:
/// no subcommand first, and none of `--help`, `--version`, `--list` or `--check`. It only
/// decides when the agent server is forked; a wrong guess costs one unused fork (ended at once,
/// [`crate::engine::agent::discard_prestarted`]) or the fork happening later, at the session's
/// start.
pub fn starts_a_session<I: IntoIterator<Item = OsString>>(args: I) -> bool {
    let mut any = false;
    for (i, arg) in args.into_iter().enumerate() {
        if arg == "--" {
            break;
        }
        if i == 0 && SUBCOMMANDS.iter().any(|s| arg == *s) {
            return false;
        }
        if NO_SESSION.iter().any(|s| arg == *s) {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::command;

    fn guess(args: &[&str]) -> bool {
        starts_a_session(args.iter().map(OsString::from))
    }

    #[test]
    fn the_names_match_the_command_line() {
        let mut cmd = command();
        cmd.build(); // adds --help, --version and the `help` subcommand
        let mut names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        names.sort();
        let mut ours: Vec<String> = SUBCOMMANDS.iter().map(|s| s.to_string()).collect();
        ours.sort();
        assert_eq!(names, ours);
        for flag in NO_SESSION {
            let found = cmd.get_arguments().any(|a| {
                a.get_long().is_some_and(|l| flag == format!("--{l}"))
                    || a.get_short().is_some_and(|c| flag == format!("-{c}"))
            });
            assert!(found, "{flag} is not an option of rocprof-attach");
        }
    }

    #[test]
    fn sessions_are_told_from_the_rest() {
        assert!(guess(&["-p", "1234", "--kernel-trace"]));
        assert!(guess(&["--attach", "1", "--attach-duration-msec", "5s"]));
        assert!(!guess(&[]));
        assert!(!guess(&["convert", "-i", "a.db"]));
        assert!(!guess(&["-p", "1", "--check"]));
        assert!(!guess(&["--list"]));
        assert!(!guess(&["--version"]));
        // A subcommand name as an option's value is not a subcommand.
        assert!(guess(&["-d", "summary", "-p", "1"]));
    }
}
