//! Command-line front end (work in progress).

/// Parse arguments, run the command, return the process exit code.
pub fn main() -> i32 {
    eprintln!("rocprof-attach: not implemented yet");
    1
}
