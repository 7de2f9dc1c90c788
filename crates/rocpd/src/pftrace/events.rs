//! `rocpd_event` rows found by a forward scan alongside the fact table (a merge scan), with a
//! point lookup for ids behind the scan.
//!
//! Event ids ascend with the fact table's ids in the databases rocprofv3 writes, so the scan reads
//! each page of the event table once. A `LEFT JOIN` would seek from the B-tree's root for every
//! row, and with three converter threads sharing SQLite's process-wide page cache those seeks
//! cost about one `pread` per row.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Rows, Statement};

use super::{col, opt_col};

/// The event columns the converter uses.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// Id.
    pub id: i64,
    /// Category (tracing kind) string id.
    pub category_id: Option<i64>,
    /// Internal correlation id.
    pub stack_id: Option<i64>,
    /// Ancestor correlation id.
    pub parent_stack_id: i64,
    /// External correlation id.
    pub correlation_id: i64,
    /// The ROCTx message in extdata, when asked for and present.
    pub message: Option<String>,
}

/// The two statements of a lookup (prepared by the caller, borrowed by [`Lookup`]).
pub struct Statements<'c> {
    scan: Statement<'c>,
    point: Statement<'c>,
    message: bool,
}

impl<'c> Statements<'c> {
    /// Statements over the event table `table` (quoted); `message` also reads extdata.
    pub fn prepare(
        conn: &'c Connection,
        table: &str,
        message: bool,
    ) -> rusqlite::Result<Statements<'c>> {
        let cols = if message {
            "id, category_id, stack_id, parent_stack_id, correlation_id, extdata"
        } else {
            "id, category_id, stack_id, parent_stack_id, correlation_id"
        };
        Ok(Statements {
            scan: conn.prepare(&format!(
                "SELECT {cols} FROM {table} WHERE id >= ?1 ORDER BY id"
            ))?,
            point: conn.prepare(&format!("SELECT {cols} FROM {table} WHERE id = ?1"))?,
            message,
        })
    }
}

fn decode(r: &rusqlite::Row<'_>, message: bool) -> rusqlite::Result<Event> {
    Ok(Event {
        id: col(r, 0)?,
        category_id: opt_col(r, 1)?,
        stack_id: opt_col(r, 2)?,
        parent_stack_id: col(r, 3)?,
        correlation_id: col(r, 4)?,
        message: if message {
            crate::reader::roctx_message(r.get_ref(5)?)
        } else {
            None
        },
    })
}

/// Finds events by id for rows whose event ids (mostly) ascend.
pub struct Lookup<'s, 'c> {
    scan_stmt: Option<&'s mut Statement<'c>>,
    scan: Option<Rows<'s>>,
    point: &'s mut Statement<'c>,
    message: bool,
    cur: Option<Event>,
    done: bool,
}

impl<'s, 'c> Lookup<'s, 'c> {
    /// A lookup over `stmts`.
    pub fn new(stmts: &'s mut Statements<'c>) -> Lookup<'s, 'c> {
        Lookup {
            scan_stmt: Some(&mut stmts.scan),
            scan: None,
            point: &mut stmts.point,
            message: stmts.message,
            cur: None,
            done: false,
        }
    }

    fn point(&mut self, id: i64) -> rusqlite::Result<Option<Event>> {
        let mut rows = self.point.query([id])?;
        match rows.next()? {
            Some(r) => Ok(Some(decode(r, self.message)?)),
            None => Ok(None),
        }
    }

    /// The event with `id`, if it exists.
    pub fn find(&mut self, id: i64) -> rusqlite::Result<Option<Event>> {
        if let Some(stmt) = self.scan_stmt.take() {
            self.scan = Some(stmt.query([id])?);
        }
        if let Some(c) = &self.cur {
            if c.id == id {
                return Ok(self.cur.clone());
            }
            if c.id > id || self.done {
                return self.point(id);
            }
        } else if self.done {
            return self.point(id);
        }
        let message = self.message;
        let Some(rows) = self.scan.as_mut() else {
            return self.point(id);
        };
        loop {
            match rows.next()? {
                Some(r) => {
                    // Only decode rows at or past the id sought.
                    let rid = match r.get_ref(0)? {
                        ValueRef::Integer(v) => v,
                        _ => continue,
                    };
                    if rid < id {
                        continue;
                    }
                    let ev = decode(r, message)?;
                    let hit = ev.id == id;
                    self.cur = Some(ev);
                    return Ok(if hit { self.cur.clone() } else { None });
                }
                None => {
                    self.done = true;
                    return Ok(None);
                }
            }
        }
    }
}
