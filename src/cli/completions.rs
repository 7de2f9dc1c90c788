//! `rocprof-attach completions SHELL`: the shells, their scripts (clap_complete), and the error
//! that names them when the shell is missing.

use crate::cli::args::command;

/// Shells `completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    /// GNU bash
    Bash,
    /// Z shell
    Zsh,
    /// fish
    Fish,
    /// Elvish
    Elvish,
    /// PowerShell
    #[value(name = "powershell")]
    PowerShell,
}

impl CompletionShell {
    /// The names `completions` accepts, in order: "bash, zsh, fish, elvish, powershell".
    pub fn names() -> String {
        use clap::ValueEnum;
        CompletionShell::value_variants()
            .iter()
            .filter_map(|s| s.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The completion script for `shell`.
pub fn completions(shell: CompletionShell) -> String {
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
        CompletionShell::Elvish => Shell::Elvish,
        CompletionShell::PowerShell => Shell::PowerShell,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "rocprof-attach", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The one-line error for `completions` without a shell, naming the choices; `None` for any
/// other error.
pub fn missing_shell(err: &clap::Error) -> Option<String> {
    missing(err, "<SHELL>").then(|| {
        format!(
            "the following required argument was not provided: <SHELL> [possible values: {}] \
             (e.g. `rocprof-attach completions bash`; see `rocprof-attach completions --help`)",
            CompletionShell::names()
        )
    })
}

/// Whether `err` says that the argument `name` (e.g. `<SHELL>`) is missing.
fn missing(err: &clap::Error, name: &str) -> bool {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    err.kind() == ErrorKind::MissingRequiredArgument
        && match err.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(v)) => v.iter().any(|a| a == name),
            Some(ContextValue::String(a)) => a == name,
            _ => false,
        }
}
