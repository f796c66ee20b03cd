//! The linearized set of the search's current path: its bitset, its
//! incremental (Zobrist) hash, and the key under which the visited cache
//! stores it.
//!
//! For a small part the key is the bitset itself. For a large part a full
//! bitset per visited configuration is what made memory explode (12.5 KB
//! per configuration at 100,000 operations), while consecutive
//! configurations differ only near the search's frontier. So above
//! [`CHUNKED_ABOVE_WORDS`] the bitset is cut into chunks of
//! [`CHUNK_WORDS`] words, each distinct chunk content is interned once
//! (exactly: the interner compares words, not just hashes), and the key is
//! the list of chunk ids: a few hundred bytes per configuration plus the
//! chunks that are actually new. Two sets have equal keys iff they are
//! equal, so the cache stays exact.

use crate::bitset::Bitset;
use crate::cache::VisitedCache;
use crate::hash::zobrist_keys;

/// Words per chunk (2,048 operations).
const CHUNK_WORDS: usize = 32;
/// Bitsets longer than this many words (8,192 operations) are chunked.
const CHUNKED_ABOVE_WORDS: usize = 4 * CHUNK_WORDS;
/// A chunk whose current content has not been interned yet.
const UNINTERNED: u64 = u64::MAX;

/// Interned chunks of a large part's bitset.
struct Chunks {
    /// Chunk contents → ids (entry numbers).
    interner: VisitedCache,
    /// Per chunk: XOR of the Zobrist keys of its members.
    hashes: Vec<u64>,
    /// Per chunk: the id of its current content, or [`UNINTERNED`].
    ids: Vec<u64>,
}

/// The set of linearized operations and its cache key.
pub(crate) struct LinearizedSet {
    bits: Bitset,
    /// One key per operation.
    zobrist: Vec<u64>,
    /// XOR of the keys of the members.
    hash: u64,
    /// `Some` for a large part.
    chunks: Option<Chunks>,
}

impl LinearizedSet {
    /// An empty set over `count` operations.
    pub(crate) fn new(count: usize) -> Self {
        let words = count.div_ceil(64).max(1);
        let chunks = (words > CHUNKED_ABOVE_WORDS).then(|| {
            let chunk_count = words.div_ceil(CHUNK_WORDS);
            let mut chunks = Chunks {
                interner: VisitedCache::new(CHUNK_WORDS),
                hashes: vec![0; chunk_count],
                ids: vec![UNINTERNED; chunk_count],
            };
            let (empty, _new) = chunks.interner.find_or_insert(0, &[0; CHUNK_WORDS], 0);
            chunks.ids.fill(u64::from(empty));
            chunks
        });
        let bits = match &chunks {
            Some(chunks) => Bitset::new(chunks.ids.len() * CHUNK_WORDS * 64),
            None => Bitset::new(count),
        };
        LinearizedSet {
            bits,
            zobrist: zobrist_keys(count),
            hash: 0,
            chunks,
        }
    }

    /// True if `op` is in the set.
    #[inline]
    pub(crate) fn contains(&self, op: usize) -> bool {
        self.bits.contains(op)
    }

    /// The set's hash: a function of its members only.
    #[inline]
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// Adds `op`.
    #[inline]
    pub(crate) fn insert(&mut self, op: usize) {
        self.bits.insert(op);
        self.toggled(op);
    }

    /// Removes `op`.
    #[inline]
    pub(crate) fn remove(&mut self, op: usize) {
        self.bits.remove(op);
        self.toggled(op);
    }

    #[inline]
    fn toggled(&mut self, op: usize) {
        self.hash ^= self.zobrist[op];
        if let Some(chunks) = &mut self.chunks {
            let chunk = op / (CHUNK_WORDS * 64);
            chunks.hashes[chunk] ^= self.zobrist[op];
            let words = &self.bits.words()[chunk * CHUNK_WORDS..(chunk + 1) * CHUNK_WORDS];
            chunks.ids[chunk] = chunks
                .interner
                .find(chunks.hashes[chunk], words, 0)
                .map_or(UNINTERNED, u64::from);
        }
    }

    /// The key for the visited cache; call [`LinearizedSet::intern`] first.
    #[inline]
    pub(crate) fn key(&self) -> &[u64] {
        match &self.chunks {
            Some(chunks) => &chunks.ids,
            None => self.bits.words(),
        }
    }

    /// Interns chunk contents never seen before, so [`LinearizedSet::key`]
    /// is complete. Only a set never seen before has such a chunk, so
    /// nothing is interned for configurations the cache already holds.
    #[inline]
    pub(crate) fn intern(&mut self) {
        let Some(chunks) = &mut self.chunks else {
            return;
        };
        for chunk in 0..chunks.ids.len() {
            if chunks.ids[chunk] == UNINTERNED {
                let words = &self.bits.words()[chunk * CHUNK_WORDS..(chunk + 1) * CHUNK_WORDS];
                let (id, _new) = chunks
                    .interner
                    .find_or_insert(chunks.hashes[chunk], words, 0);
                chunks.ids[chunk] = u64::from(id);
            }
        }
    }

    /// Forgets the interned chunks (with the visited cache, whose keys name
    /// them) and interns the current ones again.
    pub(crate) fn forget_chunks(&mut self) {
        if let Some(chunks) = &mut self.chunks {
            chunks.interner.clear();
            chunks.ids.fill(UNINTERNED);
        }
        self.intern();
    }

    /// Words per cache key.
    pub(crate) fn key_words(&self) -> usize {
        self.key().len()
    }

    /// Bytes of the fixed parts (bitset, Zobrist keys, chunk bookkeeping).
    pub(crate) fn fixed_bytes(&self) -> u64 {
        let chunk_lists = self
            .chunks
            .as_ref()
            .map_or(0, |chunks| chunks.ids.len() * 16);
        ((self.bits.words().len() + self.zobrist.len()) * 8 + chunk_lists) as u64
    }

    /// Bytes of interned chunks (grows with the search).
    pub(crate) fn interned_bytes(&self) -> u64 {
        self.chunks
            .as_ref()
            .map_or(0, |chunks| chunks.interner.bytes())
    }

    /// Bytes the next [`LinearizedSet::intern`] may newly allocate.
    pub(crate) fn intern_growth(&self) -> u64 {
        self.chunks
            .as_ref()
            .map_or(0, |chunks| chunks.interner.insert_growth())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same set reached by different paths gets the same key; a
    /// different set gets a different key, also when it differs only far
    /// from the chunk that last changed.
    #[test]
    fn chunked_keys_are_exact() {
        let count = 20_000;
        let mut set = LinearizedSet::new(count);
        assert!(set.chunks.is_some());
        for op in [5, 3_000, 19_999] {
            set.insert(op);
            set.intern();
        }
        let (key, hash) = (set.key().to_vec(), set.hash());
        for op in [5, 3_000, 19_999] {
            set.remove(op);
        }
        for op in [19_999, 7, 5, 3_000] {
            set.insert(op);
            set.intern();
        }
        assert_ne!(set.key(), key.as_slice());
        set.remove(7);
        assert_eq!(set.key(), key.as_slice());
        assert_eq!(set.hash(), hash);
        assert!(set.contains(3_000) && !set.contains(7));
    }

    #[test]
    fn small_parts_use_the_bitset_as_key() {
        let mut set = LinearizedSet::new(100);
        set.insert(70);
        set.intern();
        assert_eq!(set.key(), &[0, 1 << 6]);
    }
}
