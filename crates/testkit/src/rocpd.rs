//! rocpd databases for tests: rocprofv3's sample files (tests/rocpd_data), a tiny CSV splitter,
//! and databases written with the crate's writer.

use std::path::{Path, PathBuf};

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::model::*;
use rocprof_rocpd::{convert_with, ConvertOptions, ConvertReport, Writer};
use serde_json::Value;

/// Text of a sample from `tests/rocpd_data`.
pub fn sample(name: &str) -> String {
    let p = crate::checkout().join("tests/rocpd_data").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Header line and data lines of a sample (tolerates a missing final newline).
pub fn sample_lines(name: &str) -> (String, Vec<String>) {
    let text = sample(name);
    let mut lines = text.lines().map(str::to_owned);
    let header = lines.next().expect("sample has a header");
    (header, lines.filter(|l| !l.is_empty()).collect())
}

/// Splits one rocprofv3 CSV line; quoted cells lose their quotes.
pub fn cells(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Integer cell.
pub fn int(cells: &[String], i: usize) -> i64 {
    cells[i]
        .parse()
        .unwrap_or_else(|_| panic!("cell {i} of {cells:?} is not an integer"))
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Starts a database for process `pid` with its node and process rows.
pub fn writer(path: &Path, pid: i64, seed: u64) -> Writer {
    let mut w =
        Writer::create(path, &Guid::from_parts(0xddb5_8903 + seed, seed)).expect("create db");
    w.node(&Node {
        id: 7,
        hash: 77,
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        system_name: "Linux".into(),
        hostname: "testhost".into(),
        release: "6.1.0".into(),
        version: "#1 SMP".into(),
        hardware_name: "x86_64".into(),
        domain_name: "(none)".into(),
    })
    .expect("node");
    w.process(&Process {
        pid,
        ppid: 1,
        init: 100,
        fini: 200,
        command: "./app --flag".into(),
        environment: String::new(),
        extdata: String::new(),
    })
    .expect("process");
    w
}

/// Adds a CPU agent and a GPU agent with the given ids and logical indexes.
pub fn agents(w: &mut Writer, cpu: (i64, i64), gpu: (i64, i64)) {
    w.agent(&Agent {
        id: cpu.0,
        agent_type: "CPU".into(),
        logical_index: cpu.1,
        type_index: 0,
        name: "AMD EPYC".into(),
        ..Default::default()
    })
    .expect("cpu agent");
    w.agent(&Agent {
        id: gpu.0,
        agent_type: "GPU".into(),
        logical_index: gpu.1,
        type_index: 0,
        name: "gfx90a".into(),
        ..Default::default()
    })
    .expect("gpu agent");
}

/// Adds a code object 1 on `agent` and one kernel symbol.
#[allow(clippy::too_many_arguments)]
pub fn kernel(
    w: &mut Writer,
    agent: i64,
    id: i64,
    name: &str,
    vgpr: i64,
    accum: i64,
    sgpr: i64,
    lds: i64,
) {
    if w.string_id("file:///app#offset=0")
        .expect("lookup")
        .is_none()
    {
        w.string("file:///app#offset=0").expect("string");
        w.code_object(&CodeObject {
            id: 1,
            agent_id: agent,
            uri: "file:///app#offset=0".into(),
            ..Default::default()
        })
        .expect("code object");
    }
    w.kernel_symbol(&KernelSymbol {
        id,
        code_object_id: 1,
        kernel_name: format!("_Z{id}mangled"),
        display_name: name.into(),
        group_segment_size: lds,
        arch_vgpr_count: vgpr,
        accum_vgpr_count: accum,
        sgpr_count: sgpr,
        ..Default::default()
    })
    .expect("kernel symbol");
}

/// Converts `inputs` into `dir` with the output name `out`, as `rocprof-attach convert -i
/// INPUTS -f FORMATS -d DIR -o out` does (it calls the same function); panics unless it succeeds.
pub fn convert_to(
    inputs: &[&Path],
    dir: &Path,
    formats: &[OutputFormat],
    opts: &ConvertOptions,
) -> ConvertReport {
    let inputs: Vec<PathBuf> = inputs.iter().map(|p| p.to_path_buf()).collect();
    convert_with(&inputs, formats, dir, "out", opts).unwrap_or_else(|e| panic!("convert: {e}"))
}

/// The kind and operation names of a record of a rocprofv3 JSON document `doc` (one process's
/// object), looked up in its `strings.buffer_records` table.
pub fn json_names<'v>(doc: &'v Value, rec: &Value) -> (&'v str, &'v str) {
    let table = &doc["strings"]["buffer_records"];
    let k = rec["kind"].as_u64().expect("kind") as usize;
    let o = rec["operation"].as_u64().expect("operation") as usize;
    (
        table[k]["kind"].as_str().expect("kind name"),
        table[k]["operations"][o].as_str().expect("op name"),
    )
}

/// Reads an output file.
pub fn read(dir: &Path, name: &str) -> String {
    let p: PathBuf = dir.join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Names of the entries of a directory, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A database with a bit of everything: 2 kernels dispatched 3 times (with counters), HIP and
/// marker calls (one instant), a copy, an allocation and a free, and scratch memory.
// Long because: one fixture database written row by row, in the order a reader meets them.
pub fn full_db(path: &Path, pid: i64, seed: u64) -> PathBuf {
    let mut w = writer(path, pid, seed);
    agents(&mut w, (0, 0), (1, 1));
    w.pmc(&Pmc {
        id: 9,
        agent_id: 1,
        name: "SQ_WAVES".into(),
        ..Default::default()
    })
    .expect("pmc");
    kernel(&mut w, 1, 10, "void add<float>(float*, int)", 8, 0, 16, 0);
    kernel(&mut w, 1, 11, "mul(float*, int)", 12, 4, 24, 2048);
    for i in 1..=3i64 {
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: pid,
            correlation: Correlation {
                internal: i,
                external: 0,
                ancestor: 0,
            },
            start: 1000 * i,
            end: 1000 * i + 100 * i,
            ..Default::default()
        })
        .expect("api");
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: pid,
            agent_id: 1,
            kernel_id: if i == 2 { 11 } else { 10 },
            queue_id: 1,
            stream_id: 0,
            correlation: Correlation {
                internal: i,
                external: 0,
                ancestor: 0,
            },
            start: 1000 * i + 50,
            end: 1000 * i + 50 + 10 * i,
            workgroup: [64, 1, 1],
            grid: [1024, 1, 1],
            counters: vec![(9, 2.0), (9, 3.0)],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.api_call(&ApiCall {
        kind: "MARKER_CORE_API".into(),
        operation: "roctxMarkA".into(),
        tid: pid,
        correlation: Correlation {
            internal: 4,
            ..Default::default()
        },
        start: 5000,
        end: 5000,
        message: Some("checkpoint \"A\"".into()),
        ..Default::default()
    })
    .expect("marker");
    w.memory_copy(&MemoryCopy {
        tid: pid,
        operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
        correlation: Correlation {
            internal: 5,
            ..Default::default()
        },
        start: 6000,
        end: 6400,
        src_agent_id: 0,
        dst_agent_id: 1,
        size: 4096,
        ..Default::default()
    })
    .expect("copy");
    for (op, agent, t) in [
        ("MEMORY_ALLOCATION_ALLOCATE", Some(1), 7000),
        ("MEMORY_ALLOCATION_FREE", None, 7100),
    ] {
        w.memory_allocation(&MemoryAllocation {
            tid: pid,
            operation: op.into(),
            correlation: Correlation {
                internal: 6,
                ..Default::default()
            },
            start: t,
            end: t + 20,
            agent_id: agent,
            address: 0x7f00_0000_1000,
            size: 1 << 20,
            ..Default::default()
        })
        .expect("alloc");
    }
    w.memory_allocation(&MemoryAllocation {
        tid: pid,
        operation: "SCRATCH_MEMORY_ALLOC".into(),
        correlation: Correlation {
            internal: 7,
            ..Default::default()
        },
        start: 8000,
        end: 8300,
        agent_id: Some(1),
        size: 65536,
        queue_id: Some(1),
        flags: Some(2),
        ..Default::default()
    })
    .expect("scratch");
    w.finish().expect("finish")
}
