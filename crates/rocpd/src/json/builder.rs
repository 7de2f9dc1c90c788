//! A small compact-JSON writer over a byte buffer, printing like RapidJSON's `Writer` (no spaces,
//! doubles as `16384.0`).

use crate::numfmt::{push_hex16, push_i64, push_u64};

/// Appends `s` as a JSON string.
pub fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[run..i]);
        run = i + 1;
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[usize::from(b >> 4)]);
            buf.push(HEX[usize::from(b & 0xf)]);
        } else {
            buf.extend_from_slice(esc);
        }
    }
    buf.extend_from_slice(&bytes[run..]);
    buf.push(b'"');
}

/// Appends a double the way RapidJSON prints it (`16384.0`, `0.5`); non-finite values as `null`.
pub fn push_f64(buf: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        buf.extend_from_slice(b"null");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        buf.extend_from_slice(format!("{v:.1}").as_bytes());
    } else {
        buf.extend_from_slice(format!("{v}").as_bytes());
    }
}

/// A compact-JSON builder: `b` holds the text, `comma` whether each open container already has
/// an element. Keys are plain identifiers written as they are (never escaped).
#[derive(Default)]
pub(super) struct J {
    pub b: Vec<u8>,
    pub comma: Vec<bool>,
}

impl J {
    fn sep(&mut self) {
        if let Some(c) = self.comma.last_mut() {
            if *c {
                self.b.push(b',');
            }
            *c = true;
        }
    }
    /// `"k":` after a separator.
    fn key(&mut self, k: &str) {
        debug_assert!(k.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\'));
        self.sep();
        self.b.push(b'"');
        self.b.extend_from_slice(k.as_bytes());
        self.b.extend_from_slice(b"\":");
    }
    fn open(&mut self, c: u8) -> &mut Self {
        self.sep();
        self.b.push(c);
        self.comma.push(false);
        self
    }
    fn close(&mut self, c: u8) -> &mut Self {
        self.comma.pop();
        self.b.push(c);
        self
    }
    /// Opens an object element.
    pub fn obj(&mut self) -> &mut Self {
        self.open(b'{')
    }
    /// Closes an object.
    pub fn end_obj(&mut self) -> &mut Self {
        self.close(b'}')
    }
    /// Closes an array.
    pub fn end_arr(&mut self) -> &mut Self {
        self.close(b']')
    }
    /// `"k":<integer>`.
    pub fn i(&mut self, k: &str, v: i64) -> &mut Self {
        self.key(k);
        push_i64(&mut self.b, v);
        self
    }
    /// `"k":"<string>"`.
    pub fn s(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k);
        push_str(&mut self.b, v);
        self
    }
    /// `"k":"0x<16 hex digits>"`.
    pub fn hex16(&mut self, k: &str, v: u64) -> &mut Self {
        self.key(k);
        self.b.push(b'"');
        push_hex16(&mut self.b, v);
        self.b.push(b'"');
        self
    }
    /// `"k":<double>`.
    pub fn f(&mut self, k: &str, v: f64) -> &mut Self {
        self.key(k);
        push_f64(&mut self.b, v);
        self
    }
    /// `"k":true|false`.
    pub fn b(&mut self, k: &str, v: bool) -> &mut Self {
        self.key(k);
        self.b.extend_from_slice(if v { b"true" } else { b"false" });
        self
    }
    /// Opens `"k":{`.
    pub fn ko(&mut self, k: &str) -> &mut Self {
        self.key(k);
        self.b.push(b'{');
        self.comma.push(false);
        self
    }
    /// Opens `"k":[`.
    pub fn ka(&mut self, k: &str) -> &mut Self {
        self.key(k);
        self.b.push(b'[');
        self.comma.push(false);
        self
    }
    /// `"k":{"handle":v}`.
    pub fn handle(&mut self, k: &str, v: u64) -> &mut Self {
        self.key(k);
        self.b.extend_from_slice(b"{\"handle\":");
        push_u64(&mut self.b, v);
        self.b.push(b'}');
        self
    }
    /// `"k":<raw json>`.
    pub fn raw(&mut self, k: &str, json: &str) -> &mut Self {
        self.key(k);
        self.b.extend_from_slice(json.as_bytes());
        self
    }
    /// A raw JSON array element.
    pub fn raw_elem(&mut self, json: &str) -> &mut Self {
        self.sep();
        self.b.extend_from_slice(json.as_bytes());
        self
    }
    /// A string array element.
    pub fn str_elem(&mut self, v: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, v);
        self
    }
    /// Takes the text written so far.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_numbers_print_like_rapidjson() {
        let mut b = Vec::new();
        push_str(&mut b, "a\"b\\c\nd\te\u{1}f\u{1f}é");
        assert_eq!(b, r#""a\"b\\c\nd\te\u0001f\u001fé""#.as_bytes());
        b.clear();
        push_f64(&mut b, 16384.0);
        b.push(b' ');
        push_f64(&mut b, 0.5);
        b.push(b' ');
        push_f64(&mut b, f64::NAN);
        assert_eq!(b, b"16384.0 0.5 null".to_vec());
        let mut j = J::default();
        j.obj()
            .i("a", -1)
            .handle("h", 7)
            .ka("l")
            .str_elem("x")
            .end_arr()
            .end_obj();
        assert_eq!(j.take(), br#"{"a":-1,"h":{"handle":7},"l":["x"]}"#.to_vec());
    }
}
