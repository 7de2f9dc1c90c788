//! Reading a database while it is written (`rocprof-attach top`, [`rocprof_rocpd::report::live`]):
//! nothing before the first commit, then each read hands out only the rows committed since the
//! one before, and the reads add up to exactly what `summary` computes from the finished file.

use rocprof_rocpd::domain::Domain;
use rocprof_rocpd::model::*;
use rocprof_rocpd::reader::open_all;
use rocprof_rocpd::report::live::LiveDb;
use rocprof_rocpd::summary::Summary;
use rocprof_rocpd::ConvertOptions;
use rocprof_testkit::rocpd::{agents, kernel, tempdir, writer};

fn dispatch(w: &mut rocprof_rocpd::Writer, i: i64, kernel_id: i64) {
    w.kernel_dispatch(&KernelDispatch {
        dispatch_id: i,
        tid: 42,
        agent_id: 1,
        kernel_id,
        queue_id: 1,
        correlation: Correlation {
            internal: i,
            ..Default::default()
        },
        start: 1000 * i,
        end: 1000 * i + 10 + i,
        workgroup: [64, 1, 1],
        grid: [1024, 1, 1],
        ..Default::default()
    })
    .expect("dispatch");
}

fn copy(w: &mut rocprof_rocpd::Writer, i: i64) {
    w.memory_copy(&MemoryCopy {
        tid: 42,
        operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
        correlation: Correlation {
            internal: 1000 + i,
            ..Default::default()
        },
        start: 1000 * i + 500,
        end: 1000 * i + 600,
        src_agent_id: 0,
        dst_agent_id: 1,
        size: 4096,
        ..Default::default()
    })
    .expect("copy");
}

#[test]
fn reads_add_up_to_the_summary_of_the_finished_file() {
    let dir = tempdir();
    let path = dir.path().join("42_results.db");
    let mut live = LiveDb::new(&path);
    let opts = ConvertOptions::default();
    assert!(live.read(&opts).unwrap().is_none(), "no file yet");
    let mut w = writer(&path, 42, 1);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "void add<float>(float*, int)", 8, 0, 16, 0);
    kernel(&mut w, 1, 11, "mul(float*, int)", 12, 4, 24, 2048);
    assert!(live.read(&opts).unwrap().is_none(), "nothing committed yet");
    let mut seen = Summary::default();
    let mut rows = 0;
    for batch in 0..3i64 {
        for i in 1 + batch * 100..=100 + batch * 100 {
            dispatch(&mut w, i, if i % 3 == 0 { 11 } else { 10 });
            if i % 10 == 0 {
                copy(&mut w, i);
            }
        }
        assert!(w.commit().unwrap(), "a commit with no reader");
        let deltas = live.read(&opts).unwrap().expect("committed");
        assert_eq!(deltas.len(), 1);
        let d = &deltas[0];
        assert_eq!(d.pid, 42);
        assert_eq!(d.rows, 110, "only this batch's 100 kernels and 10 copies");
        assert_eq!(d.copy_bytes["MEMORY_COPY_HOST_TO_DEVICE"], 10 * 4096);
        let iv: usize = d.intervals.values().map(Vec::len).sum();
        assert_eq!(iv, 100);
        seen.merge(&d.summary);
        rows += d.rows;
    }
    assert!(
        live.read(&opts).unwrap().unwrap()[0].rows == 0,
        "nothing new"
    );
    w.finish_process(300_000, "{}").unwrap();
    w.finish().unwrap();
    assert_eq!(rows, 330);
    let inputs = open_all(std::slice::from_ref(&path)).unwrap();
    let sources = rocprof_rocpd::reader::all_sources(&inputs).unwrap();
    let summary = Summary::collect(&sources, &opts).unwrap();
    for d in [Domain::KernelDispatch, Domain::MemoryCopy] {
        assert_eq!(seen.sorted(d), summary.sorted(d), "{d:?}");
    }
}

fn call(w: &mut rocprof_rocpd::Writer, id: i64, kind: &str, op: &str, start: i64, dur: i64) {
    w.api_call(&ApiCall {
        kind: kind.into(),
        operation: op.into(),
        tid: 40 + id % 3,
        correlation: Correlation {
            internal: id,
            ..Default::default()
        },
        start,
        end: start + dur,
        message: kind.starts_with("MARKER").then(|| format!("step {id}")),
        ..Default::default()
    })
    .expect("api call");
}

/// A read names what the rows name even when it appeared after the reads before (a kernel
/// symbol, an API name and kind): `top` keeps the names between reads and loads them again when
/// a row names an id it lacks. The API calls (regions and samples) add up to `summary`'s,
/// markers left out, and the slowest are the longest calls of their batch.
#[test]
fn names_that_appear_later_are_named_and_api_calls_add_up() {
    let dir = tempdir();
    let path = dir.path().join("43_results.db");
    let mut live = LiveDb::new(&path);
    let opts = ConvertOptions::default();
    let mut w = writer(&path, 43, 1);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "first_kernel(int)", 8, 0, 16, 0);
    let mut seen = Summary::default();
    let mut id = 0;
    for batch in 0..3i64 {
        if batch == 1 {
            kernel(&mut w, 1, 12, "later_kernel(float*)", 8, 0, 16, 0);
        }
        for i in 1 + batch * 50..=50 + batch * 50 {
            dispatch(&mut w, i, if batch >= 1 && i % 2 == 0 { 12 } else { 10 });
            id += 1;
            call(
                &mut w,
                id,
                "HIP_RUNTIME_API_EXT",
                "hipLaunchKernel",
                1000 * i,
                3 + i % 7,
            );
            id += 1;
            // A marker longer than every call: never among the slowest.
            call(
                &mut w,
                id,
                "MARKER_CORE_API",
                "roctxRangePush",
                1000 * i,
                900,
            );
            if batch == 2 {
                id += 1;
                call(
                    &mut w,
                    id,
                    "HSA_CORE_API_EXT",
                    "hsa_signal_wait",
                    1000 * i,
                    20 + i % 5,
                );
                id += 1;
                call(
                    &mut w,
                    id,
                    "HIP_RUNTIME_API_EXT",
                    "hipGetLastError",
                    1000 * i,
                    0,
                );
            }
        }
        assert!(w.commit().unwrap());
        let d = live.read(&opts).unwrap().expect("committed").remove(0);
        let kernels = &d.summary.domains[&Domain::KernelDispatch];
        assert_eq!(kernels.contains_key("later_kernel(float*)"), batch >= 1);
        assert!(!kernels.contains_key(""), "every kernel named: {kernels:?}");
        assert!(!d.summary.domains.contains_key(&Domain::MarkerApi));
        assert_eq!(d.summary.domains.contains_key(&Domain::HsaApi), batch == 2);
        let hip = &d.summary.domains[&Domain::HipApi];
        assert_eq!(hip["hipLaunchKernel"].count, 50);
        assert_eq!(
            hip.get("hipGetLastError").map(|s| s.count),
            (batch == 2).then_some(50)
        );
        assert_eq!(d.slowest.len(), rocprof_rocpd::report::live::SLOWEST);
        assert!(d.slowest.iter().all(|c| c.name != "roctxRangePush"));
        let longest = if batch == 2 {
            ("hsa_signal_wait", 24)
        } else {
            ("hipLaunchKernel", 9)
        };
        assert_eq!((d.slowest[0].name.as_str(), d.slowest[0].duration), longest);
        assert!(d.slowest.windows(2).all(|p| p[0].duration >= p[1].duration));
        seen.merge(&d.summary);
    }
    w.finish_process(300_000, "{}").unwrap();
    w.finish().unwrap();
    let inputs = open_all(std::slice::from_ref(&path)).unwrap();
    let sources = rocprof_rocpd::reader::all_sources(&inputs).unwrap();
    let summary = Summary::collect(&sources, &opts).unwrap();
    for d in [Domain::KernelDispatch, Domain::HipApi, Domain::HsaApi] {
        assert_eq!(seen.sorted(d), summary.sorted(d), "{d:?}");
    }
}
