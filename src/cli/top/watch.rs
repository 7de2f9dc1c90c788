//! The sessions behind `top`, composed from the attach library as `rocprof-attach -p` composes
//! them (plan, attach, detach, settle, collect), and the reads of their databases:
//!
//! * CUDA processes: one session for the whole view; the tool commits its rows while the window
//!   runs (about half a second behind), and each refresh reads the new ones by id;
//! * ROCm processes: rocprofiler-sdk writes its database at detach, so each refresh is a short
//!   session of its own (attach, the interval, detach, read); the view says what that costs.

use crate::attach::session::{
    self, AttachOutcome, AttachRequest, Attachment, Collector, DetachControl, EndReason, Event,
    OutputWait, Plan, WaitEnd, Waiter,
};
use crate::engine::agent::{Agents, CallTimeouts};
use crate::engine::ptrace;
use crate::rocpd::report::live::{Delta, LiveDb};
use crate::rocpd::ConvertOptions;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Collected warnings and progress of the sessions, for the view to show.
pub type Messages = Mutex<Vec<String>>;

/// What the sessions of the ROCm processes cost.
#[derive(Debug, Default, Clone, Copy)]
pub struct Cost {
    /// Sessions run.
    pub cycles: u64,
    /// Wall time spent attaching, detaching and reading (not traced), last cycle.
    pub gap: Duration,
}

/// The watched processes and their sessions.
pub struct Watch {
    /// The request every session uses.
    pub req: AttachRequest,
    agents: Agents,
    /// The signal handlers (SIGINT, SIGTERM, SIGHUP).
    pub waiter: Waiter,
    plan: Plan,
    collector: Option<Collector>,
    cuda: AttachOutcome,
    live: Vec<(i32, LiveDb)>,
    rocm: Vec<i32>,
    rocm_now: Option<(AttachOutcome, Collector)>,
    pidfds: Vec<(i32, OwnedFd)>,
    /// Processes that exited while watched.
    pub exited: Vec<i32>,
    /// The ROCm sessions' cost.
    pub cost: Cost,
    /// Databases read and kept (with -o/-d).
    pub kept: Vec<PathBuf>,
    keep: bool,
    opts: ConvertOptions,
    /// `--spm` asked for (CUDA processes only; the ROCm sessions go without).
    spm: bool,
}

/// Why the sessions could not start: the exit code and what to say.
pub struct Refused {
    /// The exit code.
    pub code: crate::exit::ExitCode,
    /// Lines to print.
    pub lines: Vec<String>,
}

impl Watch {
    /// Plans and attaches every selected process. `keep`: the databases stay (-o/-d).
    pub fn start(
        req: AttachRequest,
        keep: bool,
        events: session::Events,
    ) -> Result<Watch, Refused> {
        let agents = Agents::start(CallTimeouts::default());
        let waiter = Waiter::install().map_err(|e| refused(&e))?;
        let mut plan = session::plan(&req, events).map_err(|e| {
            let mut r = refused(&e);
            if let Some(pid) = e.permission_denied_pid() {
                r.lines.push(crate::attach::preflight::permission_hint(pid));
            }
            r
        })?;
        let (cuda, rocm): (Vec<i32>, Vec<i32>) =
            plan.targets.iter().map(|p| p.report.pid).partition(|pid| {
                plan.targets
                    .iter()
                    .any(|p| p.report.pid == *pid && p.report.cuda.is_some())
            });
        let mut w = Watch {
            req,
            agents,
            waiter,
            plan: Plan::default(),
            collector: None,
            cuda: AttachOutcome::default(),
            live: Vec::new(),
            rocm,
            rocm_now: None,
            pidfds: Vec::new(),
            exited: Vec::new(),
            cost: Cost::default(),
            kept: Vec::new(),
            keep,
            opts: ConvertOptions::default(),
            spm: false,
        };
        w.spm = super::spm::asked(&w.req.env);
        std::mem::swap(&mut w.plan, &mut plan);
        if !cuda.is_empty() {
            let (out, collector) = w.attach_some(&cuda, events);
            w.live = out
                .attached
                .iter()
                .filter_map(|a| {
                    a.cuda
                        .as_ref()
                        .map(|l| (a.pid, LiveDb::new(&host_path(a.pid, &l.db))))
                })
                .collect();
            w.collector = Some(collector);
            w.cuda = out;
        }
        if !w.rocm.is_empty() {
            w.rocm_cycle_start(events);
        }
        let pids = w.pids();
        if pids.is_empty() {
            return Err(Refused {
                code: crate::exit::ExitCode::NotAttachable,
                lines: vec!["no process could be attached; nothing to watch".into()],
            });
        }
        w.pidfds = pids
            .iter()
            .filter_map(|&p| ptrace::pidfd_open(p).ok().map(|fd| (p, fd)))
            .collect();
        Ok(w)
    }

    /// The processes attached (CUDA and ROCm), in plan order.
    pub fn pids(&self) -> Vec<i32> {
        let mut v = self.cuda.pids();
        if let Some((o, _)) = &self.rocm_now {
            v.extend(o.pids());
        }
        v
    }

    /// How the view samples, in words.
    pub fn sampling(&self, interval: Duration) -> String {
        let mut parts = Vec::new();
        if !self.live.is_empty() {
            parts.push("CUDA: the tool's rows as it commits them (about 0.5 s behind)".to_string());
        }
        if !self.rocm.is_empty() {
            let cost = if self.cost.cycles == 0 {
                String::new()
            } else {
                let g = self.cost.gap.as_secs_f64();
                format!(
                    "; attach, detach and read take {:.1} ms each, {:.1} % of the time untraced",
                    g * 1e3,
                    g * 100.0 / (g + interval.as_secs_f64())
                )
            };
            parts.push(format!(
                "ROCm: a session of {:.2} s per refresh (rocprofiler-sdk writes at detach){cost}{}",
                interval.as_secs_f64(),
                if self.spm { "; no --spm counters" } else { "" }
            ));
        }
        parts.join("; ")
    }

    /// Whether the views show sampled counters: `--spm` asked for and CUDA processes watched.
    pub fn spm_shown(&self) -> bool {
        self.spm && !self.live.is_empty()
    }

    /// What to tell when `--spm` was asked for and ROCm processes are watched (they are not
    /// sampled): None otherwise.
    pub fn spm_not_shown(&self) -> Option<String> {
        (self.spm && !self.rocm.is_empty()).then(|| {
            let pids: Vec<String> = self.rocm.iter().map(|p| p.to_string()).collect();
            format!(
                "--spm is not shown for ROCm processes ({}): each refresh is a session of its own and rocprofiler-sdk's SPM is not read; their kernels and copies are shown, and `rocprof-attach -p PID --spm ...` samples them",
                pids.join(", ")
            )
        })
    }

    /// Attaches the processes `pids` of the plan; returns the outcome and its collector. The
    /// ROCm sessions go without `--spm` ([`Watch::spm_not_shown`]).
    fn attach_some(&mut self, pids: &[i32], events: session::Events) -> (AttachOutcome, Collector) {
        let rocm = pids.iter().all(|p| self.rocm.contains(p));
        let all = std::mem::take(&mut self.plan.targets);
        self.plan.targets = all
            .iter()
            .filter(|p| pids.contains(&p.report.pid))
            .cloned()
            .collect();
        let collector = Collector::before(&self.plan, &self.req);
        let waiter = &self.waiter;
        let env = if rocm && self.spm {
            super::spm::without(&self.req.env)
        } else {
            self.req.env.clone()
        };
        let out = session::attach(
            &self.plan,
            &env,
            self.req.parallelism,
            &self.agents,
            events,
            &|| waiter.interrupted(),
        );
        self.plan.targets = all;
        (out, collector)
    }

    fn rocm_cycle_start(&mut self, events: session::Events) {
        let live: Vec<i32> = self
            .rocm
            .iter()
            .copied()
            .filter(|p| !self.exited.contains(p))
            .collect();
        if !live.is_empty() {
            let (out, c) = self.attach_some(&live, events);
            self.rocm_now = Some((out, c));
        }
    }

    /// Ends the current ROCm session: detach, collect, read its databases.
    fn rocm_cycle_end(&mut self, events: session::Events) -> Vec<(i32, Vec<Delta>)> {
        let Some((out, collector)) = self.rocm_now.take() else {
            return Vec::new();
        };
        let dbs = self.finish(&out, collector, events);
        let mut found = Vec::new();
        for (pid, db) in dbs {
            let mut l = LiveDb::new(&db);
            if let Ok(Some(d)) = l.read(&self.opts) {
                found.push((pid.unwrap_or(0), d));
            }
            if self.keep {
                self.kept.push(db);
            } else {
                let _ = std::fs::remove_file(&db);
            }
        }
        found
    }

    /// Detach the still-running processes of `out`, settle their claims, collect the files: the
    /// databases written, with the process each belongs to.
    fn finish(
        &mut self,
        out: &AttachOutcome,
        collector: Collector,
        events: session::Events,
    ) -> Vec<(Option<i32>, PathBuf)> {
        let running: Vec<Attachment> = out
            .attached
            .iter()
            .filter(|a| !self.exited.contains(&a.pid))
            .cloned()
            .collect();
        let ctl = DetachControl::new(self.req.stopped_wait);
        let detached = session::detach_with(
            &running,
            self.req.parallelism,
            self.req.sync_output,
            &self.agents,
            events,
            &ctl,
        );
        let pids: Vec<i32> = out.pids();
        session::settle(&self.plan.claims, &pids, &detached);
        let end = WaitEnd {
            reason: EndReason::Duration,
            exited: out
                .pids()
                .into_iter()
                .filter(|p| self.exited.contains(p))
                .collect(),
        };
        let report = collector.collect(
            &self.req,
            &self.plan,
            out,
            &end,
            &detached,
            OutputWait::NotWaited,
            events,
        );
        report
            .files
            .iter()
            .filter(|f| f.host_path.extension().is_some_and(|e| e == "db"))
            .map(|f| (f.pid, f.host_path.clone()))
            .collect()
    }

    /// One refresh: the new rows of every process, with the pid they belong to.
    pub fn read(&mut self, events: session::Events) -> Vec<(i32, Vec<Delta>)> {
        let mut out = Vec::new();
        if !self.rocm.is_empty() {
            let t = Instant::now();
            out.extend(self.rocm_cycle_end(events));
            self.rocm_cycle_start(events);
            self.cost.cycles += 1;
            self.cost.gap = t.elapsed();
        }
        for (pid, db) in &mut self.live {
            match db.read(&self.opts) {
                Ok(Some(d)) => out.push((*pid, d)),
                Ok(None) => {}
                Err(e) => events(Event::Warning {
                    pid: Some(*pid),
                    message: format!("reading {}: {e}", db.path().display()),
                }),
            }
        }
        out
    }

    /// Processes that exited since the last call.
    pub fn newly_exited(&mut self) -> Vec<i32> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds: Vec<PollFd> = self
            .pidfds
            .iter()
            .map(|(_, fd)| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        if fds.is_empty() || poll(&mut fds, PollTimeout::ZERO).unwrap_or(0) <= 0 {
            return Vec::new();
        }
        let gone: Vec<i32> = fds
            .iter()
            .zip(&self.pidfds)
            .filter(|(f, _)| f.revents().is_some_and(|r| !r.is_empty()))
            .map(|(_, (p, _))| *p)
            .collect();
        self.pidfds.retain(|(p, _)| !gone.contains(p));
        self.exited.extend(&gone);
        gone
    }

    /// Whether every watched process has exited.
    pub fn all_exited(&self) -> bool {
        self.pids().iter().all(|p| self.exited.contains(p))
    }

    /// Detach from everything (the same detach and collect as a session), then the last rows.
    pub fn stop(mut self, events: session::Events) -> (Vec<(i32, Vec<Delta>)>, Vec<PathBuf>) {
        let mut out = self.rocm_cycle_end(events);
        if let Some(c) = self.collector.take() {
            let cuda = std::mem::take(&mut self.cuda);
            let dbs = self.finish(&cuda, c, events);
            for (pid, db) in &mut self.live {
                if let Ok(Some(d)) = db.read(&self.opts) {
                    out.push((*pid, d));
                }
            }
            let mut dbs: Vec<PathBuf> = dbs.into_iter().map(|d| d.1).collect();
            for (_, db) in &self.live {
                if !dbs.iter().any(|d| d == db.path()) && db.path().exists() {
                    dbs.push(db.path().to_path_buf());
                }
            }
            if self.keep {
                self.kept.extend(dbs);
            }
        }
        // The agent server exits once its socket closes.
        drop(self.agents);
        (out, self.kept)
    }
}

/// Where we find a file the process `pid` writes at `path` (as it sees it): the path itself, or
/// under `/proc/PID/root` for a process with another root (a container).
fn host_path(pid: i32, path: &std::path::Path) -> PathBuf {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    match std::fs::read_link(&root) {
        Ok(r) if r != std::path::Path::new("/") => {
            root.join(path.strip_prefix("/").unwrap_or(path))
        }
        _ => path.to_path_buf(),
    }
}

fn refused(e: &crate::attach::Error) -> Refused {
    Refused {
        code: e.exit_code(),
        lines: vec![e.to_string()],
    }
}

/// Every event of the sessions that the user should see, in words (progress is left out).
pub fn describe(ev: &Event) -> Option<String> {
    match ev {
        Event::Warning { message, .. } => Some(message.clone()),
        Event::Failed {
            pid,
            stage,
            message,
            ..
        } => Some(format!("process {pid}: {stage:?} failed: {message}")),
        Event::Exited { pid } => Some(format!("process {pid} exited")),
        _ => None,
    }
}

/// How long until `deadline` (zero when it passed).
pub fn until(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
