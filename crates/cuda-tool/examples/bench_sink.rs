//! The cost of committing the CUDA tool's database at every tick (issue 29): `N` kernels and
//! as many API calls handed to a [`Sink`] in 200 ms ticks of 5 s of activity, with and without
//! a commit per tick. `cargo run --release -p rocprof-cuda-tool --example bench_sink [N]`.
//!
//! `bench_sink spm [INTERVAL_US]`: what writing the `--spm` samples costs a tick (issue 28):
//! 50 ticks of 200 ms, each writing the 3 counters of the default set for the samples of 200 ms
//! at the interval (default 1000 µs: 200 samples, 600 rows) and committing; the write's and the
//! commit's time per tick.

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

/// 50 ticks of `--spm` samples at `interval_us`, each written and committed: the write's median
/// and maximum and the commit's median per tick (µs).
fn spm(interval_us: u64) -> (u64, u64, u64) {
    use rocprof_cuda_tool::metrics::Counter;
    use rocprof_cuda_tool::spm::{Sample, DEFAULT_METRICS};
    let dir = std::env::temp_dir().join(format!("bench-sink-spm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cuda = CudaInfo {
        devices: vec![Device::default()],
        ..Default::default()
    };
    let mut sink = Sink::create(&dir.join("s.db"), &cuda, &SessionInfo::default()).unwrap();
    let counters: Vec<Counter> = DEFAULT_METRICS
        .iter()
        .map(|m| Counter {
            name: m.to_string(),
            metric: m.to_string(),
            scale: 1.0,
            description: String::new(),
        })
        .collect();
    let per_tick = 200_000 / interval_us;
    let (mut writes, mut commits) = (Vec::new(), Vec::new());
    let extdata = serde_json::json!({});
    for t in 0..50u64 {
        let samples: Vec<Sample> = (0..per_tick)
            .map(|i| {
                let start = (t * per_tick + i) * interval_us * 1000;
                Sample {
                    start,
                    end: start + interval_us * 1000,
                    values: vec![1234.5, 2345.5, 1_980_000.0],
                }
            })
            .collect();
        let t0 = Instant::now();
        sink.write_spm(&counters, &samples, 0).unwrap();
        let t1 = Instant::now();
        sink.commit(t as i64, &extdata).unwrap();
        writes.push(t1.duration_since(t0).as_micros() as u64);
        commits.push(t1.elapsed().as_micros() as u64);
    }
    let _ = std::fs::remove_dir_all(&dir);
    writes.sort_unstable();
    commits.sort_unstable();
    (writes[25], writes[49], commits[25])
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("spm") {
        let us: u64 = std::env::args()
            .nth(2)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1000);
        for round in 0..3 {
            let (med, max, commit) = spm(us);
            println!(
                "round {round}: {} samples x 3 counters per tick: write median {med} µs, max {max} µs; commit median {commit} µs",
                200_000 / us
            );
        }
        return;
    }
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
