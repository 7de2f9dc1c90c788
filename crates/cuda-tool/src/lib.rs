//! The CUDA tool library that rocprof-attach loads into a running CUDA process: it serves the
//! attach protocol ([`protocol`]) on an abstract unix socket, records CUPTI activity while a
//! session is attached, and writes it to one rocpd database while the session runs (the tail at
//! detach: [`sink`]).
//!
//! Everything here runs inside someone else's process: nothing prints, no panic crosses the
//! FFI boundary (every `extern "C"` entry and CUPTI callback catches unwinds), nothing spins,
//! forks or exits.
#![deny(missing_docs)]

pub mod activity;
pub mod backend;
pub mod candidates;
pub mod catalog;
pub mod cuda;
pub mod cupti;
pub mod db;
pub mod exit;
pub mod host;
pub mod metrics;
pub mod order;
pub mod pmc;
pub mod profiler;
pub mod protocol;
pub mod records;
pub mod server;
pub mod sink;
pub mod sock;
pub mod spm;
pub mod teardown;

use std::ffi::{c_char, c_int, CStr};
use std::io;
use std::os::fd::OwnedFd;

/// The parsed start payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartPayload {
    /// The front end's abstract socket name.
    pub socket: String,
}

/// Parses the `key=value` payload of [`rocprof_attach_cuda_start`]; `None` if it lacks
/// `socket=` or names a version other than 1.
pub fn parse_payload(text: &str) -> Option<StartPayload> {
    let mut socket = None;
    for line in text.lines() {
        match line.trim().split_once('=') {
            Some(("socket", v)) if !v.is_empty() => socket = Some(v.to_owned()),
            Some(("version", v)) if v.trim() != "1" => return None,
            _ => {}
        }
    }
    socket.map(|socket| StartPayload { socket })
}

fn block_signals_and_name() {
    // SAFETY: sigset and prctl calls on our own thread with valid pointers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let name = b"rocp-cu-attach\0";
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// Binds the tool socket of this process; `Ok(None)` if the name is taken.
pub fn bind_tool_socket() -> io::Result<Option<OwnedFd>> {
    let name = protocol::tool_socket_name(std::process::id());
    match sock::listen(&name) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

fn start(payload: *const c_char) -> c_int {
    if payload.is_null() {
        return 2;
    }
    // SAFETY: the front end passes a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(payload) }
        .to_string_lossy()
        .into_owned();
    let Some(p) = parse_payload(&text) else {
        return 2;
    };
    block_signals_and_name();
    let listener = match bind_tool_socket() {
        Ok(Some(l)) => l,
        Ok(None) => return 1,
        Err(_) => return 2,
    };
    // A silent panic hook: this library's own std (cdylib) only; panics are caught anyway.
    std::panic::set_hook(Box::new(|_| {}));
    let first = sock::connect(&p.socket).ok();
    let mut backend = backend::CuptiBackend::default();
    server::serve_forever(&listener, first, &mut backend)
}

/// The entry point the injected thread calls: see [`protocol`]. Returns 1 if a tool instance
/// already serves this process, 2 on a bad payload or socket failure, and never returns
/// after a successful start.
///
/// # Safety
/// `payload` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rocprof_attach_cuda_start(payload: *const c_char) -> c_int {
    std::panic::catch_unwind(|| start(payload)).unwrap_or(3)
}

/// Serves sessions on this process's tool socket, with no first connection (the launch-time
/// path): the thread [`InitializeInjection`] starts.
fn listen_forever() {
    block_signals_and_name();
    let Ok(Some(listener)) = bind_tool_socket() else {
        return;
    };
    std::panic::set_hook(Box::new(|_| {}));
    let mut backend = backend::CuptiBackend::default();
    server::serve_forever(&listener, None, &mut backend)
}

/// CUDA's launch-time injection (`CUDA_INJECTION64_PATH=librocprof_cuda_tool.so`): the driver
/// calls this from `cuInit`. It starts the tool's thread, which waits for sessions on the tool
/// socket, and returns at once; nothing is traced until `rocprof-attach -p PID` comes, and no
/// ptrace is needed then (docs/cuda.md, "Without ptrace"). Returns 1 (success) as CUDA expects,
/// 0 when the thread could not be started.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    std::panic::catch_unwind(|| {
        std::thread::Builder::new()
            .name("rocp-cu-attach".into())
            .spawn(listen_forever)
            .is_ok() as c_int
    })
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload() {
        assert_eq!(
            parse_payload("socket=rocprof-attach.fe.1\nversion=1\n"),
            Some(StartPayload {
                socket: "rocprof-attach.fe.1".into()
            })
        );
        assert_eq!(parse_payload("socket=x\nversion=2\n"), None);
        assert_eq!(parse_payload("version=1\n"), None);
    }
}
