//! Number formatting exactly as rocprofv3's C++ streams print it, plus a small line builder for
//! CSV rows that avoids `fmt` machinery on the hot path.

/// `std::scientific` with `prec` digits: `5.00000000e-01` (the exponent has a sign and at least
/// two digits, unlike Rust's `{:e}`).
pub fn c_scientific(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return c_nonfinite(v);
    }
    let s = format!("{v:.prec$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let (sign, digits) = match exp.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exp),
    };
    if digits.len() < 2 {
        format!("{mantissa}e{sign}0{digits}")
    } else {
        format!("{mantissa}e{sign}{digits}")
    }
}

/// `std::fixed` with `prec` digits.
pub fn c_fixed(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return c_nonfinite(v);
    }
    format!("{v:.prec$}")
}

fn c_nonfinite(v: f64) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v > 0.0 {
        "inf".to_owned()
    } else {
        "-inf".to_owned()
    }
}

/// A floating-point CSV cell (`numerical_formatter`): fixed 6 if `v >= 1`, else scientific 8.
pub fn csv_double(v: f64) -> String {
    if v >= 1.0 {
        c_fixed(v, 6)
    } else {
        c_scientific(v, 8)
    }
}

/// A floating-point stats cell (`stats_formatter`): fixed 6 if `v > 0.01`, else scientific 8.
pub fn stats_double(v: f64) -> String {
    if v > 0.01 {
        c_fixed(v, 6)
    } else {
        c_scientific(v, 8)
    }
}

/// A percentage stats cell: fixed 2 if `>= 1`, fixed 4 if `> 0.01`, else scientific 3.
pub fn stats_percent(v: f64) -> String {
    if v >= 1.0 {
        c_fixed(v, 2)
    } else if v > 0.01 {
        c_fixed(v, 4)
    } else {
        c_scientific(v, 3)
    }
}

/// An address as rocprofv3 prints it: `0x` + 16 lowercase hex digits.
pub fn hex16(v: u64) -> String {
    format!("0x{v:016x}")
}

/// Appends [`hex16`]`(v)` without allocating.
pub fn push_hex16(buf: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.extend_from_slice(b"0x");
    for i in (0..16).rev() {
        buf.push(HEX[((v >> (i * 4)) & 0xf) as usize]);
    }
}

/// A reusable buffer for one CSV line in rocprofv3's encoding.
#[derive(Default)]
pub struct Line {
    buf: Vec<u8>,
    first: bool,
}

impl Line {
    /// Starts a new line.
    pub fn start(&mut self) -> &mut Self {
        self.buf.clear();
        self.first = true;
        self
    }

    fn sep(&mut self) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
    }

    /// A string cell: wrapped in `"` with no escaping, as rocprofv3 writes it.
    pub fn s(&mut self, v: &str) -> &mut Self {
        self.sep();
        self.buf.push(b'"');
        self.buf.extend_from_slice(v.as_bytes());
        self.buf.push(b'"');
        self
    }

    /// An integer cell.
    pub fn i(&mut self, v: i64) -> &mut Self {
        self.sep();
        push_i64(&mut self.buf, v);
        self
    }

    /// A quoted address cell, `"0x` + 16 lowercase hex digits + `"`.
    pub fn hex16(&mut self, v: u64) -> &mut Self {
        self.sep();
        self.buf.push(b'"');
        push_hex16(&mut self.buf, v);
        self.buf.push(b'"');
        self
    }

    /// A pre-formatted bare cell (e.g. a float).
    pub fn raw(&mut self, v: &str) -> &mut Self {
        self.sep();
        self.buf.extend_from_slice(v.as_bytes());
        self
    }

    /// Ends the line and returns its bytes including `\n`.
    pub fn end(&mut self) -> &[u8] {
        self.buf.push(b'\n');
        &self.buf
    }
}

/// Appends the decimal form of `v`.
pub fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

/// The two-digit decimal forms of 0..100, for [`push_u64`].
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal form of `v` (two digits per division).
pub fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while v >= 100 {
        let d = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
    }
    if v >= 10 {
        let d = v as usize * 2;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + v as u8;
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_cxx_streams() {
        assert_eq!(csv_double(16384.0), "16384.000000");
        assert_eq!(csv_double(0.5), "5.00000000e-01");
        assert_eq!(csv_double(0.0), "0.00000000e+00");
        assert_eq!(stats_double(65624351.5), "65624351.500000");
        assert_eq!(stats_double(0.0), "0.00000000e+00");
        assert_eq!(stats_percent(85.1534), "85.15");
        assert_eq!(stats_percent(0.64704), "0.6470");
        assert_eq!(stats_percent(0.001234), "1.234e-03");
        assert_eq!(c_scientific(7.002e7, 3), "7.002e+07");
        assert_eq!(c_scientific(1.5e-120, 2), "1.50e-120");
        assert_eq!(hex16(0x7ffb26354000), "0x00007ffb26354000");
        let mut b = Vec::new();
        push_hex16(&mut b, u64::MAX);
        assert_eq!(b, b"0xffffffffffffffff");
        for v in [0u64, 7, 10, 99, 100, 101, 999, 1000, 123456789, u64::MAX] {
            let mut b = Vec::new();
            push_u64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        for v in [i64::MIN, -1, 0, 42, i64::MAX] {
            let mut b = Vec::new();
            push_i64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        let mut l = Line::default();
        assert_eq!(
            l.start().s("a,b").i(-12).i(0).raw("1.5").end(),
            b"\"a,b\",-12,0,1.5\n"
        );
    }
}
