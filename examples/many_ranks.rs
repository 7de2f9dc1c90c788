//! Writes one rocpd database per rank of a made-up MPI job, to try `query`, `summary` and
//! `convert` over many databases (docs/performance.md, "Many databases").
//!
//! `cargo run --release --example many_ranks -- --ranks 256 --dispatches 10000 --dir /tmp/ranks`
//!
//! Each rank `r` is process `5000 + r` with its own GUID, `--dispatches` HIP launches each with
//! its kernel dispatch (over 16 kernels), written to `<dir>/rank<r>_results.db`.

use std::path::{Path, PathBuf};

use rocprof_attach::rocpd::guid::Guid;
use rocprof_attach::rocpd::model::*;
use rocprof_attach::rocpd::Writer;

fn rank(path: &Path, r: i64, dispatches: i64) -> rocprof_attach::rocpd::Result<()> {
    let pid = 5000 + r;
    let mut w = Writer::create(path, &Guid::from_parts(0x5eed_0000 + r as u64, r as u64))?;
    w.node(&Node {
        id: 1,
        hash: 1,
        machine_id: "ranks".into(),
        hostname: format!("node{}", r / 8),
        ..Default::default()
    })?;
    w.process(&Process {
        pid,
        ppid: 1,
        init: 0,
        fini: 1,
        command: "./solver".into(),
        ..Default::default()
    })?;
    for (id, kind) in [(0, "CPU"), (1, "GPU")] {
        w.agent(&Agent {
            id,
            agent_type: kind.into(),
            logical_index: id,
            name: kind.into(),
            ..Default::default()
        })?;
    }
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        uri: "file:///solver".into(),
        ..Default::default()
    })?;
    let kernels = 16;
    for k in 0..kernels {
        w.kernel_symbol(&KernelSymbol {
            id: k + 1,
            code_object_id: 1,
            kernel_name: format!("_Z4stepILi{k}EEvPfi"),
            display_name: format!("void step<{k}>(float*, int)"),
            ..Default::default()
        })?;
    }
    let mut t = 1_000_000_000i64;
    for i in 1..=dispatches {
        let correlation = Correlation {
            internal: i,
            ..Default::default()
        };
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: pid,
            correlation,
            start: t,
            end: t + 500 + i % 700,
            ..Default::default()
        })?;
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: pid,
            agent_id: 1,
            kernel_id: 1 + i % kernels,
            queue_id: 1,
            correlation,
            start: t + 800,
            end: t + 2800 + (i * 7 + r) % 5000,
            workgroup: [256, 1, 1],
            grid: [1 << 20, 1, 1],
            ..Default::default()
        })?;
        t += 10_000;
    }
    w.finish()?;
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut ranks, mut dispatches, mut dir) = (64i64, 10_000i64, PathBuf::from("/tmp/ranks"));
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = value().parse().expect("--ranks N"),
            "--dispatches" => dispatches = value().parse().expect("--dispatches N"),
            "--dir" => dir = PathBuf::from(value()),
            other => panic!("unknown option {other}; see the top of examples/many_ranks.rs"),
        }
    }
    std::fs::create_dir_all(&dir).expect("create --dir");
    for r in 0..ranks {
        let path = dir.join(format!("rank{r}_results.db"));
        if let Err(e) = rank(&path, r, dispatches) {
            panic!("{}: {e}", path.display());
        }
    }
    println!(
        "{ranks} databases of {dispatches} dispatches and {dispatches} HIP calls in {}",
        dir.display()
    );
}
