//! Writes a synthetic rocpd database shaped like a CUDA application's window and times the
//! writer (the CUDA tool writes its whole window through it at detach):
//!
//! ```text
//! cargo run --release -p rocprof-rocpd --example bench_writer -- [N] [--out PATH] [--api]
//!     [--copies M] [--counters] [--overlap] [--shuffle] [--seed S]
//! ```
//!
//! `N` kernel dispatches (default 1,000,000) of 30 kernels (names of realistic length, a few
//! long mangled C++ templates) on one GPU, spread over 4 streams and queues, back to back on
//! each stream. `--api` adds the launching API call of every kernel, `--copies M` M memory
//! copies, `--counters` two PMC values on every 16th kernel, `--overlap` makes every 50th kernel
//! overlap the next one on its stream (the converters must make them nest), `--shuffle` writes
//! the kernels out of start order (the Perfetto converter's sorted pass). Without `--out` the
//! database is written to a temporary directory and removed; with it, it is kept at `PATH`
//! (`docs/performance.md` converts it with `convert -f pftrace`).

use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::model::{
    Agent, ApiCall, CodeObject, Correlation, KernelDispatch, KernelSymbol, MemoryCopy, Node, Pmc,
    Process,
};
use rocprof_rocpd::writer::Writer;
use std::path::PathBuf;
use std::time::Instant;

/// Kernel names as CUDA libraries have them: short C names, templated CUB/cuBLAS/PyTorch kernels.
const BASE_NAMES: [&str; 10] = [
    "vectorAdd",
    "void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float, int, cub::Sum>::Policy600, float*, float*, int, cub::Sum>(float*, float*, int, cub::GridEvenShare<int>, cub::Sum)",
    "ampere_sgemm_128x64_nn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEENS_9transform11threadblock22PredicatedTileIteratorINS_11MatrixShapeILi128ELi8EEEfNS_6layout8RowMajorELi1ENS8_30PitchLinearStripminedThreadMapINSD_16PitchLinearShapeILi8ELi128EEELi256ELi1EEELi1EEE",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::half_t> >, false, true, false, false, true, false, false>(Flash_fwd_params)",
    "layer_norm_kernel",
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*)",
    "softmax_warp_forward",
    "void nccl::AllReduceRingLLKernel<nccl::FuncSum<float>, float>(ncclWorkElem)",
];

struct Args {
    n: i64,
    out: Option<PathBuf>,
    api: bool,
    copies: i64,
    counters: bool,
    overlap: bool,
    shuffle: bool,
    seed: u64,
}

fn parse() -> Args {
    let mut a = Args {
        n: 1_000_000,
        out: None,
        api: false,
        copies: 0,
        counters: false,
        overlap: false,
        shuffle: false,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().unwrap_or_else(|| panic!("{what} needs a value"));
        match arg.as_str() {
            "--out" => a.out = Some(value("--out").into()),
            "--api" => a.api = true,
            "--copies" => a.copies = value("--copies").parse().expect("--copies M"),
            "--counters" => a.counters = true,
            "--overlap" => a.overlap = true,
            "--shuffle" => a.shuffle = true,
            "--seed" => a.seed = value("--seed").parse().expect("--seed S"),
            n => a.n = n.parse().unwrap_or_else(|_| panic!("unknown argument {n}")),
        }
    }
    a
}

/// A small deterministic generator (xorshift64*), so that a given seed gives the same database.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// The node, process, agent, code object, 30 kernel symbols and (with `counters`) two PMCs.
fn dimensions(w: &mut Writer, pid: i64, counters: bool) {
    w.node(&Node {
        id: 1,
        hash: 1,
        hostname: "bench".into(),
        ..Default::default()
    })
    .expect("node");
    w.process(&Process {
        pid,
        ppid: 1,
        init: 1_000_000,
        command: "/opt/app/bin/train --epochs 3".into(),
        ..Default::default()
    })
    .expect("process");
    w.agent(&Agent {
        id: 1,
        agent_type: "GPU".into(),
        name: "NVIDIA H100 80GB HBM3".into(),
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
    for id in 1..=30i64 {
        let base = BASE_NAMES[(id as usize - 1) % BASE_NAMES.len()];
        let name = match (id - 1) / 10 {
            0 => base.to_owned(),
            v => format!("{base} [variant {v}]"),
        };
        w.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: name.clone(),
            display_name: name,
            arch_vgpr_count: 32 + id,
            sgpr_count: 16,
            group_segment_size: if id % 3 == 0 { 4096 } else { 0 },
            ..Default::default()
        })
        .expect("symbol");
    }
    if counters {
        for (id, name) in [(1, "SQ_WAVES"), (2, "GRBM_GUI_ACTIVE")] {
            w.pmc(&Pmc {
                id,
                agent_id: 1,
                name: name.into(),
                ..Default::default()
            })
            .expect("pmc");
        }
    }
}

/// The `n` dispatches: 4 streams, each running its kernels back to back.
fn dispatches(a: &Args, pid: i64, rng: &mut Rng) -> Vec<KernelDispatch> {
    let mut next_start = [1_000_000i64; 4];
    let mut out = Vec::with_capacity(a.n as usize);
    for i in 1..=a.n {
        let stream = rng.below(4);
        let s = stream as usize;
        let start = next_start[s] + rng.below(2_000);
        let dur = 1_000 + rng.below(20_000);
        next_start[s] = start + dur;
        if a.overlap && i % 50 == 0 {
            next_start[s] -= dur / 2;
        }
        out.push(KernelDispatch {
            dispatch_id: i,
            tid: pid + stream,
            agent_id: 1,
            kernel_id: 1 + rng.below(30),
            queue_id: 10 + stream,
            stream_id: 1 + stream,
            correlation: Correlation {
                internal: i,
                external: if i % 7 == 0 { i / 7 } else { 0 },
                ancestor: 0,
            },
            start,
            end: start + dur,
            private_segment_size: if i % 11 == 0 { 1024 } else { 0 },
            workgroup: [256, 1, 1],
            grid: [65536 + 256 * rng.below(64), 1, 1],
            counters: if a.counters && i % 16 == 0 {
                vec![(1, (i % 1000) as f64), (2, 0.5 * i as f64)]
            } else {
                Vec::new()
            },
            ..Default::default()
        });
    }
    // Dispatches are written in start order, as the CUDA tool and rocprofv3 write them.
    out.sort_by_key(|k| (k.start, k.dispatch_id));
    if a.shuffle {
        for i in (1..out.len()).rev() {
            out.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    out
}

fn main() {
    let a = parse();
    let pid = 4000 + a.seed as i64;
    let (path, temp) = match &a.out {
        Some(p) => (p.clone(), None),
        None => {
            let dir = std::env::temp_dir().join(format!("bench_writer.{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            (dir.join("w.db"), Some(dir))
        }
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ a.seed);
    let kernels = dispatches(&a, pid, &mut rng);
    let t = Instant::now();
    let mut w = Writer::create(&path, &Guid::from_parts(a.seed, 2)).expect("create");
    dimensions(&mut w, pid, a.counters);
    for k in &kernels {
        if a.api {
            w.api_call(&ApiCall {
                kind: "HIP_RUNTIME_API_EXT".into(),
                operation: "cudaLaunchKernel".into(),
                tid: k.tid,
                correlation: k.correlation,
                start: k.start - 3_000,
                end: k.start - 2_000,
                ..Default::default()
            })
            .expect("api call");
        }
        w.kernel_dispatch(k).expect("dispatch");
    }
    for i in 0..a.copies {
        let start = 1_000_000 + i * 5_000;
        w.memory_copy(&MemoryCopy {
            tid: pid,
            operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
            correlation: Correlation {
                internal: a.n + 1 + i,
                ..Default::default()
            },
            start,
            end: start + 1_000 + rng.below(6_000),
            src_agent_id: 1,
            dst_agent_id: 1,
            size: 4096 << rng.below(8),
            stream_id: 1 + rng.below(2),
            ..Default::default()
        })
        .expect("copy");
    }
    w.finish().expect("finish");
    let s = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "{} kernel dispatches in {s:.2} s: {:.0} rows/s, {} bytes per row",
        a.n,
        a.n as f64 / s,
        size / a.n.max(1) as u64
    );
    if let Some(dir) = temp {
        std::fs::remove_dir_all(&dir).expect("remove the temporary database");
    }
}
