//! The visited cache of the WGL search: every (linearized set, state) pair
//! the search has entered, so no configuration is explored twice.
//!
//! An open-addressing table specialised for this one job: keys are a bitset
//! (stored inline in one flat `Vec<u64>` arena, no per-entry allocation) and
//! an interned state id; the caller supplies the 64-bit hash, which it keeps
//! incrementally (Zobrist), so inserting never rehashes the bitset. Entries
//! are never removed: a configuration that was entered either led to success
//! (the search stops) or was fully explored and failed.

use crate::memory::vec_bytes;

/// Marks an empty slot.
const EMPTY: u64 = 0;
/// Entries an empty cache has room for.
const INITIAL_ENTRIES: usize = 512;

/// The set of configurations already explored in one partition's search.
#[derive(Debug)]
pub(crate) struct VisitedCache {
    /// Words per bitset key.
    words_per_key: usize,
    /// Open-addressing slots: `(hash >> 32) << 32 | (entry + 1)`, or
    /// [`EMPTY`]. Keeping 32 hash bits in the slot rejects almost every
    /// mismatch without touching the entry arrays.
    slots: Vec<u64>,
    /// Full hash of each entry, to rehash on growth.
    hashes: Vec<u64>,
    /// Interned state id of each entry.
    states: Vec<u32>,
    /// Bitset words of each entry, `words_per_key` per entry.
    bits: Vec<u64>,
}

impl VisitedCache {
    /// An empty cache for bitsets of `words_per_key` words.
    pub(crate) fn new(words_per_key: usize) -> Self {
        let capacity = INITIAL_ENTRIES;
        VisitedCache {
            words_per_key,
            slots: vec![EMPTY; 2 * capacity],
            hashes: Vec::with_capacity(capacity),
            states: Vec::with_capacity(capacity),
            bits: Vec::with_capacity(capacity * words_per_key),
        }
    }

    /// Number of configurations recorded.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Entries that fit before the next growth.
    fn capacity(&self) -> usize {
        self.slots.len() / 2
    }

    /// Records `(bits, state)` and returns true, or returns false if it was
    /// already present. `hash` must be a function of `(bits, state)` only.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, bits: &[u64], state: u32) -> bool {
        self.find_or_insert(hash, bits, state).1
    }

    /// The entry holding `(bits, state)`, if present.
    #[inline]
    pub(crate) fn find(&self, hash: u64, bits: &[u64], state: u32) -> Option<u32> {
        self.probe(hash, bits, state).ok()
    }

    /// The entry holding `(bits, state)` and whether it was just added.
    /// Entries are numbered from 0 in insertion order and never move, so
    /// the number is a stable id for the key.
    #[inline]
    pub(crate) fn find_or_insert(&mut self, hash: u64, bits: &[u64], state: u32) -> (u32, bool) {
        let slot = match self.probe(hash, bits, state) {
            Ok(entry) => return (entry, false),
            Err(slot) => slot,
        };
        let entry = self.states.len();
        assert!(entry < u32::MAX as usize - 1, "visited cache overflow");
        self.slots[slot] = (hash & 0xffff_ffff_0000_0000) | (entry as u64 + 1);
        self.hashes.push(hash);
        self.states.push(state);
        self.bits.extend_from_slice(bits);
        if self.states.len() == self.capacity() {
            self.grow();
        }
        (entry as u32, true)
    }

    /// `Ok(entry)` if present, else `Err(slot)`: the empty slot to use.
    #[inline]
    fn probe(&self, hash: u64, bits: &[u64], state: u32) -> Result<u32, usize> {
        debug_assert_eq!(bits.len(), self.words_per_key);
        let tag = hash & 0xffff_ffff_0000_0000;
        let mask = self.slots.len() - 1;
        let mut slot = (hash as usize) & mask;
        loop {
            let value = self.slots[slot];
            if value == EMPTY {
                return Err(slot);
            }
            if value & 0xffff_ffff_0000_0000 == tag {
                let entry = (value & 0xffff_ffff) as usize - 1;
                if self.states[entry] == state && self.key_bits(entry) == bits {
                    return Ok(entry as u32);
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    fn key_bits(&self, entry: usize) -> &[u64] {
        &self.bits[entry * self.words_per_key..(entry + 1) * self.words_per_key]
    }

    /// Doubles the slot array and the entry arrays together (load factor
    /// ≤ 1/2) and reinserts every entry. Growing in lockstep with exact
    /// reservations keeps [`VisitedCache::bytes`] a function of the entry
    /// count alone.
    fn grow(&mut self) {
        let capacity = self.capacity() * 2;
        let mask = 2 * capacity - 1;
        let mut slots = vec![EMPTY; 2 * capacity];
        for (entry, &hash) in self.hashes.iter().enumerate() {
            let mut slot = (hash as usize) & mask;
            while slots[slot] != EMPTY {
                slot = (slot + 1) & mask;
            }
            slots[slot] = (hash & 0xffff_ffff_0000_0000) | (entry as u64 + 1);
        }
        self.slots = slots;
        self.hashes.reserve_exact(capacity - self.hashes.len());
        self.states.reserve_exact(capacity - self.states.len());
        self.bits
            .reserve_exact(capacity * self.words_per_key - self.bits.len());
    }

    /// Forgets every entry and returns the memory, back to the size of a
    /// new cache: the search calls this when growing would pass its memory
    /// budget. Forgetting only costs work (a forgotten configuration may be
    /// explored again), never correctness.
    pub(crate) fn clear(&mut self) {
        *self = VisitedCache::new(self.words_per_key);
    }

    /// Heap use in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        vec_bytes(&self.slots)
            + vec_bytes(&self.hashes)
            + vec_bytes(&self.states)
            + vec_bytes(&self.bits)
    }

    /// Bytes the next insert may newly allocate: the doubled arrays when it
    /// fills the cache (the old ones are still held while copying).
    pub(crate) fn insert_growth(&self) -> u64 {
        if self.states.len() + 1 < self.capacity() {
            return 0;
        }
        Self::bytes_for(self.capacity() * 2, self.words_per_key)
    }

    /// Bytes of a cache with room for `capacity` entries.
    fn bytes_for(capacity: usize, words_per_key: usize) -> u64 {
        (2 * capacity * 8 + capacity * (8 + 4 + 8 * words_per_key)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_reports_new_then_seen() {
        let mut cache = VisitedCache::new(2);
        assert!(cache.insert(42, &[1, 0], 7));
        assert!(!cache.insert(42, &[1, 0], 7));
        // Same hash, different key: both must be kept.
        assert!(cache.insert(42, &[1, 1], 7));
        assert!(cache.insert(42, &[1, 0], 8));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn survives_growth() {
        let mut cache = VisitedCache::new(1);
        for key in 0..10_000u64 {
            let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            assert!(cache.insert(hash, &[key], 0));
        }
        for key in 0..10_000u64 {
            let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            assert!(!cache.insert(hash, &[key], 0));
        }
        assert_eq!(cache.len(), 10_000);
        // 16,384 entries of room after growing from 512 five times.
        assert_eq!(cache.bytes(), VisitedCache::bytes_for(16_384, 1));
    }

    #[test]
    fn insert_growth_announces_the_next_doubling() {
        let mut cache = VisitedCache::new(1);
        let mut key = 0;
        while cache.insert_growth() == 0 {
            assert!(cache.insert(key, &[key], 0));
            key += 1;
        }
        let before = cache.bytes();
        let announced = cache.insert_growth();
        assert!(cache.insert(key, &[key], 0));
        assert_eq!(cache.bytes(), announced);
        assert!(cache.bytes() > before);
    }
}
