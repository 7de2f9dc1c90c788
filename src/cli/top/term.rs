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
