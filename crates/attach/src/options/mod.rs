//! rocprofv3's tracing, counter, filter, summary and output options, and the `ROCPROF_*` variables
//! they set (docs/protocol.md section 7.2).
//!
//! [`ProfilerOptions`] is flattened into the command line by a front end (rocprof-attach's CLI). [`ProfilerOptions::apply`]
//! writes exactly the variables `rocprofv3 --attach` would write into its environment (which then
//! travels to the target in the environment buffer, see [`crate::envbuf`]), with these deliberate
//! differences:
//!
//! * `--perfetto-buffer-fill-policy` is exported as `ROCPROF_PERFETTO_BUFFER_FILL_POLICY`
//!   (rocprofv3 reads it under a wrong attribute name and silently drops it,
//!   docs/protocol.md section 11, item 24);
//! * a relative `-d/--output-directory` is made absolute against our working directory, because the
//!   target would otherwise resolve it against *its* working directory (values starting with `%cwd%`
//!   or an environment placeholder are kept verbatim);
//! * options rocprofv3 refuses later (or silently ignores) are refused up front with a message that
//!   says how to fix the command line: several `--pmc` groups, `--collection-period`, an empty
//!   `--pmc`, unknown output formats (also in a pre-existing `ROCPROF_OUTPUT_FORMAT`);
//! * values the tool parses only inside the target (where a bad one aborts it or is silently
//!   dropped) are validated first, with the rule in the message: kernel filter regexes, the
//!   iteration range and `--pmc` counter names (`validate.rs`).
//!
//! Trace booleans are written only when true, so a `ROCPROF_*_TRACE=1` already exported by the user
//! is never cleared; every covered variable that is still unset is then sent with its "not asked
//! for" value ([`defaults`]), so nothing an earlier session set in the target carries over; implications (`--sys-trace`, `--runtime-trace`, `--hip-trace`,
//! `--hip-runtime-trace`, `--hsa-trace`, `--kfd-trace`, `--kokkos-trace`) only affect options that
//! were not given explicitly.

use crate::envbuf::EnvList;
use crate::error::{Error, Result};
use rocprof_rocpd::format::OutputFormat;
use std::path::Path;

mod apply;
mod args;
pub mod defaults;
mod ecmascript;
pub mod hardware;
mod switch_table;
pub mod switches;
mod validate;
pub use validate::check_environment;

pub use args::{ProfilerOptions, ValueOptions};
pub use switches::{Switch, Switches};

/// Help heading for aggregate and basic tracing options.
pub const H_BASIC: &str = "Basic tracing";
/// Help heading for granular tracing options.
pub const H_EXTENDED: &str = "Extended tracing";
/// Help heading for counter collection options.
pub const H_COUNTERS: &str = "Counter collection";
/// Help heading for filtering options.
pub const H_FILTER: &str = "Filtering";
/// Help heading for statistics and summary options.
pub const H_SUMMARY: &str = "Summary";
/// Help heading for output options.
pub const H_OUTPUT: &str = "Output";
/// Help heading for advanced options (PC sampling, thread trace, tool internals).
pub const H_ADVANCED: &str = "Advanced";

/// The default output file name template of rocprofv3's tool (docs/protocol.md section 8.1).
pub const DEFAULT_OUTPUT_FILE: &str = "%hostname%/%pid%";

/// Counters `--att-activity` collects (same list as rocprofv3).
const ATT_ACTIVITY_COUNTERS: &str =
    "SQ_BUSY_CU_CYCLES SQ_VALU_MFMA_BUSY_CYCLES SQ_ACTIVE_INST_VALU \
SQ_ACTIVE_INST_LDS SQ_ACTIVE_INST_VMEM SQ_ACTIVE_INST_FLAT SQ_ACTIVE_INST_SCA SQ_ACTIVE_INST_MISC";

/// OpenMP (OMPT) categories `--ompt-trace` accepts.
pub const OMPT_TRACE_CATEGORIES: [&str; 9] = [
    "all", "thread", "parallel", "task", "sync", "mutex", "target", "device", "error",
];

/// Parse a rocprofv3 boolean: y/yes/t/true/on/1 or n/no/f/false/off/0, case-insensitive.
pub fn parse_bool(s: &str) -> std::result::Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
        _ => Err(format!(
            "'{s}' is not a boolean: use one of y, yes, t, true, on, 1 or n, no, f, false, off, 0"
        )),
    }
}

/// Split a format list the way the tool does (space, tab, `,`, `;`, `:`), dropping empty tokens.
fn format_tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split([' ', '\t', ',', ';', ':'])
        .filter(|t| !t.is_empty())
}

/// rocprofv3's `int_auto`: hexadecimal when the text contains `0x`, else decimal; returned in
/// decimal.
fn int_auto(option: &str, text: &str) -> Result<String> {
    let t = text.trim();
    let parsed = if t.contains("0x") {
        let (neg, digits) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let digits = digits.strip_prefix("0x").unwrap_or(digits);
        i128::from_str_radix(digits, 16).map(|v| if neg { -v } else { v })
    } else {
        t.parse::<i128>()
    };
    parsed.map(|v| v.to_string()).map_err(|_| {
        Error::usage(format!(
            "{option} '{text}' is not an integer: give a decimal number or a hexadecimal one starting with 0x"
        ))
    })
}

/// Placeholder prefixes that may expand to an absolute path inside the target, so a `-d` value
/// starting with one of them is not made absolute here.
const ABSOLUTE_PLACEHOLDERS: [&str; 7] =
    ["%cwd%", "{cwd}", "%env{", "$env{", "%ENV{", "$ENV{", "%q{"];

/// Make an output directory absolute against `cwd` unless it already is, or starts with a
/// placeholder that the target expands to an absolute path (`%cwd%`, `%env{NAME}%`, ...).
pub fn absolute_output_dir(dir: &str, cwd: &Path) -> String {
    if Path::new(dir).is_absolute() || ABSOLUTE_PLACEHOLDERS.iter().any(|p| dir.starts_with(p)) {
        dir.to_string()
    } else {
        let d = dir.strip_prefix("./").unwrap_or(dir);
        if d.is_empty() || d == "." {
            cwd.to_string_lossy().into_owned()
        } else {
            cwd.join(d).to_string_lossy().into_owned()
        }
    }
}

/// Whether a path contains a placeholder the tool expands (`%...%`, `{...}`, `$env{...}`).
pub fn has_placeholder(path: &str) -> bool {
    path.contains('%') || path.contains('{') || path.contains('$')
}

/// Refuse an output directory that we can see is unusable: it exists but is not a directory, or it
/// is a directory we cannot write to (or on a read-only file system). A missing directory is fine
/// (the tool in the target creates it); paths with placeholders are not checked.
pub fn check_output_dir(dir: &str) -> Result<()> {
    if has_placeholder(dir) {
        return Ok(());
    }
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if !meta.is_dir() {
        return Err(Error::usage(format!(
            "output directory {dir} exists but is not a directory: pass -d/--output-directory with a directory path (it is created if missing)"
        )));
    }
    let flags = nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK;
    let read_only_fs = nix::sys::statvfs::statvfs(dir)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false);
    if read_only_fs || nix::unistd::access(dir, flags).is_err() {
        return Err(Error::usage(format!(
            "output directory {dir} is not writable: pass -d/--output-directory with a directory the profiled process can write to"
        )));
    }
    Ok(())
}

/// Validate `--output-format` values and return them lower-cased (commas inside a value are
/// accepted as separators).
pub fn parse_formats(values: &[String]) -> Result<Vec<OutputFormat>> {
    let mut out = Vec::new();
    for v in values {
        for tok in format_tokens(v) {
            let f: OutputFormat = tok
                .parse()
                .map_err(|e: String| Error::usage(format!("-f/--output-format: {e}")))?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The formats a `ROCPROF_OUTPUT_FORMAT` value selects (rocpd when empty), deduplicated.
pub fn formats_of(value: &str) -> std::result::Result<Vec<OutputFormat>, String> {
    let mut out = Vec::new();
    for tok in format_tokens(value) {
        let f: OutputFormat = tok.parse()?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        out.push(OutputFormat::Rocpd);
    }
    Ok(out)
}

/// Directories rocprofv3 searches for the thread trace decoder when `--att-library-path` is not
/// given: `LD_LIBRARY_PATH`, then `/opt/rocm/lib` (not recursively).
fn find_att_decoder(env: &EnvList) -> Option<String> {
    let mut dirs: Vec<String> = env
        .get("LD_LIBRARY_PATH")
        .unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    dirs.push("/opt/rocm/lib".to_string());
    dirs.into_iter().find(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains("librocprof-trace-decoder.so")
            })
        })
    })
}

/// Parse `--ompt-trace [CATEGORY...]` like rocprofv3: no value means every category; a single
/// boolean-looking value is a boolean; otherwise categories (comma-free), 'all' meaning no filter.
/// Returns the switch and the comma-joined category filter.
fn parse_ompt(
    values: &Option<Vec<String>>,
    warnings: &mut Vec<String>,
) -> Result<(Option<bool>, String)> {
    let Some(values) = values else {
        return Ok((None, String::new()));
    };
    let tokens: Vec<String> = values
        .iter()
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .collect();
    if tokens.is_empty() {
        return Ok((Some(true), String::new()));
    }
    if let Some(bad) = tokens.iter().find(|t| t.contains(',')) {
        return Err(Error::usage(format!(
            "--ompt-trace: categories are space-separated, not comma-separated (got '{bad}'): use e.g. '--ompt-trace parallel task target'"
        )));
    }
    if tokens.len() == 1 {
        if let Ok(b) = parse_bool(&tokens[0]) {
            return Ok((Some(b), String::new()));
        }
    }
    let unknown: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .filter(|t| !OMPT_TRACE_CATEGORIES.contains(t))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::usage(format!(
            "--ompt-trace: unknown categor{} '{}': choose from {}",
            if unknown.len() > 1 { "ies" } else { "y" },
            unknown.join(" "),
            OMPT_TRACE_CATEGORIES.join(" ")
        )));
    }
    if tokens.iter().any(|t| t == "all") {
        let extra: Vec<&str> = tokens
            .iter()
            .map(String::as_str)
            .filter(|t| *t != "all")
            .collect();
        if !extra.is_empty() {
            warnings.push(format!(
                "--ompt-trace: 'all' already selects every category; ignoring {}",
                extra.join(" ")
            ));
        }
        return Ok((Some(true), String::new()));
    }
    Ok((Some(true), tokens.join(",")))
}

/// Variables that mean "the tool will record something" when set to a true value.
fn records_something(env: &EnvList) -> bool {
    env.iter().any(|(n, v)| {
        n.starts_with("ROCPROF_")
            && (n.ends_with("_TRACE") && n != "ROCPROF_GROUP_BY_QUEUE"
                || n == "ROCPROF_COUNTER_COLLECTION"
                || n == "ROCPROF_SPM_COUNTER_COLLECTION"
                || n == "ROCPROF_PC_SAMPLING_METHOD" && !v.eq_ignore_ascii_case("none"))
            && !v.is_empty()
            && parse_bool(v).unwrap_or(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for t in ["y", "YES", "t", "True", "on", "1"] {
            assert_eq!(parse_bool(t), Ok(true), "{t}");
        }
        for f in ["n", "No", "f", "FALSE", "off", "0"] {
            assert_eq!(parse_bool(f), Ok(false), "{f}");
        }
        assert!(parse_bool("maybe").is_err());
        assert!(parse_bool("").is_err());
    }

    #[test]
    fn int_auto_like_rocprofv3() {
        assert_eq!(int_auto("x", "0xF").unwrap(), "15");
        assert_eq!(int_auto("x", "0x18000000").unwrap(), "402653184");
        assert_eq!(int_auto("x", "12").unwrap(), "12");
        assert!(int_auto("x", "0xZZ").is_err());
        assert!(int_auto("x", "twelve").is_err());
    }

    #[test]
    fn absolute_dirs() {
        let cwd = Path::new("/home/u/w");
        assert_eq!(absolute_output_dir("/o", cwd), "/o");
        assert_eq!(absolute_output_dir("out", cwd), "/home/u/w/out");
        assert_eq!(absolute_output_dir("./out", cwd), "/home/u/w/out");
        assert_eq!(absolute_output_dir(".", cwd), "/home/u/w");
        assert_eq!(
            absolute_output_dir("%hostname%/x", cwd),
            "/home/u/w/%hostname%/x"
        );
        assert_eq!(absolute_output_dir("%cwd%/x", cwd), "%cwd%/x");
        assert_eq!(
            absolute_output_dir("%env{SCRATCH}%/x", cwd),
            "%env{SCRATCH}%/x"
        );
    }

    #[test]
    fn format_lists() {
        assert_eq!(formats_of("").unwrap(), vec![OutputFormat::Rocpd]);
        assert_eq!(
            formats_of("CSV; json:csv").unwrap(),
            vec![OutputFormat::Csv, OutputFormat::Json]
        );
        assert!(formats_of("xml").is_err());
        assert!(parse_formats(&["csv,json".into(), "ROCPD".into()]).is_ok());
        assert!(parse_formats(&["parquet".into()]).is_err());
    }
}
