//! Process GUIDs in rocprofv3's "UUIDv7-like" layout.
//!
//! Bytes 0-5 hold a 48-bit millisecond timestamp (big-endian), byte 6 is `0x70 | (ms >> 8) & 0x0f`,
//! byte 7 is `ms & 0xff`, bytes 8-15 are the first output of a 64-bit Mersenne Twister seeded with a
//! per-process value (big-endian), with the variant bits of byte 8 forced to `10`. ROCm seeds the
//! generator with a hash of the machine id, pid, ppid and process start time; callers here pass any
//! seed that identifies the process.

use std::fmt;

/// A process GUID, e.g. `0000ddb5-8903-7903-b269-cd8d3745bb8a`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guid(String);

impl Guid {
    /// Builds the GUID from a millisecond timestamp and a seed.
    pub fn from_parts(ms: u64, seed: u64) -> Guid {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
        b[6] = 0x70 | ((ms >> 8) & 0x0f) as u8;
        b[7] = (ms & 0xff) as u8;
        b[8..].copy_from_slice(&Mt19937_64::new(seed).next_u64().to_be_bytes());
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        Guid(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ))
    }

    /// Accepts a hyphenated 8-4-4-4-12 lowercase or uppercase hex GUID.
    pub fn parse(s: &str) -> Option<Guid> {
        let groups: Vec<&str> = s.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        let ok = groups.len() == 5
            && groups
                .iter()
                .zip(lens)
                .all(|(g, n)| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit()));
        ok.then(|| Guid(s.to_ascii_lowercase()))
    }

    /// The hyphenated form stored in every `guid` column.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The table-name suffix (`_` + GUID with `-` replaced by `_`), also stored as metadata `uuid`.
    pub fn uuid(&self) -> String {
        super::schema::uuid_suffix(&self.0)
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The 64-bit Mersenne Twister (`std::mt19937_64`), enough of it to draw the first outputs.
struct Mt19937_64 {
    mt: [u64; 312],
    index: usize,
}

impl Mt19937_64 {
    fn new(seed: u64) -> Self {
        let mut mt = [0u64; 312];
        mt[0] = seed;
        for i in 1..312 {
            mt[i] = 6364136223846793005u64
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 62))
                .wrapping_add(i as u64);
        }
        Mt19937_64 { mt, index: 312 }
    }

    fn next_u64(&mut self) -> u64 {
        const UPPER: u64 = 0xFFFF_FFFF_8000_0000;
        const LOWER: u64 = 0x7FFF_FFFF;
        if self.index >= 312 {
            for i in 0..312 {
                let x = (self.mt[i] & UPPER) | (self.mt[(i + 1) % 312] & LOWER);
                let mut xa = x >> 1;
                if x & 1 != 0 {
                    xa ^= 0xB502_6F5A_A966_19E9;
                }
                self.mt[i] = self.mt[(i + 156) % 312] ^ xa;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= (y >> 29) & 0x5555_5555_5555_5555;
        y ^= (y << 17) & 0x71D6_7FFF_EDA6_0000;
        y ^= (y << 37) & 0xFFF7_EEE0_0000_0000;
        y ^= y >> 43;
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_64_matches_the_standard_check_value() {
        // C++ [rand.predef]: the 10000th output of a default-constructed mt19937_64 (seed 5489).
        let mut mt = Mt19937_64::new(5489);
        let mut v = 0;
        for _ in 0..10000 {
            v = mt.next_u64();
        }
        assert_eq!(v, 9981545732273789042);
    }

    #[test]
    fn guid_layout() {
        let g = Guid::from_parts(0x0000_ddb5_8903, 42);
        assert!(g.as_str().starts_with("0000ddb5-8903-7"), "{g}");
        assert_eq!(Guid::parse(g.as_str()), Some(g.clone()));
        let variant = u8::from_str_radix(&g.as_str()[19..21], 16).unwrap();
        assert_eq!(variant & 0xc0, 0x80);
        assert_eq!(g.uuid(), format!("_{}", g.as_str().replace('-', "_")));
        assert!(Guid::parse("not-a-guid").is_none());
    }
}
