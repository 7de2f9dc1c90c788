//! Standard output and standard error of the front end. Everything the command line prints goes
//! through here, so that a reader that goes away (`rocprof-attach query ... | head -1`) is
//! handled in one place (docs/exit-codes.md, "Closed pipes"):
//!
//! * standard output ([`stdout`], `out!`, `outln!`): the first failed write stops it and
//!   later writes are dropped, so the command runs to its end. A broken pipe is not an error: no
//!   message, and the exit status stays the command's own (0 for help, completions, the manual
//!   page and data output), as ripgrep does. Any other error (a full disk under `> file`) is
//!   reported by [`finish`] in one line, with exit code 1 instead of 0;
//! * standard error (`errout!`, `errln!`): write errors are ignored, there is nowhere left to
//!   report them.
//!
//! std's `print!` and `eprint!` families panic on those errors instead; `clippy::print_stdout`
//! and `clippy::print_stderr` are denied in the front end so that they come back nowhere.

use crate::exit::ExitCode;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// `print!` to standard output through [`stdout`]: never panics.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!($crate::cli::stdio::stdout(), $($arg)*);
    }};
}

/// `println!` to standard output through [`stdout`]: never panics.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::cli::stdio::stdout(), $($arg)*);
    }};
}

/// `eprint!` that ignores write errors.
macro_rules! errout {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprintln!` that ignores write errors.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub(crate) use {errln, errout, out, outln};

/// Set once standard output has stopped; the error is in [`ERROR`].
static STOPPED: AtomicBool = AtomicBool::new(false);
/// The error that stopped standard output.
static ERROR: Mutex<Option<io::Error>> = Mutex::new(None);

/// Standard output, locked, as a writer whose writes never fail (see the module docs).
pub struct Stdout(io::StdoutLock<'static>);

/// Lock standard output; see [`Stdout`].
pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

/// Whether standard output has stopped (its reader went away or a write failed).
pub fn stopped() -> bool {
    STOPPED.load(Ordering::Relaxed)
}

/// Record the error that stops standard output (the first one wins).
fn stop(e: io::Error) {
    let mut slot = ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(e);
    }
    STOPPED.store(true, Ordering::Relaxed);
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if !stopped() {
            if let Err(e) = self.0.write_all(buf) {
                stop(e);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !stopped() {
            if let Err(e) = self.0.flush() {
                stop(e);
            }
        }
        Ok(())
    }
}

/// Flush standard output and settle the exit status: a broken pipe leaves `code` as it is;
/// another write error is reported in one line on standard error and turns success into
/// [`ExitCode::Failure`].
pub fn finish(code: ExitCode) -> ExitCode {
    let _ = stdout().flush();
    let slot = ERROR.lock().unwrap_or_else(|p| p.into_inner());
    match slot.as_ref() {
        Some(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            errln!("rocprof-attach: error: cannot write to standard output: {e}");
            if code == ExitCode::Success {
                ExitCode::Failure
            } else {
                code
            }
        }
        _ => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_keeps_the_code_and_other_errors_fail() {
        // One test: the state is process-wide.
        assert_eq!(finish(ExitCode::Success), ExitCode::Success);
        stop(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(stopped());
        assert_eq!(finish(ExitCode::Success), ExitCode::Success);
        assert_eq!(finish(ExitCode::Partial), ExitCode::Partial);
        *ERROR.lock().unwrap() = Some(io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(finish(ExitCode::Success), ExitCode::Failure);
        assert_eq!(finish(ExitCode::Partial), ExitCode::Partial);
        *ERROR.lock().unwrap() = None;
        STOPPED.store(false, Ordering::Relaxed);
    }
}
