//! The rocpd model as written: suffixed tables, metadata rows, string table, double-quoted
//! defaults, and the views ROCm's `rocpd` package queries.

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::guid::Guid;
use rocprof_rocpd::{schema, ConvertOptions};
use rocprof_testkit::rocpd::*;
use rusqlite::Connection;

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn schema_loads_with_double_quoted_defaults_in_bundled_sqlite() {
    let conn = Connection::open_in_memory().expect("memory db");
    let guid = Guid::from_parts(0x0000_ddb5_8903, 1);
    schema::load(&conn, guid.as_str()).expect("schema loads");
    let suffix = guid.uuid();
    conn.execute(
        &format!("INSERT INTO rocpd_string{suffix} (id, string) VALUES (1, '')"),
        [],
    )
    .expect("insert");
    let (g,): (String,) = conn
        .query_row(&format!("SELECT guid FROM rocpd_string{suffix}"), [], |r| {
            Ok((r.get(0)?,))
        })
        .expect("row");
    assert_eq!(
        g,
        guid.as_str(),
        "the guid column defaults to the process GUID"
    );
    for t in schema::TABLES {
        assert_eq!(
            count(
                &conn,
                &format!(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='{t}{suffix}'"
                )
            ),
            1,
            "{t}"
        );
        assert_eq!(
            count(
                &conn,
                &format!("SELECT COUNT(*) FROM sqlite_master WHERE type='view' AND name='{t}'")
            ),
            1,
            "{t} view"
        );
    }
    for v in schema::DATA_VIEWS {
        count(&conn, &format!("SELECT COUNT(*) FROM `{v}`"));
    }
}

#[test]
fn written_database_has_rocm7_metadata_and_string_rules() {
    let tmp = tempdir();
    let db = full_db(&tmp.path().join("p_results.db"), 4321, 2);
    let conn = Connection::open(&db).expect("open");
    let guid = Guid::from_parts(0xddb5_8903 + 2, 2);
    let meta: Vec<(String, String)> = conn
        .prepare("SELECT tag, value FROM rocpd_metadata ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("metadata");
    assert_eq!(
        meta,
        vec![
            ("schema_version".to_owned(), "3".to_owned()),
            ("uuid".to_owned(), guid.uuid()),
            ("guid".to_owned(), guid.as_str().to_owned()),
        ]
    );
    assert!(guid.uuid().starts_with('_') && !guid.uuid().contains('-'));
    assert_eq!(
        count(&conn, "SELECT id FROM rocpd_string WHERE string = ''"),
        1,
        "\"\" is string 1"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM rocpd_info_process WHERE id = 4321 AND pid = 4321"
        ),
        1,
        "process id = pid"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM rocpd_info_process WHERE environment = '{}' AND extdata = '{}'"
        ),
        1
    );
    assert_eq!(
        count(&conn, "SELECT COUNT(DISTINCT guid) FROM rocpd_event"),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM rocpd_info_stream WHERE id = 0 AND name = 'Default Stream'"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM rocpd_info_queue WHERE id = 0 AND name = 'Default Queue'"
        ),
        1
    );
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM pragma_foreign_key_check"),
        0,
        "every reference resolves"
    );
}

#[test]
fn data_views_see_every_written_record() {
    let tmp = tempdir();
    let db = full_db(&tmp.path().join("v.db"), 77, 3);
    let conn = Connection::open(&db).expect("open");
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM kernels"), 3);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM regions"), 3);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM samples"), 1);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM regions_and_samples"), 4);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM memory_copies"), 1);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM memory_allocations"), 3);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM scratch_memory"), 1);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM counters_collection"), 3);
    assert_eq!(
        count(
            &conn,
            "SELECT CAST(SUM(value) AS INTEGER) FROM counters_collection"
        ),
        15,
        "instances are summed"
    );
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM region_args"), 0);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM processes"), 1);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM threads"), 1);
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM kernel_symbols WHERE formatted_kernel_name IS NOT NULL"
        ),
        2
    );
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM top_kernels"), 2);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM top"), 4);
    let name: String = conn
        .query_row(
            "SELECT json_extract(extdata, '$.message') FROM samples",
            [],
            |r| r.get(0),
        )
        .expect("sample");
    assert_eq!(name, "checkpoint \"A\"");
}

#[test]
fn reader_opens_several_processes_merged_into_one_file() {
    // `rocpd merge` layout: two processes' suffixed tables side by side in one database.
    let tmp = tempdir();
    let a = full_db(&tmp.path().join("a.db"), 100, 4);
    let b = full_db(&tmp.path().join("b.db"), 200, 5);
    let conn = Connection::open(&a).expect("open");
    conn.execute("ATTACH DATABASE ?1 AS b", [b.display().to_string()])
        .expect("attach");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM b.sqlite_master WHERE type = 'table' AND name LIKE 'rocpd%'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("tables");
    for t in tables {
        conn.execute_batch(&format!(
            "CREATE TABLE main.\"{t}\" AS SELECT * FROM b.\"{t}\""
        ))
        .expect("copy table");
    }
    drop(conn);
    let input = rocprof_rocpd::reader::Input::open(&a).expect("open merged");
    assert_eq!(input.sources.len(), 2);
    let out = tmp.path().join("out");
    convert_to(
        &[&a],
        &out,
        &[OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let k = read(&out, "out_kernel_trace.csv");
    assert_eq!(k.lines().count(), 7, "{k}");
}
