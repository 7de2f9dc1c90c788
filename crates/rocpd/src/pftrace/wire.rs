//! The protocol-buffer wire format, written by hand for the packets a trace holds millions of
//! (track events): no message is built per event, the bytes go straight into a reused buffer.
//! Callers write fields in tag order, as prost does for the generated messages ([`super::proto`]),
//! so the bytes are those prost would write (the tests check it).

/// Wire type of varint fields.
const VARINT: u32 = 0;
/// Wire type of 64-bit fields.
const FIXED64: u32 = 1;
/// Wire type of length-delimited fields.
const LEN: u32 = 2;

/// Appends `v` as a varint.
#[inline]
pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// The encoded length of the varint `v`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // 7 bits a byte over the significant bits (at least one).
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// A varint field (`uint64`, `uint32`, `int64`, enums).
#[inline]
pub fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, VARINT);
    varint(buf, v);
}

/// A `fixed64` or `double` field (the value's bits).
#[inline]
pub fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, FIXED64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// A length-delimited field (`bytes`, `string`, an embedded message).
#[inline]
pub fn bytes(buf: &mut Vec<u8>, field: u32, v: &[u8]) {
    key(buf, field, LEN);
    varint(buf, v.len() as u64);
    buf.extend_from_slice(v);
}

/// The value of one debug annotation.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// `int_value`.
    Int(i64),
    /// `double_value`.
    Double(f64),
    /// `string_value`.
    Str(&'a str),
    /// `string_value_iid`.
    StrIid(u64),
}

/// A `DebugAnnotation` (field 4 of `TrackEvent`) with an interned name.
pub fn annotation(buf: &mut Vec<u8>, name_iid: u64, value: Value<'_>) {
    let value_len = match value {
        Value::Int(v) => 1 + varint_len(v as u64),
        Value::Double(_) => 9,
        Value::Str(s) => 1 + varint_len(s.len() as u64) + s.len(),
        Value::StrIid(i) => 2 + varint_len(i),
    };
    key(buf, 4, LEN);
    varint(buf, (1 + varint_len(name_iid) + value_len) as u64);
    uint(buf, 1, name_iid);
    match value {
        Value::Int(v) => uint(buf, 4, v as u64),
        Value::Double(v) => fixed64(buf, 5, v.to_bits()),
        Value::Str(s) => bytes(buf, 6, s.as_bytes()),
        Value::StrIid(i) => uint(buf, 17, i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pftrace::proto::{debug_annotation, DebugAnnotation};

    #[test]
    fn varints_match_prost() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX, (-5i64) as u64] {
            let mut a = Vec::new();
            varint(&mut a, v);
            let mut b = Vec::new();
            prost::encoding::encode_varint(v, &mut b);
            assert_eq!(a, b);
            assert_eq!(varint_len(v), b.len());
        }
    }

    #[test]
    fn annotations_match_prost() {
        let cases = [
            (3, Value::Int(-7)),
            (200, Value::Int(1 << 40)),
            (5, Value::Double(2.5)),
            (9, Value::Str("a string value")),
            (70_000, Value::StrIid(130)),
        ];
        for (iid, v) in cases {
            let mut ours = Vec::new();
            annotation(&mut ours, iid, v);
            let msg = DebugAnnotation {
                name_field: Some(debug_annotation::NameField::NameIid(iid)),
                value: Some(match v {
                    Value::Int(i) => debug_annotation::Value::IntValue(i),
                    Value::Double(d) => debug_annotation::Value::DoubleValue(d),
                    Value::Str(s) => debug_annotation::Value::StringValue(s.to_owned()),
                    Value::StrIid(i) => debug_annotation::Value::StringValueIid(i),
                }),
            };
            let mut theirs = Vec::new();
            prost::encoding::message::encode(4, &msg, &mut theirs);
            assert_eq!(ours, theirs, "{v:?}");
        }
    }
}
