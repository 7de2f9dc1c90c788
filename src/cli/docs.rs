//! The manual pages (`man [SUBCOMMAND]`) and the shell completion scripts (`completions SHELL`),
//! both generated from the clap command of [`crate::cli::args::command`].

use crate::cli::args::command;
use crate::cli::commands::CompletionShell;
use crate::cli::error::{Error, Result};
use clap_mangen::roff::{roman, Roff};

/// The manual page (roff) of rocprof-attach, or of its subcommand `sub` (titled
/// `rocprof-attach-SUB`, the name the top page's SUBCOMMANDS section refers to).
pub fn man_page(sub: Option<&str>) -> Result<String> {
    // No `help` subcommand: it would be listed as a page `rocprof-attach-help(1)` that does not
    // exist.
    let mut top = command().disable_help_subcommand(true);
    top.build();
    let cmd = match sub {
        None => top,
        Some(name) => top
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| Error::usage(format!("`man {name}`: no such subcommand")))?,
    };
    // clap_mangen would reflow the examples' columns: the text after the options is rendered
    // here instead, examples as preformatted blocks.
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|t| t.to_string());
    let cmd = cmd
        .after_help(None::<&'static str>)
        .after_long_help(None::<&'static str>);
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(format!("rocprof-attach {}", env!("CARGO_PKG_VERSION")))
        .render(&mut out)
        .map_err(|e| Error::usage(format!("cannot render the manual page: {e}")))?;
    let mut page = String::from_utf8_lossy(&out).into_owned();
    let mut extra = String::new();
    if sub.is_none() {
        // Ends the SUBCOMMANDS list: where the pages it names come from.
        let mut roff = Roff::new();
        roff.control("PP", []);
        roff.text([roman(
            "`rocprof-attach man SUBCOMMAND` prints the page of each subcommand \
             (rocprof-attach-SUBCOMMAND(1)) and `rocprof-attach SUBCOMMAND --help` its options.",
        )]);
        extra.push_str(&roff.to_roff());
    }
    if let Some(text) = after {
        extra.push_str(&after_help_sections(&text));
    }
    if !extra.is_empty() {
        match page.find("\n.SH VERSION\n") {
            Some(at) => page.insert_str(at + 1, &extra),
            None => page.push_str(&extra),
        }
    }
    Ok(page)
}

/// The text after the options (`after_help`) as man sections: a block whose first line is a
/// title (`Examples:`) followed by indented lines becomes a section of preformatted lines
/// (`.nf`/`.fi`, so the columns stay); `Environment: ...` and `Exit codes: ...` become the
/// ENVIRONMENT and EXIT STATUS sections; other paragraphs go under NOTES.
fn after_help_sections(text: &str) -> String {
    let mut roff = Roff::new();
    let mut notes = false;
    for block in text.split("\n\n") {
        let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some((first, rest)) = lines.split_first() else {
            continue;
        };
        let title = first
            .strip_suffix(':')
            .filter(|t| !t.contains(' ') || t.len() < 30);
        if let (Some(title), false) = (title, rest.is_empty()) {
            if rest.iter().all(|l| l.starts_with(' ')) {
                roff.control("SH", [title.to_uppercase().as_str()]);
                roff.control("nf", []);
                for l in rest {
                    roff.text([roman(l.strip_prefix("  ").unwrap_or(l))]);
                }
                roff.control("fi", []);
                continue;
            }
        }
        let (title, body) = match first.split_once(": ") {
            Some(("Environment", body)) => ("ENVIRONMENT", body),
            Some(("Exit codes", body)) => ("EXIT STATUS", body),
            _ => ("NOTES", *first),
        };
        if title == "NOTES" && notes {
            roff.control("PP", []);
        } else {
            roff.control("SH", [title]);
        }
        notes |= title == "NOTES";
        roff.text([roman(body.trim())]);
        for l in rest {
            roff.text([roman(l.trim())]);
        }
    }
    roff.to_roff()
}

/// Stands for the process ids in the generated scripts until [`completions`] replaces it with
/// each shell's way of listing them (clap_complete has no value hint for process ids).
const PIDS: &str = "__ROCPROF_ATTACH_PIDS__";

/// The completion script for `shell`: every option of every subcommand, the format names after
/// `-f`, and process ids after `-p`/`--pid`/`--attach` and `top -p` (after the last comma of a list in bash and
/// zsh).
pub fn completions(shell: CompletionShell) -> String {
    use clap::builder::PossibleValuesParser;
    use clap_complete::Shell;
    // (shell, how the placeholder comes out in its script, the shell's own list of process ids);
    // elvish and PowerShell complete options and formats only.
    let (shell, pids) = match shell {
        CompletionShell::Bash => (
            Shell::Bash,
            Some((
                format!(r#"$(compgen -W "{PIDS}" -- "${{cur}}")"#),
                r#"$(compgen -P "${cur%"${cur##*,}"}" -W "$(ps -e -o pid= 2>/dev/null)" -- "${cur##*,}")"#,
            )),
        ),
        CompletionShell::Zsh => (Shell::Zsh, Some((format!("({PIDS})"), "_sequence _pids"))),
        CompletionShell::Fish => (
            Shell::Fish,
            Some((
                format!(r#"-a "{PIDS}\t''""#),
                r#"-a "(__fish_complete_pids)""#,
            )),
        ),
        CompletionShell::Elvish => (Shell::Elvish, None),
        CompletionShell::PowerShell => (Shell::PowerShell, None),
    };
    let mut cmd = match pids {
        Some(_) => command()
            .mut_arg("pid", |a| a.value_parser(PossibleValuesParser::new([PIDS])))
            .mut_subcommand("top", |t| {
                t.mut_arg("pid", |a| a.value_parser(PossibleValuesParser::new([PIDS])))
            }),
        None => command(),
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "rocprof-attach", &mut out);
    let script = String::from_utf8_lossy(&out);
    let script = match pids {
        Some((generated, list)) => script.replace(&generated, list),
        None => script.into_owned(),
    };
    match shell {
        // clap_complete 4.6 names the bash cases of subcommands after the binary with its `-`
        // turned into `__subcmd__` (`rocprof__subcmd__attach__subcmd__convert)`) but sets `cmd`
        // with it turned into `__` (`rocprof__attach__subcmd__convert`): no subcommand option
        // would ever complete.
        Shell::Bash => script.replace(
            "rocprof__subcmd__attach__subcmd__",
            "rocprof__attach__subcmd__",
        ),
        _ => script,
    }
}
