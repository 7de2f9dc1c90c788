//! How the converters read rows: the result does not depend on the order of `rocpd_event` ids,
//! and a time window keeps only the records inside it.

use std::path::Path;

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::reader::{all_sources_in, open_all};
use rocprof_rocpd::{convert_with, ConvertOptions, TimeWindow};
use rocprof_testkit::rocpd::*;
use serde_json::Value;

/// Renumbers `rocpd_event` in reverse (the fact tables follow through `ON UPDATE CASCADE`), so
/// every fact table meets its events in descending order.
fn reverse_event_ids(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open copy");
    let table: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_event%'",
            [],
            |r| r.get(0),
        )
        .expect("event table");
    let before: Vec<(i64, i64)> = {
        let mut st = conn
            .prepare(&format!(
                "SELECT id, category_id FROM \"{table}\" ORDER BY id"
            ))
            .expect("prepare");
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    };
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; UPDATE \"{table}\" SET id = -id; UPDATE \"{table}\" SET id = 1000 + id;"
    ))
    .expect("renumber events");
    let first: i64 = conn
        .query_row(&format!("SELECT MIN(id) FROM \"{table}\""), [], |r| {
            r.get(0)
        })
        .expect("min id");
    assert_eq!(first, 1000 - before.last().expect("events").0);
}

fn convert_all(db: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    convert_to(
        &[db],
        dir,
        &[OutputFormat::Csv, OutputFormat::Json],
        &ConvertOptions::default(),
    );
    listing(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).expect("read output");
            (n, bytes)
        })
        .collect()
}

#[test]
fn output_does_not_depend_on_the_order_of_event_ids() {
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 100, 4);
    let b = tmp.path().join("b.db");
    std::fs::copy(&a, &b).expect("copy db");
    reverse_event_ids(&b);
    let ours = convert_all(&a, &tmp.path().join("a"));
    let theirs = convert_all(&b, &tmp.path().join("b"));
    assert!(ours.len() >= 8, "expected every trace file: {ours:?}");
    for ((na, da), (nb, db)) in ours.iter().zip(&theirs) {
        assert_eq!(na, nb);
        assert!(
            da == db,
            "{na} differs once event ids run backwards:\n{}\n---\n{}",
            String::from_utf8_lossy(da),
            String::from_utf8_lossy(db)
        );
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn time_window_keeps_only_records_inside_it() {
    let tmp = tempdir();
    let db = full_db(&tmp.path().join("a.db"), 100, 4);
    let dbs = open_all(std::slice::from_ref(&db)).expect("open");
    // Dispatch i runs 1000i+50 .. 1000i+50+10i and HIP call i 1000i .. 1000i+100i.
    let window = TimeWindow {
        start: 2000,
        end: 3999,
        inclusive: false,
    };
    let sources = all_sources_in(&dbs, Some(window)).expect("sources");
    let src = &sources[0];
    assert_eq!(src.window(), Some(window));
    let mut ids = Vec::new();
    src.dispatches(|k| {
        ids.push(k.dispatch_id);
        Ok(())
    })
    .expect("dispatches");
    assert_eq!(ids, [2, 3]);
    let mut calls = Vec::new();
    src.api_calls(|a| {
        calls.push(a.corr.internal);
        Ok(())
    })
    .expect("api calls");
    assert_eq!(calls, [2, 3], "the marker at 5000 is outside");
    let mut counters = Vec::new();
    src.counters(|c| {
        counters.push((c.dispatch.dispatch_id, c.value));
        Ok(())
    })
    .expect("counters");
    assert_eq!(counters, [(2, 5.0), (3, 5.0)]);
    let mut copies = 0;
    src.memory_copies(|_| {
        copies += 1;
        Ok(())
    })
    .expect("copies");
    assert_eq!(copies, 0);
}

#[test]
fn json_kind_table_is_right_when_the_window_drops_every_dispatch() {
    let tmp = tempdir();
    let db = full_db(&tmp.path().join("a.db"), 100, 4);
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        window: Some(TimeWindow {
            start: 4900,
            end: 7200,
            inclusive: false,
        }),
        ..Default::default()
    };
    let report = convert_with(&[db], &[OutputFormat::Json], &out, "out", &opts).expect("convert");
    // The marker, the copy, the allocation and the free.
    assert_eq!(report.json_rows, 4);
    let v: Value = serde_json::from_str(&read(&out, "out_results.json")).expect("valid JSON");
    let p = &v["rocprofiler-sdk-tool"][0];
    let kinds: Vec<&str> = p["strings"]["buffer_records"]
        .as_array()
        .expect("kind table")
        .iter()
        .map(|k| k["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(
        kinds,
        ["MARKER_CORE_API", "MEMORY_COPY", "MEMORY_ALLOCATION"]
    );
    let br = &p["buffer_records"];
    assert_eq!(br["kernel_dispatch"], serde_json::json!([]));
    assert_eq!(br["marker_api"][0]["kind"], 0);
    assert_eq!(br["memory_copy"][0]["kind"], 1);
    assert_eq!(br["memory_allocation"][1]["kind"], 2);
    assert_eq!(br["memory_allocation"][1]["operation"], 1);
}
