//! The cost of committing the CUDA tool's database at every tick (issue 29): `N` kernels and
//! as many API calls handed to a [`Sink`] in 200 ms ticks of 5 s of activity, with and without
//! a commit per tick. `cargo run --release -p rocprof-cuda-tool --example bench_sink [N]`.

use rocprof_cuda_tool::cuda::{CudaInfo, Device};
use rocprof_cuda_tool::db::SessionInfo;
use rocprof_cuda_tool::records::{ApiRow, Collected, KernelRow};
use rocprof_cuda_tool::sink::Sink;
use std::time::Instant;

fn run(n: u64, commit: bool) -> f64 {
    let dir = std::env::temp_dir().join(format!("bench-sink-{}-{commit}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("b.db");
    let cuda = CudaInfo {
        devices: vec![Device::default()],
        ..Default::default()
    };
    let session = SessionInfo::default();
    let name = |_: bool, cbid: u32| format!("cuda{cbid}");
    let t0 = Instant::now();
    let mut sink = Sink::create(&path, &cuda, &session).unwrap();
    let ticks = 25u64; // 5 s of 200 ms ticks
    let per_tick = n / ticks;
    let step = 5_000_000_000 / n;
    let extdata = serde_json::json!({});
    for t in 0..ticks {
        let mut rows = Collected::default();
        for i in 0..per_tick {
            let k = t * per_tick + i;
            rows.kernels.push(KernelRow {
                start: k * step,
                end: k * step + step / 2,
                correlation: k as u32,
                name: format!("_Z{}kv", k % 7),
                ..Default::default()
            });
            rows.apis.push(ApiRow {
                start: k * step,
                end: k * step + 10,
                correlation: k as u32,
                tid: 7,
                ..Default::default()
            });
        }
        sink.add(rows, &name).unwrap();
        if commit {
            sink.commit(t as i64, &extdata).unwrap();
        }
    }
    sink.finish(1, &extdata, &name).unwrap();
    let s = t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    s
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    for round in 0..3 {
        let with = run(n, true);
        let without = run(n, false);
        println!(
            "round {round}: {n} kernels + {n} API calls: commit per tick {with:.3} s, one commit {without:.3} s ({:+.1} %)",
            (with / without - 1.0) * 100.0
        );
    }
}
