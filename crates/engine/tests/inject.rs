//! The injection engine against real processes: remote syscalls and calls on one thread.

use rocprof_testkit as testkit;

use rocprof_engine::arch;
use rocprof_engine::inject::{Injection, Timeouts};
use rocprof_engine::ptrace::Tracee;
use rocprof_engine::Error;
use std::time::{Duration, Instant};
use testkit::{at_entry, regs_tuple, symbol_addr, thread_state, Target, TargetOpts};

const CALL: Option<Duration> = Some(Duration::from_secs(10));

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Is `addr` inside a private read-write mapping of `pid`?
fn mapped_rw(pid: i32, addr: u64) -> bool {
    testkit::maps_text(pid).lines().any(|l| {
        let mut f = l.split_whitespace();
        let (range, perms) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        let Some((s, e)) = range.split_once('-') else {
            return false;
        };
        let (s, e) = (
            u64::from_str_radix(s, 16).unwrap(),
            u64::from_str_radix(e, 16).unwrap(),
        );
        perms.starts_with("rw") && s <= addr && addr < e
    })
}

#[test]
fn mmap_write_call_munmap() {
    let t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let maps_before = testkit::maps_text(t.pid);
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
    let a = inj.mmap(4096).unwrap();
    assert!(
        mapped_rw(t.pid, a),
        "new mapping visible in maps (the kernel may merge it with a neighbour)"
    );
    inj.write(a, &cstr("abcde")).unwrap();
    inj.write(a + 100, &cstr("xyz")).unwrap();
    assert_eq!(inj.read(a, 6).unwrap(), cstr("abcde"));
    // Two pointer arguments: strlen(a) * 1000 + strlen(b).
    assert_eq!(
        inj.call_int(probe, [a, a + 100, 0, 0, 0, 0], CALL).unwrap(),
        5003
    );
    inj.munmap(a).unwrap();
    inj.finish().unwrap();
    tr.detach(Duration::from_secs(5)).unwrap();
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
    t.assert_heartbeat();
}

#[test]
fn small_buffers_go_on_the_stack_and_its_bytes_are_put_back() {
    let t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let site = at_entry(t.pid);
    let maps_before = testkit::maps_text(t.pid);
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    // What lies below the listener's red zone while it waits (it keeps the same stack pointer
    // across our stops: it is blocked in the same futex wait).
    let (top, before) = {
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        let top = arch::stack_top(inj.saved_regs());
        let before = inj.read(top - 64, 64).unwrap();
        inj.finish().unwrap();
        (top, before)
    };
    let traps = tr.counts().traps;
    {
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        assert_eq!(arch::stack_top(inj.saved_regs()), top);
        let data = [cstr("hello"), cstr("stack")].concat();
        let a = inj.place(&data).unwrap();
        assert!(a < top && a >= top - 64, "{a:#x} is just below {top:#x}");
        assert_eq!(
            inj.call_int(probe, [a, a + 6, 0, 0, 0, 0], CALL).unwrap(),
            5005
        );
        inj.finish().unwrap();
    }
    assert_eq!(
        tr.counts().traps - traps,
        1,
        "no remote mmap or munmap: the call's trap only"
    );
    {
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        // The call's own frame lies below the data; the data's bytes are as they were.
        let after = inj.read(top - 64, 64).unwrap();
        assert_eq!(
            after[48..],
            before[48..],
            "the stack bytes under the data are back"
        );
        inj.finish().unwrap();
    }
    tr.detach(Duration::from_secs(5)).unwrap();
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
    t.assert_heartbeat();
}

#[test]
fn large_buffers_get_a_mapping_that_is_removed() {
    let t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let maps_before = testkit::maps_text(t.pid);
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
    let big = cstr(&"x".repeat(rocprof_engine::inject::STACK_DATA_MAX + 1));
    let a = inj.place(&big).unwrap();
    assert!(
        testkit::maps_text(t.pid) != maps_before && mapped_rw(t.pid, a),
        "a buffer larger than STACK_DATA_MAX gets its own mapping"
    );
    assert_eq!(
        inj.call_int(probe, [a, a, 0, 0, 0, 0], CALL).unwrap(),
        ((big.len() - 1) * 1001) as i32
    );
    inj.finish().unwrap();
    tr.detach(Duration::from_secs(5)).unwrap();
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
}

#[test]
fn int_result_is_read_as_32_bits_and_vector_registers_restored() {
    let t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let neg = symbol_addr(t.pid, &lib, "rocprofiler_standin_negative");
    let clobber = symbol_addr(t.pid, &lib, "rocprofiler_standin_clobber");
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    let fp_before;
    {
        let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
        assert_eq!(inj.call_int(neg, [0; 6], CALL).unwrap(), -7);
        assert_eq!(inj.call_int(clobber, [0; 6], CALL).unwrap(), 42);
        inj.finish().unwrap();
    }
    {
        // Compare the FP state seen at the next stop with the one saved at the first.
        tr.interrupt(Duration::from_secs(5)).unwrap();
        fp_before = tr.get_fpstate().unwrap();
        tr.cont(0).unwrap();
    }
    let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
    assert_eq!(inj.call_int(clobber, [0; 6], CALL).unwrap(), 42);
    inj.finish().unwrap();
    tr.interrupt(Duration::from_secs(5)).unwrap();
    let fp_after = tr.get_fpstate().unwrap();
    // Bytes 160..416 of the XSAVE/FXSAVE area hold xmm0-xmm15.
    assert_eq!(
        &fp_before.bytes()[160..416],
        &fp_after.bytes()[160..416],
        "xmm registers restored"
    );
    tr.cont(0).unwrap();
    tr.detach(Duration::from_secs(5)).unwrap();
    t.assert_heartbeat();
}

#[test]
fn thousand_calls_leave_maps_and_registers_unchanged() {
    let t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let site = at_entry(t.pid);
    let maps_before = testkit::maps_text(t.pid);
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    tr.interrupt(Duration::from_secs(5)).unwrap();
    let regs_before = tr.getregs().unwrap();
    let fp_before = tr.get_fpstate().unwrap();
    let code_before = rocprof_engine::memory::read(t.pid, t.listener(), site, 16).unwrap();
    tr.cont(0).unwrap();
    for i in 0..1000u32 {
        let mut inj = Injection::begin(&mut tr, site, Timeouts::default()).unwrap();
        let a = inj
            .push_buffer(&cstr(&"a".repeat((i % 7) as usize)))
            .unwrap();
        let b = inj.push_buffer(&cstr("bb")).unwrap();
        assert_eq!(
            inj.call_int(probe, [a, b, 0, 0, 0, 0], CALL).unwrap(),
            (i % 7) as i32 * 1000 + 2
        );
        inj.finish().unwrap();
    }
    // Let the listener re-enter its futex wait, then compare bit for bit.
    testkit::wait_until(Duration::from_secs(5), || {
        thread_state(t.pid, t.listener()) == Some('S')
    });
    tr.interrupt(Duration::from_secs(5)).unwrap();
    let regs_after = tr.getregs().unwrap();
    let fp_after = tr.get_fpstate().unwrap();
    let code_after = rocprof_engine::memory::read(t.pid, t.listener(), site, 16).unwrap();
    tr.cont(0).unwrap();
    let counts = tr.counts();
    tr.detach(Duration::from_secs(5)).unwrap();
    assert_eq!(regs_tuple(&regs_after), regs_tuple(&regs_before));
    assert_eq!(fp_after.bytes(), fp_before.bytes());
    assert_eq!(code_after, code_before, "entry-point bytes restored");
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
    // One interrupt-stop per sequence, 5 completions per sequence (2 mmap, 1 call, 2 munmap).
    assert_eq!(counts.interrupts, 1000 + 2);
    assert_eq!(counts.traps, 5000);
    t.assert_heartbeat();
}

#[test]
fn worker_threads_never_enter_a_ptrace_stop() {
    let t = Target::spawn(TargetOpts {
        workers: 4,
        ..Default::default()
    });
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let workers = t.beats().tids;
    assert_eq!(workers.len(), 4);
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let taken = std::sync::Arc::new(AtomicU64::new(0));
    let pid = t.pid;
    let sampler = {
        let (stop, taken) = (stop.clone(), taken.clone());
        let workers = workers.clone();
        std::thread::spawn(move || {
            let mut stopped = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                for &w in &workers {
                    if let Some(s) = thread_state(pid, w) {
                        taken.fetch_add(1, Ordering::Relaxed);
                        if s == 't' || s == 'T' {
                            stopped.push((w, s));
                        }
                    }
                }
            }
            stopped
        })
    };
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    let mut listener_stopped_seen = false;
    // At least 200 injections, and as many more as it takes for the sampler to have looked at
    // the workers more than 100 times while they ran (on a loaded machine it may not be
    // scheduled at all during the first 200); bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut done = 0;
    while done < 200 || taken.load(Ordering::Relaxed) <= 100 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sampler took {} samples in 60 s of injections",
            taken.load(Ordering::Relaxed)
        );
        let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
        let a = inj.push_buffer(&cstr("abc")).unwrap();
        listener_stopped_seen |= thread_state(t.pid, t.listener()) == Some('t');
        assert_eq!(inj.call_int(probe, [a, a, 0, 0, 0, 0], CALL).unwrap(), 3003);
        inj.finish().unwrap();
        done += 1;
    }
    tr.detach(Duration::from_secs(5)).unwrap();
    stop.store(true, Ordering::Relaxed);
    let stopped = sampler.join().unwrap();
    let samples = taken.load(Ordering::Relaxed);
    assert!(
        listener_stopped_seen,
        "the sampler method sees a ptrace stop on the listener"
    );
    assert!(samples > 100, "sampled worker states {samples} times");
    assert!(
        stopped.is_empty(),
        "worker threads entered a stop: {stopped:?}"
    );
}

#[test]
fn target_killed_during_a_call_gives_an_error_within_a_second() {
    let mut t = Target::spawn(TargetOpts::default());
    let lib = testkit::register_lib();
    let sleep = symbol_addr(t.pid, &lib, "rocprofiler_standin_sleep");
    let pid = t.pid;
    let (tx, rx) = std::sync::mpsc::channel();
    let listener = t.listener();
    let worker = std::thread::spawn(move || {
        let mut tr = Tracee::seize(pid, listener).unwrap();
        let mut inj = Injection::begin(&mut tr, at_entry(pid), Timeouts::default()).unwrap();
        let ms = inj.push_buffer(b"60000\0").unwrap();
        tx.send(()).unwrap();
        let r = inj.call_int(sleep, [ms, 0, 0, 0, 0, 0], Some(Duration::from_secs(120)));
        (r, Instant::now())
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Make sure the call is under way (the listener sleeps inside the stand-in).
    testkit::wait_until(Duration::from_secs(10), || {
        thread_state(pid, listener) == Some('S')
    });
    let killed_at = Instant::now();
    t.kill();
    let (r, at) = worker.join().unwrap();
    assert!(matches!(r, Err(Error::TargetDied { .. })), "got {r:?}");
    assert!(
        at.duration_since(killed_at) < Duration::from_secs(1),
        "error took {:?}",
        at.duration_since(killed_at)
    );
}

#[test]
fn signals_sent_during_calls_all_arrive() {
    let t = Target::spawn(TargetOpts {
        workers: 2,
        ..Default::default()
    });
    let lib = testkit::register_lib();
    let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
    let pid = nix::unistd::Pid::from_raw(t.pid);
    // One signal per sequence, sent while the listener is stopped by us, each confirmed before
    // the next (standard signals coalesce while pending, so this is the exact count).
    let mut tr = Tracee::seize(t.pid, t.listener()).unwrap();
    let base = t.beats().sigusr1;
    for i in 1..=100u64 {
        let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1).unwrap();
        let a = inj.push_buffer(b"y\0").unwrap();
        assert_eq!(inj.call_int(probe, [a, a, 0, 0, 0, 0], CALL).unwrap(), 1001);
        inj.finish().unwrap();
        testkit::wait_until(Duration::from_secs(5), || t.beats().sigusr1 >= base + i);
    }
    tr.detach(Duration::from_secs(5)).unwrap();
    assert_eq!(t.beats().sigusr1, base + 100);
}

#[test]
fn signal_to_the_traced_thread_is_redelivered() {
    // A SIGUSR1 aimed at the listener itself (blocked there) must stay pending, not be consumed
    // by our waits: after detach it is still pending in the thread's SigPnd mask.
    let t = Target::spawn(TargetOpts::default());
    let listener = t.listener();
    let mut tr = Tracee::seize(t.pid, listener).unwrap();
    let inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
    rocprof_engine::ptrace::tgkill(t.pid, listener, libc::SIGUSR1).unwrap();
    inj.finish().unwrap();
    tr.detach(Duration::from_secs(5)).unwrap();
    let status =
        std::fs::read_to_string(format!("/proc/{}/task/{listener}/status", t.pid)).unwrap();
    let pnd = status.lines().find(|l| l.starts_with("SigPnd:")).unwrap();
    let mask = u64::from_str_radix(pnd.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_ne!(
        mask & (1 << (libc::SIGUSR1 - 1)),
        0,
        "SIGUSR1 still pending on the listener: {pnd}"
    );
    t.assert_heartbeat();
}

#[test]
fn signal_mask_and_sigtrap_disposition_survive_calls() {
    // Our breakpoint is an int3: the kernel unblocks a blocked SIGTRAP and resets its handler
    // when it fires. The injector must undo both.
    for handler in [false, true] {
        let t = Target::spawn(TargetOpts {
            sigtrap_handler: handler,
            ..Default::default()
        });
        let lib = testkit::register_lib();
        let probe = symbol_addr(t.pid, &lib, "rocprofiler_standin_probe");
        let l = t.listener();
        let blk = testkit::status_mask(t.pid, l, "SigBlk:");
        let cgt = testkit::status_mask(t.pid, l, "SigCgt:");
        assert_eq!(cgt & (1 << (libc::SIGTRAP - 1)) != 0, handler);
        let mut tr = Tracee::seize(t.pid, l).unwrap();
        for _ in 0..3 {
            let mut inj = Injection::begin(&mut tr, at_entry(t.pid), Timeouts::default()).unwrap();
            let a = inj.push_buffer(b"q\0").unwrap();
            assert_eq!(inj.call_int(probe, [a, a, 0, 0, 0, 0], CALL).unwrap(), 1001);
            inj.finish().unwrap();
        }
        tr.detach(Duration::from_secs(5)).unwrap();
        assert_eq!(
            testkit::status_mask(t.pid, l, "SigBlk:"),
            blk,
            "listener's blocked mask restored"
        );
        assert_eq!(
            testkit::status_mask(t.pid, l, "SigCgt:"),
            cgt,
            "SIGTRAP handler kept (handler={handler})"
        );
        t.assert_heartbeat();
    }
}
