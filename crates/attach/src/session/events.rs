//! What a session reports while it runs: one [`Event`] per step, delivered to a callback.

use serde::Serialize;
use std::time::Duration;

/// The callback a session reports through. It may be called from several threads.
pub type Events<'a> = &'a (dyn Fn(Event) + Sync);

/// Where in the session something happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Selection and preflight.
    Plan,
    /// The attach injection.
    Attach,
    /// The detach injection.
    Detach,
}

/// Why the profiling window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "signal")]
pub enum EndReason {
    /// Enter was pressed.
    Enter,
    /// SIGINT, SIGTERM or SIGHUP arrived (the signal number).
    Signal(i32),
    /// The requested duration passed.
    Duration,
    /// Every attached process exited.
    TargetsExited,
    /// A signal arrived while attaching; what was attached is detached at once.
    Interrupted,
}

impl EndReason {
    /// Why the window ended, in words (for logs): "the duration passed", "SIGINT received".
    pub fn describe(&self) -> String {
        match self {
            EndReason::Enter => "Enter pressed".into(),
            EndReason::Signal(s) => format!("{} received", crate::signals::name(*s)),
            EndReason::Duration => "the requested duration passed".into(),
            EndReason::TargetsExited => "every attached process exited".into(),
            EndReason::Interrupted => "interrupted while attaching".into(),
        }
    }
}

/// One step of a session, in the order they happen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    /// Processes that could not be examined while selecting (the reasons are logged at info
    /// level).
    Unreadable {
        /// Their process ids.
        pids: Vec<i32>,
    },
    /// Processes chosen by a selection other than one explicit PID.
    Selected {
        /// The selection as written on the command line.
        selection: String,
        /// The processes, in order.
        pids: Vec<i32>,
    },
    /// A process passed preflight and will be attached.
    Planned {
        /// Process id.
        pid: i32,
        /// The selected process whose tree it belongs to.
        root: i32,
        /// Listener thread that will be seized.
        listener_tid: i32,
        /// The tool library string that will be sent.
        tool: String,
    },
    /// Something the user should know; the session goes on.
    Warning {
        /// The process concerned, when there is one.
        pid: Option<i32>,
        /// The warning.
        message: String,
    },
    /// A process could not be planned, attached or detached.
    Failed {
        /// Process id.
        pid: i32,
        /// Which step failed.
        stage: Stage,
        /// The error.
        message: String,
        /// How to get the permission this needs, when the kernel refused us.
        hint: Option<String>,
        /// The process exited (a detach failure that needs no warning of its own).
        exited: bool,
    },
    /// A process was attached.
    Attached {
        /// Process id.
        pid: i32,
        /// Listener thread used (ROCm); CUDA: the thread that started the tool, or the tool's
        /// own thread when an earlier session loaded it.
        listener_tid: i32,
        /// Milliseconds for the whole attach sequence.
        attach_ms: f64,
        /// Microseconds the listener (CUDA: the thread that started the tool) was stopped outside
        /// the call.
        stopped_us: u64,
        /// The CUDA backend's attach: whether this session loaded the tool (None: ROCm).
        cuda_loaded_now: Option<bool>,
    },
    /// Every process of the attach phase was handled; these are attached.
    AttachedAll {
        /// The attached processes.
        pids: Vec<i32>,
    },
    /// The profiling window starts.
    Waiting {
        /// Detach after this long (None: on Enter, a signal, or the targets' exit).
        duration: Option<Duration>,
        /// Enter on stdin ends the window.
        enter: bool,
    },
    /// Periodic progress during the window (only with [`super::WaitOptions::tick`]).
    Tick {
        /// Time since the window started.
        elapsed: Duration,
        /// Time left (with a duration).
        remaining: Option<Duration>,
        /// Processes still attached and alive.
        live: Vec<i32>,
    },
    /// An attached process exited during the window.
    Exited {
        /// Process id.
        pid: i32,
    },
    /// The window ended.
    WaitEnded {
        /// Why.
        reason: EndReason,
    },
    /// Detaching starts.
    Detaching {
        /// The tool writes its output before detach returns.
        sync_output: bool,
    },
    /// A signal arrived while detach calls were running (they are finished, not abandoned; a
    /// detach waiting for a stopped target gives up).
    SignalWhileDetaching {
        /// The signal number.
        signal: i32,
        /// Stopped processes whose detach was waiting for them to continue (now given up).
        stopped: Vec<i32>,
    },
    /// A process to detach is stopped (SIGSTOP, Ctrl-Z, a debugger): the detach call cannot run
    /// until it continues; the detach waits for it at most `wait`.
    Stopped {
        /// Process id.
        pid: i32,
        /// Its state letter (`T` or `t`).
        state: char,
        /// How long the detach waits for it.
        wait: Duration,
    },
    /// A stopped process continued; its detach goes on.
    Continued {
        /// Process id.
        pid: i32,
    },
    /// With asynchronous output: waiting (at most `timeout`) for the tool's files to appear.
    AwaitingOutput {
        /// The bound (`--output-timeout`).
        timeout: Duration,
    },
    /// A process was detached.
    Detached {
        /// Process id.
        pid: i32,
        /// Milliseconds for the whole detach sequence.
        detach_ms: f64,
    },
}
