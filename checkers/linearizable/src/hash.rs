//! Fast, deterministic hashing for the engine's internal tables: an
//! FxHash-style [`FxHasher`] for hash maps keyed by small values, and
//! [`zobrist_keys`] for incremental hashing of the linearized-set bitset.
//!
//! Nothing here is cryptographic or DoS-resistant; the inputs are our own
//! histories. Both are seeded by constants so a run is reproducible.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier FxHash (rustc's hasher) uses; odd, with well-mixed bits.
const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// A word-at-a-time multiplicative hasher, in the style of rustc's FxHash.
/// Much faster than SipHash for the short keys (state ids, small strings)
/// the engine hashes in its inner loop.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add_to_hash(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add_to_hash(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add_to_hash(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.add_to_hash(u64::from(value));
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.add_to_hash(u64::from(value));
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.add_to_hash(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.add_to_hash(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // One extra multiply-xorshift so low bits depend on all input bits;
        // our open-addressing tables index by the low bits.
        let hash = self.hash ^ (self.hash >> 29);
        hash.wrapping_mul(FX_SEED) ^ (hash >> 32)
    }
}

/// `BuildHasher` for [`FxHasher`].
pub(crate) type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// A `HashMap` using [`FxHasher`].
pub(crate) type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;

/// SplitMix64: a tiny, well-distributed generator, used only to derive the
/// fixed Zobrist keys (no external RNG, so runs are reproducible).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One random 64-bit key per operation. The hash of a set of operations is
/// the XOR of their keys, so adding or removing one operation updates the
/// hash in O(1) instead of rehashing the whole bitset.
pub(crate) fn zobrist_keys(count: usize) -> Vec<u64> {
    let mut seed = 0x6c6f_676a_616d_u64; // "logjam"
    (0..count).map(|_| splitmix64(&mut seed)).collect()
}

/// Mixes a state id into a 64-bit value to XOR with a Zobrist set hash.
#[inline]
pub(crate) fn mix_state(state: u32) -> u64 {
    let z = (u64::from(state) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    #[test]
    fn zobrist_keys_are_distinct_and_deterministic() {
        let first = zobrist_keys(1000);
        let second = zobrist_keys(1000);
        assert_eq!(first, second);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), first.len());
    }

    #[test]
    fn fx_hasher_distinguishes_nearby_strings() {
        let hash = |text: &str| {
            let mut hasher = FxHasher::default();
            text.hash(&mut hasher);
            hasher.finish()
        };
        assert_ne!(hash("x 0 1 y"), hash("x 0 2 y"));
        assert_ne!(hash(""), hash("a"));
    }
}
