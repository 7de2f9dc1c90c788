//! The first pass: what the document's header needs before any record can be written.
//!
//! The document opens with `strings.buffer_records` (every kind and operation, indexed by the
//! records) and `strings.marker_api` (every marker message). Both depend on every row, so a light
//! pass reads the tables first (on every core, see [`crate::par`]) and keeps only the
//! distinct (category, name) ids in the order a single pass meets them (grouped queries, not a
//! decoded row stream), the marker messages
//! (spooled), and which `buffer_records` arrays have records. The second pass then encodes each
//! record once, straight into the document (`sections`).

use std::collections::HashMap;

use super::builder::J;
use super::records::non_empty;
use super::spool::{slot, Kinds, Spool, BUFFER_KEYS};
use crate::domain::Domain;
use crate::error::Result;
use crate::output::OutputSet;
use crate::par;
use crate::reader::{Dims, IdMap, Source};

/// The tables read, in the order of the single pass the kind indices follow; each fills some of
/// the `buffer_records` arrays (see [`Table::of_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Table {
    Dispatches,
    ApiCalls,
    Copies,
    Allocations,
}

impl Table {
    /// Every table, in pass order.
    pub const ALL: [Table; 4] = [
        Table::Dispatches,
        Table::ApiCalls,
        Table::Copies,
        Table::Allocations,
    ];

    /// The physical tables whose ids the rows of this table carry.
    pub fn bases(self) -> &'static [&'static str] {
        match self {
            Table::Dispatches => &["rocpd_kernel_dispatch"],
            Table::ApiCalls => &["rocpd_region", "rocpd_sample"],
            Table::Copies => &["rocpd_memory_copy"],
            Table::Allocations => &["rocpd_memory_allocate"],
        }
    }

    /// The table whose records fill the `buffer_records` array `key` (by index).
    pub fn of_key(key: usize) -> Table {
        match BUFFER_KEYS.get(key).copied() {
            Some("kernel_dispatch") => Table::Dispatches,
            Some("memory_copy") => Table::Copies,
            Some("memory_allocation" | "scratch_memory") => Table::Allocations,
            _ => Table::ApiCalls,
        }
    }
}

/// An API kind: its domain, array slot and (kind, operation) indices; `None` for categories that
/// are not API calls (their rows are left out, as rocprofv3's JSON has no array for them).
pub(super) type ApiKind = Option<(Domain, usize, i64, i64)>;

/// What the first pass found.
pub(super) struct Plan {
    /// The kind table, in the order a single pass meets the kinds.
    pub kinds: Kinds,
    /// A dispatch's (kind, operation) by its category id.
    pub dispatch: IdMap<Option<i64>, (i64, i64)>,
    /// An API call's kind by (category id, name id).
    pub api: IdMap<(Option<i64>, Option<i64>), ApiKind>,
    /// A copy's (kind, operation) by (category id, name id).
    pub copy: IdMap<(Option<i64>, Option<i64>), (i64, i64)>,
    /// An allocation's (kind, operation) by (category id, operation, scratch).
    pub alloc: HashMap<(Option<i64>, &'static str, bool), (i64, i64)>,
    /// Whether each `buffer_records` array has records.
    pub present: [bool; BUFFER_KEYS.len()],
    /// The `strings.marker_api` elements, if any.
    pub markers: Option<Spool>,
    /// The id span of each table (index: [`Table`] as usize), `None` if it has no rows.
    pub spans: [Option<(i64, i64)>; 4],
}

/// What one id range contributes: the keys it meets first, in order, and its marker strings.
#[derive(Default)]
struct Found {
    dispatch: Vec<Option<i64>>,
    api: Vec<(Option<i64>, Option<i64>)>,
    copy: Vec<(Option<i64>, Option<i64>)>,
    alloc: Vec<(Option<i64>, &'static str, bool)>,
    markers: Vec<u8>,
}

/// The light pass over one id range of `table`: grouped queries, no row decoding (see
/// [`Source::dispatch_kinds`]); marker messages only when the range has marker calls.
fn scan(src: &Source<'_>, dims: &Dims, table: Table) -> Result<Found> {
    let mut f = Found::default();
    match table {
        Table::Dispatches => f.dispatch = src.dispatch_kinds()?,
        Table::ApiCalls => {
            f.api = src.api_kinds()?;
            let mut markers: Vec<i64> = f
                .api
                .iter()
                .filter_map(|(c, _)| *c)
                .filter(|c| Domain::of_api_kind(dims.string(Some(*c))) == Some(Domain::MarkerApi))
                .collect();
            markers.sort_unstable();
            markers.dedup();
            let mut j = J::default();
            src.messages_of(&markers, |key, m| {
                if !f.markers.is_empty() {
                    f.markers.push(b',');
                }
                j.b.clear();
                j.obj().i("key", key).s("value", m).end_obj();
                f.markers.extend_from_slice(&j.b);
                Ok(())
            })?;
        }
        Table::Copies => f.copy = src.copy_kinds()?,
        Table::Allocations => f.alloc = src.allocation_kinds()?,
    }
    Ok(f)
}

/// Runs the first pass over every table of `src`.
pub(super) fn plan(src: &Source<'_>, dims: &Dims, out: &OutputSet) -> Result<Plan> {
    let mut p = Plan {
        kinds: Kinds::default(),
        dispatch: IdMap::default(),
        api: IdMap::default(),
        copy: IdMap::default(),
        alloc: HashMap::new(),
        present: [false; BUFFER_KEYS.len()],
        markers: None,
        spans: [None; 4],
    };
    let workers = par::threads();
    for table in Table::ALL {
        let span = src.id_span(table.bases())?;
        p.spans[table as usize] = span;
        par::ordered_chunks(
            src,
            span,
            workers,
            |s| scan(s, dims, table),
            |found| p.absorb(dims, found, out),
        )?;
    }
    Ok(p)
}

impl Plan {
    /// Adds what one range found, in range order (so indices follow a single pass's order).
    fn absorb(&mut self, dims: &Dims, f: Found, out: &OutputSet) -> Result<()> {
        for c in f.dispatch {
            if !self.dispatch.contains_key(&c) {
                let ids = self.kinds.id(
                    non_empty(dims.string(c), "KERNEL_DISPATCH"),
                    "KERNEL_DISPATCH_COMPLETE",
                );
                self.dispatch.insert(c, ids);
                self.present[slot("kernel_dispatch")] = true;
            }
        }
        for (c, n) in f.api {
            if !self.api.contains_key(&(c, n)) {
                let kind = dims.string(c);
                let v = Domain::of_api_kind(kind).map(|d| {
                    let (k, o) = self.kinds.id(kind, dims.string(n));
                    (d, slot(d.json_key()), k, o)
                });
                if let Some((_, s, _, _)) = v {
                    if let Some(p) = self.present.get_mut(s) {
                        *p = true;
                    }
                }
                self.api.insert((c, n), v);
            }
        }
        for (c, n) in f.copy {
            if !self.copy.contains_key(&(c, n)) {
                let ids = self
                    .kinds
                    .id(non_empty(dims.string(c), "MEMORY_COPY"), dims.string(n));
                self.copy.insert((c, n), ids);
                self.present[slot("memory_copy")] = true;
            }
        }
        for (c, op, scratch) in f.alloc {
            if !self.alloc.contains_key(&(c, op, scratch)) {
                let default_kind = if scratch {
                    "SCRATCH_MEMORY"
                } else {
                    "MEMORY_ALLOCATION"
                };
                let ids = self.kinds.id(non_empty(dims.string(c), default_kind), op);
                self.alloc.insert((c, op, scratch), ids);
                let key = if scratch {
                    "scratch_memory"
                } else {
                    "memory_allocation"
                };
                self.present[slot(key)] = true;
            }
        }
        if !f.markers.is_empty() {
            if self.markers.is_none() {
                self.markers = Some(Spool::new(out)?);
            }
            if let Some(s) = self.markers.as_mut() {
                s.push(&f.markers)?;
            }
        }
        Ok(())
    }
}
