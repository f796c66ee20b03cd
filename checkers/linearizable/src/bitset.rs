//! A fixed-size bitset over a partition's operations: which operations the
//! current search path has linearized.
//!
//! Plain `u64` words, no allocation after construction; the search copies
//! the words into the visited cache (`cache.rs`) and hashes them
//! incrementally (`hash.rs`), so this type stays minimal.

/// A set of operation indices `0..len`, one bit each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    /// An empty set able to hold indices `0..len`.
    pub(crate) fn new(len: usize) -> Self {
        Bitset {
            words: vec![0; len.div_ceil(64).max(1)],
        }
    }

    /// Adds `index`.
    #[inline]
    pub(crate) fn insert(&mut self, index: usize) {
        debug_assert!(!self.contains(index), "bit {index} already set");
        self.words[index / 64] |= 1 << (index % 64);
    }

    /// Removes `index`.
    #[inline]
    pub(crate) fn remove(&mut self, index: usize) {
        debug_assert!(self.contains(index), "bit {index} not set");
        self.words[index / 64] &= !(1 << (index % 64));
    }

    /// True if `index` is in the set.
    #[inline]
    pub(crate) fn contains(&self, index: usize) -> bool {
        self.words[index / 64] & (1 << (index % 64)) != 0
    }

    /// The raw words, for copying into the visited cache.
    #[inline]
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// How many indices are in the set.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.words
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_contains_across_word_boundaries() {
        let mut set = Bitset::new(130);
        for index in [0, 63, 64, 127, 129] {
            assert!(!set.contains(index));
            set.insert(index);
            assert!(set.contains(index));
        }
        assert_eq!(set.count(), 5);
        assert_eq!(set.words().len(), 3);
        set.remove(64);
        assert!(!set.contains(64));
        assert!(set.contains(63));
        assert_eq!(set.count(), 4);
    }

    #[test]
    fn empty_partition_still_has_one_word() {
        let set = Bitset::new(0);
        assert_eq!(set.words(), &[0]);
    }
}
