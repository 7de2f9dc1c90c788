//! The distinct kinds of each row stream: what a converter needs to know before its first record
//! (JSON's kind table). Each is a light scan: the fact table's id, times, event id and name
//! columns only, merged with the event table's categories like the row streams (see `scan`),
//! without decoding the rows. Each list comes in the order a pass over the rows in id order meets
//! its entries, and honours the source's time window and id range like the row streams.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use super::rows::{opt, text};
use super::scan::EventCols;
use super::Source;
use crate::error::Result;

/// Distinct keys in order of first appearance, with the id each was first met at.
struct FirstSeen<K> {
    seen: HashSet<K>,
    list: Vec<(K, i64)>,
    last: Option<K>,
}

impl<K: Copy + Eq + Hash> FirstSeen<K> {
    fn new() -> Self {
        FirstSeen {
            seen: HashSet::new(),
            list: Vec::new(),
            last: None,
        }
    }

    fn add(&mut self, k: K, id: i64) {
        // Runs of one key are the common case: skip the hash then.
        if self.last == Some(k) {
            return;
        }
        self.last = Some(k);
        if self.seen.insert(k) {
            self.list.push((k, id));
        }
    }

    /// The keys; `self` and `other` merged by first id (ties: `self` first), duplicates dropped.
    fn merge(self, other: FirstSeen<K>) -> Vec<K> {
        let mut all = self.list;
        all.extend(other.list);
        all.sort_by_key(|(_, id)| *id);
        let mut seen = HashSet::new();
        all.into_iter()
            .filter(|(k, _)| seen.insert(*k))
            .map(|(k, _)| k)
            .collect()
    }

    fn keys(self) -> Vec<K> {
        self.list.into_iter().map(|(k, _)| k).collect()
    }
}

impl Source<'_> {
    /// The distinct categories of the kernel dispatches.
    pub fn dispatch_kinds(&self) -> Result<Vec<Option<i64>>> {
        let Some(t) = self.table("rocpd_kernel_dispatch") else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT X.id, X.start, X.end, X.event_id FROM {t} X{} ORDER BY X.id",
            self.id_filter("X")
        );
        let mut found = FirstSeen::new();
        let e = self.err();
        self.stream(&sql, 3, EventCols::Category, (1, 2), |r, ev| {
            let id: i64 = r.get(0).map_err(&e)?;
            found.add(ev.and_then(|v| v.category_id), id);
            Ok(())
        })?;
        Ok(found.keys())
    }

    /// The distinct (category, name) ids of the API calls, regions and samples merged.
    pub fn api_kinds(&self) -> Result<Vec<(Option<i64>, Option<i64>)>> {
        let e = self.err();
        let mut regions = FirstSeen::new();
        if let Some(t) = self.table("rocpd_region") {
            let sql = format!(
                "SELECT X.id, X.start, X.end, X.event_id, X.name_id FROM {t} X{} ORDER BY X.id",
                self.id_filter("X")
            );
            self.stream(&sql, 3, EventCols::Category, (1, 2), |r, ev| {
                let (id, name): (i64, Option<i64>) =
                    (r.get(0).map_err(&e)?, opt(r, 4).map_err(&e)?);
                regions.add((ev.and_then(|v| v.category_id), name), id);
                Ok(())
            })?;
        }
        let mut samples = FirstSeen::new();
        if let (Some(s), Some(tr)) = (self.table("rocpd_sample"), self.table("rocpd_track")) {
            let mut names: HashMap<i64, Option<i64>> = HashMap::new();
            self.each(&format!("SELECT id, name_id FROM {tr}"), |r| {
                names.insert(r.get(0).map_err(&e)?, opt(r, 1).map_err(&e)?);
                Ok(())
            })?;
            let sql = format!(
                "SELECT X.id, X.timestamp, X.timestamp, X.event_id, X.track_id FROM {s} X{} ORDER BY X.id",
                self.id_filter("X")
            );
            self.stream(&sql, 3, EventCols::Category, (1, 2), |r, ev| {
                let id: i64 = r.get(0).map_err(&e)?;
                let track = opt(r, 4).map_err(&e)?;
                let name = track.and_then(|t| names.get(&t).copied().flatten());
                samples.add((ev.and_then(|v| v.category_id), name), id);
                Ok(())
            })?;
        }
        Ok(regions.merge(samples))
    }

    /// The distinct (category, name) ids of the memory copies.
    pub fn copy_kinds(&self) -> Result<Vec<(Option<i64>, Option<i64>)>> {
        let Some(t) = self.table("rocpd_memory_copy") else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT X.id, X.start, X.end, X.event_id, X.name_id FROM {t} X{} ORDER BY X.id",
            self.id_filter("X")
        );
        let mut found = FirstSeen::new();
        let e = self.err();
        self.stream(&sql, 3, EventCols::Category, (1, 2), |r, ev| {
            let (id, name): (i64, Option<i64>) = (r.get(0).map_err(&e)?, opt(r, 4).map_err(&e)?);
            found.add((ev.and_then(|v| v.category_id), name), id);
            Ok(())
        })?;
        Ok(found.keys())
    }

    /// The distinct (category, operation, scratch) of the memory allocations.
    pub fn allocation_kinds(&self) -> Result<Vec<(Option<i64>, &'static str, bool)>> {
        let Some(t) = self.table("rocpd_memory_allocate") else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT X.id, X.start, X.end, X.event_id, X.type, X.level FROM {t} X{} ORDER BY X.id",
            self.id_filter("X")
        );
        let mut found = FirstSeen::new();
        let e = self.err();
        self.stream(&sql, 3, EventCols::Category, (1, 2), |r, ev| {
            let id: i64 = r.get(0).map_err(&e)?;
            let (kind, level) = (text(r, 4).map_err(&e)?, text(r, 5).map_err(&e)?);
            let op = crate::model::allocation_operation(&kind, &level);
            found.add((ev.and_then(|v| v.category_id), op, level == "SCRATCH"), id);
            Ok(())
        })?;
        Ok(found.keys())
    }

    /// Calls `f` with the internal correlation id and message of every API call (regions and
    /// samples merged by id) whose category is one of `categories`, in id order.
    pub fn messages_of(
        &self,
        categories: &[i64],
        mut f: impl FnMut(i64, &str) -> Result<()>,
    ) -> Result<()> {
        if categories.is_empty() {
            return Ok(());
        }
        let e = self.err();
        let mut found: Vec<(i64, i64, String)> = Vec::new();
        for (base, times) in [
            ("rocpd_region", "X.start, X.end"),
            ("rocpd_sample", "X.timestamp, X.timestamp"),
        ] {
            let Some(t) = self.table(base) else {
                continue;
            };
            let sql = format!(
                "SELECT X.id, {times}, X.event_id FROM {t} X{} ORDER BY X.id",
                self.id_filter("X")
            );
            self.stream(&sql, 3, EventCols::Message, (1, 2), |r, ev| {
                let Some(ev) = ev else {
                    return Ok(());
                };
                if !ev.category_id.is_some_and(|c| categories.contains(&c)) {
                    return Ok(());
                }
                if let Some(m) = &ev.message {
                    let id: i64 = r.get(0).map_err(&e)?;
                    found.push((id, ev.stack_id.unwrap_or(id), m.clone()));
                }
                Ok(())
            })?;
        }
        // Regions first at equal ids (the sort is stable), as `api_calls` merges them.
        found.sort_by_key(|(id, _, _)| *id);
        for (_, internal, m) in &found {
            f(*internal, m)?;
        }
        Ok(())
    }
}
