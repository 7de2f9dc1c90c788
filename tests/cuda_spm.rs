//! `--spm` on a CUDA process (issue 27, docs/cuda.md "Sampled counters"), on the GPU-free
//! stand-ins: the fake CUPTI's PM sampling gives samples of exactly the interval from `Start`,
//! `gpc__cycles_elapsed.max` = the sample's length in ns x 1.98 and `sm__cycles_active.avg` =
//! the ns a kernel ran in it x 1.98, and a stale first sample starting 5 s before `Start`
//! (tests/fixtures/cuda/fake_cupti_profiler.c). The samples land in `rocpd_spm_sample`; after
//! detach nothing samples; denied counters are refused with nothing written.

use crate::cuda::{count, query, session, Target};

/// The field of the fake CUPTI's state line.
fn field(t: &Target, name: &str) -> String {
    t.state()
        .split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or("")
        .to_owned()
}

#[test]
fn spm_samples_the_gpu_every_interval_drops_the_stale_sample_and_stops_at_detach() {
    let t = Target::spawn(&[], &[]);
    let args = [
        "--kernel-trace",
        "--spm",
        "sm__cycles_active.avg",
        "gpc__cycles_elapsed.max",
        "--spm-beta-enabled",
        "--spm-sample-interval",
        "2000",
        "-o",
        "s",
        "--attach-duration-msec",
        "600",
    ];
    let (code, _, stderr) = session(&t, &args);
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("s_results.db");
    let rows = query(
        &db,
        "SELECT start, end, metric, value FROM rocpd_spm_sample ORDER BY start, metric",
    );
    // Two counters per sample; 2 ms samples over a 600 ms window.
    assert!(rows.len() >= 2 * 50, "{} rows\n{stderr}", rows.len());
    assert_eq!(rows.len() % 2, 0);
    let mut prev_end: Option<i64> = None;
    for pair in rows.chunks(2) {
        let (s, e): (i64, i64) = (pair[0][0].parse().unwrap(), pair[0][1].parse().unwrap());
        // Every sample is exactly the interval (the stale 5 s one was dropped) and they are
        // contiguous.
        assert_eq!(e - s, 2_000_000, "{pair:?}");
        if let Some(p) = prev_end {
            assert_eq!(s, p, "contiguous samples");
        }
        prev_end = Some(e);
        let elapsed: f64 = pair[0][3].parse().unwrap();
        let active: f64 = pair[1][3].parse().unwrap();
        assert_eq!(pair[0][2], "gpc__cycles_elapsed.max");
        assert_eq!(elapsed, 2_000_000.0 * 1.98, "{pair:?}");
        assert!((0.0..=elapsed).contains(&active), "{pair:?}");
    }
    // The samples lie within the session's kernels' span: the same clock.
    let first_kernel = count(&db, "SELECT MIN(start) FROM kernels");
    let last_kernel = count(&db, "SELECT MAX(end) FROM kernels");
    let first: i64 = rows[0][0].parse().unwrap();
    assert!(
        (first - first_kernel).abs() < 1_000_000_000
            && prev_end.unwrap() <= last_kernel + 1_000_000_000,
        "samples {first}..{prev_end:?}, kernels {first_kernel}..{last_kernel}"
    );
    // The busy fraction shows: some sample saw a kernel run.
    assert!(
        rows.iter()
            .any(|r| r[2] == "sm__cycles_active.avg" && r[3] != "0"),
        "{rows:?}"
    );
    // After detach nothing samples.
    assert_eq!(field(&t, "sampling"), "0", "{}", t.state());
    // Perfetto: a counter track per sampled counter, beside the kernel slices.
    let conv = t.out().join("conv");
    crate::cuda::run_on_db("convert", &db, &["pftrace"], &conv);
    let trace = std::fs::read(conv.join("out_results.pftrace")).unwrap();
    for name in ["SPM sm__cycles_active.avg", "SPM gpc__cycles_elapsed.max"] {
        assert!(
            trace.windows(name.len()).any(|w| w == name.as_bytes()),
            "track {name} in the trace"
        );
    }
    // The HTML summary draws a line per sampled counter.
    crate::cuda::run_on_db("summary", &db, &["html"], &conv);
    let html = std::fs::read_to_string(conv.join("out_summary.html")).unwrap();
    assert!(
        html.contains("Sampled counters (--spm)"),
        "the chart's heading"
    );
    assert_eq!(html.matches("<polyline").count(), 2, "one line per counter");
    for name in ["sm__cycles_active.avg", "gpc__cycles_elapsed.max"] {
        assert!(html.contains(name), "{name} labelled");
    }
}

#[test]
fn spm_refuses_denied_counters_and_writes_nothing() {
    let t = Target::spawn(&[], &[("FAKE_CUPTI_PROFILING", "denied")]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--spm",
            "gpc__cycles_elapsed.max",
            "--spm-beta-enabled",
            "-o",
            "d",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("may not read GPU counters"), "{stderr}");
    assert!(!t.out().join("d_results.db").exists(), "{stderr}");
    assert_eq!(field(&t, "sampling"), "0", "{}", t.state());
}

/// A bare `--spm` samples the tool's default set (SM and graphics-engine activity against
/// elapsed cycles), as a person who only wants "how busy is the GPU" types it.
#[test]
fn a_bare_spm_samples_the_default_set() {
    let t = Target::spawn(&[], &[]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--spm",
            "--spm-beta-enabled",
            "-o",
            "b",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("b_results.db");
    let metrics = query(
        &db,
        "SELECT DISTINCT metric FROM rocpd_spm_sample ORDER BY metric",
    );
    assert_eq!(
        metrics,
        vec![
            vec!["gpc__cycles_elapsed.max".to_string()],
            vec!["gr__cycles_active.avg".to_string()],
            vec!["sm__cycles_active.avg".to_string()],
        ],
        "{stderr}"
    );
    assert!(count(&db, "SELECT COUNT(*) FROM rocpd_spm_sample") >= 3 * 50);
    assert_eq!(field(&t, "sampling"), "0", "{}", t.state());
}

/// Samples whose clock is not CUPTI's timestamp clock (on the H200, 20 days apart in a session
/// without activity tracing) are placed by their own `Start`: they fall inside the session (give
/// or take a second: sampling starts a little before the session's recorded start, and a loaded
/// machine stretches that).
#[test]
fn samples_on_another_clock_are_placed_by_their_start() {
    let t = Target::spawn(&[], &[("FAKE_PM_CLOCK_SHIFT_NS", "-1800000000000000")]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--spm",
            "--spm-beta-enabled",
            "-o",
            "c",
            "--attach-duration-msec",
            "300",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("c_results.db");
    let rows = query(
        &db,
        "SELECT MIN(s.start) >= p.init - 1000000000, MAX(s.end) <= p.fini + 1000000000, COUNT(*) \
         FROM rocpd_spm_sample s, rocpd_info_process p",
    );
    assert_eq!(
        rows[0][0], "1",
        "samples start inside the session: {rows:?}"
    );
    assert_eq!(rows[0][1], "1", "samples end inside the session: {rows:?}");
    assert!(rows[0][2].parse::<i64>().unwrap() >= 3 * 50, "{rows:?}");
}

/// The tool writes the samples at every tick (200 ms) as they are decoded and the rest at
/// detach: over a window of several ticks, every 1 ms sample is in the database exactly once
/// and none is missing (the samples' span is their count times the interval).
#[test]
fn samples_written_at_each_tick_and_at_detach_are_each_in_the_database_once() {
    let t = Target::spawn(&[], &[]);
    let (code, _, stderr) = session(
        &t,
        &[
            "--spm",
            "sm__cycles_active.avg",
            "gpc__cycles_elapsed.max",
            "--spm-beta-enabled",
            "-o",
            "once",
            "--attach-duration-msec",
            "1000",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let db = t.out().join("once_results.db");
    let twice = count(
        &db,
        "SELECT COUNT(*) FROM (SELECT start, metric FROM rocpd_spm_sample GROUP BY start, metric HAVING COUNT(*) > 1)",
    );
    assert_eq!(twice, 0, "no sample written twice");
    let samples = count(&db, "SELECT COUNT(DISTINCT start) FROM rocpd_spm_sample");
    assert!(samples >= 300, "{samples} samples over 1 s\n{stderr}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM rocpd_spm_sample"),
        2 * samples
    );
    let span = count(
        &db,
        "SELECT MAX(\"end\") - MIN(start) FROM rocpd_spm_sample",
    );
    assert_eq!(span, samples * 1_000_000, "no gap, no overlap");
}
