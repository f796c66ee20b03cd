//! The visited cache of the WGL search: every (linearized set, state) pair
//! the search has entered, so no configuration is explored twice.
//!
//! An open-addressing table specialised for this one job: keys are a bitset
//! (stored inline in one flat `Vec<u64>` arena, no per-entry allocation) and
//! an interned state id; the caller supplies the 64-bit hash, which it keeps
//! incrementally (Zobrist), so inserting never rehashes the bitset. Entries
//! are never removed: a configuration that was entered either led to success
//! (the search stops) or was fully explored and failed.

/// Marks an empty slot.
const EMPTY: u64 = 0;

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
        VisitedCache {
            words_per_key,
            slots: vec![EMPTY; 1 << 10],
            hashes: Vec::new(),
            states: Vec::new(),
            bits: Vec::new(),
        }
    }

    /// Number of configurations recorded.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Records `(bits, state)` and returns true, or returns false if it was
    /// already present. `hash` must be a function of `(bits, state)` only.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, bits: &[u64], state: u32) -> bool {
        debug_assert_eq!(bits.len(), self.words_per_key);
        let tag = hash & 0xffff_ffff_0000_0000;
        let mask = self.slots.len() - 1;
        let mut slot = (hash as usize) & mask;
        loop {
            let value = self.slots[slot];
            if value == EMPTY {
                break;
            }
            if value & 0xffff_ffff_0000_0000 == tag {
                let entry = (value & 0xffff_ffff) as usize - 1;
                if self.states[entry] == state && self.key_bits(entry) == bits {
                    return false;
                }
            }
            slot = (slot + 1) & mask;
        }
        let entry = self.states.len();
        assert!(entry < u32::MAX as usize - 1, "visited cache overflow");
        self.slots[slot] = tag | (entry as u64 + 1);
        self.hashes.push(hash);
        self.states.push(state);
        self.bits.extend_from_slice(bits);
        if self.states.len() * 2 > self.slots.len() {
            self.grow();
        }
        true
    }

    fn key_bits(&self, entry: usize) -> &[u64] {
        &self.bits[entry * self.words_per_key..(entry + 1) * self.words_per_key]
    }

    /// Doubles the slot array and reinserts every entry (load factor ≤ 1/2).
    fn grow(&mut self) {
        let capacity = self.slots.len() * 2;
        let mask = capacity - 1;
        let mut slots = vec![EMPTY; capacity];
        for (entry, &hash) in self.hashes.iter().enumerate() {
            let mut slot = (hash as usize) & mask;
            while slots[slot] != EMPTY {
                slot = (slot + 1) & mask;
            }
            slots[slot] = (hash & 0xffff_ffff_0000_0000) | (entry as u64 + 1);
        }
        self.slots = slots;
    }

    /// Approximate heap use in bytes, for reports.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * 8
            + self.hashes.capacity() * 8
            + self.states.capacity() * 4
            + self.bits.capacity() * 8
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
        assert!(cache.bytes() > 0);
    }
}
