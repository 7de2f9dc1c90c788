//! `rocprof-attach query`: SQL over the rocpd views of one or many databases.
//!
//! Like ROCm's `rocpd query`, each database is attached read-only to an in-memory connection, a
//! TEMP view per `rocpd_*` table unions that table over every process of every database (with
//! the time window applied to regions, samples, dispatches, copies and allocations), and the data
//! and summary views (`regions`, `kernels`, `memory_copies`, `top_kernels`, …) are created on top,
//! so the same SQL works on one database or many.
//!
//! SQLite attaches at most 10 databases to a connection (a compile-time limit of the bundled
//! SQLite). Past that, `merge` copies the same rows into one private temporary database on disk,
//! attaching the inputs a group at a time, and the `rocpd_*` views read that copy instead: the
//! views, their columns and their rows are the same, for any number of databases.

mod merge;

use std::path::{Path, PathBuf};

use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::reader;
use super::report::{Cell, Table};
use super::schema;
use super::window::{self, MaybeWindow, WindowSpec};
use crate::{Error, Result};

/// Percent-encodes a path for an SQLite `file:` URI.
fn uri(path: &Path) -> String {
    let mut s = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.push_str("?mode=ro");
    s
}

fn window_on(base: &str) -> Option<(&'static str, &'static str)> {
    match base {
        "rocpd_region"
        | "rocpd_kernel_dispatch"
        | "rocpd_memory_copy"
        | "rocpd_memory_allocate" => Some(("\"start\"", "\"end\"")),
        "rocpd_sample" => Some(("\"timestamp\"", "\"timestamp\"")),
        _ => None,
    }
}

/// Turns an SQLite error in user SQL into a one-line usage error with the position.
pub fn sql_error(what: &str, e: rusqlite::Error) -> Error {
    match e {
        rusqlite::Error::SqlInputError {
            msg, sql, offset, ..
        } => {
            let off = usize::try_from(offset).unwrap_or(0).min(sql.len());
            let before = &sql[..off];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let near: String = sql[off..]
                .chars()
                .take(24)
                .map(|c| if c == '\n' { ' ' } else { c })
                .collect();
            Error::usage(format!(
                "SQL error in {what} at line {line}, column {col} (near `{near}`): {msg}; the views are regions, samples, \
                 kernels, memory_copies, memory_allocations, counters_collection, top_kernels, top, busy and the rocpd_* tables"
            ))
        }
        other => Error::usage(format!(
            "SQL error in {what}: {}; the views are regions, samples, kernels, memory_copies, memory_allocations, \
             counters_collection, top_kernels, top, busy and the rocpd_* tables",
            other.to_string().replace('\n', " ")
        )),
    }
}

/// An in-memory connection with every database attached and the rocpd views over them. Any
/// number of databases works: past SQLite's attach limit their rows are copied into a temporary
/// database first (see `merge`).
pub fn connect(inputs: &[PathBuf], spec: &WindowSpec) -> Result<(Connection, MaybeWindow)> {
    connect_with(inputs, spec, None)
}

/// The `SELECT` of one process's table `base` in the schema `schema`, with the time window applied
/// to the tables that have times.
fn select_from(schema: &str, base: &str, suffix: &str, window: &MaybeWindow) -> String {
    let filter = match window_on(base) {
        Some((s, e)) => format!(" WHERE {}", window::sql(window, s, e)),
        None => String::new(),
    };
    format!("SELECT * FROM {schema}.\"{base}{suffix}\"{filter}")
}

/// [`connect`] with SQLite's attach limit replaced by `max_attached` (tests use it to take the
/// merged path with a few databases).
fn connect_with(
    inputs: &[PathBuf],
    spec: &WindowSpec,
    max_attached: Option<usize>,
) -> Result<(Connection, MaybeWindow)> {
    let dbs = reader::open_all(inputs)?;
    let window = spec.resolve(&reader::all_sources(&dbs)?)?;
    let conn = Connection::open_with_flags(
        ":memory:",
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    schema::enable_dqs(&conn)?;
    let max_attached = match max_attached {
        Some(n) => n,
        None => usize::try_from(conn.limit(Limit::SQLITE_LIMIT_ATTACHED)?).unwrap_or(0),
    };
    // Per entry of schema::TABLES, the SELECTs the view over that table unions.
    let mut parts: Vec<Vec<String>> = vec![Vec::new(); schema::TABLES.len()];
    if dbs.len() <= max_attached {
        for (i, db) in dbs.iter().enumerate() {
            conn.execute(&format!("ATTACH DATABASE ?1 AS db{i}"), [uri(&db.path)])
                .map_err(|e| reader::read_error(&db.path, e))?;
            for src in db.sources()? {
                for (t, base) in schema::TABLES.iter().enumerate() {
                    if src.table(base).is_some() {
                        parts[t].push(select_from(
                            &format!("db{i}"),
                            base,
                            &src.info.suffix,
                            &window,
                        ));
                    }
                }
            }
        }
    } else {
        let present = merge::materialise(&conn, dbs, &window, max_attached)?;
        for (t, base) in schema::TABLES.iter().enumerate() {
            if present[t] {
                parts[t].push(format!("SELECT * FROM {}.\"{base}\"", merge::SCHEMA));
            }
        }
    }
    let mut ddl = String::new();
    for (t, base) in schema::TABLES.iter().enumerate() {
        if !parts[t].is_empty() {
            ddl.push_str(&format!(
                "CREATE TEMP VIEW \"{base}\" AS {};\n",
                parts[t].join(" UNION ALL ")
            ));
        }
    }
    ddl.push_str(&schema::data_views_sql().replace(
        "CREATE VIEW IF NOT EXISTS",
        "CREATE TEMP VIEW IF NOT EXISTS",
    ));
    conn.execute_batch(&ddl)?;
    if let Some(w) = &window {
        let probes: Vec<String> = schema::TABLES
            .iter()
            .enumerate()
            .filter(|(t, base)| window_on(base).is_some() && !parts[*t].is_empty())
            .map(|(_, base)| format!("EXISTS (SELECT 1 FROM \"{base}\")"))
            .collect();
        let any: bool = if probes.is_empty() {
            false
        } else {
            conn.query_row(&format!("SELECT {}", probes.join(" OR ")), [], |r| r.get(0))?
        };
        if !any {
            return Err(window::empty(w));
        }
    }
    Ok((conn, window))
}

/// Runs `query` (after the statements of `script`, if any) and returns its result.
pub fn run(
    inputs: &[PathBuf],
    query: Option<&str>,
    script: Option<&Path>,
    spec: &WindowSpec,
) -> Result<Table> {
    let (conn, window) = connect(inputs, spec)?;
    let mut last_sql = query.map(str::to_owned);
    if let Some(path) = script {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::usage(format!(
                "cannot read the script {}: {e}; check the path",
                path.display()
            ))
        })?;
        if query.is_some() {
            conn.execute_batch(&text)
                .map_err(|e| sql_error(&format!("script {}", path.display()), e))?;
        } else {
            // Without --query, the script's last statement is the query whose rows are shown.
            let trimmed = text.trim().trim_end_matches(';');
            let (head, tail) = match trimmed.rfind(';') {
                Some(i) => (&trimmed[..=i], trimmed[i + 1..].trim()),
                None => ("", trimmed),
            };
            conn.execute_batch(head)
                .map_err(|e| sql_error(&format!("script {}", path.display()), e))?;
            last_sql = Some(tail.to_owned());
        }
    }
    let Some(sql) = last_sql.filter(|s| !s.trim().is_empty()) else {
        return Err(Error::usage(
            "nothing to run: give --query SQL (or a --script whose last statement is a query)",
        ));
    };
    let mut stmt = conn.prepare(&sql).map_err(|e| sql_error("--query", e))?;
    let columns: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let n = columns.len();
    let mut rows = stmt.query([]).map_err(|e| sql_error("--query", e))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| sql_error("--query", e))? {
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(match r.get_ref(i).map_err(|e| sql_error("--query", e))? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Int(v),
                ValueRef::Real(v) => Cell::Real(v),
                ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Cell::Text(format!("<{} bytes>", b.len())),
            });
        }
        out.push(row);
    }
    if let Some(w) = &window {
        if out.is_empty() {
            tracing::info!("the query returned no rows in the window {}", w.describe());
        }
    }
    Ok(Table {
        title: String::new(),
        columns,
        rows: out,
    })
}

#[cfg(test)]
mod tests;
