//! Two sessions of one process (a reattach: the same process GUID, two databases) are read
//! together, in time order; a database given twice (one file by two paths, or a byte-identical
//! copy) is refused (issue 29 item 5).

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::model::*;
use rocprof_rocpd::reader::{all_sources, open_all};
use rocprof_rocpd::ConvertOptions;
use rocprof_testkit::rocpd::*;

/// A later session of the process of `full_db(_, 4242, 7)`: the same GUID, its own rows, and a
/// start after the first session's.
fn second_session(path: &std::path::Path) {
    let mut w = writer(path, 4242, 7);
    agents(&mut w, (0, 0), (1, 1));
    kernel(&mut w, 1, 10, "late(float*)", 8, 0, 16, 0);
    w.kernel_dispatch(&KernelDispatch {
        dispatch_id: 1,
        tid: 4242,
        agent_id: 1,
        kernel_id: 10,
        queue_id: 1,
        correlation: Correlation {
            internal: 1,
            ..Default::default()
        },
        start: 90_000,
        end: 90_500,
        workgroup: [64, 1, 1],
        grid: [1024, 1, 1],
        ..Default::default()
    })
    .expect("dispatch");
    let table: String = w
        .connection()
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_info_process%'",
            [],
            |r| r.get(0),
        )
        .expect("process table");
    w.connection()
        .execute(&format!("UPDATE \"{table}\" SET start = 80000"), [])
        .expect("later start");
    w.finish().expect("finish");
}

#[test]
fn two_sessions_of_one_process_are_merged_in_time_order() {
    let dir = tempdir();
    let first = full_db(&dir.path().join("first.db"), 4242, 7);
    let second = dir.path().join("second.db");
    second_session(&second);
    // Given later session first: read all the same, the earlier session first.
    let inputs = open_all(&[second.clone(), first.clone()]).expect("two sessions are no duplicate");
    let sources = all_sources(&inputs).unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!(sources[0].info.guid, sources[1].info.guid, "one process");
    assert!(sources[0].info.start < sources[1].info.start);
    assert_eq!(sources[0].input.path, first);
    let out = dir.path().join("out");
    convert_to(
        &[&second, &first],
        &out,
        &[OutputFormat::Csv, OutputFormat::Json, OutputFormat::Pftrace],
        &ConvertOptions::default(),
    );
    let csv = read(&out, "out_kernel_trace.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(
        rows.len(),
        4,
        "3 dispatches of the first session, 1 of the second: {csv}"
    );
    assert!(
        rows[3].contains("late(float*)"),
        "the later session last: {csv}"
    );
    let json = read(&out, "out_results.json");
    assert!(json.contains("late(float*)"), "both sessions in the JSON");
}

#[test]
fn a_database_given_twice_is_refused_by_path_or_by_content() {
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 7);
    let e = open_all(&[db.clone(), dir.path().join("./a.db")])
        .err()
        .expect("the same file twice")
        .to_string();
    assert!(e.contains("one file by two paths"), "{e}");
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let e = open_all(&[db, copy])
        .err()
        .expect("an identical copy")
        .to_string();
    assert!(e.contains("identical contents"), "{e}");
}
