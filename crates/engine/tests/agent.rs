//! The forked injection agent: attach and detach calls against the stand-in register library.

use rocprof_testkit as testkit;

use rocprof_engine::agent::{self, CallTimeouts, Job};
use rocprof_engine::Error;
use testkit::{at_entry, env_buffer, hex, records, symbol_addr, Target, TargetOpts};

fn agent_target(t: &Target, func: &str) -> agent::Target {
    agent::Target {
        pid: t.pid,
        tid: t.listener(),
        site: at_entry(t.pid),
        function: symbol_addr(t.pid, &testkit::register_lib(), func),
    }
}

#[test]
fn attach_then_detach_through_the_agent() {
    let t = Target::spawn(TargetOpts::default());
    let maps_before = testkit::maps_text(t.pid);
    let env = env_buffer(&[("ROCPROF_KERNEL_TRACE", "1"), ("ROCPROF_OUTPUT_PATH", "/o")]);
    let job = Job::Attach {
        env,
        tool: b"/no/such/tool.so".to_vec(),
    };
    let out = agent::run(
        &agent_target(&t, "rocprofiler_register_attach"),
        &job,
        CallTimeouts::default(),
    )
    .unwrap();
    assert_eq!(out.status, Some(0));
    assert_eq!(
        out.interrupts, 1,
        "one interrupt-stop for the whole attach sequence"
    );
    assert_eq!(
        out.traps, 1,
        "the call only: the buffers go on the listener's stack, no mmap or munmap"
    );
    let phases: Vec<&str> = out.steps.iter().map(|s| s.phase.name()).collect();
    assert_eq!(
        phases,
        [
            "seize",
            "prepare",
            "interrupt-stop",
            "save registers",
            "patch site",
            "reserve stack",
            "write buffers",
            "call",
            "restore",
            "detach"
        ],
        "every step is timed, in order"
    );
    assert!(out.stopped_ns() > 0 && out.stopped_ns() < out.total_us * 1000);
    // The listener is no longer traced, the maps are as before.
    let st =
        std::fs::read_to_string(format!("/proc/{}/task/{}/status", t.pid, t.listener())).unwrap();
    assert!(st.contains("TracerPid:\t0"), "{st}");
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
    let out = agent::run(
        &agent_target(&t, "rocprofiler_register_detach"),
        &Job::Detach,
        CallTimeouts::default(),
    )
    .unwrap();
    assert_eq!(out.status, Some(0));
    let recs = records(&t);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].kind, "attach");
    assert_eq!(recs[0].get("comm"), hex("rocp-bg-attach"));
    assert_eq!(recs[0].get("sigblocked"), "1", "{:?}", recs[0]);
    assert_eq!(recs[0].get("tool"), hex("/no/such/tool.so"));
    assert_eq!(
        recs[0].pairs(),
        vec![
            ("ROCPROF_KERNEL_TRACE".into(), "1".into()),
            ("ROCPROF_OUTPUT_PATH".into(), "/o".into())
        ]
    );
    assert_eq!(recs[1].kind, "detach");
    assert_eq!(recs[1].get("status"), "0");
    t.assert_heartbeat();
}

#[test]
fn non_zero_status_is_returned_and_the_target_keeps_running() {
    let t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_ATTACH_STATUS".into(), "6".into())],
        ..Default::default()
    });
    let maps_before = testkit::maps_text(t.pid);
    let job = Job::Attach {
        env: env_buffer(&[]),
        tool: b"tool.so".to_vec(),
    };
    let out = agent::run(
        &agent_target(&t, "rocprofiler_register_attach"),
        &job,
        CallTimeouts::default(),
    )
    .unwrap();
    assert_eq!(out.status, Some(6));
    testkit::assert_maps_eq(&maps_before, &testkit::maps_text(t.pid));
    t.assert_heartbeat();
}

#[test]
fn agent_reports_a_target_that_dies_mid_call() {
    let mut t = Target::spawn(TargetOpts {
        env: vec![("STANDIN_ATTACH_SLEEP_MS".into(), "30000".into())],
        ..Default::default()
    });
    let at = agent_target(&t, "rocprofiler_register_attach");
    let pid = t.pid;
    let listener = t.listener();
    let h = std::thread::spawn(move || {
        agent::run(
            &at,
            &Job::Attach {
                env: env_buffer(&[]),
                tool: b"x".to_vec(),
            },
            CallTimeouts::default(),
        )
    });
    // Wait until the listener is inside the slow call (sleeping, traced by the agent).
    testkit::wait_until(std::time::Duration::from_secs(10), || {
        let st = std::fs::read_to_string(format!("/proc/{pid}/task/{listener}/status"))
            .unwrap_or_default();
        !st.contains("TracerPid:\t0") && testkit::thread_state(pid, listener) == Some('S')
    });
    let killed = std::time::Instant::now();
    t.kill();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(Error::TargetDied { .. })), "{r:?}");
    assert!(killed.elapsed() < std::time::Duration::from_secs(1));
}
