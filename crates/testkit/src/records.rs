//! The stand-in register library's log (one record per attach or detach call it received) and
//! the environment buffer an attach hands it (docs/protocol.md section 5.10).

use std::path::Path;

use crate::target::Target;

/// Encode an environment buffer by hand (independent oracle of docs/protocol.md section 5.10).
pub fn env_buffer(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut b = (pairs.len() as u32).to_le_bytes().to_vec();
    for (k, v) in pairs {
        b.extend_from_slice(k.as_bytes());
        b.push(0);
        b.extend_from_slice(v.as_bytes());
        b.push(0);
    }
    b
}

/// Hex as the stand-in logs strings.
pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One parsed stand-in log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `attach` or `detach`.
    pub kind: String,
    /// The record's `name=value` fields.
    pub fields: std::collections::BTreeMap<String, String>,
}

impl Record {
    /// A field, or `""` if the record lacks it.
    pub fn get(&self, k: &str) -> &str {
        self.fields.get(k).map(String::as_str).unwrap_or("")
    }
    /// Decoded (name, value) pairs of an attach record.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let p = self.get("pairs");
        if p.is_empty() {
            return Vec::new();
        }
        p.split(',')
            .map(|kv| {
                let (k, v) = kv.split_once(':').unwrap();
                (unhex(k), unhex(v))
            })
            .collect()
    }
}

/// Decodes the hex the stand-in logs strings in ([`hex`]).
pub fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// The pairs of the `n`th attach record of `t` (what the register received), as a map.
pub fn attach_pairs(t: &Target, n: usize) -> std::collections::BTreeMap<String, String> {
    let recs: Vec<_> = records(t)
        .into_iter()
        .filter(|r| r.kind == "attach")
        .collect();
    recs.get(n)
        .unwrap_or_else(|| panic!("no attach record {n}: {recs:?}"))
        .pairs()
        .into_iter()
        .collect()
}

/// The records of `t`'s stand-in log.
pub fn records(t: &Target) -> Vec<Record> {
    records_in(&t.log)
}

/// Parse a stand-in log file (several processes may share one; records carry `pid=`).
pub fn records_in(log: &Path) -> Vec<Record> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            let kind = it.next().unwrap().to_string();
            let fields = it
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Record { kind, fields }
        })
        .collect()
}
