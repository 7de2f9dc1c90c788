//! The agent server: a small process, forked before the front end starts any thread, that forks
//! one agent per job.
//!
//! Forking the front end itself for every attach and detach is expensive once it runs many
//! threads (page tables copied, every thread's pages write-protected, TLB shootdowns): with 32
//! targets it was a third of our CPU. The server is forked while the front end is still small and
//! single-threaded, so the agents it forks are cheap, and each job still runs in its own process
//! exactly as with [`super::run`]. The server blocks terminal signals too: if the front end dies,
//! the server sees the socket close, lets running agents finish, and exits.
//!
//! Protocol: one SOCK_SEQPACKET message per job (a JSON request: target, job, timeouts) carrying, as SCM_RIGHTS,
//! the write end of a pipe on which the agent sends its result line.

use super::{agent_main, outcome_of, read_result, CallTimeouts, Job, Outcome, Target};
use crate::error::{Error, Result};
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd};

/// Largest job message (the environment buffer is at most a few hundred KiB).
const MAX_REQUEST: usize = 8 << 20;

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    target: Target,
    job: Job,
    timeouts: CallTimeouts,
}

/// Handle on a running agent server.
#[derive(Debug)]
pub struct AgentServer {
    sock: Option<OwnedFd>,
    pid: Pid,
}

impl AgentServer {
    /// Fork the server. Call it before the process starts threads, so the server is small.
    pub fn start() -> Result<AgentServer> {
        let (front, back) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Error::io("creating the agent server socket", std::io::Error::from(e)))?;
        match crate::ptrace::fork_agent()? {
            nix::unistd::ForkResult::Child => {
                drop(front);
                serve(back)
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(back);
                Ok(AgentServer {
                    sock: Some(front),
                    pid: child,
                })
            }
        }
    }

    /// Run `job` on `target` in a fresh agent forked by the server. `Ok(None)` means the server
    /// is gone (killed): the caller forks the agent itself instead.
    pub fn run(
        &self,
        target: &Target,
        job: &Job,
        timeouts: CallTimeouts,
    ) -> Result<Option<Outcome>> {
        let Some(sock) = self.sock.as_ref() else {
            return Ok(None);
        };
        let (read_end, write_end) = nix::unistd::pipe()
            .map_err(|e| Error::io("creating the agent pipe", std::io::Error::from(e)))?;
        let request = Request {
            target: target.clone(),
            job: job.clone(),
            timeouts,
        };
        let bytes = serde_json::to_vec(&request).map_err(|e| Error::Agent {
            pid: target.pid,
            message: e.to_string(),
        })?;
        let fds = [write_end.as_raw_fd()];
        let sent = sendmsg::<()>(
            sock.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        );
        drop(write_end);
        if sent.is_err() {
            return Ok(None);
        }
        outcome_of(target, read_result(read_end)).map(Some)
    }
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        // Closing the socket tells the server to exit once its agents are done.
        self.sock.take();
        let _ = nix::sys::wait::waitpid(self.pid, None);
    }
}

/// The server's loop: receive a job, fork an agent for it, reap finished agents.
fn serve(sock: OwnedFd) -> ! {
    crate::ptrace::block_terminal_signals();
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let received = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let (len, fd) = match received {
            Ok(msg) => {
                let fd = msg.cmsgs().ok().and_then(|mut c| {
                    c.find_map(|m| match m {
                        ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
                        _ => None,
                    })
                });
                (msg.bytes, fd)
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        };
        if len == 0 {
            break; // the front end closed the socket
        }
        // The descriptor arrived with the message: nobody else in this process owns it.
        let Some(fd) = fd.map(crate::ptrace::own_fd) else {
            continue;
        };
        let Ok(req) = serde_json::from_slice::<Request>(&buf[..len]) else {
            continue;
        };
        match crate::ptrace::fork_agent() {
            Ok(nix::unistd::ForkResult::Child) => {
                drop(sock);
                agent_main(&req.target, &req.job, req.timeouts, fd)
            }
            Ok(nix::unistd::ForkResult::Parent { .. }) => drop(fd),
            Err(_) => drop(fd), // the caller sees the pipe close and reports the failure
        }
        reap(nix::sys::wait::WaitPidFlag::WNOHANG);
    }
    reap(nix::sys::wait::WaitPidFlag::empty());
    crate::ptrace::exit_now(0)
}

/// Collect finished agents (all of them, blocking, when `flags` is empty).
fn reap(flags: nix::sys::wait::WaitPidFlag) {
    use nix::sys::wait::{waitpid, WaitStatus};
    while let Ok(status) = waitpid(None, Some(flags)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}
