//! The few system interfaces of this crate that need `unsafe`, kept in this one module. Each
//! wrapper is safe to call.

/// Width of the terminal on stdout, if stdout is a terminal.
pub fn terminal_columns() -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the valid, properly aligned struct we pass.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// Turn off SQLite's global memory statistics (one process-wide mutex around every SQLite
/// allocation). Effective only before SQLite is initialised; later calls change nothing.
pub fn sqlite_disable_memstatus() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config with SQLITE_CONFIG_MEMSTATUS takes one int argument. It is only
        // permitted before sqlite3_initialize; afterwards it returns SQLITE_MISUSE and changes
        // nothing. The `Once` keeps it from racing with itself.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::os::raw::c_int,
            );
        }
    });
}

/// Keep freed heap memory for the next allocations instead of handing it back to the system
/// at each free (glibc's trim and mmap thresholds raised to 32 MiB and 16 MiB): for a process
/// that reads a database every second, whose page cache SQLite frees and allocates again at
/// each read of a file that changed. The heap then stays at its largest size, a few MiB.
pub fn keep_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two ints and only changes glibc's allocator thresholds; it is safe
    // to call at any time, from any thread.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 16 << 20);
    }
}
