//! rocpd → CSV against real rocprofv3 samples: each test rebuilds a database from a sample's
//! values with the crate's writer, converts it with `convert_with` (what `rocprof-attach
//! convert` runs), and compares bytes.

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::model::*;
use rocprof_rocpd::ConvertOptions;
use rocprof_testkit::rocpd::*;

/// What `convert --stats` asks for.
fn with_stats() -> ConvertOptions {
    ConvertOptions {
        stats: true,
        ..Default::default()
    }
}

/// Output lines of a converted file (header first).
fn out_lines(dir: &std::path::Path, name: &str) -> Vec<String> {
    let text = read(dir, name);
    assert!(text.ends_with('\n'), "{name} must end with a newline");
    text.lines().map(str::to_owned).collect()
}

#[test]
fn kernel_trace_matches_sample() {
    let (header, rows) = sample_lines("kernel_trace.csv");
    let tmp = tempdir();
    let db = tmp.path().join("k.db");
    let mut w = writer(&db, 4242, 1);
    agents(&mut w, (0, 0), (4, 4));
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        let c = cells(r);
        if seen.insert(int(&c, 6)) {
            kernel(
                &mut w,
                4,
                int(&c, 6),
                &c[7],
                int(&c, 13),
                int(&c, 14),
                int(&c, 15),
                int(&c, 11),
            );
        }
    }
    for r in &rows {
        let c = cells(r);
        assert_eq!(c[1], "Agent 4");
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: int(&c, 5),
            tid: int(&c, 4),
            agent_id: 4,
            kernel_id: int(&c, 6),
            queue_id: int(&c, 2),
            stream_id: int(&c, 3),
            correlation: Correlation {
                internal: int(&c, 8),
                external: 0,
                ancestor: 0,
            },
            start: int(&c, 9),
            end: int(&c, 10),
            private_segment_size: int(&c, 12),
            group_segment_size: 0,
            workgroup: [int(&c, 16), int(&c, 17), int(&c, 18)],
            grid: [int(&c, 19), int(&c, 20), int(&c, 21)],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_kernel_trace.csv");
    assert_eq!(got[0], header, "header");
    // rocprofv3 writes rows in buffer order; the converter writes them in dispatch-id order.
    let mut expected = rows.clone();
    expected.sort_by_key(|r| int(&cells(r), 5));
    assert_eq!(&got[1..], &expected[..]);
    assert_eq!(
        listing(&out),
        vec!["out_agent_info.csv", "out_kernel_trace.csv"],
        "only domains with data get a trace file (agent_info.csv always, as rocprofv3)"
    );
}

#[test]
fn lds_block_size_is_rounded_up_to_512_bytes() {
    let tmp = tempdir();
    let db = tmp.path().join("lds.db");
    let mut w = writer(&db, 1, 1);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 1, "k", 8, 0, 16, 100);
    kernel(&mut w, 1, 2, "k2", 8, 0, 16, 1024);
    for (id, k) in [(1, 1), (2, 2)] {
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: id,
            tid: 1,
            agent_id: 1,
            kernel_id: k,
            workgroup: [1, 1, 1],
            grid: [1, 1, 1],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_kernel_trace.csv");
    assert_eq!(cells(&got[1])[11], "512");
    assert_eq!(cells(&got[2])[11], "1024");
}

/// Rebuilds an API trace sample (7 columns) and checks the converted file.
fn api_roundtrip(sample_name: &str, out_name: &str) {
    let (header, rows) = sample_lines(sample_name);
    let tmp = tempdir();
    let db = tmp.path().join("api.db");
    let pid = int(&cells(&rows[0]), 2);
    let mut w = writer(&db, pid, 3);
    let mut ids = std::collections::HashSet::new();
    for r in &rows {
        let c = cells(r);
        assert_eq!(int(&c, 2), pid, "one process per sample");
        assert!(
            ids.insert(int(&c, 4)),
            "correlation ids are unique in {sample_name}"
        );
        let marker = c[0].starts_with("MARKER");
        let (start, end) = (int(&c, 5), int(&c, 6));
        w.api_call(&ApiCall {
            kind: c[0].clone(),
            operation: if marker {
                if start == end {
                    "roctxMarkA"
                } else {
                    "roctxRangePushA"
                }
                .into()
            } else {
                c[1].clone()
            },
            tid: int(&c, 3),
            correlation: Correlation {
                internal: int(&c, 4),
                external: 0,
                ancestor: 0,
            },
            start,
            end,
            message: marker.then(|| c[1].clone()),
            args: vec![Arg {
                arg_type: "int".into(),
                name: "x".into(),
                value: "1".into(),
            }],
        })
        .expect("api call");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, out_name);
    assert_eq!(got[0], header, "header of {sample_name}");
    let mut expected = rows.clone();
    expected.sort_by_key(|r| int(&cells(r), 4));
    assert_eq!(&got[1..], &expected[..], "rows of {sample_name}");
}

#[test]
fn hip_trace_matches_sample() {
    api_roundtrip("hip_trace.csv", "out_hip_api_trace.csv");
    api_roundtrip("hip_runtime_trace.csv", "out_hip_api_trace.csv");
    api_roundtrip("hip_compile_trace.csv", "out_hip_api_trace.csv");
}

#[test]
fn hsa_trace_matches_sample() {
    api_roundtrip("hsa_api_trace.csv", "out_hsa_api_trace.csv");
}

#[test]
fn marker_trace_matches_sample() {
    // Instant markers become rocpd samples, ranges become regions; the message is the Function.
    api_roundtrip("marker_api_trace.csv", "out_marker_api_trace.csv");
}

#[test]
fn rccl_trace_matches_sample() {
    api_roundtrip("rccl_trace.csv", "out_rccl_api_trace.csv");
}

#[test]
fn memory_copy_trace_matches_sample() {
    let (header, rows) = sample_lines("memory_copy_trace.csv");
    let tmp = tempdir();
    let db = tmp.path().join("copy.db");
    let mut w = writer(&db, 10, 4);
    agents(&mut w, (0, 0), (4, 4));
    let agent = |s: &str| -> i64 { s.trim_start_matches("Agent ").parse().expect("agent") };
    for r in &rows {
        let c = cells(r);
        w.memory_copy(&MemoryCopy {
            tid: 10,
            operation: c[1].clone(),
            correlation: Correlation {
                internal: int(&c, 5),
                ..Default::default()
            },
            start: int(&c, 6),
            end: int(&c, 7),
            src_agent_id: agent(&c[3]),
            dst_agent_id: agent(&c[4]),
            size: 4096,
            stream_id: int(&c, 2),
            ..Default::default()
        })
        .expect("copy");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_memory_copy_trace.csv");
    assert_eq!(got[0], header);
    assert_eq!(&got[1..], &rows[..]);
}

#[test]
fn memory_allocation_trace_matches_sample() {
    let (header, rows) = sample_lines("memory_allocation_trace.csv");
    let tmp = tempdir();
    let db = tmp.path().join("alloc.db");
    let mut w = writer(&db, 10, 5);
    agents(&mut w, (0, 0), (4, 4));
    for r in &rows {
        let c = cells(r);
        let agent = c[2]
            .strip_prefix("Agent ")
            .map(|a| a.parse::<i64>().expect("agent"));
        w.memory_allocation(&MemoryAllocation {
            tid: 10,
            operation: c[1].clone(),
            correlation: Correlation {
                internal: int(&c, 5),
                ..Default::default()
            },
            start: int(&c, 6),
            end: int(&c, 7),
            agent_id: agent,
            address: i64::from_str_radix(c[4].trim_start_matches("0x"), 16).expect("address"),
            size: int(&c, 3),
            ..Default::default()
        })
        .expect("allocation");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_memory_allocation_trace.csv");
    assert_eq!(got[0], header);
    assert_eq!(&got[1..], &rows[..]);
}

#[test]
fn scratch_memory_trace_matches_sample_plus_rocm7_size_column() {
    // The sample predates ROCm 7.0's ninth column (Allocation_Size); the first eight must match.
    let (header, rows) = sample_lines("scratch_memory_trace.csv");
    let tmp = tempdir();
    let db = tmp.path().join("scratch.db");
    let mut w = writer(&db, 10, 6);
    agents(&mut w, (0, 0), (4, 4));
    for (i, r) in rows.iter().enumerate() {
        let c = cells(r);
        w.memory_allocation(&MemoryAllocation {
            tid: int(&c, 4),
            operation: c[1].clone(),
            correlation: Correlation {
                internal: i as i64 + 1,
                ..Default::default()
            },
            start: int(&c, 6),
            end: int(&c, 7),
            agent_id: Some(4),
            size: 65536,
            queue_id: Some(int(&c, 3)),
            flags: Some(int(&c, 5)),
            ..Default::default()
        })
        .expect("scratch");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_scratch_memory_trace.csv");
    assert_eq!(got[0], format!("{header},\"Allocation_Size\""));
    let expected: Vec<String> = rows.iter().map(|r| format!("{r},65536")).collect();
    assert_eq!(&got[1..], &expected[..]);
}

#[test]
fn counter_collection_matches_sample_and_sums_instances() {
    let (header, rows) = sample_lines("counter_collection.csv");
    let tmp = tempdir();
    let db = tmp.path().join("pmc.db");
    let pid = int(&cells(&rows[0]), 4);
    let mut w = writer(&db, pid, 7);
    agents(&mut w, (0, 0), (1, 1));
    w.pmc(&Pmc {
        id: 5,
        agent_id: 1,
        name: "SQ_WAVES".into(),
        description: "waves".into(),
        block: "SQ".into(),
        ..Default::default()
    })
    .expect("pmc");
    for r in &rows {
        let c = cells(r);
        kernel(
            &mut w,
            1,
            int(&c, 7),
            &c[8],
            int(&c, 12),
            int(&c, 13),
            int(&c, 14),
            int(&c, 10),
        );
    }
    for r in &rows {
        let c = cells(r);
        assert_eq!(int(&c, 6), 1024 * 1024);
        assert_eq!(int(&c, 9), 64);
        let value: f64 = c[16].parse().expect("value");
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: int(&c, 1),
            tid: int(&c, 5),
            agent_id: 1,
            kernel_id: int(&c, 7),
            queue_id: int(&c, 3),
            correlation: Correlation {
                internal: int(&c, 0),
                ..Default::default()
            },
            start: int(&c, 17),
            end: int(&c, 18),
            workgroup: [64, 1, 1],
            grid: [1024, 1024, 1],
            counters: vec![(5, value / 4.0), (5, value / 4.0), (5, value / 2.0)],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let got = out_lines(&out, "out_counter_collection.csv");
    assert_eq!(got[0], header);
    assert_eq!(&got[1..], &rows[..]);
}

/// Durations reproducing a stats row: exact for one or two calls; otherwise the count, sum, min
/// and max are exact and the rest is spread evenly (so the standard deviation differs).
fn durations(calls: i64, sum: i64, min: i64, max: i64) -> Vec<i64> {
    match calls {
        1 => vec![sum],
        2 => vec![min, max],
        n => {
            let rest = sum - min - max;
            let k = n - 2;
            let mut v = vec![min, max];
            for i in 0..k {
                v.push(rest / k + i64::from(i < rest % k));
            }
            assert!(
                v.iter().all(|&d| d >= min && d <= max),
                "cannot rebuild {calls} {sum} {min} {max}"
            );
            v
        }
    }
}

#[test]
fn hip_api_stats_match_sample() {
    let (header, rows) = sample_lines("hip_api_stats.csv");
    let tmp = tempdir();
    let db = tmp.path().join("stats.db");
    let mut w = writer(&db, 10, 8);
    let (mut t, mut corr) = (1_000_000i64, 1i64);
    for r in &rows {
        let c = cells(r);
        let kind = if c[0].starts_with("__hip") {
            "HIP_COMPILER_API_EXT"
        } else {
            "HIP_RUNTIME_API_EXT"
        };
        for d in durations(int(&c, 1), int(&c, 2), int(&c, 5), int(&c, 6)) {
            w.api_call(&ApiCall {
                kind: kind.into(),
                operation: c[0].clone(),
                tid: 10,
                correlation: Correlation {
                    internal: corr,
                    ..Default::default()
                },
                start: t,
                end: t + d,
                ..Default::default()
            })
            .expect("call");
            t += d + 10;
            corr += 1;
        }
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(&[&db], &out, &[OutputFormat::Csv], &with_stats());
    let got = out_lines(&out, "out_hip_api_stats.csv");
    assert_eq!(got[0], header);
    assert_eq!(got.len() - 1, rows.len());
    for (g, e) in got[1..].iter().zip(&rows) {
        if int(&cells(e), 1) <= 2 {
            assert_eq!(g, e);
        } else {
            let upto = |s: &str| {
                s.rsplit_once(',')
                    .map(|x| x.0.to_owned())
                    .unwrap_or_default()
            };
            assert_eq!(upto(g), upto(e), "all but StdDev");
        }
    }
    let domain = out_lines(&out, "out_domain_stats.csv");
    assert_eq!(domain[0], header);
    let calls: i64 = rows.iter().map(|r| int(&cells(r), 1)).sum();
    let total: i64 = rows.iter().map(|r| int(&cells(r), 2)).sum();
    assert!(
        domain[1].starts_with(&format!("\"HIP_API\",{calls},{total},")),
        "{}",
        domain[1]
    );
}

#[test]
fn domain_stats_match_sample() {
    let (header, rows) = sample_lines("hip_domain_stats.csv");
    let c = cells(&rows[0]);
    let tmp = tempdir();
    let db = tmp.path().join("domain.db");
    let mut w = writer(&db, 10, 9);
    let mut t = 5_000i64;
    for (i, d) in durations(int(&c, 1), int(&c, 2), int(&c, 5), int(&c, 6))
        .into_iter()
        .enumerate()
    {
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: format!("hipCall{}", i % 3),
            tid: 10,
            correlation: Correlation {
                internal: i as i64 + 1,
                ..Default::default()
            },
            start: t,
            end: t + d,
            ..Default::default()
        })
        .expect("call");
        t += d + 1;
    }
    w.finish().expect("finish");
    let out = tmp.path().join("out");
    convert_to(&[&db], &out, &[OutputFormat::Csv], &with_stats());
    let got = out_lines(&out, "out_domain_stats.csv");
    assert_eq!(got[0], header);
    let upto = |s: &str| {
        s.rsplit_once(',')
            .map(|x| x.0.to_owned())
            .unwrap_or_default()
    };
    assert_eq!(upto(&got[1]), upto(&rows[0]));
}
