//! The merged path (inputs copied into a temporary database) against the attached one: the same
//! views, columns, rows and errors.

use std::path::{Path, PathBuf};

use rusqlite::types::Value;

use super::{connect_with, schema};
use crate::guid::Guid;
use crate::model::*;
use crate::window::{Bound, WindowSpec};
use crate::Writer;

/// A small database for process `pid`: two agents, a kernel, `n` API calls each launching one
/// dispatch, a marker and a copy.
fn db(path: &Path, pid: i64, n: i64) -> PathBuf {
    let mut w = Writer::create(path, &Guid::from_parts(0xab00 + pid as u64, pid as u64)).unwrap();
    process(&mut w, pid);
    launches(&mut w, pid, n);
    marker_and_copy(&mut w, pid, n);
    w.finish().unwrap()
}

/// The node, the process `pid`, its two agents (CPU, GPU) and its one kernel.
fn process(w: &mut Writer, pid: i64) {
    w.node(&Node {
        id: 1,
        hash: 11,
        machine_id: "m".into(),
        hostname: "h".into(),
        ..Default::default()
    })
    .unwrap();
    w.process(&Process {
        pid,
        ppid: 1,
        init: 0,
        fini: 100_000,
        command: "./app".into(),
        ..Default::default()
    })
    .unwrap();
    for (id, kind) in [(0, "CPU"), (1, "GPU")] {
        w.agent(&Agent {
            id,
            agent_type: kind.into(),
            logical_index: id,
            name: kind.into(),
            ..Default::default()
        })
        .unwrap();
    }
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        uri: "file:///app".into(),
        ..Default::default()
    })
    .unwrap();
    w.kernel_symbol(&KernelSymbol {
        id: 5,
        code_object_id: 1,
        kernel_name: "_Z1kv".into(),
        display_name: format!("k{}", pid % 2),
        ..Default::default()
    })
    .unwrap();
}

/// `n` API calls, each launching one dispatch of the kernel.
fn launches(w: &mut Writer, pid: i64, n: i64) {
    for i in 1..=n {
        let c = Correlation {
            internal: i,
            ..Default::default()
        };
        w.api_call(&ApiCall {
            kind: "HIP_RUNTIME_API_EXT".into(),
            operation: "hipLaunchKernel".into(),
            tid: pid,
            correlation: c,
            start: 1000 * i + pid,
            end: 1000 * i + pid + 40,
            ..Default::default()
        })
        .unwrap();
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            tid: pid,
            agent_id: 1,
            kernel_id: 5,
            queue_id: 1,
            correlation: c,
            start: 1000 * i + pid + 50,
            end: 1000 * i + pid + 50 + 7 * i,
            workgroup: [64, 1, 1],
            grid: [256, 1, 1],
            ..Default::default()
        })
        .unwrap();
    }
}

/// A marker and a copy, after the `n` launches.
fn marker_and_copy(w: &mut Writer, pid: i64, n: i64) {
    w.api_call(&ApiCall {
        kind: "MARKER_CORE_API".into(),
        operation: "roctxMarkA".into(),
        tid: pid,
        correlation: Correlation {
            internal: n + 1,
            ..Default::default()
        },
        start: 500,
        end: 500,
        message: Some("mark".into()),
        ..Default::default()
    })
    .unwrap();
    w.memory_copy(&MemoryCopy {
        tid: pid,
        operation: "MEMORY_COPY_HOST_TO_DEVICE".into(),
        correlation: Correlation {
            internal: n + 2,
            ..Default::default()
        },
        start: 900,
        end: 950,
        src_agent_id: 0,
        dst_agent_id: 1,
        size: 64 * pid,
        ..Default::default()
    })
    .unwrap();
}

/// Every row of `sql`, in the order SQLite returns them.
fn rows(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn inputs(dir: &Path, count: i64) -> Vec<PathBuf> {
    (1..=count)
        .map(|p| db(&dir.join(format!("p{p}.db")), 100 + p, 2 + p % 3))
        .collect()
}

fn same_everywhere(inputs: &[PathBuf], spec: &WindowSpec) {
    let (direct, _) = connect_with(inputs, spec, None).unwrap();
    // A limit of 2 attaches one input at a time next to the temporary database.
    let (merged, _) = connect_with(inputs, spec, Some(2)).unwrap();
    assert_eq!(
        rows(
            &merged,
            "SELECT name FROM merged.sqlite_master WHERE type = 'table' LIMIT 1"
        )
        .len(),
        1,
        "the merged path was taken"
    );
    let mut total = 0;
    for v in schema::TABLES.iter().chain(schema::DATA_VIEWS.iter()) {
        let sql = format!("SELECT * FROM \"{v}\"");
        // Names, declared types, NOT NULL and primary keys as SQLite reports them for the view.
        let info = format!("PRAGMA table_info(\"{v}\")");
        assert_eq!(rows(&direct, &info), rows(&merged, &info), "columns of {v}");
        let (mut a, mut b) = (rows(&direct, &sql), rows(&merged, &sql));
        if schema::TABLES.contains(v) {
            // The rocpd_* views keep the inputs' order.
            assert_eq!(a, b, "rows of {v} in order");
        }
        let key = |r: &Vec<Value>| format!("{r:?}");
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!(a, b, "rows of {v}");
        total += a.len();
    }
    assert!(total > 100, "the views hold rows: {total}");
}

#[test]
fn merged_views_equal_attached_views() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path(), 5);
    same_everywhere(&inputs, &WindowSpec::default());
    let window = WindowSpec {
        start: Some(Bound::Percent(20.0)),
        end: Some(Bound::Percent(70.0)),
        ..Default::default()
    };
    same_everywhere(&inputs, &window);
}

#[test]
fn merged_views_refuse_writes_like_attached_ones() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path(), 3);
    for limit in [None, Some(2)] {
        let (conn, _) = connect_with(&inputs, &WindowSpec::default(), limit).unwrap();
        let err = conn
            .execute_batch("DELETE FROM rocpd_string")
            .unwrap_err()
            .to_string();
        assert!(err.contains("because it is a view"), "{limit:?}: {err}");
    }
}

#[test]
fn a_window_with_nothing_in_it_is_refused_on_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path(), 3);
    let spec = WindowSpec {
        start: Some(Bound::Ns(10_000_000)),
        end: Some(Bound::Ns(20_000_000)),
        ..Default::default()
    };
    for limit in [None, Some(2)] {
        let err = connect_with(&inputs, &spec, limit).expect_err("refused");
        assert!(err.to_string().contains("window"), "{limit:?}: {err}");
    }
}
