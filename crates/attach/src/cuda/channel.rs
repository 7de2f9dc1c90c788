//! The socket between a front end and the CUDA tool: abstract Unix sockets of type
//! `SOCK_SEQPACKET` (one message per send, no file on disk), every wait bounded by `poll`.
//!
//! The first session of a process listens on a name of its own and the tool, once loaded,
//! connects to it; later sessions connect to the tool's own name, `rocprof-attach-cuda.<pid>`
//! (docs/cuda.md, "The conversation"). Each side checks who is at the other end
//! (`SO_PEERCRED`): the front end accepts only the target process.

use crate::error::{Error, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    accept4, bind, connect, getsockopt, listen, recv, send, socket, sockopt, AddressFamily,
    Backlog, MsgFlags, SockFlag, SockType, UnixAddr,
};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// Largest message accepted (one part of a reply: the tool sends parts of at most 64 KiB).
const MAX_MESSAGE: usize = 1 << 20;

/// The tool's own listening name in process `own_pid` (its PID as it sees itself).
pub fn tool_name(own_pid: i32) -> String {
    format!("rocprof-attach-cuda.{own_pid}")
}

fn io(context: impl Into<String>) -> impl FnOnce(nix::Error) -> Error {
    let context = context.into();
    move |e| Error::Io {
        context,
        source: std::io::Error::from(e),
    }
}

fn seqpacket() -> Result<OwnedFd> {
    socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io("creating a socket for the CUDA tool"))
}

/// A listening socket for the tool to connect back to.
pub struct Listener {
    fd: OwnedFd,
    /// Its abstract name (without the leading NUL).
    pub name: String,
}

impl Listener {
    /// Listen on a fresh name for a session with `pid`.
    pub fn new(pid: i32) -> Result<Listener> {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!("rocprof-attach.{}.{pid}.{nonce:08x}", std::process::id());
        let fd = seqpacket()?;
        let addr = UnixAddr::new_abstract(name.as_bytes()).map_err(io("naming the socket"))?;
        bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr)
            .map_err(io("binding the socket for the CUDA tool"))?;
        listen(&fd, Backlog::new(4).expect("small backlog"))
            .map_err(io("listening for the CUDA tool"))?;
        Ok(Listener { fd, name })
    }

    /// Wait up to `timeout` for process `pid` to connect; connections from anyone else are
    /// closed. None when it did not come in time.
    pub fn accept_from(&self, pid: i32, timeout: Duration) -> Result<Option<OwnedFd>> {
        let deadline = Instant::now() + timeout;
        loop {
            if !wait_readable(&self.fd, deadline)? {
                return Ok(None);
            }
            let raw = accept4(
                std::os::fd::AsRawFd::as_raw_fd(&self.fd),
                SockFlag::SOCK_CLOEXEC,
            )
            .map_err(io("accepting the CUDA tool's connection"))?;
            // SAFETY: accept4 returned a new descriptor that nothing else owns.
            let conn = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
            if peer_pid(&conn) == Some(pid) {
                return Ok(Some(conn));
            }
        }
    }
}

/// The process id at the other end of a connection.
pub fn peer_pid(conn: &OwnedFd) -> Option<i32> {
    getsockopt(conn, sockopt::PeerCredentials)
        .ok()
        .map(|c| c.pid())
}

/// Connect to the tool already loaded in process `pid` (`own_pid`: its PID as it sees itself).
pub fn connect_tool(pid: i32, own_pid: i32) -> Result<OwnedFd> {
    let fd = seqpacket()?;
    let name = tool_name(own_pid);
    let addr = UnixAddr::new_abstract(name.as_bytes()).map_err(io("naming the socket"))?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr).map_err(|e| Error::NotAttachable {
        pid,
        reason: format!(
            "our CUDA tool is loaded in it, but its socket @{name} does not answer ({e}); the process \
             may run in another network namespace. Fix: restart the process to load the tool afresh"
        ),
    })?;
    if peer_pid(&fd) != Some(pid) {
        return Err(Error::NotAttachable {
            pid,
            reason: format!("the socket @{name} belongs to another process"),
        });
    }
    Ok(fd)
}

/// Send one message.
pub fn send_message(conn: &OwnedFd, text: &str) -> Result<()> {
    send(
        std::os::fd::AsRawFd::as_raw_fd(conn),
        text.as_bytes(),
        MsgFlags::MSG_NOSIGNAL,
    )
    .map(drop)
    .map_err(io("sending to the CUDA tool"))
}

/// Wait up to `timeout` for one message. None when none came in time; an error when the
/// connection closed. A long reply comes in parts, each but the last starting with [`MORE`]:
/// they are joined, each part waited for up to `timeout`.
pub fn receive(conn: &OwnedFd, timeout: Duration) -> Result<Option<String>> {
    let mut whole = Vec::new();
    loop {
        let Some(part) = receive_part(conn, timeout)? else {
            return Ok(None);
        };
        match part.split_first() {
            Some((&MORE, rest)) if whole.len() + rest.len() <= MAX_REPLY => {
                whole.extend_from_slice(rest)
            }
            Some((&MORE, _)) => {
                return Err(Error::Io {
                    context: "reading from the CUDA tool".into(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("its reply is longer than {} MiB", MAX_REPLY >> 20),
                    ),
                })
            }
            _ => {
                whole.extend_from_slice(&part);
                return Ok(Some(String::from_utf8_lossy(&whole).into_owned()));
            }
        }
    }
}

/// The first byte of each part of a long reply but the last (the tool's `sock::MORE`).
const MORE: u8 = 0x01;

/// Longest reply joined from parts.
const MAX_REPLY: usize = 256 << 20;

/// One message, waited for up to `timeout`.
fn receive_part(conn: &OwnedFd, timeout: Duration) -> Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + timeout;
    if !wait_readable(conn, deadline)? {
        return Ok(None);
    }
    let mut buf = vec![0u8; MAX_MESSAGE];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(conn),
        &mut buf,
        MsgFlags::empty(),
    )
    .map_err(io("reading from the CUDA tool"))?;
    if n == 0 {
        return Err(Error::Io {
            context: "reading from the CUDA tool".into(),
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the tool closed the connection (its process may have exited)",
            ),
        });
    }
    buf.truncate(n);
    Ok(Some(buf))
}

/// Wait until `fd` is readable or `deadline` passes (false).
fn wait_readable(fd: &OwnedFd, deadline: Instant) -> Result<bool> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up: a wait of less than a millisecond must not turn into a spin.
        let ms = u16::try_from(left.as_micros().div_ceil(1000).min(60_000)).unwrap_or(60_000);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) if left.is_zero() => return Ok(false),
            Ok(0) => continue,
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io("waiting for the CUDA tool")(e)),
        }
    }
}
