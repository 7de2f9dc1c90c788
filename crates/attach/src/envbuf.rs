//! The environment list we send to the target and its wire encoding
//! (docs/protocol.md section 5.10).
//!
//! [`EnvList`] is an ordered list of `(name, value)` pairs that behaves like C `environ` under
//! `setenv(3)`: setting an existing name replaces its value in place, setting a new name appends it
//! at the end. The front end starts from [`EnvList::from_process`], applies the option variables to
//! it, and the session encodes it with [`encode`] right before injecting
//! `rocprofiler_register_attach(env_buffer, tool_path)`.
//!
//! Only `ROCP*` variables travel (see [`is_forwarded`]); everything else in the list stays on our
//! side.

use crate::error::{Error, Result};

/// Variables that start with `ROCP` but must never be sent to the target.
///
/// * `ROCPROFILER_REGISTER_LIBRARY`: a host-side path set by the attacher's SDK; the target must
///   resolve its own (docs/protocol.md section 5.10).
/// * `ROCP_TOOL_LIBRARIES`: rocprofv3's LD_PRELOAD-mode tool list; in attach mode the tool is given
///   by the second argument of the attach call instead (docs/protocol.md section 6.2, step 2).
pub const EXCLUDED: [&str; 2] = ["ROCPROFILER_REGISTER_LIBRARY", "ROCP_TOOL_LIBRARIES"];

/// An ordered environment (name, value) list that behaves like C `environ` under `setenv`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvList {
    vars: Vec<(String, String)>,
}

impl EnvList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Our own process environment, in `environ` order.
    ///
    /// Entries whose name or value is not valid UTF-8 are left out (none of the variables
    /// rocprofiler reads can legitimately contain such bytes).
    pub fn from_process() -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(n, v)| Some((n.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        EnvList { vars }
    }

    /// Build a list from pairs, keeping their order (a repeated name keeps its first position and
    /// its last value, as successive `setenv` calls would).
    pub fn from_pairs<I, N, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let mut env = EnvList::new();
        for (n, v) in pairs {
            env.set(n.as_ref(), v.as_ref());
        }
        env
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `name` is set (possibly to an empty value).
    pub fn contains(&self, name: &str) -> bool {
        self.vars.iter().any(|(n, _)| n == name)
    }

    /// Set `name` (in place if present, else appended).
    pub fn set(&mut self, name: &str, value: &str) {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.vars.push((name.to_string(), value.to_string())),
        }
    }

    /// Set each of `pairs` whose name the list lacks, appended in order (`pairs` names each
    /// variable once): one pass over the list, not one per pair.
    pub fn set_absent(&mut self, pairs: &[(&str, &str)]) {
        // Only names that share a first byte with one of `pairs` can match: the rest of a
        // process environment is not hashed.
        let mut firsts: Vec<u8> = pairs.iter().filter_map(|(n, _)| n.bytes().next()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        let have: std::collections::HashSet<&str> = self
            .vars
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.bytes().next().is_some_and(|b| firsts.contains(&b)))
            .collect();
        let missing: Vec<(String, String)> = pairs
            .iter()
            .filter(|(n, _)| !have.contains(n))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        self.vars.extend(missing);
    }

    /// Append `value` to `name` with `sep` between the old and the new value, or set it when the
    /// variable is absent or empty. An empty `value` leaves the variable unchanged.
    pub fn append(&mut self, name: &str, value: &str, sep: &str) {
        if value.is_empty() {
            return;
        }
        let new = match self.get(name) {
            Some(old) if !old.is_empty() => format!("{old}{sep}{value}"),
            _ => value.to_string(),
        };
        self.set(name, &new);
    }

    /// Remove `name`; returns its old value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let idx = self.vars.iter().position(|(n, _)| n == name)?;
        Some(self.vars.remove(idx).1)
    }

    /// All entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// This list without the entries `held` (a process's environment) has with the same value,
    /// where `held` has that name once: setting them again would change nothing. A name `held`
    /// has twice stays (which one the process's `getenv` sees is not known here).
    pub fn without_held(&self, held: &[(String, String)]) -> EnvList {
        let mut once: std::collections::HashMap<&str, Option<&str>> =
            std::collections::HashMap::with_capacity(held.len());
        for (n, v) in held {
            once.entry(n.as_str())
                .and_modify(|seen| *seen = None)
                .or_insert(Some(v.as_str()));
        }
        let vars = self
            .vars
            .iter()
            .filter(|(n, v)| once.get(n.as_str()) != Some(&Some(v.as_str())))
            .cloned()
            .collect();
        EnvList { vars }
    }

    /// The entries [`encode`] would send, in order.
    pub fn forwarded(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter()
            .filter(|(n, v)| is_forwarded(n) && is_encodable(n, v))
    }
}

/// Whether a variable of this name travels to the target: the name starts with the exact bytes
/// `ROCP` and is not one of [`EXCLUDED`].
pub fn is_forwarded(name: &str) -> bool {
    name.starts_with("ROCP") && !EXCLUDED.contains(&name)
}

/// Whether a pair can be represented in the wire format: no NUL anywhere, a non-empty name
/// without `=` (the target passes it to `setenv`, which rejects such names).
pub fn is_encodable(name: &str, value: &str) -> bool {
    !name.is_empty() && !name.contains('\0') && !name.contains('=') && !value.contains('\0')
}

/// Encode the `ROCP*` part of `env` as the buffer `rocprofiler_register_attach` consumes
/// (docs/protocol.md section 5.10): a little-endian `u32` count, then `name\0value\0` for each
/// forwarded entry, in list order. Entries that cannot be encoded (see [`is_encodable`]) are
/// skipped.
pub fn encode(env: &EnvList) -> Vec<u8> {
    let entries: Vec<(&str, &str)> = env.forwarded().collect();
    let size = 4 + entries
        .iter()
        .map(|(n, v)| n.len() + v.len() + 2)
        .sum::<usize>();
    let mut buf = Vec::with_capacity(size);
    // The count can never exceed u32::MAX in practice (each entry is at least 6 bytes).
    let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&count.to_le_bytes());
    for (n, v) in entries.iter().take(count as usize) {
        buf.extend_from_slice(n.as_bytes());
        buf.push(0);
        buf.extend_from_slice(v.as_bytes());
        buf.push(0);
    }
    buf
}

fn bad_buffer(msg: String) -> Error {
    Error::io(
        "decoding an environment buffer",
        std::io::Error::new(std::io::ErrorKind::InvalidData, msg),
    )
}

/// Decode a buffer produced by [`encode`] (or by upstream rocattach) into its pairs.
///
/// Fails if the buffer is shorter than its header, an entry is not NUL-terminated, a string is not
/// UTF-8, or bytes are left over after the announced number of entries.
pub fn decode(buf: &[u8]) -> Result<Vec<(String, String)>> {
    let header: [u8; 4] = buf
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| {
            bad_buffer(format!(
                "buffer is {} bytes, shorter than the 4-byte count",
                buf.len()
            ))
        })?;
    let count = u32::from_le_bytes(header) as usize;
    let mut rest = &buf[4..];
    let mut take = |what: &str, idx: usize| -> Result<String> {
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad_buffer(format!("entry {idx}: {what} is not NUL-terminated")))?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|e| bad_buffer(format!("entry {idx}: {what} is not UTF-8: {e}")))?
            .to_string();
        rest = &rest[end + 1..];
        Ok(s)
    };
    let mut out = Vec::with_capacity(count.min(4096));
    for idx in 0..count {
        let name = take("name", idx)?;
        let value = take("value", idx)?;
        out.push((name, value));
    }
    if !rest.is_empty() {
        return Err(bad_buffer(format!(
            "{} bytes left over after the {count} announced entries",
            rest.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_held_leaves_out_only_what_the_process_holds_once_with_the_same_value() {
        let env = EnvList::from_pairs([
            ("ROCPROF_A", "1"),
            ("ROCPROF_B", "0"),
            ("ROCPROF_C", ""),
            ("ROCPROF_D", "x"),
            ("ROCPROF_E", "y"),
        ]);
        let held: Vec<(String, String)> = [
            ("ROCPROF_A", "1"),
            ("ROCPROF_B", "1"),
            ("ROCPROF_C", ""),
            ("ROCPROF_D", "x"),
            ("ROCPROF_D", "z"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let kept = env.without_held(&held);
        let sent: Vec<(&str, &str)> = kept.iter().collect();
        // B differs, D is held twice, E is not held.
        assert_eq!(
            sent,
            [("ROCPROF_B", "0"), ("ROCPROF_D", "x"), ("ROCPROF_E", "y")]
        );
    }

    #[test]
    fn set_absent_appends_only_missing_names_in_order() {
        let mut env = EnvList::from_pairs([("HOME", "/root"), ("ROCPROF_B", "1")]);
        env.set_absent(&[("ROCPROF_A", "0"), ("ROCPROF_B", "0"), ("ROCPROF_C", "")]);
        let got: Vec<(&str, &str)> = env.iter().collect();
        assert_eq!(
            got,
            [
                ("HOME", "/root"),
                ("ROCPROF_B", "1"),
                ("ROCPROF_A", "0"),
                ("ROCPROF_C", "")
            ]
        );
    }

    #[test]
    fn spec_example_byte_for_byte() {
        let env = EnvList::from_pairs([
            ("PATH", "/bin"),
            ("ROCPROF_KERNEL_TRACE", "1"),
            ("HOME", "/root"),
            ("ROCPROF_OUTPUT_PATH", "/o"),
        ]);
        let mut want = vec![2u8, 0, 0, 0];
        want.extend_from_slice(b"ROCPROF_KERNEL_TRACE\x001\x00ROCPROF_OUTPUT_PATH\x00/o\x00");
        let got = encode(&env);
        assert_eq!(got, want);
        assert_eq!(got.len(), 4 + (20 + 1 + 1 + 1) + (19 + 1 + 2 + 1));
        assert_eq!(
            decode(&got).unwrap(),
            vec![
                ("ROCPROF_KERNEL_TRACE".to_string(), "1".to_string()),
                ("ROCPROF_OUTPUT_PATH".to_string(), "/o".to_string())
            ]
        );
    }

    #[test]
    fn filter_is_exact_prefix_and_excludes() {
        let env = EnvList::from_pairs([
            ("ROCP_TOOL_ATTACH", "1"),
            ("ROCPROFILER_REGISTER_LIBRARY", "/host/lib.so"),
            ("ROCP_TOOL_LIBRARIES", "/x.so"),
            ("rocprof_lower", "1"),
            ("ROC_OTHER", "1"),
            ("XROCPROF", "1"),
            ("ROCPROFILER_LIBRARY_CTOR", "1"),
            ("ROCPROFILER_REGISTER_LIBRARY_X", "kept"),
        ]);
        let names: Vec<&str> = env.forwarded().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "ROCP_TOOL_ATTACH",
                "ROCPROFILER_LIBRARY_CTOR",
                "ROCPROFILER_REGISTER_LIBRARY_X"
            ]
        );
        let decoded = decode(&encode(&env)).unwrap();
        assert_eq!(decoded.len(), 3);
    }

    #[test]
    fn empty_list_is_just_a_zero_count() {
        assert_eq!(encode(&EnvList::new()), vec![0, 0, 0, 0]);
        assert!(decode(&[0, 0, 0, 0]).unwrap().is_empty());
    }

    #[test]
    fn nul_and_equals_are_skipped() {
        let env = EnvList::from_pairs([
            ("ROCPROF_A", "x\0y"),
            ("ROCP=B", "1"),
            ("ROCPROF_C", ""),
            ("ROCP\0D", "1"),
        ]);
        assert_eq!(
            decode(&encode(&env)).unwrap(),
            vec![("ROCPROF_C".into(), "".into())]
        );
    }

    #[test]
    fn setenv_semantics() {
        let mut env = EnvList::from_pairs([("A", "1"), ("B", "2")]);
        env.set("A", "3");
        env.set("C", "4");
        assert_eq!(
            env.iter().collect::<Vec<_>>(),
            [("A", "3"), ("B", "2"), ("C", "4")]
        );
        env.append("B", "5", ",");
        env.append("D", "6", ",");
        env.append("D", "", ",");
        assert_eq!(env.get("B"), Some("2,5"));
        assert_eq!(env.get("D"), Some("6"));
        assert_eq!(env.remove("A").as_deref(), Some("3"));
        assert_eq!(env.remove("A"), None);
        assert_eq!(
            env.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["B", "C", "D"]
        );
        assert_eq!(env.len(), 3);
        assert!(!env.is_empty());
        assert!(env.contains("C") && !env.contains("A"));
    }

    #[test]
    fn from_process_keeps_environ_order() {
        let env = EnvList::from_process();
        let std_order: Vec<String> = std::env::vars_os()
            .filter_map(|(n, _)| n.into_string().ok())
            .collect();
        let ours: Vec<&str> = env.iter().map(|(n, _)| n).collect();
        assert_eq!(ours, std_order);
    }

    #[test]
    fn decode_rejects_malformed() {
        assert!(decode(&[1, 0]).is_err());
        assert!(decode(&[1, 0, 0, 0, b'A', 0, b'1']).is_err());
        assert!(decode(&[1, 0, 0, 0, b'A']).is_err());
        assert!(decode(&[0, 0, 0, 0, b'A']).is_err());
        assert!(decode(&[1, 0, 0, 0, 0xff, 0, b'1', 0]).is_err());
        assert_eq!(
            decode(&[1, 0, 0, 0, b'A', 0, b'1', 0]).unwrap(),
            vec![("A".into(), "1".into())]
        );
    }
}
