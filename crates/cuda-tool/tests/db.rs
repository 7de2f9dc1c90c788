//! `db::write` on synthetic rows: markers, memsets, every copy direction, repeated correlation
//! ids, a device only the records know, the clock offset; read back with rocpd's reader.

use rocprof_cuda_tool::cuda::{CudaInfo, Device};
use rocprof_cuda_tool::db::{self, SessionInfo};
use rocprof_cuda_tool::records::*;
use rocprof_rocpd::reader::{AgentIndex, Input};

#[test]
fn rows_to_rocpd() {
    let dir = std::env::temp_dir().join(format!("cuda-tool-db-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.db");
    let mut rows = Collected::default();
    let k = |corr: u32, device: u32, name: &str| KernelRow {
        device,
        stream: 7,
        start: 1000,
        end: 2000,
        grid: [2, 3, 1],
        block: [128, 2, 1],
        static_shared: 256,
        dynamic_shared: 1024,
        registers: 40,
        local_per_thread: 16,
        correlation: corr,
        name: name.into(),
    };
    rows.kernels = vec![k(5, 0, "_Z1av"), k(6, 1, "_Z1bv"), k(5, 0, "_Z1av")];
    for (i, kind) in [1u8, 2, 8, 9, 0].into_iter().enumerate() {
        rows.copies.push(CopyRow {
            copy_kind: kind,
            bytes: 100 + i as u64,
            start: 10,
            end: 20,
            correlation: 9,
            ..Default::default()
        });
    }
    rows.copies.push(CopyRow {
        memset: true,
        bytes: 64,
        start: 30,
        end: 40,
        device: 1,
        ..Default::default()
    });
    for (driver, corr, tid) in [
        (false, 5, 111),
        (true, 5, 111),
        (false, 9, 222),
        (false, 6, 333),
    ] {
        rows.apis.push(ApiRow {
            driver,
            cbid: 211,
            start: 1,
            end: 1, // zero length: still a region
            tid,
            correlation: corr,
        });
    }
    rows.allocs.push(AllocRow {
        release: false,
        address: 0x1000,
        bytes: 4096,
        timestamp: 50,
        device: 0,
        stream: 7,
        correlation: 6,
    });
    rows.markers = vec![
        MarkerRow {
            flags: MARKER_START,
            timestamp: 100,
            id: 1,
            tid: Some(444),
            name: Some("step".into()),
        },
        MarkerRow {
            flags: MARKER_INSTANTANEOUS,
            timestamp: 150,
            id: 2,
            tid: Some(444),
            name: Some("tick".into()),
        },
        MarkerRow {
            flags: MARKER_END,
            timestamp: 200,
            id: 1,
            tid: Some(444),
            name: None,
        },
    ];
    let cuda = CudaInfo {
        path: None,
        driver_version: 13000,
        devices: vec![Device {
            ordinal: 0,
            name: "NVIDIA H100".into(),
            uuid: [7; 16],
            sm_count: 132,
            cc: (9, 0),
            memory: 80 << 30,
            warp_size: 32,
            ..Default::default()
        }],
    };
    let session = SessionInfo {
        init: 5,
        fini: 6,
        offset: 1_000_000,
        extdata: serde_json::json!({"clock": "CLOCK_BOOTTIME"}),
        demangle: false,
    };
    let name = |driver: bool, cbid: u32| format!("{}{cbid}", if driver { "cu" } else { "cuda" });
    let counts = db::write(&path, &rows, &cuda, &session, &name).unwrap();
    assert_eq!(
        (
            counts.kernels,
            counts.copies,
            counts.api,
            counts.allocations
        ),
        (3, 6, 6, 1)
    );

    let input = Input::open(&path).unwrap();
    let sources = input.sources().unwrap();
    let src = &sources[0];
    let dims = src.dims(AgentIndex::Absolute).unwrap();
    assert_eq!(
        dims.agents.len(),
        3,
        "CPU, the known GPU and device 1 from the records"
    );
    assert_eq!(dims.agents[&1].product_name, "NVIDIA H100");
    assert_eq!(dims.agents[&1].name, "sm_90");
    // Every agent carries every field rocprofiler-sdk writes, so that ROCm's own C++ rocpd
    // readers decode it; the device's true values where it has them.
    for (id, a) in &dims.agents {
        let missing = rocprof_rocpd::agent_json::missing(&a.extdata);
        assert!(
            missing.is_empty(),
            "agent {id} lacks {missing:?}: {}",
            a.extdata
        );
    }
    let gpu: serde_json::Value = serde_json::from_str(&dims.agents[&1].extdata).unwrap();
    assert_eq!(gpu["cu_count"], 132);
    assert_eq!(gpu["wave_front_size"], 32);
    assert_eq!(gpu["type"], 2);
    assert_eq!(gpu["id"]["handle"], 1);
    assert_eq!(gpu["vendor_id"], 0x10de);
    assert_eq!(gpu["cuda_uuid"], "GPU-07070707-0707-0707-0707-070707070707");
    assert_eq!(gpu["uuid"]["value"], i64::from_be_bytes([7; 8]));
    assert_eq!(dims.symbols.len(), 2);
    let mut dispatches = Vec::new();
    src.dispatches(|d| {
        dispatches.push((
            d.tid,
            d.agent_id,
            d.grid,
            d.workgroup,
            d.start,
            d.group_segment_size,
        ));
        Ok(())
    })
    .unwrap();
    assert_eq!(dispatches.len(), 3);
    assert_eq!(
        dispatches[0],
        (111, 1, [256, 6, 1], [128, 2, 1], 1_001_000, 1024)
    );
    assert_eq!(dispatches[1].0, 333);
    assert_eq!(dispatches[1].1, 2);
    let mut copies = Vec::new();
    src.memory_copies(|c| {
        copies.push((
            dims.string(c.name_id).to_owned(),
            c.src_agent_id,
            c.dst_agent_id,
            c.size,
            c.tid,
        ));
        Ok(())
    })
    .unwrap();
    copies.sort();
    assert!(copies.contains(&(
        "MEMORY_COPY_HOST_TO_DEVICE".into(),
        Some(0),
        Some(1),
        100,
        222
    )));
    assert!(copies.contains(&(
        "MEMORY_COPY_DEVICE_TO_HOST".into(),
        Some(1),
        Some(0),
        101,
        222
    )));
    assert!(copies.contains(&(
        "MEMORY_SET".into(),
        Some(2),
        Some(2),
        64,
        std::process::id() as i64
    )));
    let mut apis = Vec::new();
    src.api_calls(|a| {
        apis.push((
            dims.string(a.category_id).to_owned(),
            dims.string(a.name_id).to_owned(),
            a.tid,
            a.id,
            a.end - a.start,
            a.message.clone(),
        ));
        Ok(())
    })
    .unwrap();
    assert_eq!(apis.len(), 6);
    let ids: std::collections::HashSet<i64> = apis.iter().map(|a| a.3).collect();
    assert_eq!(ids.len(), 6, "region ids unique: {apis:?}");
    assert!(apis
        .iter()
        .any(|a| a.0 == db::RUNTIME_KIND && a.1 == "cuda211" && a.3 == 5));
    assert!(apis
        .iter()
        .any(|a| a.0 == db::DRIVER_KIND && a.1 == "cu211" && a.3 != 5));
    let marker: Vec<_> = apis.iter().filter(|a| a.0 == "MARKER_CORE_API").collect();
    assert_eq!(marker.len(), 2, "{apis:?}");
    assert!(marker
        .iter()
        .any(|m| m.1 == "step" && m.4 == 100 && m.2 == 444));
    assert!(marker.iter().any(|m| m.1 == "tick" && m.4 == 0));
    let mut allocs = Vec::new();
    src.memory_allocations(|m| {
        allocs.push((m.operation, m.agent_id, m.size, m.tid, m.start));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        allocs,
        [("MEMORY_ALLOCATION_ALLOCATE", Some(1), 4096, 333, 1_000_050)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session's rows reach the database while it runs: each `add` writes the rows [`LAG_NS`]
/// behind the newest start, in start order; a row CUPTI delivers later than that is written
/// anyway and counted as late; `finish` writes the rest and the process's end and JSON.
#[test]
fn rows_are_written_while_the_session_runs() {
    use rocprof_cuda_tool::sink::{Sink, LAG_NS};
    let dir = std::env::temp_dir().join(format!("cuda-tool-sink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.db");
    let cuda = CudaInfo {
        devices: vec![Device::default()],
        ..Default::default()
    };
    let session = SessionInfo {
        init: 5,
        fini: 5,
        offset: 0,
        extdata: serde_json::json!({}),
        demangle: false,
    };
    let s = |tenths: u64| tenths * LAG_NS / 10;
    let kernel = |start: u64, corr: u32| KernelRow {
        start,
        end: start + 10,
        correlation: corr,
        name: "_Z1kv".into(),
        ..Default::default()
    };
    let api = |start: u64, corr: u32, tid: u32| ApiRow {
        start,
        end: start + 5,
        correlation: corr,
        tid,
        ..Default::default()
    };
    let name = |_: bool, cbid: u32| format!("cuda{cbid}");
    let mut sink = Sink::create(&path, &cuda, &session).unwrap();

    // Out of order, newest at 2.5 s: the rows before 1.5 s go out, sorted.
    let rows = Collected {
        kernels: vec![kernel(s(5), 2), kernel(s(25), 4), kernel(s(1), 1)],
        apis: vec![api(s(1), 1, 101), api(s(5), 2, 102), api(s(25), 4, 104)],
        dropped: 3,
        ..Default::default()
    };
    sink.add(rows, &name).unwrap();
    assert_eq!((sink.counts().kernels, sink.counts().api), (2, 2));

    // Delivered late: the kernel and its API call start before rows already written.
    let rows = Collected {
        kernels: vec![kernel(s(3), 3)],
        apis: vec![api(s(3), 3, 103)],
        ..Default::default()
    };
    sink.add(rows, &name).unwrap();
    assert_eq!(sink.counts().kernels, 3);
    assert_eq!(sink.counts().late, 2);

    // A newer row moves the frontier: the 2.5 s kernel goes out, the 4 s one waits for detach.
    let rows = Collected {
        kernels: vec![kernel(s(40), 5)],
        ..Default::default()
    };
    sink.add(rows, &name).unwrap();
    assert_eq!(sink.counts().kernels, 4);
    let counts = sink
        .finish(77, &serde_json::json!({"backend": "cuda"}), &name)
        .unwrap();
    assert_eq!(
        (counts.kernels, counts.api, counts.dropped, counts.late),
        (5, 4, 3, 2)
    );

    let input = Input::open(&path).unwrap();
    let sources = input.sources().unwrap();
    let src = &sources[0];
    let dims = src.dims(AgentIndex::Absolute).unwrap();
    assert_eq!(dims.process.fini, 77);
    let ext: serde_json::Value = serde_json::from_str(&dims.process.extdata).unwrap();
    assert_eq!(ext["backend"], "cuda");
    assert_eq!(ext["late_records"], 2);
    assert_eq!(ext["dropped_records"], 3);
    let mut dispatches = Vec::new();
    src.dispatches(|d| {
        dispatches.push((d.start, d.tid));
        Ok(())
    })
    .unwrap();
    let pid = std::process::id() as i64;
    assert_eq!(
        dispatches,
        [
            (s(1) as i64, 101),
            (s(5) as i64, 102),
            (s(3) as i64, 103),
            (s(25) as i64, 104),
            (s(40) as i64, pid)
        ],
        "in write order, with each kernel's thread from its API call"
    );
}

/// Once the session's delivery order is learnt, a kind CUPTI delivers in order is held only
/// [`MIN_LAG_NS`] behind its newest row, not [`LAG_NS`]; a row that then comes later than that
/// is written, counted late, and lengthens its kind's lag.
#[test]
fn an_in_order_kind_is_held_less_once_learnt() {
    use rocprof_cuda_tool::sink::{Sink, LAG_NS, LEARN_NS, MIN_LAG_NS};
    let dir = std::env::temp_dir().join(format!("cuda-tool-lag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("l.db");
    let cuda = CudaInfo {
        devices: vec![Device::default()],
        ..Default::default()
    };
    let session = SessionInfo {
        extdata: serde_json::json!({}),
        ..Default::default()
    };
    const MS: u64 = 1_000_000;
    let kernel = |start: u64| KernelRow {
        start,
        end: start + 10,
        name: "_Z1kv".into(),
        ..Default::default()
    };
    let name = |_: bool, cbid: u32| format!("cuda{cbid}");
    let mut sink = Sink::create(&path, &cuda, &session).unwrap();
    // Hands the sink `starts`; the rows it holds afterwards.
    let mut given = 0;
    let mut add = |sink: &mut Sink, starts: Vec<u64>| {
        given += starts.len() as u64;
        let kernels = starts.into_iter().map(kernel).collect();
        let rows = Collected {
            kernels,
            ..Default::default()
        };
        sink.add(rows, &name).unwrap();
        given - sink.counts().kernels
    };
    // One kernel every 10 ms, delivered in order, up to `until` (inclusive).
    let t0 = 1_000 * MS;
    let grid = |from: u64, until: u64| (from..=until).step_by(10 * MS as usize).collect();
    // While learning: the rows of the last LAG_NS are held (both ends included).
    assert_eq!(
        add(&mut sink, grid(t0, t0 + 1_000 * MS)),
        LAG_NS / (10 * MS) + 1
    );
    // Learnt: those of the last MIN_LAG_NS.
    let newest = t0 + LEARN_NS + 500 * MS;
    assert_eq!(
        add(&mut sink, grid(t0 + 1_010 * MS, newest)),
        MIN_LAG_NS / (10 * MS) + 1
    );
    // A kernel 95 ms behind the newest: its kind's lag becomes 190 ms, so it is held (with
    // the rows not written yet), and written late (rows after it are in the database) when the
    // frontier is 190 ms past it.
    let late = newest - 95 * MS;
    assert_eq!(add(&mut sink, vec![late]), MIN_LAG_NS / (10 * MS) + 1 + 1);
    assert_eq!(sink.counts().late, 0);
    let newest2 = newest + 1_000 * MS;
    assert_eq!(
        add(&mut sink, grid(newest + 10 * MS, newest2)),
        190 / 10 + 1
    );
    assert_eq!(sink.counts().late, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Events carry their stacks as rocprofv3 writes them: a kernel dispatch's parent stack is its
/// own id; a driver call made inside a runtime call of the same thread has that call as its
/// parent; other calls are at the top (0).
#[test]
fn parent_stack_ids_nest_driver_calls_in_runtime_calls() {
    let dir = std::env::temp_dir().join(format!("cuda-tool-stack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.db");
    let api = |driver: bool, start: u64, end: u64, corr: u32, tid: u32| ApiRow {
        driver,
        cbid: 1,
        start,
        end,
        correlation: corr,
        tid,
    };
    let rows = Collected {
        apis: vec![
            api(false, 100, 200, 1, 7), // cudaLaunchKernel
            api(true, 120, 150, 2, 7),  // cuLaunchKernel inside it
            api(true, 300, 320, 3, 7),  // a driver call of its own
            api(true, 130, 140, 4, 8),  // another thread: not nested
        ],
        kernels: vec![KernelRow {
            start: 400,
            end: 500,
            correlation: 1,
            name: "_Z1kv".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let cuda = CudaInfo {
        devices: vec![Device::default()],
        ..Default::default()
    };
    let name = |driver: bool, _: u32| if driver { "cu" } else { "cuda" }.to_string();
    db::write(&path, &rows, &cuda, &SessionInfo::default(), &name).unwrap();
    let input = Input::open(&path).unwrap();
    let c = input.connection();
    let stacks: Vec<(i64, i64)> = c
        .prepare("SELECT stack_id, parent_stack_id FROM regions ORDER BY stack_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stacks, [(1, 0), (2, 1), (3, 0), (4, 0)]);
    let kernel: (i64, i64) = c
        .query_row("SELECT stack_id, parent_stack_id FROM kernels", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(kernel, (1, 1));
    drop(input);
    let _ = std::fs::remove_dir_all(&dir);
}
