//! `convert -f pftrace`: the trace is decoded with Perfetto's own protos (PyPI `perfetto`, in the
//! virtual environment scripts/ci-deps.sh makes) and checked event by event against the
//! databases: every kernel, API call, sample, copy, flow and counter value appears exactly once,
//! on a track of the right process and thread; windows keep exactly what they select.

use crate::rocpd_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use rocpd_common::*;
use rocprof_attach::rocpd::model::*;

/// The Python with `perfetto` and `protobuf` (see scripts/ci-deps.sh).
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("ROCPROF_ATTACH_TEST_PYTHON") {
        return p.into();
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-venv/bin/python3");
    assert!(
        p.exists(),
        "{} is missing: run scripts/ci-deps.sh (it makes the virtual environment with PyPI's perfetto)",
        p.display()
    );
    p
}

/// Runs tests/pftrace/check.py; returns its JSON summary.
fn check(trace: &Path, dbs: &[&Path], extra: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pftrace/check.py");
    let out = Command::new(python())
        .arg(script)
        .arg(trace)
        .args(dbs)
        .args(extra)
        .output()
        .expect("run check.py");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("check.py prints JSON")
}

#[test]
fn every_event_appears_once_on_the_right_track() {
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    let out = dir.path().join("out");
    let o = convert(&[&db], &out, &["pftrace"], &[]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        out.join("out_results.pftrace").display().to_string()
    );
    let s = check(&out.join("out_results.pftrace"), &[&db], &[]);
    assert_eq!(s["kernels"], 3, "{s}");
    assert_eq!(s["api"], 3, "{s}");
    assert_eq!(s["instants"], 1, "{s}");
    assert_eq!(s["copies"], 1, "{s}");
    assert_eq!(s["flows"], 3, "{s}");
    assert_eq!(s["pmc"], 3, "{s}");
    assert_eq!(s["allocations"], 3, "{s}");
    assert_eq!(listing(&out), vec!["out_results.pftrace"]);
}

/// Two processes, one with a second thread, API arguments, overlapping kernels on one stream.
fn second_db(path: &Path) -> PathBuf {
    let pid = 300;
    let mut w = writer(path, pid, 3);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "overlapping(int)", 8, 0, 16, 0);
    for (i, (tid, start, end, ks, ke)) in [
        (pid, 100, 200, 150, 400),
        (pid + 1, 110, 180, 300, 500),
        (pid + 1, 600, 700, 650, 660),
    ]
    .into_iter()
    .enumerate()
    {
        let corr = i as i64 + 1;
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid,
            correlation: Correlation {
                internal: corr,
                ..Default::default()
            },
            start,
            end,
            args: vec![Arg {
                arg_type: "int".into(),
                name: "blocks".into(),
                value: format!("{}", 64 * corr),
            }],
            ..Default::default()
        })
        .expect("api");
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: corr,
            tid,
            agent_id: 1,
            kernel_id: 10,
            queue_id: 1,
            stream_id: 7,
            correlation: Correlation {
                internal: corr,
                ..Default::default()
            },
            start: ks,
            end: ke,
            workgroup: [64, 1, 1],
            grid: [64, 1, 1],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish")
}

#[test]
fn merged_processes_threads_args_and_overlaps() {
    let dir = tempdir();
    let a = full_db(&dir.path().join("a.db"), 4242, 1);
    let b = second_db(&dir.path().join("b.db"));
    for gbq in [false, true] {
        let out = dir.path().join(format!("out{gbq}"));
        let extra: &[&str] = if gbq { &["--group-by-queue"] } else { &[] };
        convert(&[&a, &b], &out, &["perfetto"], extra);
        let check_extra: &[&str] = if gbq { &["--group-by-queue"] } else { &[] };
        let s = check(&out.join("out_results.pftrace"), &[&a, &b], check_extra);
        assert_eq!(s["kernels"], 6, "{s}");
        assert_eq!(s["api"], 6, "{s}");
        assert_eq!(s["flows"], 6, "{s}");
    }
    // The argument and the overlap fix, read with Perfetto's protos directly.
    let script = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace(); t.ParseFromString(open(sys.argv[1], "rb").read())
names = {}
for p in t.packet:
    for x in p.interned_data.debug_annotation_names: names[(p.trusted_packet_sequence_id, x.iid)] = x.name
blocks = sorted(a.string_value for p in t.packet for a in p.track_event.debug_annotations
                if names.get((p.trusted_packet_sequence_id, a.name_iid)) == "blocks")
threads = sorted((p.track_descriptor.thread.pid, p.track_descriptor.thread.tid, p.track_descriptor.thread.thread_name)
                 for p in t.packet if p.track_descriptor.HasField("thread"))
ov = sorted(p.timestamp for p in t.packet if p.HasField("track_event") and p.track_event.type in (1, 2)
            and p.track_event.track_uuid in {q.track_descriptor.uuid for q in t.packet
            if q.track_descriptor.name == "STREAM [7]"})
print(blocks, threads, ov)
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(dir.path().join("outfalse/out_results.pftrace"))
        .output()
        .expect("python");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("['128', '192', '64']"), "{text}");
    assert!(
        text.contains("(300, 300, 'app')") && text.contains("(300, 301, 'THREAD 1')"),
        "{text}"
    );
    assert!(text.contains("(4242, 4242, 'app')"), "{text}");
    // Kernels [150,400] and [300,500] overlap: both edges move to 350.
    assert!(text.contains("[150, 350, 350, 500, 650, 660]"), "{text}");
}

#[test]
fn windowed_traces_hold_exactly_the_window() {
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    for (range, inclusive, kernels) in [
        ((2000, 3079), false, 1),
        ((2000, 3079), true, 2),
        ((0, 1055), true, 1),
    ] {
        let out = dir.path().join(format!("w{}{}", range.1, inclusive));
        let (s, e) = (range.0.to_string(), range.1.to_string());
        let mut extra = vec!["--start", &s, "--end", &e];
        if inclusive {
            extra.push("--inclusive");
        }
        convert(&[&db], &out, &["pftrace"], &extra);
        let mut cx = vec!["--window", &s, &e];
        if inclusive {
            cx.push("--inclusive");
        }
        let r = check(&out.join("out_results.pftrace"), &[&db], &cx);
        assert_eq!(r["kernels"], kernels, "{range:?} {inclusive}: {r}");
    }
    // An empty window is an error and leaves nothing behind.
    let out = dir.path().join("empty");
    let o = run(&[
        "convert",
        "-i",
        db.to_str().unwrap(),
        "-f",
        "pftrace",
        "-d",
        out.to_str().unwrap(),
        "--start",
        "10",
        "--end",
        "20",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("empty time window") && err.lines().count() == 1,
        "{err}"
    );
    assert!(listing(&out).is_empty(), "{:?}", listing(&out));
}

#[test]
fn bad_inputs_and_outputs_are_one_line_errors() {
    let dir = tempdir();
    let not_db = dir.path().join("notes.txt");
    std::fs::write(&not_db, "not a database").unwrap();
    let out = dir.path().join("o");
    let o = run(&[
        "convert",
        "-i",
        not_db.to_str().unwrap(),
        "-f",
        "pftrace",
        "-d",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(10));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a SQLite database") && err.lines().count() == 1,
        "{err}"
    );
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    let file = dir.path().join("plainfile");
    std::fs::write(&file, "x").unwrap();
    let o = run(&[
        "convert",
        "-i",
        db.to_str().unwrap(),
        "-f",
        "pftrace",
        "-d",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a directory") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn rows_out_of_time_order_are_read_again_sorted() {
    let dir = tempdir();
    let pid = 77;
    let mut w = writer(&dir.path().join("o.db"), pid, 9);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "late_first(int)", 8, 0, 16, 0);
    // Ids (correlation and dispatch) that do not follow the start times on one thread/stream.
    for (corr, start) in [(1i64, 5000i64), (2, 1000), (3, 3000)] {
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: pid,
            correlation: Correlation {
                internal: corr,
                ..Default::default()
            },
            start,
            end: start + 100,
            ..Default::default()
        })
        .expect("api");
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: corr,
            tid: pid,
            agent_id: 1,
            kernel_id: 10,
            queue_id: 1,
            stream_id: 0,
            correlation: Correlation {
                internal: corr,
                ..Default::default()
            },
            start: start + 50,
            end: start + 80,
            ..Default::default()
        })
        .expect("dispatch");
    }
    let db = w.finish().expect("finish");
    let out = dir.path().join("out");
    convert(&[&db], &out, &["pftrace"], &[]);
    let s = check(&out.join("out_results.pftrace"), &[&db], &[]);
    assert_eq!(
        (
            s["kernels"].as_u64(),
            s["api"].as_u64(),
            s["flows"].as_u64()
        ),
        (Some(3), Some(3), Some(3)),
        "{s}"
    );
}
