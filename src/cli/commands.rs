//! The subcommands of [`crate::cli::Cli`]: every one is a real clap subcommand, so `--help`, the
//! manual pages and the completion scripts know all their options, and one place
//! ([`crate::cli::args::parse_request`]) turns their usage errors into one line.

use crate::cli::help::{COMPLETIONS_EXAMPLES, INSTALL_EXAMPLES, MAN_EXAMPLES};
use crate::cli::install::InstallArgs;
use crate::cli::rocpd_args::{
    ConvertArgs, QueryArgs, SummaryArgs, CONVERT_EXAMPLES, QUERY_EXAMPLES, SUMMARY_EXAMPLES,
};
use clap::builder::PossibleValuesParser;
use clap::Subcommand;

/// Every subcommand name, `help` included (a test checks it against [`Command`]).
pub const SUBCOMMANDS: [&str; 8] = [
    "top",
    "convert",
    "summary",
    "query",
    "install-library",
    "completions",
    "man",
    "help",
];

/// The subcommands `man` prints a page for (all but `help`; a test checks it).
pub const MAN_PAGES: [&str; 7] = [
    "top",
    "convert",
    "summary",
    "query",
    "install-library",
    "completions",
    "man",
];

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch what the GPU of running processes does, live: top kernels, how busy each GPU is,
    /// copies and the slowest API calls, refreshed every second (see docs/top.md)
    #[command(after_help = crate::cli::top::TOP_EXAMPLES)]
    Top(crate::cli::top::TopArgs),
    /// Convert rocpd databases to rocprofv3's CSV and JSON outputs, a Perfetto trace or an OTF2
    /// archive
    #[command(after_help = CONVERT_EXAMPLES)]
    Convert(ConvertArgs),
    /// Summarise rocpd databases: per-kernel, per-API and per-domain duration statistics, on the
    /// terminal or as CSV, JSON, Markdown or a self-contained HTML report with charts
    #[command(after_help = SUMMARY_EXAMPLES)]
    Summary(SummaryArgs),
    /// Run SQL over the rocpd views (regions, kernels, memory_copies, top_kernels, ...) of one or
    /// many databases
    #[command(after_help = QUERY_EXAMPLES)]
    Query(QueryArgs),
    /// Install the rocattach C library under the names ROCm's tools load (see docs/library.md)
    #[command(name = "install-library", after_help = INSTALL_EXAMPLES)]
    InstallLibrary(InstallArgs),
    /// Print a shell completion script for bash, zsh, fish, elvish or PowerShell
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the manual page (roff) of rocprof-attach or of one of its subcommands on stdout
    #[command(after_help = MAN_EXAMPLES)]
    Man {
        /// The subcommand whose page to print (default: rocprof-attach's own)
        #[arg(value_name = "SUBCOMMAND", value_parser = PossibleValuesParser::new(MAN_PAGES))]
        subcommand: Option<String>,
    },
}

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
