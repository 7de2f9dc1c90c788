//! Command-line front end (work in progress).

/// Parse arguments, run the command, return the process exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if matches!(args.first().and_then(|a| a.to_str()), Some("convert" | "summary")) {
        return crate::rocpd::cli_main(&args) as i32;
    }
    eprintln!("rocprof-attach: not implemented yet");
    1
}
