//! `--pmc` on a CUDA process (issue 27, docs/cuda.md "Counters"), on the GPU-free stand-ins:
//! the fake CUPTI's range profiler returns values derived from each launch (warps = blocks x
//! ceil(threads / 32), elapsed cycles = the kernel's duration x 1.98, ...; see
//! tests/fixtures/cuda/fake_cupti_profiler.c), so every value written is checked exactly, end to
//! end: the tool's launch callbacks, range *i* given to launch *i*, rocpd's counter tables,
//! rocprofv3's `counter_collection.csv`. Refusals (a set needing several passes, a rocprofv3
//! name with no NVIDIA equivalent, counters denied) leave nothing enabled.

use crate::cuda::{count, query, session, start, Target};

/// The header of rocprofv3's `counter_collection.csv` (its sample in the shared reference).
const ROCPROFV3_HEADER: &str = "\"Correlation_Id\",\"Dispatch_Id\",\"Agent_Id\",\"Queue_Id\",\"Process_Id\",\"Thread_Id\",\"Grid_Size\",\"Kernel_Id\",\"Kernel_Name\",\"Workgroup_Size\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\"Accum_VGPR_Count\",\"SGPR_Count\",\"Counter_Name\",\"Counter_Value\",\"Start_Timestamp\",\"End_Timestamp\"";

/// The fake driver's kernel duration (fake_cuda.c): 2 to 9 µs, fixed per name by its FNV-1a
/// hash.
fn duration_ns(mangled: &str) -> u64 {
    let mut h: u32 = 2166136261;
    for b in mangled.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    2000 + (h % 8) as u64 * 1000
}

/// `(counter, value, blocks, threads per block, mangled kernel name)` of every counter row.
fn counter_rows(db: &std::path::Path) -> Vec<(String, f64, u64, u64, String)> {
    query(
        db,
        "SELECT C.counter_name, C.value, C.grid_size / C.workgroup_size, C.workgroup_size, S.kernel_name \
         FROM counters_collection C JOIN kernel_symbols S ON S.id = C.kernel_id ORDER BY C.dispatch_id",
    )
    .into_iter()
    .map(|r| {
        (
            r[0].clone(),
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
            r[3].parse().unwrap(),
            r[4].clone(),
        )
    })
    .collect()
}

/// The field of the fake CUPTI's state line.
fn field(t: &Target, name: &str) -> String {
    let state = t.state();
    state
        .split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or("")
        .to_owned()
}

fn check_exact(rows: &[(String, f64, u64, u64, String)]) {
    for (counter, value, blocks, threads, name) in rows {
        let want = match counter.as_str() {
            "SQ_WAVES" => (blocks * threads.div_ceil(32)) as f64,
            "GRBM_COUNT" => (duration_ns(name) * 198 / 100) as f64,
            "sm__ctas_launched.sum" => *blocks as f64,
            "TCC_HIT" => (blocks * threads / 4) as f64,
            "FETCH_SIZE" => (blocks * threads * 8) as f64 / 1024.0,
            other => panic!("unexpected counter {other}"),
        };
        assert_eq!(*value, want, "{counter} of {name} ({blocks} x {threads})");
    }
}

#[test]
fn pmc_counts_each_kernel_exactly_writes_rocprofv3_csv_and_a_second_session_sets_up_again() {
    let mut t = Target::spawn(&[], &[]);
    let args = [
        "--pmc",
        "SQ_WAVES",
        "GRBM_COUNT",
        "sm__ctas_launched.sum",
        "FETCH_SIZE",
        "--kernel-iteration-range",
        "[1-3]",
        "-o",
        "p",
        "--attach-duration-msec",
        "1500",
        "--output-format",
        "csv,rocpd",
    ];
    let (code, _, stderr) = session(&t, &args);
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("p_results.db");
    let rows = counter_rows(&db);
    check_exact(&rows);
    // Five kernel names, launches 1 to 3 of each, four counters each; without --kernel-trace
    // only the counted kernels are written.
    assert_eq!(rows.len(), 5 * 3 * 4, "{rows:?}\n{stderr}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM kernels"), 15);
    // Counting stops once every kernel has its launches (or at the window's end on a slow
    // machine); the report says what was counted and what it cost.
    assert!(
        stderr.contains("launches counted, values written for 15")
            && (stderr.contains("every kernel seen had its launches")
                || stderr.contains("the window ended"))
            && stderr.contains("kernels were serialised for"),
        "{stderr}"
    );
    // rocprofv3's counter_collection.csv, its columns exactly.
    let csv = std::fs::read_to_string(t.out().join("p_counter_collection.csv")).unwrap();
    assert_eq!(
        csv.lines().next().unwrap_or(""),
        ROCPROFV3_HEADER,
        "rocprofv3's columns"
    );
    assert_eq!(csv.lines().count(), 1 + 60, "{csv}");
    assert!(
        csv.contains("\"SQ_WAVES\",864.000000"),
        "108 blocks of 256: {csv}"
    );
    // JSON and Perfetto carry the values; summary gives launches, mean, min and max per kernel.
    let conv = t.out().join("conv");
    crate::cuda::run_on_db("convert", &db, &["json", "pftrace"], &conv);
    let json = std::fs::read_to_string(conv.join("out_results.json")).unwrap();
    assert!(json.contains("SQ_WAVES"), "counter values in the JSON");
    assert!(conv.join("out_results.pftrace").is_file());
    let (code, out, err) =
        crate::common::rocprof_attach(&["summary", "-i", db.to_str().unwrap()], &[]).finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l.contains("_Z10gemm_kerneli")
            && l.contains("| SQ_WAVES ")
            && l.contains("|        3 |")),
        "COUNTER SUMMARY: {out}"
    );
    // Counting stopped; the range profiler is disabled at detach (an enabled one kept the H200
    // transformer slower and 3 GB larger) and no activity kind is on.
    assert_eq!(field(&t, "counting"), "0", "{}", t.state());
    assert_eq!(field(&t, "profiler"), "0", "{}", t.state());
    assert_eq!(t.enabled(), Vec::<u32>::new(), "{}", t.state());

    // A second session with the same counters and kernel trace: every kernel is written, the
    // counted ones carry their values; the profiler is set up again (CUPTI was torn down).
    let (code, _, second) = session(
        &t,
        &[
            "--kernel-trace",
            "--pmc",
            "SQ_WAVES",
            "GRBM_COUNT",
            "sm__ctas_launched.sum",
            "FETCH_SIZE",
            "--kernel-include-regex",
            "gemm",
            "-o",
            "q",
            "--attach-duration-msec",
            "800",
        ],
    );
    assert_eq!(code, 0, "{second}");
    assert!(second.contains("counters set up"), "set up again: {second}");
    let db = t.out().join("q_results.db");
    let rows = counter_rows(&db);
    check_exact(&rows);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.4.contains("gemm")), "{rows:?}");
    assert!(
        count(&db, "SELECT COUNT(*) FROM kernels") > rows.len() as i64,
        "every kernel traced"
    );
    assert_eq!(field(&t, "counting"), "0", "{}", t.state());
    assert_eq!(field(&t, "profiler"), "0", "released: {}", t.state());
    // Other counters: set up afresh.
    let (code, _, third) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "-o",
            "r",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_eq!(code, 0, "{third}");
    assert!(third.contains("counters set up"), "{third}");
    check_exact(&counter_rows(&t.out().join("r_results.db")));
    assert_eq!(field(&t, "profiler"), "0", "released: {}", t.state());
    assert!(t.alive());
}

#[test]
fn a_multi_pass_set_is_refused_naming_the_passes_and_kernel_replay_collects_it() {
    let t = Target::spawn(&[], &[]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "TCC_HIT",
            "-o",
            "m",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("need 2 passes")
            && stderr
                .contains("pass 1: sm__warps_launched.sum; pass 2: lts__t_sectors_lookup_hit.sum")
            && stderr.contains("--replay-mode kernel"),
        "{stderr}"
    );
    assert_eq!(field(&t, "profiler"), "0", "nothing enabled: {}", t.state());
    assert_eq!(field(&t, "subscribed"), "0", "{}", t.state());
    assert!(!t.out().join("m_results.db").exists());

    let (code, _, stderr) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "TCC_HIT",
            "--replay-mode",
            "kernel",
            "--kernel-replay-beta-enabled",
            "-o",
            "k",
            "--attach-duration-msec",
            "800",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let rows = counter_rows(&t.out().join("k_results.db"));
    check_exact(&rows);
    assert_eq!(
        rows.len(),
        5 * 5 * 2,
        "5 names x 5 launches (the default) x 2"
    );
    assert!(stderr.contains("kernel replay, 2 pass(es)"), "{stderr}");
}

/// Iteration multiplexing (`--replay-mode iteration`): a 2-pass set counted one pass per window.
/// The fake CUPTI merges a pass's range *i* into the image's range *i*, as the H200 did, so a
/// launch of pass 2 sits in the same range as a different launch of pass 1; each launch must get
/// only the metrics of its own pass, and every value is checked exactly against its launch's
/// grid.
#[test]
fn iteration_multiplexing_gives_each_launch_the_metrics_of_its_pass_and_every_kernel_every_group() {
    let mut t = Target::spawn(&[], &[]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "sm__ctas_launched.sum",
            "--pmc",
            "TCC_HIT",
            "--replay-mode",
            "iteration",
            "--kernel-iteration-range",
            "[1-3]",
            "-o",
            "i",
            "--attach-duration-msec",
            "5000",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("i_results.db");
    let rows = counter_rows(&db);
    check_exact(&rows);
    // Pass 1 gave launches 1-3 of each of the 5 names SQ_WAVES and the CTAs, pass 2 gave
    // launches 1-3 of each TCC_HIT: 30 dispatches, each with its own pass's metrics only.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM kernels"), 30, "{stderr}");
    let of = |c: &str| rows.iter().filter(|r| r.0 == c).count();
    assert_eq!(
        (of("SQ_WAVES"), of("sm__ctas_launched.sum"), of("TCC_HIT")),
        (15, 15, 15),
        "{rows:?}\n{stderr}"
    );
    for name in rows.iter().map(|r| &r.4) {
        for c in ["SQ_WAVES", "TCC_HIT"] {
            assert!(
                rows.iter().any(|r| &r.4 == name && r.0 == c),
                "{name} got {c}"
            );
        }
    }
    assert!(
        stderr.contains("iteration multiplexing counted 2 of 2 passes (pass 1: SQ_WAVES, sm__ctas_launched.sum; pass 2: TCC_HIT)")
            && stderr.contains("5 of 5 kernel names got every group")
            && stderr.contains("iteration replay, 2 pass(es)"),
        "{stderr}"
    );
    assert_eq!(field(&t, "profiler"), "0", "released: {}", t.state());
    assert!(t.alive());
}

#[test]
fn iteration_multiplexing_of_a_one_pass_set_counts_as_without_it() {
    let t = Target::spawn(&[], &[]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "--replay-mode",
            "iteration",
            "-o",
            "one",
            "--attach-duration-msec",
            "300",
        ],
    );
    // A set of one pass is counted as without the mode.
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("user replay, 1 pass(es)"), "{stderr}");
    assert!(!counter_rows(&t.out().join("one_results.db")).is_empty());
}

#[test]
fn names_without_an_equivalent_and_denied_counters_are_refused_with_nothing_enabled() {
    let t = Target::spawn(&[], &[("FAKE_CUPTI_PROFILING", "denied")]);
    let (code, _, stderr) = session(
        &t,
        &["--pmc", "SQ_INSTS_VALU", "--attach-duration-msec", "200"],
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("no NVIDIA equivalent") && stderr.contains("smsp__inst_executed.sum"),
        "{stderr}"
    );
    let (code, _, stderr) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "-o",
            "d",
            "--attach-duration-msec",
            "200",
        ],
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
            && stderr.contains("NVreg_RestrictProfilingToAdminUsers"),
        "CUPTI's reason and the fix: {stderr}"
    );
    assert!(!t.out().join("d_results.db").exists(), "no empty file");
    assert_eq!(field(&t, "profiler"), "0", "{}", t.state());
    assert_eq!(field(&t, "subscribed"), "0", "{}", t.state());
    // The process is still served: tracing works.
    let run = start(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "after",
            "--attach-duration-msec",
            "200",
        ],
        &[],
    );
    let (code, _, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_front_end_killed_while_counting_leaves_nothing_counting_and_the_values_written() {
    // 20 ms steps and every launch kept: the window counts for seconds.
    let t = Target::spawn(&["--step-us", "20000"], &[]);
    let mut run = start(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "--kernel-iteration-range",
            "[1-1000000]",
            "-o",
            "k",
        ],
        &[],
    );
    run.wait_for("attached to PID");
    crate::common::wait_until(std::time::Duration::from_secs(20), || {
        field(&t, "counting") == "1" && field(&t, "ranges").parse::<u32>().unwrap_or(0) >= 12
    });
    run.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = run.finish();
    // The tool sees the connection close and detaches by itself: counting stops, the
    // subscription ends, the values are written.
    crate::common::wait_until(std::time::Duration::from_secs(30), || {
        field(&t, "counting") == "0" && field(&t, "subscribed") == "0"
    });
    let db = t.out().join("k_results.db");
    crate::common::wait_until(std::time::Duration::from_secs(30), || db.is_file());
    // Read without panicking while the tool may still be writing.
    let values = || -> rusqlite::Result<i64> {
        let c = rusqlite::Connection::open(&db)?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        c.query_row("SELECT COUNT(*) FROM counters_collection", [], |r| r.get(0))
    };
    crate::common::wait_until(std::time::Duration::from_secs(30), || {
        values().is_ok_and(|n| n > 0)
    });
    check_exact(&counter_rows(&db));
    let (code, _, stderr) = session(&t, &["--pmc", "SQ_WAVES", "--attach-duration-msec", "300"]);
    assert_eq!(code, 0, "{stderr}");
}

/// `(name, type, description, rocprofv3 names)` of every metric of the fake CUPTI's catalog as
/// `-L` lists it: the counters by base name (no rollup), one ratio, one throughput
/// (tests/fixtures/cuda/fake_cupti_profiler.c).
const CATALOG: [(&str, &str, &str, &str); 13] = [
    (
        "dram__bytes_read",
        "counter",
        "# of bytes read from DRAM",
        "FETCH_SIZE (.sum)",
    ),
    (
        "dram__bytes_write",
        "counter",
        "# of bytes written to DRAM",
        "WRITE_SIZE (.sum)",
    ),
    (
        "gpc__cycles_elapsed",
        "counter",
        "# of cycles elapsed on GPC",
        "GRBM_COUNT (.max)",
    ),
    (
        "gr__cycles_active",
        "counter",
        "# of cycles where the graphics engine is busy",
        "GRBM_GUI_ACTIVE (.avg)",
    ),
    (
        "lts__t_sectors_lookup_hit",
        "counter",
        "# of L2 sector lookups that hit",
        "TCC_HIT (.sum)",
    ),
    (
        "lts__t_sectors_lookup_miss",
        "counter",
        "# of L2 sector lookups that missed",
        "TCC_MISS (.sum)",
    ),
    ("sm__ctas_launched", "counter", "# of CTAs launched", ""),
    (
        "sm__cycles_active",
        "counter",
        "# of cycles with at least one warp in flight",
        "",
    ),
    (
        "sm__warps_launched",
        "counter",
        "# of warps launched",
        "SQ_WAVES (.sum), Wavefronts (.sum)",
    ),
    (
        "smsp__inst_executed",
        "counter",
        "# of warp instructions executed",
        "",
    ),
    (
        "smsp__inst_executed_pipe_uniform",
        "counter",
        "# of warp instructions executed by the uniform pipe",
        "SQ_INSTS_SALU (.sum)",
    ),
    (
        "smsp__inst_executed_per_warp",
        "ratio",
        "# of warp instructions executed per warp launched",
        "",
    ),
    ("dram__throughput", "throughput", "DRAM throughput", ""),
];

/// Nothing of the listing stays: no range profiler, no sampler, no host object, no activity
/// kind; CUPTI torn down at the target's next launch (`finalized` reaches `finalized`).
fn nothing_stays(t: &Target, finalized: &str) {
    crate::common::wait_until(std::time::Duration::from_secs(10), || {
        field(t, "finalized") == finalized
    });
    for (name, want) in [
        ("profiler", "0"),
        ("counting", "0"),
        ("sampling", "0"),
        ("hosts", "0"),
        ("subscribed", "0"),
    ] {
        assert_eq!(field(t, name), want, "{name}: {}", t.state());
    }
    assert_eq!(t.enabled(), Vec::<u32>::new(), "{}", t.state());
}

#[test]
fn list_avail_lists_the_fake_catalog_with_descriptions_and_json_and_leaves_nothing_enabled() {
    let mut t = Target::spawn(&[], &[]);
    let pid = t.pid.to_string();
    let tool = crate::cuda::tool();
    let env = [("ROCPROF_ATTACH_CUDA_TOOL", tool.to_str().unwrap())];
    // A process with no session: the tool is loaded, lists, and enables nothing.
    let (code, out, err) = crate::common::rocprof_attach(&["-L", "-p", &pid], &env).finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("process {pid}: chip GH100, device(s) 0"))
            && out.contains("13 metrics"),
        "{out}"
    );
    for (name, kind, description, rocprofv3) in CATALOG {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}: {out}"));
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert!(cells.contains(&kind), "{name} is a {kind}: {row}");
        assert!(row.ends_with(description), "{name}: {row}");
        if !rocprofv3.is_empty() {
            assert!(cells.contains(&rocprofv3), "{name} maps {rocprofv3}: {row}");
        }
    }
    nothing_stays(&t, "1");

    // Again, the tool loaded already, with --json: the documented object.
    let (code, out, err) =
        crate::common::rocprof_attach(&["--list-avail", "-p", &pid, "--json"], &env).finish();
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(doc["command"], "list-avail", "{doc}");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["pid"], t.pid);
    assert_eq!(doc["backend"], "cuda");
    let chips = doc["chips"].as_array().expect("chips");
    assert_eq!(chips.len(), 1, "{doc}");
    assert_eq!(chips[0]["chip"], "GH100");
    assert_eq!(chips[0]["devices"], serde_json::json!([0]));
    assert_eq!(
        chips[0]["availability"], true,
        "the image of device 0 was used"
    );
    let metrics = chips[0]["metrics"].as_array().expect("metrics");
    assert_eq!(metrics.len(), CATALOG.len(), "{doc}");
    for (name, kind, description, _) in CATALOG {
        let m = metrics
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed: {doc}"));
        assert_eq!(m["type"], kind, "{m}");
        assert_eq!(m["description"], description, "{m}");
    }
    let warps = metrics
        .iter()
        .find(|m| m["name"] == "sm__warps_launched")
        .unwrap();
    assert_eq!(
        warps["rocprofv3"],
        serde_json::json!([
            ["SQ_WAVES", "sm__warps_launched.sum"],
            ["Wavefronts", "sm__warps_launched.sum"]
        ])
    );
    let bytes = metrics
        .iter()
        .find(|m| m["name"] == "dram__bytes_read")
        .unwrap();
    assert_eq!(
        (&bytes["unit"], &bytes["hw_unit"]),
        (&"bytes".into(), &"sm".into())
    );
    nothing_stays(&t, "2");

    // Counting still works afterwards, from a fresh CUPTI.
    let (code, _, err) = session(
        &t,
        &[
            "--pmc",
            "SQ_WAVES",
            "-o",
            "after",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!counter_rows(&t.out().join("after_results.db")).is_empty());
    assert!(t.alive());
}

/// The H200 lists 3,601 metrics with descriptions: more than one socket message holds (a
/// `SOCK_SEQPACKET` message larger than the send buffer fails with EMSGSIZE, and `-L` failed
/// there with "the tool closed the connection"). The reply comes in parts, joined whole.
#[test]
fn list_avail_lists_a_catalog_longer_than_one_socket_message() {
    let mut t = Target::spawn(&[], &[("FAKE_CUPTI_EXTRA_METRICS", "5000")]);
    let pid = t.pid.to_string();
    let tool = crate::cuda::tool();
    let env = [("ROCPROF_ATTACH_CUDA_TOOL", tool.to_str().unwrap())];
    let (code, out, err) =
        crate::common::rocprof_attach(&["--list-avail", "-p", &pid, "--json"], &env).finish();
    assert_eq!(code, 0, "{err}");
    assert!(out.len() > 1 << 20, "the listing is {} bytes", out.len());
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one whole JSON document");
    let metrics = doc["chips"][0]["metrics"].as_array().expect("metrics");
    assert_eq!(metrics.len(), CATALOG.len() + 5000);
    for i in [0, 2500, 4999] {
        let name = format!("fake__padding_{i:05}");
        let m = metrics.iter().find(|m| m["name"] == name.as_str());
        assert!(
            m.is_some_and(|m| m["description"].as_str().unwrap().len() > 200),
            "{name} listed with its description"
        );
    }
    let (code, out, err) = crate::common::rocprof_attach(&["-L", "-p", &pid], &env).finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("5013 metrics"),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(t.alive());
}

#[test]
fn list_avail_is_refused_during_a_session_and_lists_defaults_when_counters_are_denied() {
    // Another session in its window: -L is refused as an attach would be, the session unharmed.
    let t = Target::spawn(&[], &[]);
    let pid = t.pid.to_string();
    let tool = crate::cuda::tool();
    let env = [("ROCPROF_ATTACH_CUDA_TOOL", tool.to_str().unwrap())];
    let mut first = start(
        &t,
        &[
            "--kernel-trace",
            "-o",
            "one",
            "--attach-duration-msec",
            "30s",
        ],
        &[],
    );
    first.wait_for("attached to PID");
    let (code, out, err) = crate::common::rocprof_attach(&["-L", "-p", &pid], &env).finish();
    assert_eq!(code, 4, "refused: {out} {err}");
    assert!(out.is_empty(), "{out}");
    first.signal(nix::sys::signal::Signal::SIGINT);
    let (code, _, err) = first.finish();
    assert_eq!(code, 0, "the session is unharmed: {err}");
    assert!(t.out().join("one_results.db").is_file());

    // Counters denied: the availability cannot be read, CUPTI's defaults for the chip are listed
    // with a warning, and nothing is enabled.
    let t = Target::spawn(&[], &[("FAKE_CUPTI_PROFILING", "denied")]);
    let pid = t.pid.to_string();
    let (code, out, err) =
        crate::common::rocprof_attach(&["-L", "-p", &pid, "--json"], &env).finish();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("CUPTI's defaults for the chip"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(doc["chips"][0]["availability"], false, "{doc}");
    assert_eq!(
        doc["chips"][0]["metrics"].as_array().map(Vec::len),
        Some(CATALOG.len())
    );
    nothing_stays(&t, "1");
}
