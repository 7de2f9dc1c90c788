//! The agent server started as a program, for a caller that must not fork itself (module docs
//! of [`super`]): `rocprof-attach __agent-server`, its socket on standard input.

use super::{send_message, serve, AgentServer};
use crate::error::{Error, Result};
use nix::sys::socket::{socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The argument that makes the `rocprof-attach` binary run [`serve_stdin`].
pub const SERVER_ARG: &str = "__agent-server";

/// How long [`AgentServer::spawn`] waits for the new server's first message.
const READY_WAIT: Duration = Duration::from_secs(30);

impl AgentServer {
    /// Start the server as a new process from `program` (the `rocprof-attach` binary, with
    /// [`SERVER_ARG`]), for a caller that must not fork itself; returns once the server said it
    /// is ready. An error when it could not be started, ended at once, or is another version.
    pub fn spawn(program: &Path) -> Result<AgentServer> {
        let fail = |msg: String| {
            Error::io(
                format!("starting the agent server {}", program.display()),
                std::io::Error::other(msg),
            )
        };
        let (front, back) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Error::io("creating the agent server socket", std::io::Error::from(e)))?;
        let mut child = Command::new(program)
            .arg(SERVER_ARG)
            .stdin(Stdio::from(back))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail(e.to_string()))?;
        // The server's end of the socket was closed here with the Command: if the server ends,
        // its first message is an end of file. The first process exits once it has forked the
        // server (a host that reaps children itself may have reaped it: nothing to wait for).
        let _ = child.wait();
        let mut server = AgentServer {
            sock: Some(front),
            pid: Pid::from_raw(0),
            batch: Mutex::new(Vec::new()),
            pending: Default::default(),
            spawned: true,
        };
        let hello = server.hello();
        let (version, pid) = match hello.as_deref().map(|h| h.split_once(' ')) {
            Ok(Some((v, pid))) => (v.to_string(), pid.parse().unwrap_or(0)),
            Ok(None) => (hello.clone().unwrap_or_default(), 0),
            Err(msg) => {
                server
                    .pending
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(fail(msg.clone()));
            }
        };
        server.pid = Pid::from_raw(pid);
        if version == env!("CARGO_PKG_VERSION") && pid > 0 {
            return Ok(server);
        }
        // Told to end, not waited for: it may be another program, or hung.
        server
            .pending
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Err(fail(format!(
            "the agent is version {version} but the library calling it is {}: install both from \
             the same build (or point ROCATTACH_AGENT at the matching binary)",
            env!("CARGO_PKG_VERSION")
        )))
    }

    /// The first message of a server started by [`AgentServer::spawn`]: its version and
    /// process id.
    fn hello(&self) -> std::result::Result<String, String> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let sock = self.sock.as_ref().ok_or("no socket")?;
        let deadline = std::time::Instant::now() + READY_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let ms = PollTimeout::try_from(left.as_millis().min(i32::MAX as u128) as i32)
                .unwrap_or(PollTimeout::ZERO);
            let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(0) => {
                    return Err(format!(
                        "it did not start within {} s",
                        READY_WAIT.as_secs()
                    ))
                }
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        let mut buf = [0u8; 256];
        match nix::sys::socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(0) => Err("it ended at once (is the program the rocprof-attach binary?)".into()),
            Ok(n) => Ok(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Body of the `rocprof-attach __agent-server` process ([`AgentServer::spawn`]): the socket is
/// its standard input; it says its version, then serves. Never returns.
pub fn serve_stdin() -> ! {
    let Ok(sock) = std::io::stdin().as_fd().try_clone_to_owned() else {
        crate::ptrace::exit_now(3)
    };
    crate::ptrace::detach_stdin();
    // The caller, watched as well as the socket: a fork of it that kept a copy of the socket
    // open must not delay the will once the caller itself is gone.
    let caller = crate::ptrace::pidfd_open(nix::unistd::getppid().as_raw()).ok();
    let mut keep = vec![sock.as_raw_fd()];
    keep.extend(caller.as_ref().map(|c| c.as_raw_fd()));
    crate::ptrace::close_other_fds(&keep);
    // Not a child of the caller: the first process exits at once, the fork serves.
    if let Ok(nix::unistd::ForkResult::Parent { .. }) = crate::ptrace::fork_agent() {
        crate::ptrace::exit_now(0)
    }
    let hello = format!("{} {}", env!("CARGO_PKG_VERSION"), std::process::id());
    if !send_message(&sock, hello.as_bytes(), &[]) {
        crate::ptrace::exit_now(3)
    }
    serve(sock, caller)
}

/// Wait until the socket has something to read or has closed (true), or until the `caller`
/// (a pidfd) has exited and nothing is left to read (false: the front end is gone, though a
/// copy of its socket may live on in a fork of it). Without a caller to watch, true at once.
pub(super) fn caller_alive(sock: &OwnedFd, caller: Option<&OwnedFd>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let Some(caller) = caller else {
        return true;
    };
    loop {
        let mut fds = [
            PollFd::new(sock.as_fd(), PollFlags::POLLIN),
            PollFd::new(caller.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {
                let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                if ready(&fds[0]) {
                    return true;
                }
                if ready(&fds[1]) {
                    return false;
                }
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return true,
        }
    }
}
