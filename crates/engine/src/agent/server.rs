//! The agent server: a small process, forked before the front end starts any thread, that runs
//! each job on a thread of its own.
//!
//! Forking the front end itself for every attach and detach is expensive once it runs many
//! threads (page tables copied, every thread's pages write-protected, TLB shootdowns): with 32
//! targets it was a third of our CPU. Forking one child per job from a small server still cost
//! a process creation, its copy-on-write faults and its exit per attach and per detach. So the
//! server, forked once while the front end is still small and single-threaded, runs every job
//! on one of its worker threads: ptrace ties a tracee to the thread that seized it (each job
//! seizes and releases its thread), and a thread is all the isolation a job needs from the
//! front end. Workers are reused, so a session over 128 targets creates as many threads as jobs
//! ran at the same time, not 256. The server blocks terminal signals (its
//! threads inherit the mask): if the front end dies, the server sees the socket close, lets the
//! running jobs finish (restoring every thread they stopped), and exits. A job that panics
//! unwinds through the tracee's and the injection's drops, which restore and release the thread.
//!
//! Protocol: one SOCK_SEQPACKET message per job (a JSON request: target, job, timeouts). A single
//! job ([`AgentServer::run`]) carries, as SCM_RIGHTS, the write end of a pipe on which the agent
//! sends its result line. A batch ([`AgentServer::run_all`]) numbers its jobs instead, and each
//! result comes back on the socket as one message tagged with that number: no pipe, no passed
//! descriptor and no `poll` over many pipes per job.
//!
//! A caller that must not fork itself (the rocattach C library, loaded into someone else's
//! process) starts the server as a program instead ([`AgentServer::spawn`]: `rocprof-attach
//! __agent-server`, its socket on the server's standard input). That program forks once and its
//! first process exits, so the server is not a child of the caller (whose `wait` loops, SIGCHLD
//! handlers and child counts it must not disturb); it closes every descriptor of the caller's it
//! inherited but its socket, watches the caller's process as well as the socket (a fork of the
//! caller may hold a copy of the socket: the caller's death is what counts), says which version
//! and process it is before anything is sent, and the caller knows it has ended when its socket
//! does. Either way the front end ends the server with an explicit end message before it closes
//! the socket, so a copy of the socket that a fork of the front end kept open cannot keep the
//! server (and the front end waiting for it) alive.

use super::will::{self, Will};
use super::{
    agent_job, outcome_of, parse_tagged, read_result, CallTimeouts, Job, JobEnd, Outcome, Reply,
    Target, WireResult,
};
use crate::error::{Error, Result};
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};

mod spawned;
use spawned::caller_alive;
pub use spawned::{serve_stdin, SERVER_ARG};

/// Largest job message (the environment buffer is at most a few hundred KiB).
const MAX_REQUEST: usize = 8 << 20;

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    target: Target,
    job: Job,
    timeouts: CallTimeouts,
    /// Reply on the socket tagged with this number (batches); None: on the pipe passed along.
    #[serde(default)]
    reply_id: Option<u64>,
    /// The only job in flight: the server runs it on its own thread (no worker to start).
    #[serde(default)]
    inline: bool,
}

/// What the front end sends the server.
#[derive(Debug, Serialize, Deserialize)]
enum Message {
    /// Run a job.
    Job(Request),
    /// Set (or, with `append`, extend) the will; the descriptors of its files travel with it.
    SetWill { will: Will, append: bool },
    /// The front end finished its work itself: forget the will (and close its files).
    ClearWill,
    /// The front end is done: exit once the jobs in flight are finished, as when the socket
    /// closes (a will still set is carried out).
    End,
}

/// Most file descriptors passed with one message (SCM_MAX_FD is 253).
const MAX_FDS: usize = 64;

/// Largest result message (an outcome with its step timings and an error message is well under
/// 4 KiB; a larger one would be cut and reported as malformed).
const MAX_RESULT: usize = 16 << 10;

/// Handle on a running agent server.
#[derive(Debug)]
pub struct AgentServer {
    sock: Option<OwnedFd>,
    pid: Pid,
    /// One batch at a time reads results from the socket, into this buffer (zeroed once per
    /// server, not once per batch).
    batch: Mutex<Vec<u8>>,
    /// An agent stays behind with a call that outlived its wait: the server outlives us.
    pending: std::sync::atomic::AtomicBool,
    /// Started by [`AgentServer::spawn`]: not our child, so its end is the socket's.
    spawned: bool,
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
                serve(back, None)
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(back);
                Ok(AgentServer {
                    sock: Some(front),
                    pid: child,
                    batch: Mutex::new(Vec::new()),
                    pending: Default::default(),
                    spawned: false,
                })
            }
        }
    }

    /// Run `job` on `target` on a worker thread of the server. `Ok(None)` means the server is
    /// gone (killed): the caller forks an agent itself instead.
    pub fn run(
        &self,
        target: &Target,
        job: &Job,
        timeouts: CallTimeouts,
    ) -> Result<Option<Outcome>> {
        match self.send(target, job, timeouts)? {
            Some(read_end) => outcome_of(target, self.note(read_result(read_end))).map(Some),
            None => Ok(None),
        }
    }

    /// Remember a result whose agent stays behind (see [`Drop`]).
    fn note(&self, wire: WireResult) -> WireResult {
        if matches!(&wire, Ok(w) if w.outcome.pending_agent.is_some()) {
            self.pending
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        wire
    }

    /// Hand `job` to the server; returns the pipe its result arrives on (None: the server is
    /// gone).
    pub(super) fn send(
        &self,
        target: &Target,
        job: &Job,
        timeouts: CallTimeouts,
    ) -> Result<Option<OwnedFd>> {
        let (read_end, write_end) = nix::unistd::pipe()
            .map_err(|e| Error::io("creating the agent pipe", std::io::Error::from(e)))?;
        let sent = self.request(target, job, timeouts, None, Some(&write_end), false)?;
        drop(write_end);
        Ok(sent.then_some(read_end))
    }

    /// Send one request; false when the server is gone.
    fn request(
        &self,
        target: &Target,
        job: &Job,
        timeouts: CallTimeouts,
        reply_id: Option<u64>,
        pipe: Option<&OwnedFd>,
        inline: bool,
    ) -> Result<bool> {
        let Some(sock) = self.sock.as_ref() else {
            return Ok(false);
        };
        let request = Message::Job(Request {
            target: target.clone(),
            job: job.clone(),
            timeouts,
            reply_id,
            inline,
        });
        let bytes = serde_json::to_vec(&request).map_err(|e| Error::Agent {
            pid: target.pid,
            message: e.to_string(),
        })?;
        let fds: Vec<std::os::fd::RawFd> = pipe.iter().map(|p| p.as_raw_fd()).collect();
        Ok(send_message(sock, &bytes, &fds))
    }

    /// Hand the server a [`Will`]: what it finishes by itself if this process dies before
    /// [`AgentServer::clear_will`] (module docs of [`will`]). `files` are the descriptors of
    /// the will's files, one per item that has a file, in item order. False when the server is
    /// gone (nobody would finish anything).
    pub fn set_will(&self, w: &Will, files: &[BorrowedFd]) -> bool {
        let Some(sock) = self.sock.as_ref() else {
            return false;
        };
        let mut files = files.iter();
        let mut items = w.items.iter().peekable();
        let mut append = false;
        // Several messages when the files are more than one message may carry.
        while items.peek().is_some() || !append {
            let mut part = Will {
                items: Vec::new(),
                timeouts: w.timeouts,
            };
            let mut fds = Vec::new();
            while let Some(item) = items.next_if(|i| i.file.is_none() || fds.len() < MAX_FDS) {
                if item.file.is_some() {
                    match files.next() {
                        Some(fd) => fds.push(fd.as_raw_fd()),
                        None => return false,
                    }
                }
                part.items.push(item.clone());
            }
            let msg = Message::SetWill { will: part, append };
            let Ok(bytes) = serde_json::to_vec(&msg) else {
                return false;
            };
            if !send_message(sock, &bytes, &fds) {
                return false;
            }
            append = true;
        }
        true
    }

    /// Take the will back: the front end did its work itself.
    pub fn clear_will(&self) {
        if let Some(sock) = self.sock.as_ref() {
            if let Ok(bytes) = serde_json::to_vec(&Message::ClearWill) {
                send_message(sock, &bytes, &[]);
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Run `jobs` with at most `limit` in flight at once, from this one thread: requests go
    /// out as results come back on the socket, so the caller needs no thread, pipe or `poll`
    /// per job; `handed(i)` is told just before job `i` goes to the server (a job the server then
    /// does not take is run another way by the caller). Results are in the order of `jobs`; None
    /// for a job the server did not take (it is gone), which the caller runs another way.
    pub fn run_all(
        &self,
        jobs: &[(Target, Job)],
        limit: usize,
        timeouts: CallTimeouts,
        handed: &dyn Fn(usize),
    ) -> Vec<Option<Result<Outcome>>> {
        let mut results: Vec<Option<Result<Outcome>>> = (0..jobs.len()).map(|_| None).collect();
        let Some(sock) = self.sock.as_ref() else {
            return results;
        };
        let mut one_batch = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        let limit = limit.max(1);
        let mut in_flight = 0usize;
        let mut next = 0usize;
        if one_batch.len() != MAX_RESULT {
            *one_batch = vec![0u8; MAX_RESULT];
        }
        let buf: &mut [u8] = &mut one_batch;
        loop {
            while next < jobs.len() && in_flight < limit {
                let (target, job) = &jobs[next];
                // A batch of one is the only job in flight: the server runs it itself.
                let inline = jobs.len() == 1;
                // Told before the send: once sent, the server may seize the thread at once, and
                // a caller that gives up waiting must already count this job as under way.
                handed(next);
                match self.request(target, job, timeouts, Some(next as u64), None, inline) {
                    Ok(true) => in_flight += 1,
                    Ok(false) => break, // gone: the rest stays None
                    Err(e) => results[next] = Some(Err(e)),
                }
                next += 1;
            }
            if in_flight == 0 {
                break;
            }
            let n = match nix::sys::socket::recv(sock.as_raw_fd(), buf, MsgFlags::empty()) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => 0,
            };
            if n == 0 {
                break;
            }
            if let Some((id, wire)) = parse_tagged(&buf[..n]) {
                if let Some(slot) = results.get_mut(id as usize).filter(|s| s.is_none()) {
                    *slot = Some(outcome_of(&jobs[id as usize].0, self.note(wire)));
                    in_flight -= 1;
                }
            }
        }
        // Jobs sent but never answered (the server died): report them, do not run them again.
        for (i, slot) in results.iter_mut().enumerate().take(next) {
            if slot.is_none() {
                *slot = Some(outcome_of(
                    &jobs[i].0,
                    Err("the agent server ended without a result (it was killed)".into()),
                ));
            }
        }
        results
    }
}

/// Send one message with `fds`; false when the server is gone.
fn send_message(sock: &OwnedFd, bytes: &[u8], fds: &[std::os::fd::RawFd]) -> bool {
    let cmsgs = [ControlMessage::ScmRights(fds)];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(bytes)],
        if fds.is_empty() { &[] } else { &cmsgs },
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .is_ok()
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        // The end message (or the socket's end, should it not arrive) tells the server to exit
        // once its agents are done. An agent that stays until the target continues (stopped by
        // job control in our call) or until a slow call returns must not hold the front end: the
        // server then finishes alone.
        let Some(sock) = self.sock.take() else {
            return;
        };
        if let Ok(bytes) = serde_json::to_vec(&Message::End) {
            send_message(&sock, &bytes, &[]);
        }
        if self.pending.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if self.spawned {
            // Not our child: it has ended (and closed every file it held) when its socket has.
            let mut buf = vec![0u8; MAX_RESULT];
            loop {
                match nix::sys::socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                    Ok(0) => break,
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                }
            }
        } else {
            drop(sock);
            let _ = nix::sys::wait::waitpid(self.pid, None);
        }
    }
}

/// Stack of a worker thread: a sequence needs little (the FP-state buffer is on the heap).
const JOB_STACK: usize = 256 << 10;

/// Jobs received and not yet taken by a worker.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<(Request, Reply)>,
    /// Workers waiting for a job.
    idle: usize,
    /// The front end closed the socket: workers exit once the queue is empty.
    closed: bool,
    /// How each job that ran ended, by target process and kind of job (the last one of each
    /// counts): a will does not run again what already ran.
    ran: HashMap<(i32, &'static str), JobEnd>,
}

impl Queue {
    /// Queue a job; true when a new worker is needed for it (more jobs wait than workers idle).
    fn push(&self, job: (Request, Reply)) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.jobs.push_back(job);
        let spawn = s.jobs.len() > s.idle;
        drop(s);
        self.ready.notify_one();
        spawn
    }

    /// The next job if one is queued.
    fn try_take(&self) -> Option<(Request, Reply)> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .jobs
            .pop_front()
    }

    /// The next job, or None once the queue is closed and empty.
    fn take(&self) -> Option<(Request, Reply)> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = s.jobs.pop_front() {
                return Some(job);
            }
            if s.closed {
                return None;
            }
            s.idle += 1;
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
            s.idle -= 1;
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.ready.notify_all();
    }
}

/// A worker: run jobs until the queue closes.
fn work(queue: &Queue) {
    while let Some(job) = queue.take() {
        run_job(job, queue);
    }
}

fn run_job((req, reply): (Request, Reply), queue: &Queue) {
    let key = (req.target.pid, req.job.name());
    let end = run_one(&req.target, &req.job, req.timeouts, reply);
    queue
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .ran
        .insert(key, end);
}

/// Run one job; how it ended. A panic unwinds through the job's tracee and injection, which
/// restore and release the thread; the front end reports the missing result.
fn run_one(target: &Target, job: &Job, timeouts: CallTimeouts, reply: Reply) -> JobEnd {
    let job = std::panic::AssertUnwindSafe(|| agent_job(target, job, timeouts, reply));
    std::panic::catch_unwind(job).unwrap_or_default()
}

/// A will received, with the files of its items (None for an item without a file).
#[derive(Default)]
struct HeldWill {
    will: Will,
    files: Vec<Option<std::fs::File>>,
}

impl HeldWill {
    /// Add `part` and its descriptors (in item order).
    fn extend(&mut self, part: Will, fds: Vec<OwnedFd>) {
        let mut fds = fds.into_iter();
        for item in part.items {
            let file = item
                .file
                .as_ref()
                .and_then(|_| fds.next().map(std::fs::File::from));
            self.files.push(file);
            self.will.items.push(item);
        }
        self.will.timeouts = part.timeouts;
    }

    /// The front end died: say so in every file.
    fn announce(&self) {
        for (item, file) in self.will.items.iter().zip(&self.files) {
            if let (Some(f), Some(file)) = (&item.file, file) {
                will::rewrite(file, &f.on_death, f.pad_to);
            }
        }
    }

    /// Finish every item (module docs of [`will`]); the files close when this returns.
    fn execute(self, queue: &Queue) {
        let ran = std::mem::take(&mut queue.state.lock().unwrap_or_else(|e| e.into_inner()).ran);
        for (item, file) in self.will.items.iter().zip(&self.files) {
            let ended = |kind: &str| {
                ran.iter()
                    .find(|((pid, k), _)| *pid == item.target.pid && *k == kind)
                    .map(|(_, end)| *end)
                    .unwrap_or_default()
            };
            let done = match &item.job {
                None => true,
                // What it undoes did not happen (or failed): nothing to undo.
                Some(_)
                    if item
                        .only_after
                        .as_deref()
                        .is_some_and(|k| ended(k).status != Some(0)) =>
                {
                    true
                }
                Some(job) if ended(job.name()).done => true,
                Some(job) => run_one(&item.target, job, self.will.timeouts, Reply::Nowhere).done,
            };
            if let (Some(f), Some(file)) = (&item.file, file) {
                will::rewrite(
                    file,
                    if done { &f.on_success } else { &f.on_failure },
                    f.pad_to,
                );
            }
        }
    }
}

/// The server's loop: receive a job, hand it to an idle worker or a new one.
// Long because: one receive loop with its message kinds, then the end (and the will).
fn serve(sock: OwnedFd, caller: Option<OwnedFd>) -> ! {
    crate::ptrace::block_terminal_signals();
    let sock = Arc::new(sock);
    let mut buf = vec![0u8; MAX_REQUEST];
    let queue = Arc::new(Queue::default());
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut held: Option<HeldWill> = None;
    loop {
        if !caller_alive(&sock, caller.as_ref()) {
            break; // the caller died; only a fork of it still holds the socket
        }
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; MAX_FDS]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let received = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let (len, fds) = match received {
            Ok(msg) => {
                let fds: Vec<std::os::fd::RawFd> = msg
                    .cmsgs()
                    .map(|c| {
                        c.flat_map(|m| match m {
                            ControlMessageOwned::ScmRights(fds) => fds,
                            _ => Vec::new(),
                        })
                        .collect()
                    })
                    .unwrap_or_default();
                (msg.bytes, fds)
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        };
        if len == 0 {
            break; // the front end closed the socket
        }
        // The descriptors arrived with the message: nobody else in this process owns them.
        let mut fds: Vec<OwnedFd> = fds.into_iter().map(crate::ptrace::own_fd).collect();
        let req = match serde_json::from_slice::<Message>(&buf[..len]) {
            Ok(Message::Job(req)) => req,
            Ok(Message::SetWill { will, append }) => {
                let h = match held.take() {
                    Some(h) if append => held.insert(h),
                    _ => held.insert(HeldWill::default()),
                };
                h.extend(will, fds);
                continue;
            }
            Ok(Message::ClearWill) => {
                held = None;
                continue;
            }
            Ok(Message::End) => break,
            Err(_) => continue,
        };
        let fd = (!fds.is_empty()).then(|| fds.swap_remove(0));
        let reply = match (req.reply_id, fd) {
            (Some(id), _) => Reply::Socket {
                sock: sock.clone(),
                id,
            },
            (None, Some(fd)) => Reply::Pipe(std::fs::File::from(fd)),
            (None, None) => continue,
        };
        if req.inline {
            run_job((req, reply), &queue);
            continue;
        }
        if queue.push((req, reply)) {
            let q = queue.clone();
            let spawned = std::thread::Builder::new()
                .name("agent".into())
                .stack_size(JOB_STACK)
                .spawn(move || work(&q));
            match spawned {
                Ok(handle) => workers.push(handle),
                // With no worker at all the job would wait forever: run it here.
                Err(_) if workers.is_empty() => {
                    while let Some(job) = queue.try_take() {
                        run_job(job, &queue);
                    }
                }
                // Otherwise a running worker takes it when it is done.
                Err(_) => {}
            }
        }
    }
    // The front end is gone. With a will set it died before finishing its work: say so first.
    if let Some(h) = &held {
        h.announce();
    }
    // Let every queued and running job finish: a thread it stopped must be restored first.
    queue.close();
    for handle in workers {
        let _ = handle.join();
    }
    if let Some(h) = held {
        h.execute(&queue);
    }
    crate::ptrace::exit_now(0)
}
