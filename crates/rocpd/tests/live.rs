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
