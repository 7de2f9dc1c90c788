//! The terminal of the full-screen view: raw mode and the alternate screen while it runs, the
//! terminal as it was after any exit. [`Screen`] restores it when dropped (a normal exit, `q`,
//! Ctrl-C, and SIGTERM/SIGHUP, which end the loop), and the panic hook it installs restores it
//! before the panic's message is printed.

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use std::io::Stdout;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the terminal is in the view's state (raw mode, alternate screen).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back: main screen, cooked mode, cursor shown. Idempotent.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    }
}

/// The terminal while the view runs.
pub struct Screen {
    /// The ratatui terminal.
    pub term: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    /// Enters raw mode and the alternate screen, and makes a panic restore them first.
    pub fn enter() -> std::io::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        if let Err(e) = execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        ) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(std::io::stdout())) {
            Ok(term) => Ok(Screen { term }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// What the terminal has for the view after a wait ([`wait_input`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Something to read (a key, a resize's report), or a signal came.
    Ready,
    /// Nothing within the wait.
    Idle,
    /// The terminal hung up (its window closed, tmux's server killed): crossterm would spin on
    /// it (its poll re-reads a dead terminal for ever), so the view ends.
    Gone,
}

/// Waits up to `ms` for standard input (the view's terminal) or `signal_fd`, with our own
/// `poll`, so that a terminal that hung up is seen.
pub fn wait_input(signal_fd: std::os::fd::BorrowedFd<'_>, ms: u16) -> Input {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [
        PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
        PollFd::new(signal_fd, PollFlags::POLLIN),
    ];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(0) => Input::Idle,
        Ok(_) => {
            let hung = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
            if fds[0].revents().is_some_and(|r| r.intersects(hung)) {
                Input::Gone
            } else {
                Input::Ready
            }
        }
        Err(_) => Input::Ready,
    }
}
