//! Abstract `SOCK_SEQPACKET` unix sockets: listen, connect, accept, peer uid, one datagram in
//! and out, and a blocking two-descriptor poll.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::protocol::MAX_MESSAGE;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn abstract_addr(name: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() + 1 > addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad abstract socket name",
        ));
    }
    for (i, b) in bytes.iter().enumerate() {
        addr.sun_path[i + 1] = *b as libc::c_char;
    }
    let len = mem::size_of::<libc::sa_family_t>() + 1 + bytes.len();
    Ok((addr, len as libc::socklen_t))
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds and listens on the abstract socket `name`; `AddrInUse` if it is taken.
pub fn listen(name: &str) -> io::Result<OwnedFd> {
    let fd = socket()?;
    let (addr, len) = abstract_addr(name)?;
    // SAFETY: addr/len describe a valid sockaddr_un.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &addr as *const _ as *const libc::sockaddr,
            len,
        )
    })?;
    // SAFETY: plain listen(2).
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 8) })?;
    Ok(fd)
}

/// Connects to the abstract socket `name`.
pub fn connect(name: &str) -> io::Result<OwnedFd> {
    let fd = socket()?;
    let (addr, len) = abstract_addr(name)?;
    loop {
        // SAFETY: addr/len describe a valid sockaddr_un.
        let r = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                len,
            )
        };
        match cvt(r) {
            Ok(_) => return Ok(fd),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Accepts one connection (blocking).
pub fn accept(listener: &OwnedFd) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: accept4 with null address pointers is allowed.
        let r = unsafe {
            libc::accept4(
                listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        match cvt(r) {
            // SAFETY: r is a fresh descriptor we own.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The peer's uid (`SO_PEERCRED`).
pub fn peer_uid(fd: &OwnedFd) -> io::Result<u32> {
    // SAFETY: ucred is plain data.
    let mut cred: libc::ucred = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred/len point to a buffer of the right size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(cred.uid)
}

/// Whether a peer with `uid` may use this tool: root or our effective uid.
pub fn peer_allowed(uid: u32) -> bool {
    // SAFETY: geteuid cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// Sends one datagram (no SIGPIPE).
pub fn send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: msg is a valid buffer.
        let r = unsafe {
            libc::send(
                fd.as_raw_fd(),
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Largest part of a long reply: a `SOCK_SEQPACKET` message larger than the socket's send
/// buffer (about 208 KiB by default) fails with `EMSGSIZE`, and the H200's metric list (3,601
/// metrics with descriptions) is larger than that.
pub const PART: usize = 64 << 10;

/// The first byte of every part of a long reply but the last (JSON never holds it raw).
pub const MORE: u8 = 0x01;

/// How long one part may wait for room in the socket (the front end reads as they come).
const PART_WAIT_MS: i32 = 10_000;

/// Sends `msg` as one message, or, when longer than [`PART`], as parts: each but the last
/// starts with [`MORE`] (the front end joins them). Bounded: a part that finds no room within
/// 10 s fails the send.
pub fn send_long(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    if msg.len() <= PART {
        return send(fd, msg);
    }
    let mut parts = msg.chunks(PART - 1).peekable();
    let mut buf = Vec::with_capacity(PART);
    while let Some(part) = parts.next() {
        buf.clear();
        if parts.peek().is_some() {
            buf.push(MORE);
        }
        buf.extend_from_slice(part);
        if !writable_within(fd, PART_WAIT_MS) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the front end read nothing for 10 s",
            ));
        }
        send(fd, &buf)?;
    }
    Ok(())
}

fn writable_within(fd: &OwnedFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 && p.revents & libc::POLLOUT != 0 }
}

/// What [`recv`] got.
#[derive(Debug)]
pub enum Received {
    /// A datagram.
    Message(Vec<u8>),
    /// A datagram longer than [`MAX_MESSAGE`] (discarded).
    TooLong,
    /// End of the connection.
    Eof,
}

/// Receives one datagram (blocking).
pub fn recv(fd: &OwnedFd) -> io::Result<Received> {
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    loop {
        // SAFETY: buf is valid for its length.
        let r = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = r as usize;
        if n == 0 {
            return Ok(Received::Eof);
        }
        if n > MAX_MESSAGE {
            return Ok(Received::TooLong);
        }
        buf.truncate(n);
        return Ok(Received::Message(buf));
    }
}

/// Blocks until `a` or (if given) `b` is readable or hung up; returns `(a_ready, b_ready)`.
pub fn wait(a: RawFd, b: Option<RawFd>, timeout_ms: i32) -> io::Result<(bool, bool)> {
    let mut fds = [
        libc::pollfd {
            fd: a,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: fds is a valid array of two pollfd; a negative fd is ignored by poll.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok((fds[0].revents != 0, fds[1].revents != 0));
    }
}

/// Waits up to `ms` milliseconds for `fd` to become readable (or hung up).
pub fn readable_within(fd: &OwnedFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}
