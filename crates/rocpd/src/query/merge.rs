//! More databases than SQLite attaches at once: their rows copied into one temporary database.
//!
//! The bundled SQLite attaches at most 10 databases to a connection (`SQLITE_MAX_ATTACHED`, a
//! compile-time limit that cannot go past 125 either), and a view can only read what is attached.
//! So for more inputs the query connection attaches one private temporary database, `merged`,
//! holding one table per `rocpd_*` base name, and fills it a group of inputs at a time: attach up
//! to `limit - 1` inputs read-only, `INSERT INTO merged.<base> SELECT * FROM <input table>`
//! (with the time window), detach them, next group. The `rocpd_*` TEMP views then read
//! `merged.<base>` instead of the union of every input's table; the data views on top are the
//! same.
//!
//! What stays the same as the attached case: the tables' columns and declared types (copied from
//! the first process that has the table), the rows and their order (inputs in the order given,
//! processes in GUID order, rows in rowid order), and writes through the views being refused (the
//! `rocpd_*` names are still views). An index on `(id, guid)` per table stands in for the inputs'
//! primary keys, which the views' joins use.
//!
//! Memory stays bounded: SQLite copies row by row, and the temporary database lives in a file
//! (`PRAGMA temp_store = FILE`; SQLite deletes it when the connection closes, or at once on a
//! crash since it is unlinked when created) with a bounded page cache. The file is created in
//! `SQLITE_TMPDIR`, else `TMPDIR`, else `/var/tmp` or `/tmp`, and needs about as much space as the
//! rows kept.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{schema, select_from, uri};
use crate::reader::{self, Input};
use crate::window::MaybeWindow;
use crate::{Error, Result};

/// The schema name of the temporary database the views read.
pub(super) const SCHEMA: &str = "merged";

/// Page cache of the temporary database, in KiB (SQLite's `-N` form).
const CACHE_KIB: i64 = 16 * 1024;

/// A quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Name and declared type of each column of `table` in `db`.
fn columns(db: &Input, table: &str) -> Result<Columns> {
    let mut stmt = db
        .connection()
        .prepare(&format!("PRAGMA table_info({})", ident(table)))
        .map_err(|e| reader::read_error(&db.path, e))?;
    let cols = stmt
        .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| reader::read_error(&db.path, e))?;
    Ok(cols)
}

/// Turns an error of the temporary database into one that says what to do when it is the disk
/// filling up.
fn temp_error(e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => Error::usage(
            "no space left for the temporary copy of the databases (a query over more databases than SQLite attaches \
             at once copies their rows into a temporary file first); point SQLITE_TMPDIR or TMPDIR at a directory on \
             a larger disk, narrow the copy with --start/--end, or query fewer databases at once",
        ),
        _ => Error::Sqlite(e),
    }
}

/// Like [`temp_error`], naming the input `path` for errors that are not about the disk.
fn fill_error(path: &Path, e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => temp_error(e),
        _ => reader::read_error(path, e),
    }
}

/// Name and declared type of each column of a table.
type Columns = Vec<(String, String)>;

/// What is copied from one input: its path, and per process and table the index of the table in
/// [`schema::TABLES`] and the process's table-name suffix.
struct Plan {
    path: PathBuf,
    tables: Vec<(usize, String)>,
}

/// Copies every `rocpd_*` table of every process of `dbs` (the rows inside `window`) into the
/// temporary database [`SCHEMA`] attached to `conn`, attaching at most `limit` databases at a
/// time (the temporary one included). Returns, per entry of [`schema::TABLES`], whether some
/// process has that table. `dbs` are closed before the copy: their connections would otherwise
/// hold memory for every input while it runs.
pub(super) fn materialise(
    conn: &Connection,
    dbs: Vec<Input>,
    window: &MaybeWindow,
    limit: usize,
) -> Result<Vec<bool>> {
    let Some(group) = limit.checked_sub(1).filter(|g| *g > 0) else {
        return Err(Error::usage(format!(
            "this build's SQLite attaches only {limit} database(s) at a time, too few to combine {} databases; \
             build with the bundled SQLite's default SQLITE_MAX_ATTACHED (10) or more",
            dbs.len()
        )));
    };
    let (plans, first) = plans(&dbs)?;
    drop(dbs);
    create_tables(conn, &first)?;
    for chunk in plans.chunks(group) {
        for (k, plan) in chunk.iter().enumerate() {
            conn.execute(&format!("ATTACH DATABASE ?1 AS src{k}"), [uri(&plan.path)])
                .map_err(|e| reader::read_error(&plan.path, e))?;
        }
        let copied = copy_group(conn, chunk, window);
        let detached = (0..chunk.len()).try_for_each(|k| {
            conn.execute_batch(&format!("DETACH DATABASE src{k}"))
                .map_err(Error::from)
        });
        copied.and(detached)?;
    }
    create_indexes(conn, &first)?;
    Ok(first.iter().map(Option::is_some).collect())
}

/// Per entry of [`schema::TABLES`], the columns of the first process that has that table, and
/// the input it is in; None where no process has it.
type FirstColumns = Vec<Option<(PathBuf, Columns)>>;

/// What to copy from each input, and the columns of each table. Every process must have the
/// same columns in a table as the first that has it (as the UNION ALL of the attached case
/// requires).
fn plans(dbs: &[Input]) -> Result<(Vec<Plan>, FirstColumns)> {
    let mut first: FirstColumns = vec![None; schema::TABLES.len()];
    let mut plans = Vec::with_capacity(dbs.len());
    for db in dbs {
        let mut plan = Plan {
            path: db.path.clone(),
            tables: Vec::new(),
        };
        for src in db.sources()? {
            for (t, base) in schema::TABLES.iter().enumerate() {
                if src.table(base).is_none() {
                    continue;
                }
                plan.tables.push((t, src.info.suffix.clone()));
                let cols = columns(db, &format!("{base}{}", src.info.suffix))?;
                let names = |c: &[(String, String)]| {
                    c.iter()
                        .map(|c| c.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                match &first[t] {
                    None => first[t] = Some((db.path.clone(), cols)),
                    Some((other, want)) if names(want) != names(&cols) => {
                        return Err(Error::usage(format!(
                            "{} and {} have different columns in {base} ({} / {}): they come from different \
                             rocpd schema revisions; query them separately",
                            other.display(),
                            db.path.display(),
                            names(want),
                            names(&cols)
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
        plans.push(plan);
    }
    Ok((plans, first))
}

/// Attach the temporary database [`SCHEMA`] and create in it every table some process has.
fn create_tables(conn: &Connection, first: &FirstColumns) -> Result<()> {
    conn.execute_batch(&format!(
        "PRAGMA temp_store = FILE; ATTACH DATABASE '' AS {SCHEMA}; PRAGMA {SCHEMA}.journal_mode = OFF; \
         PRAGMA {SCHEMA}.synchronous = OFF; PRAGMA {SCHEMA}.cache_size = -{CACHE_KIB};"
    ))
    .map_err(temp_error)?;
    let mut ddl = String::new();
    for (t, base) in schema::TABLES.iter().enumerate() {
        if let Some((_, cols)) = &first[t] {
            let defs: Vec<String> = cols
                .iter()
                .map(|(name, decl)| format!("{} {decl}", ident(name)).trim_end().to_owned())
                .collect();
            ddl.push_str(&format!(
                "CREATE TABLE {SCHEMA}.{} ({});\n",
                ident(base),
                defs.join(", ")
            ));
        }
    }
    conn.execute_batch(&ddl).map_err(temp_error)
}

/// Index the copied tables by `id` (and `guid`, where they have one), once they are full.
fn create_indexes(conn: &Connection, first: &FirstColumns) -> Result<()> {
    let mut index = String::new();
    for (t, base) in schema::TABLES.iter().enumerate() {
        let Some((_, cols)) = &first[t] else { continue };
        let has = |c: &str| cols.iter().any(|(n, _)| n == c);
        if has("id") {
            let key = if has("guid") {
                "\"id\", \"guid\""
            } else {
                "\"id\""
            };
            index.push_str(&format!(
                "CREATE INDEX {SCHEMA}.{} ON {} ({key});\n",
                ident(&format!("{base}_id")),
                ident(base)
            ));
        }
    }
    conn.execute_batch(&index).map_err(temp_error)
}

/// Copies the tables of the inputs of one group, attached as `src0`, `src1`, ..., in one
/// transaction.
fn copy_group(conn: &Connection, chunk: &[Plan], window: &MaybeWindow) -> Result<()> {
    conn.execute_batch("BEGIN").map_err(temp_error)?;
    let copied = (|| {
        for (k, plan) in chunk.iter().enumerate() {
            for (t, suffix) in &plan.tables {
                let base = schema::TABLES[*t];
                let select = select_from(&format!("src{k}"), base, suffix, window);
                conn.execute_batch(&format!("INSERT INTO {SCHEMA}.{} {select}", ident(base)))
                    .map_err(|e| fill_error(&plan.path, e))?;
            }
        }
        Ok(())
    })();
    match copied {
        Ok(()) => conn.execute_batch("COMMIT").map_err(temp_error),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}
