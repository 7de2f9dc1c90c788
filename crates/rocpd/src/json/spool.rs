//! The `buffer_records` keys, the kind/operation string table, and spool files: unlinked
//! temporary files for the few arrays that cannot be written in place (see `sections`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use crate::error::{Error, Result};
use crate::output::{OutFile, OutputSet};

/// The `buffer_records` arrays, in document order.
pub(super) const BUFFER_KEYS: [&str; 12] = [
    "kernel_dispatch",
    "hip_api",
    "hsa_api",
    "marker_api",
    "rccl_api",
    "memory_copy",
    "memory_allocation",
    "scratch_memory",
    "rocdecode_api",
    "rocjpeg_api",
    "pc_sample_host_trap",
    "pc_sample_stochastic",
];

/// The spool slot of a `buffer_records` key; an unknown key gets a slot that drops its records.
pub(super) fn slot(key: &str) -> usize {
    BUFFER_KEYS
        .iter()
        .position(|k| *k == key)
        .unwrap_or(usize::MAX)
}

/// An unlinked temporary file collecting one JSON array's elements: the arrays that cannot be
/// written where they belong while their table is read (see `sections`).
pub(super) struct Spool {
    w: BufWriter<File>,
    count: u64,
}

impl Spool {
    /// An empty spool in `out`'s directory.
    pub fn new(out: &OutputSet) -> Result<Spool> {
        Ok(Spool {
            w: BufWriter::with_capacity(256 * 1024, out.scratch()?),
            count: 0,
        })
    }

    /// Appends `elems`: one or more elements separated by commas.
    pub fn push(&mut self, elems: &[u8]) -> Result<()> {
        let r = (|| {
            if self.count > 0 {
                self.w.write_all(b",")?;
            }
            self.count += 1;
            self.w.write_all(elems)
        })();
        r.map_err(|e| crate::output::write_error(std::path::Path::new("JSON spool file"), &e))
    }

    /// Appends the collected elements to `out` (an in-kernel copy where the system has one).
    pub fn copy_into(self, out: &mut OutFile) -> Result<()> {
        let mut f = self
            .w
            .into_inner()
            .map_err(|e| Error::io("cannot flush a JSON spool file", e.into_error()))?;
        f.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io("cannot rewind a JSON spool file", e))?;
        std::io::copy(&mut f, out.writer()).map_err(|e| out.error(&e))?;
        Ok(())
    }
}

/// The kind/operation string table (`strings.buffer_records`), in order of first appearance.
#[derive(Default, Clone, PartialEq, Eq)]
pub(super) struct Kinds {
    /// Kinds with their operations.
    pub list: Vec<(String, Vec<String>)>,
    index: HashMap<String, usize>,
    ops: HashMap<(usize, String), usize>,
}

impl Kinds {
    /// The (kind, operation) indices, added if new.
    pub fn id(&mut self, kind: &str, op: &str) -> (i64, i64) {
        let k = match self.index.get(kind) {
            Some(&k) => k,
            None => {
                self.list.push((kind.to_owned(), Vec::new()));
                self.index.insert(kind.to_owned(), self.list.len() - 1);
                self.list.len() - 1
            }
        };
        let key = (k, op.to_owned());
        let o = match self.ops.get(&key) {
            Some(&o) => o,
            None => {
                self.list[k].1.push(op.to_owned());
                let o = self.list[k].1.len() - 1;
                self.ops.insert(key, o);
                o
            }
        };
        (k as i64, o as i64)
    }
}
