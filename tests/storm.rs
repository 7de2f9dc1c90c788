//! Signal storm (issue 5): SIGUSR1 at 10 kHz or more through 1,000 attach/detach cycles.
//!
//! Standard signals coalesce while pending, so a blind sender cannot count exactly. The sender
//! here keeps exactly one SIGUSR1 in flight: it sends one (alternating thread-directed `tgkill`
//! to each worker and a process-directed `kill`), then waits until the target's handler has
//! counted it in the heartbeat page before sending the next. The count is therefore exact: a
//! lost signal stops the sender (bounded wait, the test fails naming the signal), and at the end
//! the target's counter equals the number sent. The rate is held at 10 kHz or more by
//! construction: the attach/detach loop does not start its next cycle until the sender has sent
//! at least 10,000 signals per second elapsed since the storm began.
//!
//! The cycles use the library's forked agent (`agent::run`, exactly what rocprof-attach runs per
//! process) in this test process, so 1,000 cycles take seconds rather than minutes.

use crate::common;

use common::{at_entry, env_buffer, symbol_addr, wait_until, Pristine, Target, TargetOpts};
use rocprof_attach::engine::agent::{self, CallTimeouts, Job};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Offset of the `sigusr1` counter in the heartbeat page (see target.c).
const SIGUSR1_OFFSET: u64 = 3 * 8;
const CYCLES: u64 = 1000;
const MIN_RATE_HZ: f64 = 10_000.0;

fn counter(page: &std::fs::File) -> u64 {
    let mut b = [0u8; 8];
    page.read_exact_at(&mut b, SIGUSR1_OFFSET).unwrap();
    u64::from_ne_bytes(b)
}

#[test]
fn sigusr1_storm_through_a_thousand_attach_detach_cycles() {
    let t = Target::spawn(TargetOpts {
        workers: 2,
        ..Default::default()
    });
    let lib = common::register_lib();
    let attach = agent::Target {
        pid: t.pid,
        tid: t.listener(),
        site: at_entry(t.pid),
        function: symbol_addr(t.pid, &lib, "rocprofiler_register_attach"),
    };
    let detach = agent::Target {
        function: symbol_addr(t.pid, &lib, "rocprofiler_register_detach"),
        ..attach.clone()
    };
    let job = Job::Attach {
        env: env_buffer(&[("ROCPROF_KERNEL_TRACE", "1")]),
        tool: common::tool_lib().to_str().unwrap().as_bytes().to_vec(),
    };
    // Reference cycle (loads the tool), then the snapshot every later state must equal.
    assert_eq!(
        agent::run(&attach, &job, CallTimeouts::default())
            .unwrap()
            .status,
        Some(0)
    );
    assert_eq!(
        agent::run(&detach, &Job::Detach, CallTimeouts::default())
            .unwrap()
            .status,
        Some(0)
    );
    let pristine = Pristine::take(&t);

    let page = std::fs::File::open(&t.heartbeat).unwrap();
    let base = counter(&page);
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (pid, workers, heartbeat) = (t.pid, t.beats().tids, t.heartbeat.clone());
    let sender = {
        let (sent, stop) = (sent.clone(), stop.clone());
        std::thread::spawn(move || -> Result<(), String> {
            let page = std::fs::File::open(&heartbeat).map_err(|e| e.to_string())?;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (n % (workers.len() as u64 + 1)) as usize;
                if k < workers.len() {
                    rocprof_attach::engine::ptrace::tgkill(pid, workers[k], libc::SIGUSR1)
                        .map_err(|e| e.to_string())?;
                } else {
                    nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGUSR1,
                    )
                    .map_err(|e| e.to_string())?;
                }
                n += 1;
                let deadline = Instant::now() + Duration::from_secs(10);
                while counter(&page) < base + n {
                    if Instant::now() > deadline {
                        return Err(format!(
                            "signal #{n} (to {}) was never counted",
                            if k < workers.len() {
                                format!("thread {}", workers[k])
                            } else {
                                "the process".into()
                            }
                        ));
                    }
                    std::hint::spin_loop();
                }
                sent.store(n, Ordering::Release);
            }
            Ok(())
        })
    };
    let start = Instant::now();
    let mut attach_stops = 0;
    for i in 0..CYCLES {
        let a = agent::run(&attach, &job, CallTimeouts::default())
            .unwrap_or_else(|e| panic!("attach {i}: {e}"));
        assert_eq!(a.status, Some(0), "attach {i}");
        attach_stops += a.interrupts;
        let d = agent::run(&detach, &Job::Detach, CallTimeouts::default())
            .unwrap_or_else(|e| panic!("detach {i}: {e}"));
        assert_eq!(d.status, Some(0), "detach {i}");
        assert!(
            !sender.is_finished(),
            "the sender stopped: {:?}",
            sender.join()
        );
        // Hold the rate at MIN_RATE_HZ or more (see the module docs).
        wait_until(Duration::from_secs(30), || {
            sent.load(Ordering::Acquire) as f64 >= MIN_RATE_HZ * start.elapsed().as_secs_f64()
        });
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap().unwrap();
    let n = sent.load(Ordering::Acquire);
    let rate = n as f64 / elapsed;
    eprintln!(
        "storm: {CYCLES} attach/detach cycles in {elapsed:.2} s, {n} SIGUSR1 at {rate:.0} Hz, {attach_stops} interrupt-stops"
    );
    assert!(rate >= MIN_RATE_HZ, "rate {rate:.0} Hz");
    assert_eq!(
        counter(&page),
        base + n,
        "every SIGUSR1 counted exactly once"
    );
    assert!(t.alive());
    t.assert_heartbeat();
    pristine.assert_same(&t, "after the storm");
    let recs = common::records(&t);
    assert_eq!(recs.len() as u64, 2 + 2 * CYCLES);
    assert!(recs.iter().all(|r| r.get("status") == "0"));
}
