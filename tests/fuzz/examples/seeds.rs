//! Writes seed inputs for every fuzz target into `DIR/<target>/` (the committed corpora under
//! `tests/fuzz/corpus/` were grown from these and minimised with `cargo fuzz cmin`):
//!
//! * `proc_maps`, `proc_status`, `proc_children`: this machine's own `/proc` files;
//! * `envbuf`: buffers `encode` produces;
//! * `elf_symbol`: the stand-in `librocprofiler-register.so.0` built from `tests/fixtures` with
//!   `gcc` (as the tests build it, stripped, with DT_HASH only, and without section headers so
//!   that the PT_DYNAMIC path is taken) and a few small system libraries;
//! * `rocpd_reader`: small rocpd databases written by the crate's writer (512-byte pages), and
//!   one with extreme values in `DIR/regressions/rocpd_reader/`.
//!
//! `cargo run --manifest-path tests/fuzz/Cargo.toml --example seeds -- DIR`

use rocprof_attach::attach::envbuf::{self, EnvList};
use rocprof_attach::rocpd::guid::Guid;
use rocprof_attach::rocpd::model::*;
use rocprof_attach::rocpd::Writer;
use std::path::{Path, PathBuf};
use std::process::Command;

fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("seed dir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

fn proc_seeds(out: &Path) {
    let me = std::process::id();
    for (target, files) in [
        ("proc_maps", &["maps"][..]),
        ("proc_status", &["status", "stat", "task/{tid}/stat"][..]),
        ("proc_children", &["task/{tid}/children"][..]),
    ] {
        for pid in [1, me] {
            for f in files {
                let path = format!("/proc/{pid}/{}", f.replace("{tid}", &pid.to_string()));
                if let Ok(bytes) = std::fs::read(&path) {
                    put(
                        &out.join(target),
                        &format!("{pid}_{}", f.replace(['/', '{', '}'], "_")),
                        &bytes,
                    );
                }
            }
        }
    }
    put(&out.join("proc_children"), "three", b"12 345 6789 ");
}

fn envbuf_seeds(out: &Path) {
    let lists: [&[(&str, &str)]; 3] = [
        &[],
        &[
            ("ROCPROF_KERNEL_TRACE", "1"),
            ("ROCPROF_OUTPUT_PATH", "/tmp/out"),
            ("HOME", "/root"),
        ],
        &[
            ("ROCP_TOOL_ATTACH", "1"),
            ("ROCPROF_COUNTERS", "SQ_WAVES GRBM_COUNT"),
            ("ROCPROF_EMPTY", ""),
        ],
    ];
    for (i, list) in lists.iter().enumerate() {
        put(
            &out.join("envbuf"),
            &format!("list{i}"),
            &envbuf::encode(&EnvList::from_pairs(list.iter().copied())),
        );
    }
}

fn gcc(out: &Path, name: &str, flags: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let dest = out.join("elf_symbol").join(name);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let status = Command::new("gcc")
        .args([
            "-O1",
            "-pthread",
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-Wl,-soname,librocprofiler-register.so.0",
            "-I",
        ])
        .arg(&src)
        .args(flags)
        .arg("-o")
        .arg(&dest)
        .arg(src.join("register_standin.c"))
        .arg("-ldl")
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {name}");
}

/// Zero e_shoff/e_shnum/e_shstrndx: lookups must go through PT_DYNAMIC.
fn drop_section_headers(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[0x28..0x30].fill(0);
    bytes[0x3c..0x40].fill(0);
    std::fs::write(path, bytes).unwrap();
}

fn elf_seeds(out: &Path) {
    gcc(out, "register_gnu_hash.so", &["-s", "-Wl,--hash-style=gnu"]);
    gcc(
        out,
        "register_sysv_hash.so",
        &["-s", "-Wl,--hash-style=sysv"],
    );
    gcc(out, "register_noshdr.so", &["-s", "-Wl,--hash-style=gnu"]);
    drop_section_headers(&out.join("elf_symbol/register_noshdr.so"));
    gcc(
        out,
        "register_noshdr_sysv.so",
        &["-s", "-Wl,--hash-style=sysv"],
    );
    drop_section_headers(&out.join("elf_symbol/register_noshdr_sysv.so"));
    for lib in [
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libutil.so.1",
    ] {
        let path = Path::new("/lib/x86_64-linux-gnu").join(lib);
        if let Ok(bytes) = std::fs::read(&path) {
            if bytes.len() <= 64 << 10 {
                put(&out.join("elf_symbol"), lib, &bytes);
            }
        }
    }
}

fn writer(path: &Path, pid: i64) -> Writer {
    let mut w =
        Writer::create(path, &Guid::from_parts(0xddb5_8903, pid as u64)).expect("create db");
    w.node(&Node {
        id: 7,
        hash: 77,
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        system_name: "Linux".into(),
        hostname: "host".into(),
        hardware_name: "x86_64".into(),
        ..Default::default()
    })
    .unwrap();
    w.process(&Process {
        pid,
        ppid: 1,
        init: 100,
        fini: 9000,
        command: "./app".into(),
        ..Default::default()
    })
    .unwrap();
    w
}

/// Every kind of row, a few of each.
fn full_db(path: &Path) {
    let pid = 4242;
    let mut w = writer(path, pid);
    for (id, kind, logical) in [(0, "CPU", 0), (1, "GPU", 1)] {
        w.agent(&Agent {
            id,
            agent_type: kind.into(),
            logical_index: logical,
            name: "agent".into(),
            ..Default::default()
        })
        .unwrap();
    }
    w.pmc(&Pmc {
        id: 9,
        agent_id: 1,
        name: "SQ_WAVES".into(),
        ..Default::default()
    })
    .unwrap();
    w.string("file:///app#offset=0").unwrap();
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        uri: "file:///app#offset=0".into(),
        ..Default::default()
    })
    .unwrap();
    for (id, name) in [
        (10, "void add<float>(float*, int)"),
        (11, "mul(float*, int)"),
    ] {
        w.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: format!("_Z{id}k"),
            display_name: name.into(),
            arch_vgpr_count: 8,
            sgpr_count: 16,
            ..Default::default()
        })
        .unwrap();
    }
    let corr = |internal| Correlation {
        internal,
        ..Default::default()
    };
    for i in 1..=2i64 {
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: pid,
            correlation: corr(i),
            start: 1000 * i,
            end: 1000 * i + 100,
            ..Default::default()
        })
        .unwrap();
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: pid,
            agent_id: 1,
            kernel_id: 9 + i,
            queue_id: 1,
            correlation: corr(i),
            start: 1000 * i + 50,
            end: 1000 * i + 80,
            workgroup: [64, 1, 1],
            grid: [1024, 1, 1],
            region_name: if i == 2 {
                "region".into()
            } else {
                String::new()
            },
            counters: vec![(9, 2.0), (9, 3.0)],
            ..Default::default()
        })
        .unwrap();
    }
    w.api_call(&ApiCall {
        kind: "MARKER_CORE_API".into(),
        operation: "roctxMarkA".into(),
        tid: pid,
        correlation: corr(4),
        start: 5000,
        end: 5000,
        message: Some("checkpoint".into()),
        ..Default::default()
    })
    .unwrap();
    w.memory_copy(&MemoryCopy {
        tid: pid,
        operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
        correlation: corr(5),
        start: 6000,
        end: 6400,
        dst_agent_id: 1,
        size: 4096,
        ..Default::default()
    })
    .unwrap();
    for (op, agent) in [
        ("MEMORY_ALLOCATION_ALLOCATE", Some(1)),
        ("SCRATCH_MEMORY_ALLOC", Some(1)),
    ] {
        w.memory_allocation(&MemoryAllocation {
            tid: pid,
            operation: op.into(),
            correlation: corr(6),
            start: 7000,
            end: 7020,
            agent_id: agent,
            size: 1 << 20,
            queue_id: Some(1),
            flags: Some(2),
            ..Default::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
}

/// Values at the ends of their ranges (the seed of tests/fuzz/regressions/rocpd_reader/): two
/// kernels, one with a static LDS size of i64::MAX, dispatched from i64::MIN to i64::MAX ns with
/// grid and workgroup sizes whose products overflow and counter values of f64::MAX.
fn extreme_db(path: &Path) {
    let mut w = writer(path, 1);
    w.agent(&Agent {
        id: 1,
        agent_type: "GPU".into(),
        ..Default::default()
    })
    .unwrap();
    w.pmc(&Pmc {
        id: 9,
        agent_id: 1,
        name: "SQ_WAVES".into(),
        ..Default::default()
    })
    .unwrap();
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        ..Default::default()
    })
    .unwrap();
    for (id, lds) in [(1, 0), (2, i64::MAX)] {
        w.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: format!("k{id}"),
            display_name: format!("k{id}"),
            group_segment_size: lds,
            ..Default::default()
        })
        .unwrap();
    }
    for i in 1..=10 {
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            agent_id: 1,
            kernel_id: 1 + i % 2,
            start: i64::MIN,
            end: i64::MAX,
            workgroup: [i64::MAX, 2, 1],
            grid: [i64::MIN, 2, 1],
            counters: vec![(9, f64::MAX), (9, f64::MAX)],
            ..Default::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
}

fn small_pages(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA page_size = 512; VACUUM;")
        .unwrap();
}

fn rocpd_seeds(out: &Path) {
    let dir = out.join("rocpd_reader");
    std::fs::create_dir_all(&dir).unwrap();
    let full = dir.join("full.db");
    full_db(&full);
    small_pages(&full);
    let empty = dir.join("process_only.db");
    writer(&empty, 77).finish().unwrap();
    small_pages(&empty);
    let extreme = out.join("regressions/rocpd_reader/extreme_values.db");
    std::fs::create_dir_all(extreme.parent().unwrap()).unwrap();
    extreme_db(&extreme);
    small_pages(&extreme);
}

fn main() {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .expect("usage: seeds DIR");
    proc_seeds(&out);
    envbuf_seeds(&out);
    elf_seeds(&out);
    rocpd_seeds(&out);
}
