//! rocpd → rocprofv3 JSON read on several threads, through the command: `ROCPROF_ATTACH_THREADS`
//! and a time window given as `--start`/`--end` (the rest of the JSON layout is checked in
//! crates/rocpd/tests/to_json.rs).

use crate::rocpd_common;

use rocpd_common::*;
use serde_json::Value;

/// A database large enough to be read in many id ranges: dispatches of two kernels; HIP, HSA and
/// marker calls interleaved (HSA and marker arrays follow HIP's, so they are the ones spooled);
/// copies; allocations interleaved with scratch memory. Returns the rows written per array.
fn big_db(path: &std::path::Path) -> std::collections::BTreeMap<&'static str, usize> {
    use rocprof_attach::rocpd::model::*;
    let mut w = writer(path, 300, 9);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "void add<float>(float*, int)", 8, 0, 16, 0);
    kernel(&mut w, 1, 11, "mul(float*, int)", 12, 4, 24, 2048);
    let mut n = std::collections::BTreeMap::new();
    let corr = |i: i64| Correlation {
        internal: i,
        external: 0,
        ancestor: 0,
    };
    for i in 1..=9000i64 {
        let t = 10_000 * i;
        let (kind, op, key) = match i % 7 {
            0 => ("HSA_CORE_API", "hsa_queue_create", "hsa_api"),
            3 => ("MARKER_CORE_API", "roctxMarkA", "marker_api"),
            1 | 5 => ("HIP_RUNTIME_API_EXT", "hipMemcpyAsync", "hip_api"),
            _ => ("HIP_RUNTIME_API_EXT", "hipLaunchKernel", "hip_api"),
        };
        *n.entry(key).or_insert(0) += 1;
        w.api_call(&ApiCall {
            kind: kind.into(),
            operation: op.into(),
            tid: 300 + i % 3,
            correlation: corr(i),
            start: t,
            end: t + 100,
            message: (key == "marker_api").then(|| format!("mark {i}")),
            ..Default::default()
        })
        .expect("api");
        if i % 2 == 0 {
            *n.entry("kernel_dispatch").or_insert(0) += 1;
            w.kernel_dispatch(&KernelDispatch {
                dispatch_id: i,
                tid: 300,
                agent_id: 1,
                kernel_id: 10 + (i / 2) % 2,
                queue_id: 1,
                correlation: corr(i),
                start: t + 200,
                end: t + 300,
                workgroup: [64, 1, 1],
                grid: [1024, 1, 1],
                ..Default::default()
            })
            .expect("dispatch");
        }
        if i % 5 == 0 {
            *n.entry("memory_copy").or_insert(0) += 1;
            let op = if i % 10 == 0 {
                "MEMORY_COPY_DEVICE_TO_HOST"
            } else {
                "MEMORY_COPY_HOST_TO_DEVICE"
            };
            w.memory_copy(&MemoryCopy {
                tid: 300,
                operation: op.into(),
                correlation: corr(i),
                start: t + 400,
                end: t + 500,
                src_agent_id: 0,
                dst_agent_id: 1,
                size: i,
                ..Default::default()
            })
            .expect("copy");
        }
        if i % 3 == 0 {
            let scratch = i % 9 == 0;
            *n.entry(if scratch {
                "scratch_memory"
            } else {
                "memory_allocation"
            })
            .or_insert(0) += 1;
            w.memory_allocation(&MemoryAllocation {
                tid: 300,
                operation: if scratch {
                    "SCRATCH_MEMORY_ALLOC"
                } else {
                    "MEMORY_ALLOCATION_ALLOCATE"
                }
                .into(),
                correlation: corr(i),
                start: t + 600,
                end: t + 700,
                agent_id: Some(1),
                address: 0x1000 * i,
                size: 4096,
                queue_id: scratch.then_some(1),
                flags: scratch.then_some(0),
                ..Default::default()
            })
            .expect("alloc");
        }
    }
    w.finish().expect("finish");
    n
}

/// Converts `db` to JSON with `threads` reader threads and `extra` options.
fn json_with_threads(
    db: &std::path::Path,
    out: &std::path::Path,
    threads: &str,
    extra: &[&str],
) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocprof-attach"))
        .args(["convert", "-f", "json", "-o", "out", "-i"])
        .arg(db)
        .arg("-d")
        .arg(out)
        .args(extra)
        .env("ROCPROF_ATTACH_THREADS", threads)
        .output()
        .expect("run convert");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read(out, "out_results.json")
}

#[test]
fn a_table_read_in_ranges_on_several_threads_gives_the_same_document_in_id_order() {
    let tmp = tempdir();
    let db = tmp.path().join("big.db");
    let written = big_db(&db);
    let one = json_with_threads(&db, &tmp.path().join("t1"), "1", &[]);
    for threads in ["2", "5"] {
        let many = json_with_threads(&db, &tmp.path().join(format!("t{threads}")), threads, &[]);
        assert!(
            one == many,
            "{threads} threads: the same bytes as one thread"
        );
    }
    let v: Value = serde_json::from_str(&one).expect("valid JSON");
    let p = &v["rocprofiler-sdk-tool"][0];
    let br = &p["buffer_records"];
    for (key, count) in &written {
        let recs = br[*key].as_array().unwrap_or_else(|| panic!("{key}"));
        assert_eq!(recs.len(), *count, "{key}: every record once");
        let ids: Vec<i64> = recs
            .iter()
            .map(|r| r["correlation_id"]["internal"].as_i64().expect("id"))
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{key}: in id order");
    }
    for r in br["hip_api"].as_array().expect("hip") {
        let id = r["correlation_id"]["internal"].as_i64().expect("id");
        let want = if id % 7 == 1 || id % 7 == 5 {
            "hipMemcpyAsync"
        } else {
            "hipLaunchKernel"
        };
        assert_eq!(
            json_names(p, r),
            ("HIP_RUNTIME_API_EXT", want),
            "record {id}"
        );
    }
    assert_eq!(
        json_names(p, &br["hsa_api"][0]),
        ("HSA_CORE_API", "hsa_queue_create")
    );
    assert_eq!(
        json_names(p, &br["memory_copy"][1]),
        ("MEMORY_COPY", "MEMORY_COPY_DEVICE_TO_HOST")
    );
    assert_eq!(
        json_names(p, &br["scratch_memory"][0]).1,
        "SCRATCH_MEMORY_ALLOC"
    );
    let marks = p["strings"]["marker_api"]
        .as_array()
        .expect("marker strings");
    assert_eq!(marks.len(), written["marker_api"]);
    assert_eq!(marks[0], serde_json::json!({"key": 3, "value": "mark 3"}));
    let keys: Vec<i64> = marks
        .iter()
        .map(|m| m["key"].as_i64().expect("key"))
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "marker strings in id order"
    );
    let ops: Vec<&str> = p["strings"]["buffer_records"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| k["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(
        ops[0], "KERNEL_DISPATCH",
        "kinds in the order one pass meets them"
    );

    // A time window: the same on one and several threads, and only records inside it.
    let window = ["--start", "20000000", "--end", "60000000"];
    let one = json_with_threads(&db, &tmp.path().join("w1"), "1", &window);
    let many = json_with_threads(&db, &tmp.path().join("w4"), "4", &window);
    assert!(one == many, "windowed: the same bytes on 1 and 4 threads");
    let v: Value = serde_json::from_str(&one).expect("valid JSON");
    let hip = v["rocprofiler-sdk-tool"][0]["buffer_records"]["hip_api"]
        .as_array()
        .expect("hip")
        .clone();
    assert!(!hip.is_empty() && hip.len() < written["hip_api"]);
    for r in &hip {
        let s = r["start_timestamp"].as_i64().expect("start");
        assert!(
            (20_000_000..=60_000_000).contains(&s),
            "{s} inside the window"
        );
    }
}
