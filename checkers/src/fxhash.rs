//! A tiny multiplicative hasher (the FxHash scheme) for the checker's integer-keyed maps.
//! SipHash's DoS resistance buys nothing for a history we read ourselves, and the index does
//! millions of lookups per check. No dependency: it is twenty lines.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher state.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    /// The product's low bits depend only on the input's low bits, and hash tables pick a
    /// bucket by the low bits: values that differ only above bit 20 (the queue workload's
    /// `sent << 20 | process`) would share a bucket per process and probe chains hundreds
    /// long. Rotating brings the high bits, which depend on every input bit, down (as
    /// `rustc-hash` 2 does).
    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

/// A `HashMap` using [`FxHasher`].
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
/// A `HashSet` using [`FxHasher`].
pub(crate) type FxHashSet<T> = HashSet<T, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ only in their high bits (the queue workload's values, four processes
    /// sending 1,024 each) must still spread over a table's buckets, which are picked by the
    /// hash's low bits.
    #[test]
    fn keys_differing_only_in_high_bits_spread_over_low_bits() {
        let mut buckets = HashSet::new();
        for process in 0..4i64 {
            for sent in 0..1024i64 {
                let mut hasher = FxHasher::default();
                hasher.write_i64((sent << 20) | process);
                buckets.insert(hasher.finish() & 0xfff);
            }
        }
        // 4,096 keys into 4,096 buckets at random fill about 63% of them.
        assert!(buckets.len() > 2_400, "{} buckets used", buckets.len());
    }
}
