//! How fast the rocpd writer takes kernel dispatches (the CUDA tool writes its whole window
//! through it at detach): `cargo run --release -p rocprof-rocpd --example bench_writer [N]`.

use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::model::{
    Agent, CodeObject, Correlation, KernelDispatch, KernelSymbol, Node, Process,
};
use rocprof_rocpd::writer::Writer;
use std::time::Instant;

fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("bench_writer.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("w.db");
    let t = Instant::now();
    let mut w = Writer::create(&path, &Guid::from_parts(1, 2)).expect("create");
    w.node(&Node {
        id: 1,
        hash: 1,
        hostname: "bench".into(),
        ..Default::default()
    })
    .expect("node");
    w.process(&Process {
        pid: 100,
        ppid: 1,
        command: "bench".into(),
        ..Default::default()
    })
    .expect("process");
    w.agent(&Agent {
        id: 1,
        agent_type: "GPU".into(),
        name: "gpu".into(),
        ..Default::default()
    })
    .expect("agent");
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        uri: "memory://bench".into(),
        ..Default::default()
    })
    .expect("code object");
    for id in 1..=8 {
        w.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: format!("_Z6kernel{id}v"),
            display_name: format!("kernel{id}()"),
            ..Default::default()
        })
        .expect("symbol");
    }
    for i in 1..=n {
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: 100,
            agent_id: 1,
            kernel_id: 1 + i % 8,
            queue_id: 7,
            stream_id: 7,
            correlation: Correlation {
                internal: i,
                ..Default::default()
            },
            start: 1_000_000 + i * 1000,
            end: 1_000_500 + i * 1000,
            workgroup: [256, 1, 1],
            grid: [65536, 1, 1],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
    let s = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "{n} kernel dispatches in {s:.2} s: {:.0} rows/s, {} bytes per row",
        n as f64 / s,
        size / n.max(1) as u64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
