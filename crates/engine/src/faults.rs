//! Test-only pause points at named steps of attach and detach (issue: fault injection).
//!
//! Compiled to nothing unless the `fault-injection` cargo feature is on. With the feature, setting
//! `ROCPROF_ATTACH_FAULT_STEP=<step>` and `ROCPROF_ATTACH_FAULT_FIFO=<path>` makes the process
//! that reaches that step first create `<path>.paused` containing `<step> <pid>\n` and block until
//! a line is written into the FIFO `<path>` (later arrivals at the step do not pause). Tests use the pause to kill the target, or to SIGTERM or
//! SIGKILL rocprof-attach, at exactly that step.

/// A named step of the attach or detach sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Right after PTRACE_SEIZE.
    Seize,
    /// Right after the interrupt-stop (thread stopped, nothing changed yet).
    Interrupt,
    /// After the code patch and a remote mmap.
    Map,
    /// After writing the buffers into the target.
    Write,
    /// Just before resuming the thread into the injected call.
    Call,
    /// After the remote munmap.
    Unmap,
    /// After restoring the thread and releasing it (PTRACE_DETACH) at the end of attach.
    Release,
    /// Right after seizing the listener again for detach.
    Reseize,
    /// Just before resuming the thread into the injected detach call.
    DetachCall,
}

impl Step {
    /// All steps, in the order they happen during one attach/detach cycle.
    pub const ALL: [Step; 9] = [
        Step::Seize,
        Step::Interrupt,
        Step::Map,
        Step::Write,
        Step::Call,
        Step::Unmap,
        Step::Release,
        Step::Reseize,
        Step::DetachCall,
    ];

    /// The name used in `ROCPROF_ATTACH_FAULT_STEP`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Seize => "seize",
            Step::Interrupt => "interrupt",
            Step::Map => "map",
            Step::Write => "write",
            Step::Call => "call",
            Step::Unmap => "unmap",
            Step::Release => "release",
            Step::Reseize => "reseize",
            Step::DetachCall => "detach-call",
        }
    }
}

/// Pause here if the test asked for this step (feature `fault-injection` only).
#[cfg(feature = "fault-injection")]
pub fn point(step: Step) {
    use std::io::{BufRead, Write};
    let Ok(want) = std::env::var("ROCPROF_ATTACH_FAULT_STEP") else {
        return;
    };
    if want != step.name() {
        return;
    }
    let Ok(fifo) = std::env::var("ROCPROF_ATTACH_FAULT_FIFO") else {
        return;
    };
    // Pause once per run: the first process to reach the step creates the marker file; later
    // arrivals (the detach agent passes "interrupt" too) go straight on.
    match std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(format!("{fifo}.paused"))
    {
        Ok(mut f) => {
            let _ = writeln!(f, "{} {}", step.name(), std::process::id());
        }
        Err(_) => return,
    }
    if let Ok(f) = std::fs::File::open(&fifo) {
        let mut line = String::new();
        let _ = std::io::BufReader::new(f).read_line(&mut line);
    }
}

/// Pause here if the test asked for this step (feature `fault-injection` only).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_step: Step) {}
