//! Serving sessions: plain functions over connected sockets and a [`Backend`], usable from
//! tests without the injected thread.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::protocol::{ok_reply, Code, Message, ToolError};
use crate::sock::{self, Received};

/// What a session drives: the CUPTI backend in the target, a fake one in tests.
pub trait Backend {
    /// Starts collecting; the value is the JSON of the `ok` reply.
    fn attach(
        &mut self,
        req: &crate::protocol::AttachRequest,
    ) -> Result<serde_json::Value, ToolError>;
    /// Stops collecting and writes the database; the value is the JSON of the `ok` reply.
    fn detach(&mut self) -> Result<serde_json::Value, ToolError>;
    /// Called about every [`TICK_MS`] while attached: writes what was collected so far.
    fn tick(&mut self) {}
    /// Lists the metrics the process's GPUs offer (no session attached); the value is the
    /// JSON of the `ok` reply.
    fn metrics(
        &mut self,
        _req: &crate::protocol::AttachRequest,
    ) -> Result<serde_json::Value, ToolError> {
        Err(ToolError::new(
            Code::Unsupported,
            "this backend cannot list metrics",
        ))
    }
}

/// How often an attached session's rows are written while it runs (ms): ticks start this far
/// apart (a tick that takes long is followed by the next one a quarter of this later, not a
/// whole period).
/// Half of it is what a process killed by SIGKILL loses on average between its last commit and
/// its end; 200 ms until issue 29 asked to lose at most 1 s.
pub const TICK_MS: i32 = 100;

/// The wait until the next tick, due [`TICK_MS`] after `last` (the last tick's start), and at
/// least a quarter of that: a tool thread that cannot keep up still sleeps between ticks.
fn until_tick(last: std::time::Instant) -> i32 {
    let due = last + std::time::Duration::from_millis(TICK_MS as u64);
    let wait = due.saturating_duration_since(std::time::Instant::now());
    (wait.as_millis() as i32).max(TICK_MS / 4)
}

fn reply(conn: &OwnedFd, r: Result<serde_json::Value, ToolError>) -> bool {
    let text = match r {
        Ok(v) => ok_reply(&v),
        Err(e) => e.reply(),
    };
    sock::send_long(conn, text.as_bytes()).is_ok()
}

/// Sends `e` on a connection about to be closed. A front end sends `attach` right after
/// connecting; closing before it arrives would fail its send (EPIPE) before it reads the
/// refusal, so that message is taken first (waiting at most 2 s).
fn refuse(conn: &OwnedFd, e: &ToolError) {
    let _ = sock::send(conn, e.reply().as_bytes());
    if sock::readable_within(conn, 2000) {
        let _ = sock::recv(conn);
    }
}

/// Refuses `conn` if its peer is neither root nor our uid (sending `error permission`);
/// true if it may be served.
pub fn check_peer(conn: &OwnedFd) -> bool {
    match sock::peer_uid(conn) {
        Ok(uid) if sock::peer_allowed(uid) => true,
        Ok(uid) => {
            let e = ToolError::new(
                Code::Permission,
                format!("the connecting process runs as uid {uid}, this process as uid {}; only root or the same user may attach: run rocprof-attach as that user or as root", unsafe { libc::geteuid() }),
            );
            refuse(conn, &e);
            false
        }
        Err(e) => {
            let e = ToolError::new(
                Code::Permission,
                format!("cannot read the peer's credentials ({e}); connect through a unix socket of this host"),
            );
            refuse(conn, &e);
            false
        }
    }
}

fn refuse_busy(listener: &OwnedFd) {
    if let Ok(c) = sock::accept(listener) {
        if check_peer(&c) {
            let e = ToolError::new(
                Code::Busy,
                "a session is already active on this process and a second concurrent session is refused; detach the first one (or let it end) and attach again",
            );
            refuse(&c, &e);
        }
    }
}

/// Serves one connection until it ends. While it runs, connections arriving on `listener`
/// (if given) get `error busy`. If the connection ends while attached, detaches anyway.
/// Returns whether a session was still attached when the connection ended.
pub fn serve_connection(
    conn: &OwnedFd,
    listener: Option<&OwnedFd>,
    backend: &mut dyn Backend,
) -> bool {
    let mut attached = false;
    let mut last_tick = std::time::Instant::now();
    while let Ok((conn_ready, listen_ready)) = sock::wait(
        conn.as_raw_fd(),
        listener.map(|l| l.as_raw_fd()),
        if attached { until_tick(last_tick) } else { -1 },
    ) {
        // The connection first: a peer that closed it just before a new one connected must
        // end this session (EOF) rather than have the newcomer refused.
        if !conn_ready {
            if let (true, Some(l)) = (listen_ready, listener) {
                refuse_busy(l);
            } else if attached {
                last_tick = std::time::Instant::now();
                backend.tick();
            }
            continue;
        }
        let msg = match sock::recv(conn) {
            Ok(Received::Message(m)) => m,
            Ok(Received::TooLong) => {
                let e = ToolError::new(
                    Code::Internal,
                    "a message longer than 1 MiB was discarded; the front end must send shorter messages",
                );
                if !reply(conn, Err(e)) {
                    break;
                }
                continue;
            }
            Ok(Received::Eof) | Err(_) => break,
        };
        let r = match Message::parse(&msg) {
            Err(e) => Err(e),
            Ok(Message::Attach(_)) if attached => Err(ToolError::new(
                Code::Busy,
                "a session is already attached on this connection; a second concurrent session is refused: send 'detach' first",
            )),
            Ok(Message::Attach(req)) => {
                let r = backend.attach(&req);
                attached = r.is_ok();
                last_tick = std::time::Instant::now();
                r
            }
            Ok(Message::Detach) if !attached => Err(ToolError::new(
                Code::Internal,
                "'detach' came while no session is attached (attach failed or was never sent); send 'attach' first",
            )),
            Ok(Message::Detach) => {
                attached = false;
                backend.detach()
            }
            Ok(Message::Metrics(_)) if attached => Err(ToolError::new(
                Code::Busy,
                "a session is attached on this connection; metrics are listed without one: send 'detach' first",
            )),
            Ok(Message::Metrics(req)) => backend.metrics(&req),
        };
        if !reply(conn, r) {
            break;
        }
    }
    if attached {
        let _ = backend.detach();
    }
    attached
}

/// Serves `first` (if any), then accepts on `listener` forever, one session at a time.
pub fn serve_forever(listener: &OwnedFd, first: Option<OwnedFd>, backend: &mut dyn Backend) -> ! {
    if let Some(c) = first {
        if check_peer(&c) {
            serve_connection(&c, Some(listener), backend);
        }
    }
    loop {
        match sock::accept(listener) {
            Ok(c) => {
                if check_peer(&c) {
                    serve_connection(&c, Some(listener), backend);
                }
            }
            Err(_) => {
                // Out of descriptors or similar: wait a while instead of spinning.
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}
