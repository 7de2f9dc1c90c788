//! The CUPTI [`Backend`]: attach enables activity kinds, detach flushes, disables and writes
//! the database.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Instant;

use crate::activity::{self, BUFFER_BYTES, CUPTI};
use crate::cuda;
use crate::cupti::{self, Cupti};
use crate::db::{self, SessionInfo};
use crate::protocol::{AttachRequest, Code, Plan, ToolError};
use crate::records::{
    KIND_CONCURRENT_KERNEL, KIND_DRIVER, KIND_MARKER, KIND_MEMCPY, KIND_MEMORY2, KIND_MEMSET,
    KIND_RUNTIME,
};
use crate::server::Backend;
use crate::sink::Sink;

/// `clock_gettime(CLOCK_BOOTTIME)` in ns.
pub fn boottime_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// `CLOCK_BOOTTIME - clock()` from the tightest-bracketed of 5 samples, with the bracket width.
pub fn clock_offset(clock: &dyn Fn() -> Option<u64>) -> Option<(i64, i64)> {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..5 {
        let a = boottime_ns();
        let c = clock()? as i64;
        let b = boottime_ns();
        let width = b - a;
        if best.is_none_or(|(_, w)| width < w) {
            best = Some((a + width / 2 - c, width));
        }
    }
    best
}

struct Session {
    plan: Plan,
    /// The process JSON (`extdata`): what the session knows at attach.
    extdata: serde_json::Value,
    /// Rows were written since the last commit.
    uncommitted: bool,
    /// When the last commit ended and how long it took (µs).
    last_commit: Option<(Instant, u64)>,
    /// Sizes CUPTI's buffers to the rate records come at.
    sizer: activity::Sizer,
    cupti: &'static Cupti,
    enabled: Vec<u32>,
    subscriber: *mut c_void,
    /// The database, written while the session runs (`None` once a write failed).
    sink: Option<Sink>,
    /// Why writing failed during the window.
    sink_error: Option<String>,
    /// What the counting window counted and cost (`--pmc`), once it stopped.
    counter_report: Option<crate::pmc::Report>,
    /// The `--spm` sampler, running from attach to detach.
    spm: Option<crate::spm::Sampler>,
    /// What the sampler cost the ticks.
    spm_cost: crate::spm::TickCost,
}

/// API names as users know them, from CUPTI's callback names.
fn api_namer(c: &'static Cupti) -> impl Fn(bool, u32) -> String {
    move |driver: bool, cbid: u32| {
        let domain = if driver {
            cupti::CUPTI_CB_DOMAIN_DRIVER_API
        } else {
            cupti::CUPTI_CB_DOMAIN_RUNTIME_API
        };
        db::api_display_name(&c.callback_name(domain, cbid)).to_owned()
    }
}

fn write_failed(db: &std::path::Path, e: &str) -> ToolError {
    let full = e.contains("full") || e.contains("No space left");
    let cause = if full {
        " (ENOSPC: the file system holding it is full)"
    } else {
        ""
    };
    ToolError::new(
        Code::Internal,
        format!("writing the database {} failed: {e}{cause}; the rows committed before the failure stay in it, the rest of the window is lost: {}, then attach again", db.display(),
            if full { "free space there or choose another directory with -d" } else { "check the path and free space" }),
    )
}

// SAFETY: the subscriber handle and the CUPTI table are only used under the session lock.
unsafe impl Send for Session {}

/// The attached session of this process: the tool thread's, and the exit path's when the
/// process ends during it ([`crate::exit`]).
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// The reply of a session the exit path finished, for a detach that comes after it.
static FINISHED_AT_EXIT: Mutex<Option<serde_json::Value>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The session lock within `wait` (a tick or a detach in progress lets go within
/// milliseconds), or None: polled every millisecond, never waiting longer.
fn lock_within(wait: std::time::Duration) -> Option<MutexGuard<'static, Option<Session>>> {
    let until = Instant::now() + wait;
    loop {
        match SESSION.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// The backend used inside the target process (its session lives in one place per process,
/// shared with the exit path).
#[derive(Default)]
pub struct CuptiBackend {
    /// The counters' process state, kept between sessions (docs/cuda.md, "Counters").
    counters: Option<crate::pmc::Counters>,
}

fn kind_name(k: u32) -> &'static str {
    match k {
        KIND_CONCURRENT_KERNEL => "CONCURRENT_KERNEL",
        KIND_MEMCPY => "MEMCPY",
        KIND_MEMSET => "MEMSET",
        KIND_RUNTIME => "RUNTIME",
        KIND_DRIVER => "DRIVER",
        KIND_MEMORY2 => "MEMORY2",
        KIND_MARKER => "MARKER",
        _ => "?",
    }
}

/// Makes the database's directory (as rocprofv3's tool does: the output template may name
/// directories that do not exist yet, such as `%hostname%/`), as the target's user, and fails
/// early (before anything is enabled) if it is not writable here.
fn check_db_dir(db: &std::path::Path) -> Result<(), ToolError> {
    let dir = db.parent().unwrap_or(std::path::Path::new("/"));
    let _ = std::fs::create_dir_all(dir);
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| {
        ToolError::new(
            Code::Unsupported,
            "ROCPROF_ATTACH_DB contains a NUL byte; send a plain path",
        )
    })?;
    // SAFETY: c is a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: trivial getter.
        let uid = unsafe { libc::geteuid() };
        return Err(ToolError::new(
            Code::Internal,
            format!("the target process (uid {uid}) cannot write the database directory {} ({e}); create it, make it writable by that user, and mind that the path is resolved in the target's mount namespace", dir.display()),
        ));
    }
    Ok(())
}

fn held(c: &Cupti, what: &str, r: c_int) -> ToolError {
    ToolError::new(
        Code::CuptiHeld,
        format!("{what} failed with {}: another profiler (Kineto/torch.profiler, Nsight Systems/Compute, cuda-gdb, DCGM profiling) already holds CUPTI in this process and CUPTI allows one subscriber; stop that profiler or attach to a process without it", c.describe(r)),
    )
}

fn cupti_error(c: &Cupti, what: &str, r: c_int) -> ToolError {
    if r == cupti::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
        return held(c, what, r);
    }
    ToolError::new(
        Code::Internal,
        format!("{what} failed with {}; check that the process's CUDA driver works and CUPTI matches it (ROCPROF_ATTACH_CUPTI)", c.describe(r)),
    )
}

/// A note when `ROCPROF_ATTACH_CUPTI` names another CUPTI than the one this process already uses.
fn note_cupti_in_use(plan: &mut Plan, c: &Cupti) {
    if let Some(p) = &plan.cupti {
        if *p != c.path {
            plan.notes.push(format!(
                "ROCPROF_ATTACH_CUPTI={} ignored: this process already uses {}",
                p.display(),
                c.path.display()
            ));
        }
    }
}

/// CUPTI's API version, refused below [`cupti::MIN_CUPTI_VERSION`].
pub(crate) fn cupti_version(c: &Cupti) -> Result<u32, ToolError> {
    let mut version = 0u32;
    // SAFETY: valid out pointer.
    let r = unsafe { (c.get_version)(&mut version) };
    if r != 0 || version < cupti::MIN_CUPTI_VERSION {
        return Err(ToolError::new(
            Code::CuptiOld,
            format!("{} reports CUPTI API version {version} (result {r}); this tool needs version {} (CUDA 12.0) or newer: point ROCPROF_ATTACH_CUPTI at the libcupti of CUDA 12 or 13", c.path.display(), cupti::MIN_CUPTI_VERSION),
        ));
    }
    Ok(version)
}

/// The activity kinds the plan asks for.
fn wanted_kinds(plan: &Plan) -> Vec<u32> {
    let mut want = Vec::new();
    if plan.kernels || plan.counters.is_some() {
        want.push(KIND_CONCURRENT_KERNEL);
    }
    if plan.copies {
        want.extend([KIND_MEMCPY, KIND_MEMSET]);
    }
    if plan.runtime_api {
        want.push(KIND_RUNTIME);
    }
    if plan.driver_api {
        want.push(KIND_DRIVER);
    }
    if plan.allocations {
        want.push(KIND_MEMORY2);
    }
    if plan.markers {
        want.push(KIND_MARKER);
    }
    want
}

/// Register the buffer callbacks, ask for system thread ids and enable the plan's activity
/// kinds: the kinds enabled. On failure what was done is undone, the subscription included.
fn start_activity(c: &Cupti, sub: *mut c_void, plan: &mut Plan) -> Result<Vec<u32>, ToolError> {
    // SAFETY: the callbacks have the CUPTI signatures.
    let r =
        unsafe { (c.register_callbacks)(activity::buffer_requested, activity::buffer_completed) };
    if r != 0 {
        return Err(undo(
            c,
            sub,
            &[],
            cupti_error(c, "cuptiActivityRegisterCallbacks", r),
        ));
    }
    // SAFETY: plain CUPTI call.
    let r = unsafe { (c.set_thread_id_type)(cupti::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) };
    if r != 0 {
        plan.notes.push(format!(
            "cuptiSetThreadIdType(SYSTEM) failed ({}): API thread ids are CUPTI's, not kernel tids",
            c.describe(r)
        ));
    }
    let mut enabled = Vec::new();
    for k in wanted_kinds(plan) {
        // SAFETY: plain CUPTI call.
        let r = unsafe { (c.enable)(k as c_int) };
        if r != 0 {
            let what = format!("cuptiActivityEnable({})", kind_name(k));
            return Err(undo(c, sub, &enabled, cupti_error(c, &what, r)));
        }
        enabled.push(k);
    }
    Ok(enabled)
}

/// Undo a failed attach: disable the `enabled` kinds and unsubscribe `sub`; returns `e`.
fn undo(c: &Cupti, sub: *mut c_void, enabled: &[u32], e: ToolError) -> ToolError {
    for &k in enabled {
        // SAFETY: plain CUPTI call.
        unsafe { (c.disable)(k as c_int) };
    }
    // SAFETY: sub came from cuptiSubscribe.
    unsafe { (c.unsubscribe)(sub) };
    e
}

/// The attach reply: CUPTI, the driver, what is traced, counted and sampled, notes.
fn attach_reply(
    c: &Cupti,
    version: u32,
    cuda: &crate::cuda::CudaInfo,
    plan: &Plan,
    t0: Instant,
) -> serde_json::Value {
    serde_json::json!({
        "cupti": c.path.display().to_string(),
        "cupti_version": version,
        "driver_version": cuda.driver_version,
        "kinds": plan.kind_names(),
        "enable_us": t0.elapsed().as_micros() as u64,
        "teardowns": crate::teardown::done(),
        "notes": plan.notes,
        "left_out": plan.left_out,
        "counters": plan.counters.as_ref().map(|cp| {
            cp.counters.iter().map(|x| [x.name.clone(), x.metric.clone()]).collect::<Vec<_>>()
        }),
        "spm": plan.spm.as_ref().map(|sp| {
            sp.counters.iter().map(|x| [x.name.clone(), x.metric.clone()]).collect::<Vec<_>>()
        }),
    })
}

impl CuptiBackend {
    /// The process's CUPTI: the one loaded already, else `path` or the one found
    /// ([`cupti::load`]).
    pub(crate) fn load(path: Option<&std::path::Path>) -> Result<&'static Cupti, ToolError> {
        if let Some(c) = CUPTI.get() {
            return Ok(c);
        }
        let c = cupti::load(path)?;
        let _ = CUPTI.set(c);
        CUPTI
            .get()
            .ok_or_else(|| ToolError::new(Code::Internal, "CUPTI table vanished; attach again"))
    }

    // Long because: the attach is one ordered sequence of CUPTI steps, each undone on failure
    // by the same `undo`; split, the order and the undo would live in several places.
    fn do_attach(&mut self, req: &AttachRequest) -> Result<serde_json::Value, ToolError> {
        let t0 = Instant::now();
        let mut plan = req.plan()?;
        check_db_dir(&plan.db)?;
        crate::teardown::cancel();
        let c = Self::load(plan.cupti.as_deref())?;
        note_cupti_in_use(&mut plan, c);
        let version = cupti_version(c)?;
        let sub = subscribe(c)?;
        let t_counters = Instant::now();
        if let Err(e) = self.prepare_counters(c, &mut plan) {
            // SAFETY: sub came from cuptiSubscribe; nothing else was enabled.
            unsafe { (c.unsubscribe)(sub) };
            return Err(e);
        }
        let counters_setup_us = t_counters.elapsed().as_micros() as u64;
        let buffer_bytes = plan.buffer_bytes;
        BUFFER_BYTES.store(buffer_bytes, Ordering::Relaxed);
        promise_zeroed_buffers(c);
        let _ = activity::take_rows();
        let enabled = start_activity(c, sub, &mut plan)?;
        if plan.counters.is_some() {
            // SAFETY: sub came from this CUPTI's cuptiSubscribe and is subscribed.
            if let Err(e) = unsafe { crate::pmc::enable_callbacks(c, sub) } {
                return Err(undo(c, sub, &enabled, e));
            }
        }
        // Sampling starts before the database is created: a refusal writes nothing.
        let spm = match plan
            .spm
            .as_ref()
            .map(|sp| crate::spm::Sampler::start(c, sp))
        {
            Some(Err(e)) => return Err(undo(c, sub, &enabled, e)),
            Some(Ok(s)) => Some(s),
            None => None,
        };
        let (offset, offset_width) = session_clock(c, &mut plan);
        let cuda = cuda::query();
        let init = boottime_ns();
        let extdata = serde_json::json!({
            "backend": "cuda", "tool": "rocprof-attach", "cupti": c.path.display().to_string(),
            "cupti_version": version, "driver_version": cuda.driver_version,
            "clock": "CLOCK_BOOTTIME", "source_clock": "cuptiGetTimestamp",
            "clock_offset_ns": offset, "clock_offset_uncertainty_ns": offset_width,
            "kinds": plan.kind_names(), "process_start_ns": crate::host::process_start_ns(),
            "finished": false,
        });
        let header = SessionInfo {
            init,
            fini: init,
            offset,
            extdata: extdata.clone(),
            demangle: plan.demangle,
        };
        let mut sink = match Sink::create(&plan.db, &cuda, &header) {
            Ok(s) => s,
            Err(e) => {
                spm.into_iter().for_each(|sp| drop(sp.stop(c, 0)));
                return Err(undo(
                    c,
                    sub,
                    &enabled,
                    write_failed(&plan.db, &e.to_string()),
                ));
            }
        };
        if let Err(e) = self.start_counting(c, &plan, &mut sink, counters_setup_us) {
            spm.into_iter().for_each(|sp| drop(sp.stop(c, 0)));
            return Err(undo(c, sub, &enabled, e));
        }
        let reply = attach_reply(c, version, &cuda, &plan, t0);
        *lock(&FINISHED_AT_EXIT) = None;
        crate::exit::arm();
        *lock(&SESSION) = Some(Session {
            plan,
            extdata,
            uncommitted: false,
            last_commit: None,
            sizer: activity::Sizer::new(buffer_bytes),
            cupti: c,
            enabled,
            subscriber: sub,
            sink: Some(sink),
            sink_error: None,
            counter_report: None,
            spm,
            spm_cost: Default::default(),
        });
        Ok(reply)
    }

    /// Opens the counting window of the plan's `--pmc` (kernel rows then carry its counters).
    fn start_counting(
        &mut self,
        c: &'static Cupti,
        plan: &Plan,
        sink: &mut Sink,
        setup_us: u64,
    ) -> Result<(), ToolError> {
        let (Some(cp), Some(cs)) = (&plan.counters, self.counters.as_mut()) else {
            return Ok(());
        };
        sink.set_counters(&cp.counters, !plan.kernels);
        sink.set_counting(true);
        cs.start(c, std::sync::Arc::new(cp.clone()), setup_us)
    }

    /// Sets the counters up for the plan's `--pmc`, adding its notes to the plan; nothing is
    /// enabled on a refusal.
    fn prepare_counters(&mut self, c: &'static Cupti, plan: &mut Plan) -> Result<(), ToolError> {
        let Some(cp) = &plan.counters else {
            return Ok(());
        };
        let (counters, notes) = crate::pmc::Counters::prepare(c, cp)?;
        self.counters = Some(counters);
        plan.notes.extend(notes);
        Ok(())
    }

    /// Ends the counting window if it is due (`force`: at detach), handing its values to the
    /// sink.
    fn finish_counting(&mut self, s: &mut Session, force: bool) {
        let Some(cs) = self.counters.as_mut() else {
            return;
        };
        if !cs.counting() {
            return;
        }
        if !force && !cs.due() {
            if let Some(sink) = s.sink.as_mut() {
                sink.wait_for(crate::pmc::launches::recorded_correlations());
            }
            return;
        }
        if let Some((values, report)) = cs.finish(s.cupti) {
            if let Some(sink) = s.sink.as_mut() {
                sink.add_values(values);
            }
            s.counter_report = Some(match s.counter_report.take() {
                Some(mut earlier) if report.multiplexed.is_some() => {
                    earlier.add(report);
                    earlier
                }
                _ => report,
            });
        }
        // Iteration multiplexing: the next pass starts at once.
        if let Some(plan) = cs.next_pass() {
            if let Err(e) = cs.start(s.cupti, plan, 0) {
                if let Some(r) = s.counter_report.as_mut() {
                    r.notes
                        .push(format!("the next pass could not start: {}", e.message));
                }
            }
        }
        if let Some(sink) = s.sink.as_mut() {
            sink.set_counting(cs.counting());
        }
    }

    /// Writes what CUPTI has delivered since the last tick (rows older than the lag).
    fn do_tick(&mut self) {
        let mut guard = lock(&SESSION);
        let Some(s) = guard.as_mut() else {
            return;
        };
        self.finish_counting(s, false);
        let t_spm = Instant::now();
        if let Some(sp) = s.spm.as_mut() {
            sp.poll(s.cupti);
        }
        let decode = t_spm.elapsed();
        // A default flush: CUPTI hands over every buffer whose records are all complete, full
        // or not (what its documentation suggests doing at a regular interval from a thread of
        // one's own), so rows arrive within a tick of their end rather than when a buffer fills.
        let t0 = Instant::now();
        // SAFETY: plain CUPTI call, outside any CUPTI callback.
        unsafe { (s.cupti.flush_all)(0) };
        let rows = activity::take_rows();
        s.sizer.tick();
        let Some(sink) = s.sink.as_mut() else {
            // A write failed: detach reports it; the rows and samples are dropped.
            if let Some(sp) = s.spm.as_mut() {
                sp.samples.clear();
            }
            return;
        };
        let t1 = Instant::now();
        let before = (sink.counts().clone(), sink.spm_samples());
        let mut r = crate::spm::write_taken(s.spm.as_mut(), s.plan.spm.as_ref(), sink);
        if s.spm.is_some() {
            s.spm_cost.add(decode, t1.elapsed());
        }
        r = r.and_then(|()| sink.add(rows, &api_namer(s.cupti)));
        s.uncommitted |= (sink.counts().clone(), sink.spm_samples()) != before;
        // What was written is committed: a process killed from here on keeps it, and a reader
        // (`rocprof-attach top`) sees it. A reader holding the file defers it to the next tick.
        if r.is_ok() && s.uncommitted {
            let t2 = Instant::now();
            let extdata = with_tick(&s.extdata, t0, t1, t2, s.last_commit);
            r = sink.commit(boottime_ns(), &extdata).map(|done| {
                s.uncommitted = !done;
                if done {
                    s.last_commit = Some((Instant::now(), t2.elapsed().as_micros() as u64));
                }
            });
        }
        if let Err(e) = r {
            s.sink_error = Some(e.to_string());
            s.sink = None;
        }
    }

    fn do_detach(&mut self) -> Result<serde_json::Value, ToolError> {
        // Held to the end: a process exiting meanwhile waits for this detach to finish.
        let mut guard = lock(&SESSION);
        let Some(mut s) = guard.take() else {
            if let Some(reply) = lock(&FINISHED_AT_EXIT).clone() {
                return Ok(reply); // the process is exiting; its database is finished
            }
            return Err(ToolError::new(
                Code::Internal,
                "detach without an attached session; send 'attach' first",
            ));
        };
        self.finish_counting(&mut s, true);
        crate::exit::disarm();
        let c = s.cupti;
        let samples = s
            .spm
            .map(|sp| sp.stop(c, s.sink.as_ref().map_or(0, Sink::offset)));
        let t0 = Instant::now();
        // SAFETY: plain CUPTI calls; the subscriber came from cuptiSubscribe.
        unsafe {
            (c.flush_all)(cupti::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            for &k in &s.enabled {
                (c.disable)(k as c_int);
            }
            (c.flush_all)(cupti::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        }
        // Counters are not kept for the next session: an enabled range profiler left the H200
        // transformer 20 % slower and 3 GB larger after the session. They are disabled, and
        // CUPTI is torn down at the application's next launch (docs/cuda.md, "Safety").
        if let Some(cs) = self.counters.take() {
            crate::pmc::release(cs);
        }
        // SAFETY: the subscriber came from cuptiSubscribe; every kind is disabled and flushed.
        let teardown = unsafe { crate::teardown::request(c, s.subscriber) };
        if !teardown {
            // SAFETY: as above.
            unsafe { (c.unsubscribe)(s.subscriber) };
        }
        let flush_us = t0.elapsed().as_micros() as u64;
        let rows = activity::take_rows();
        // The buffers kept for reuse go back to the system: between sessions the process holds
        // none of ours.
        activity::clear_pool();
        let t1 = Instant::now();
        let extdata = ended_by(&s.extdata, "detach");
        let name = api_namer(c);
        let mut sink = match (s.sink, s.sink_error) {
            (Some(sink), None) => sink,
            (_, e) => {
                let e = e.unwrap_or_else(|| "no database was open".into());
                return Err(write_failed(&s.plan.db, &e));
            }
        };
        if let (Some(sp), Some((samples, offset))) = (&s.plan.spm, &samples) {
            sink.write_spm(&sp.counters, samples, *offset)
                .map_err(|e| write_failed(&s.plan.db, &e.to_string()))?;
        }
        let spm_samples = samples.as_ref().map(|_| sink.spm_samples());
        let counts = sink
            .add(rows, &name)
            .and_then(|()| sink.finish(boottime_ns(), &extdata, &name))
            .map_err(|e| write_failed(&s.plan.db, &e.to_string()))?;
        Ok(serde_json::json!({
            "db": s.plan.db.display().to_string(),
            "kernels": counts.kernels, "copies": counts.copies, "api": counts.api,
            "allocations": counts.allocations, "dropped": counts.dropped, "late": counts.late,
            "flush_us": flush_us, "write_us": t1.elapsed().as_micros() as u64,
            "counters": s.counter_report,
            "spm_samples": spm_samples,
            "spm_tick_us": samples.as_ref().map(|_| s.spm_cost.json()),
            "teardown": teardown,
        }))
    }
}

/// `extdata` with the timing of the tick that commits (`"tick"`, µs): the flush, the write, the
/// previous commit, and the time since the previous commit ended: where the time between a row's
/// delivery and its commit goes (docs/cuda.md, "Writing while attached").
fn with_tick(
    extdata: &serde_json::Value,
    start: Instant,
    flushed: Instant,
    written: Instant,
    last_commit: Option<(Instant, u64)>,
) -> serde_json::Value {
    let us = |a: Instant, b: Instant| b.saturating_duration_since(a).as_micros() as u64;
    let mut json = extdata.clone();
    if let Some(o) = json.as_object_mut() {
        o.insert(
            "tick".into(),
            serde_json::json!({
                "flush_us": us(start, flushed),
                "write_us": us(flushed, written),
                "previous_commit_us": last_commit.map(|(_, d)| d),
                "since_previous_commit_us": last_commit.map(|(at, _)| us(at, written)),
                "buffer_bytes": BUFFER_BYTES.load(Ordering::Relaxed),
            }),
        );
    }
    json
}

/// `extdata` with `"ended_by"` set (`detach`, `exit`, `signal SIGTERM`, ...).
fn ended_by(extdata: &serde_json::Value, how: &str) -> serde_json::Value {
    let mut json = extdata.clone();
    if let Some(o) = json.as_object_mut() {
        o.insert("ended_by".into(), how.into());
    }
    json
}

/// Finishes the attached session, if any, as the process ends (`how`: `exit` or `signal NAME`;
/// [`crate::exit`]). The rows already handed over are written and committed first, before any
/// call into CUPTI, which may be torn down or blocked by the thread that is ending the process;
/// then CUPTI's buffers are flushed and the database finished. Activity is not disabled: the
/// process is going away. Bounded: gives up if the tool thread holds the session longer than
/// [`crate::exit::LOCK_WAIT`].
pub fn finish_at_exit(how: &str) {
    let Some(mut guard) = lock_within(crate::exit::LOCK_WAIT) else {
        return;
    };
    let Some(mut s) = guard.take() else {
        return;
    };
    let name = api_namer(s.cupti);
    let extdata = ended_by(&s.extdata, how);
    let Some(mut sink) = s.sink.take() else {
        return;
    };
    let held = crate::spm::write_taken(s.spm.as_mut(), s.plan.spm.as_ref(), &mut sink)
        .and_then(|()| sink.add(activity::take_rows(), &name))
        .and_then(|()| sink.commit(boottime_ns(), &extdata).map(drop));
    if held.is_err() {
        return;
    }
    // SAFETY: plain CUPTI call, outside any CUPTI callback.
    unsafe { (s.cupti.flush_all)(cupti::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    let rows = activity::take_rows();
    let done = sink
        .add(rows, &name)
        .and_then(|()| sink.finish(boottime_ns(), &extdata, &name));
    if let Ok(counts) = done {
        *lock(&FINISHED_AT_EXIT) = Some(serde_json::json!({
            "db": s.plan.db.display().to_string(), "ended_by": how,
            "kernels": counts.kernels, "copies": counts.copies, "api": counts.api,
            "allocations": counts.allocations, "dropped": counts.dropped, "late": counts.late,
        }));
    }
    drop(guard);
    crate::exit::disarm();
}

/// Subscribes the tool (its callback records launches while counters are collected).
pub(crate) fn subscribe(c: &Cupti) -> Result<*mut c_void, ToolError> {
    let mut sub: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out pointer and callback.
    let r = unsafe {
        (c.subscribe)(
            &mut sub,
            crate::pmc::launches::on_callback,
            std::ptr::null_mut(),
        )
    };
    match r {
        0 => Ok(sub),
        r => Err(cupti_error(c, "cuptiSubscribe", r)),
    }
}

/// The offset from CUPTI's clock to `CLOCK_BOOTTIME` and its uncertainty (0 with a note when
/// CUPTI's clock cannot be read).
fn session_clock(c: &Cupti, plan: &mut Plan) -> (i64, i64) {
    let clock = || {
        let mut t = 0u64;
        // SAFETY: valid out pointer.
        (unsafe { (c.get_timestamp)(&mut t) } == 0).then_some(t)
    };
    clock_offset(&clock).unwrap_or_else(|| {
        plan.notes
            .push("cuptiGetTimestamp failed: timestamps are CUPTI's clock".into());
        (0, 0)
    })
}

/// Tells CUPTI our buffers come zeroed (fresh ones from the allocator, reused ones cleared as
/// they return), so it need not clear 8 MiB on the application thread that needs room.
fn promise_zeroed_buffers(c: &Cupti) {
    let Some(set) = c.set_attribute else {
        return;
    };
    let (mut size, mut on) = (1usize, 1u8);
    // SAFETY: a u8 attribute with its size, as the header declares it.
    let r = unsafe {
        set(
            cupti::CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
            &mut size,
            &mut on as *mut u8 as *mut c_void,
        )
    };
    if r == 0 && !activity::ZEROED.swap(true, Ordering::Relaxed) {
        activity::clear_pool();
    }
}

fn guarded<T>(f: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(ToolError::new(
            Code::Internal,
            "the tool hit an internal error (a Rust panic, caught); the session state is reset: attach again and report the bug",
        ))
    })
}

impl Backend for CuptiBackend {
    fn attach(&mut self, req: &AttachRequest) -> Result<serde_json::Value, ToolError> {
        let r = guarded(|| self.do_attach(req));
        if r.is_err() {
            // An attach that failed after setting counters up leaves none enabled.
            if let Some(left) = self.counters.take() {
                crate::pmc::release(left);
            }
        }
        r
    }

    fn detach(&mut self) -> Result<serde_json::Value, ToolError> {
        guarded(|| self.do_detach())
    }

    fn metrics(&mut self, req: &AttachRequest) -> Result<serde_json::Value, ToolError> {
        guarded(|| crate::catalog::reply(req))
    }

    fn tick(&mut self) {
        let _ = guarded(|| {
            self.do_tick();
            Ok(())
        });
    }
}
