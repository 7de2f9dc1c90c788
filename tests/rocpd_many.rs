//! `query`, `summary` and `convert` over more databases than SQLite attaches at once (10): a
//! 64-rank job and a 256-rank one, each rank with its own number of kernels, checked against
//! what the ranks hold.

use crate::rocpd_common;

use std::path::{Path, PathBuf};

use rocpd_common::*;
use rocprof_attach::rocpd::model::*;

/// What one rank's database holds.
struct Rank {
    path: PathBuf,
    dispatches: i64,
    kernel_ns: i64,
}

/// A database for `rank`: `1 + rank % 4` HIP launches, each with its kernel dispatch (duration
/// `10 * (rank + i)` ns), and one host-to-device copy.
fn rank_db(dir: &Path, rank: i64) -> Rank {
    let path = dir.join(format!("rank{rank}_results.db"));
    let mut w = writer(&path, 10_000 + rank, rank as u64 + 1);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "void step<float>(float*, int)", 8, 0, 16, 0);
    let dispatches = 1 + rank % 4;
    let mut kernel_ns = 0;
    for i in 1..=dispatches {
        let correlation = Correlation {
            internal: i,
            ..Default::default()
        };
        let start = 1000 * i;
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: 10_000 + rank,
            correlation,
            start,
            end: start + 40,
            ..Default::default()
        })
        .expect("api");
        let duration = 10 * (rank + i);
        kernel_ns += duration;
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: 10_000 + rank,
            agent_id: 1,
            kernel_id: 10,
            queue_id: 1,
            correlation,
            start: start + 50,
            end: start + 50 + duration,
            workgroup: [64, 1, 1],
            grid: [1024, 1, 1],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.memory_copy(&MemoryCopy {
        tid: 10_000 + rank,
        operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
        correlation: Correlation {
            internal: dispatches + 1,
            ..Default::default()
        },
        start: 9000,
        end: 9100,
        src_agent_id: 0,
        dst_agent_id: 1,
        size: 4096,
        ..Default::default()
    })
    .expect("copy");
    w.finish().expect("finish");
    Rank {
        path,
        dispatches,
        kernel_ns,
    }
}

fn ranks(dir: &Path, n: i64) -> Vec<Rank> {
    (0..n).map(|r| rank_db(dir, r)).collect()
}

/// Runs the binary with `args` followed by `-i <every database>` and `tail`; returns stdout.
fn ok_over(args: &[&str], ranks: &[Rank], tail: &[&str]) -> String {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("-i".into());
    all.extend(ranks.iter().map(|r| r.path.display().to_string()));
    all.extend(tail.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = run(&refs);
    assert!(
        out.status.success(),
        "{} over {} databases failed: {}",
        args[0],
        ranks.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `query --format csv` of one row of integers.
fn query_ints(ranks: &[Rank], sql: &str) -> Vec<i64> {
    let csv = ok_over(&["query"], ranks, &["--query", sql, "--format", "csv"]);
    let line = csv
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("no row: {csv}"));
    cells(line)
        .iter()
        .map(|c| c.parse().unwrap_or_else(|_| panic!("{c} in {csv}")))
        .collect()
}

/// Data rows of a CSV file.
fn csv_rows(dir: &Path, name: &str) -> usize {
    read(dir, name)
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .count()
}

#[test]
fn query_summary_and_convert_over_64_databases() {
    let tmp = tempdir();
    let ranks = ranks(tmp.path(), 64);
    let dispatches: i64 = ranks.iter().map(|r| r.dispatches).sum();
    let kernel_ns: i64 = ranks.iter().map(|r| r.kernel_ns).sum();

    // query: the totals are the sums over the ranks, also as each rank's own query gives them.
    let sql = "SELECT COUNT(*), SUM(duration), COUNT(DISTINCT guid), \
               (SELECT COUNT(*) FROM memory_copies), (SELECT SUM(total_calls) FROM top_kernels) FROM kernels";
    assert_eq!(
        query_ints(&ranks, sql),
        vec![dispatches, kernel_ns, 64, 64, dispatches]
    );
    let one_by_one: Vec<i64> = ranks
        .iter()
        .map(|r| query_ints(std::slice::from_ref(r), "SELECT COUNT(*) FROM kernels")[0])
        .collect();
    assert_eq!(one_by_one.iter().sum::<i64>(), dispatches);
    // Rows per process, in the order of the processes' own ids.
    let per_pid = ok_over(
        &["query"],
        &ranks,
        &[
            "--query",
            "SELECT pid, COUNT(*) AS n FROM kernels GROUP BY pid ORDER BY pid",
            "--format",
            "csv",
        ],
    );
    let want: String = std::iter::once("pid,n\n".to_owned())
        .chain(
            ranks
                .iter()
                .enumerate()
                .map(|(r, k)| format!("{},{}\n", 10_000 + r, k.dispatches)),
        )
        .collect();
    assert_eq!(per_pid, want);

    // summary --json: the kernel and copy totals are the sums.
    let doc: serde_json::Value =
        serde_json::from_str(&ok_over(&["summary"], &ranks, &["--json"])).expect("json");
    let domain = |label: &str| -> (i64, i64) {
        let d = doc["domains"]
            .as_array()
            .expect("domains")
            .iter()
            .find(|d| d["domain"] == label)
            .unwrap_or_else(|| panic!("no {label} in {doc}"));
        let calls = d["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["calls"].as_i64().expect("calls"))
            .sum();
        (calls, d["total_ns"].as_i64().expect("total_ns"))
    };
    assert_eq!(domain("KERNEL_DISPATCH"), (dispatches, kernel_ns));
    assert_eq!(domain("HIP_API"), (dispatches, 40 * dispatches));
    assert_eq!(domain("MEMORY_COPY"), (64, 64 * 100));

    // convert -f csv: one row per dispatch, API call and copy of every rank.
    let out = tmp.path().join("out");
    let paths: Vec<&Path> = ranks.iter().map(|r| r.path.as_path()).collect();
    convert(&paths, &out, &["csv"], &[]);
    assert_eq!(csv_rows(&out, "out_kernel_trace.csv") as i64, dispatches);
    assert_eq!(csv_rows(&out, "out_hip_api_trace.csv") as i64, dispatches);
    assert_eq!(csv_rows(&out, "out_memory_copy_trace.csv"), 64);

    // One bad file among many is named, with what to do.
    let bad = tmp.path().join("notes.db");
    std::fs::write(&bad, "not a database\n".repeat(10)).expect("write");
    let mut args = vec!["query".to_owned(), "-i".to_owned()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    args.extend([
        bad.display().to_string(),
        "--query".into(),
        "SELECT 1".into(),
    ]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = run(&refs);
    let err = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(10), "{err}");
    assert!(
        err.contains("notes.db") && err.contains("not a SQLite database"),
        "{err}"
    );
}

#[test]
fn query_over_256_databases() {
    let tmp = tempdir();
    let ranks = ranks(tmp.path(), 256);
    let dispatches: i64 = ranks.iter().map(|r| r.dispatches).sum();
    let kernel_ns: i64 = ranks.iter().map(|r| r.kernel_ns).sum();
    assert_eq!(
        query_ints(
            &ranks,
            "SELECT COUNT(*), SUM(duration), COUNT(DISTINCT guid), MIN(pid), MAX(pid) FROM kernels"
        ),
        vec![dispatches, kernel_ns, 256, 10_000, 10_255]
    );
}
