//! The `buffer_records` object, each record written once.
//!
//! Its arrays come in a fixed order, and each is filled by one table (`kinds::Table`). Tables are
//! read in pass order; while a table is read, the first array still to be written is streamed
//! straight into the document if that table fills it. Arrays the same table fills further on
//! (`hsa_api` after `hip_api`, `scratch_memory` after `memory_allocation`, ROCdecode calls after
//! the copies) go to a spool file and are appended when their turn comes. A typical database
//! (dispatches, one API domain, copies) spools nothing.

use super::builder::push_str;
use super::kinds::Table;
use super::spool::{Spool, BUFFER_KEYS};
use crate::error::Result;
use crate::output::{OutFile, OutputSet};

/// The encoded records of one id range, by `buffer_records` array.
pub(super) type Chunk = [Vec<u8>; BUFFER_KEYS.len()];

/// Writes the `buffer_records` arrays in order as the tables are read.
pub(super) struct Sections<'o> {
    out: &'o OutputSet,
    present: [bool; BUFFER_KEYS.len()],
    /// Arrays `0..written` are complete in the document.
    written: usize,
    /// The tables read completely so far.
    finished: Option<Table>,
    /// The array being streamed, and whether it has an element yet.
    open: Option<(usize, bool)>,
    spools: [Option<Spool>; BUFFER_KEYS.len()],
}

impl<'o> Sections<'o> {
    /// Starts the object (`"buffer_records":{`); `present` says which arrays have records.
    pub fn begin(
        out: &'o OutputSet,
        present: [bool; BUFFER_KEYS.len()],
        file: &mut OutFile,
    ) -> Result<Self> {
        file.write_all(b"\"buffer_records\":{")?;
        Ok(Sections {
            out,
            present,
            written: 0,
            finished: None,
            open: None,
            spools: Default::default(),
        })
    }

    /// `"key":[` of array `key`.
    fn key(&self, key: usize, file: &mut OutFile) -> Result<()> {
        let mut b = Vec::with_capacity(32);
        if key > 0 {
            b.push(b',');
        }
        push_str(&mut b, BUFFER_KEYS[key]);
        b.extend_from_slice(b":[");
        file.write_all(&b)
    }

    /// Writes every array that is complete and next in order: empty ones, and those of tables
    /// already read (from their spools).
    fn catch_up(&mut self, file: &mut OutFile) -> Result<()> {
        while self.written < BUFFER_KEYS.len() {
            let k = self.written;
            let done = self.finished.is_some_and(|t| Table::of_key(k) <= t);
            if self.present[k] && !done {
                break;
            }
            self.key(k, file)?;
            if let Some(s) = self.spools[k].take() {
                s.copy_into(file)?;
            }
            file.write_all(b"]")?;
            self.written += 1;
        }
        Ok(())
    }

    /// Starts reading `table`: opens the next array if `table` fills it.
    pub fn start(&mut self, table: Table, file: &mut OutFile) -> Result<()> {
        self.catch_up(file)?;
        if self.written < BUFFER_KEYS.len() && Table::of_key(self.written) == table {
            self.key(self.written, file)?;
            self.open = Some((self.written, false));
        }
        Ok(())
    }

    /// Adds one range's records: the open array's straight into the document, others to spools.
    pub fn add(&mut self, chunk: Chunk, file: &mut OutFile) -> Result<()> {
        for (k, bytes) in chunk.into_iter().enumerate() {
            if bytes.is_empty() {
                continue;
            }
            match &mut self.open {
                Some((open, any)) if *open == k => {
                    if *any {
                        file.write_all(b",")?;
                    }
                    *any = true;
                    file.write_all(&bytes)?;
                }
                _ => {
                    if self.spools[k].is_none() {
                        self.spools[k] = Some(Spool::new(self.out)?);
                    }
                    if let Some(s) = self.spools[k].as_mut() {
                        s.push(&bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends reading `table`: closes its open array and writes what is complete after it.
    pub fn finish(&mut self, table: Table, file: &mut OutFile) -> Result<()> {
        if self.open.take().is_some() {
            file.write_all(b"]")?;
            self.written += 1;
        }
        self.finished = Some(table);
        self.catch_up(file)
    }

    /// Ends the object once every table has been read.
    pub fn end(mut self, file: &mut OutFile) -> Result<()> {
        self.finished = Some(Table::Allocations);
        self.catch_up(file)?;
        file.write_all(b"}")
    }
}
