//! A map from `i64` to `V` that stores small non-negative keys in a vector and the rest in a
//! hash map. Offsets and per-key values are mostly dense counters from 0, so the vector part
//! turns the index's millions of lookups into sequential memory accesses; anything else
//! (negative, sparse or huge keys, e.g. a corrupted offset) still works through the hash map.

use crate::fxhash::FxHashMap;

/// Keys below this always fit the vector part.
const DENSE_FLOOR: i64 = 4_096;

/// See the module doc.
pub(crate) struct IntMap<V> {
    /// `dense[k]` holds key `k`; every key below `dense.len()` lives here.
    dense: Vec<Option<V>>,
    /// Keys at or above `dense.len()`, or negative.
    sparse: FxHashMap<i64, V>,
    /// Number of entries.
    len: usize,
}

impl<V> Default for IntMap<V> {
    fn default() -> Self {
        IntMap {
            dense: Vec::new(),
            sparse: FxHashMap::default(),
            len: 0,
        }
    }
}

impl<V> IntMap<V> {
    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: i64) -> Option<&V> {
        match usize::try_from(key) {
            Ok(k) if k < self.dense.len() => self.dense[k].as_ref(),
            _ => self.sparse.get(&key),
        }
    }

    /// The value of `key`, inserting `make()` first when absent.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: i64, make: impl FnOnce() -> V) -> &mut V {
        if key >= 0 && key as usize >= self.dense.len() {
            let limit = (2 * self.dense.len() as i64).max(DENSE_FLOOR);
            if key < limit {
                self.grow(key as usize + 1);
            }
        }
        match usize::try_from(key) {
            Ok(k) if k < self.dense.len() => {
                let slot = &mut self.dense[k];
                if slot.is_none() {
                    *slot = Some(make());
                    self.len += 1;
                }
                slot.as_mut().unwrap_or_else(|| unreachable!("just filled"))
            }
            _ => {
                let len = &mut self.len;
                self.sparse.entry(key).or_insert_with(|| {
                    *len += 1;
                    make()
                })
            }
        }
    }

    /// Extends the vector part to `new_len` slots (at least doubling), moving sparse keys it
    /// now covers.
    fn grow(&mut self, new_len: usize) {
        let new_len = new_len.max(self.dense.len() * 2);
        self.dense.resize_with(new_len, || None);
        if !self.sparse.is_empty() {
            let covered: Vec<i64> = self
                .sparse
                .keys()
                .copied()
                .filter(|&k| k >= 0 && (k as usize) < new_len)
                .collect();
            for k in covered {
                if let Some(v) = self.sparse.remove(&k) {
                    self.dense[k as usize] = Some(v);
                }
            }
        }
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Every entry: the vector part in key order, then the hash part in no order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &V)> {
        self.dense
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k as i64, v)))
            .chain(self.sparse.iter().map(|(k, v)| (*k, v)))
    }

    /// Removes and returns every entry, as [`IntMap::iter`] orders them.
    pub fn drain(&mut self) -> Vec<(i64, V)> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(
            std::mem::take(&mut self.dense)
                .into_iter()
                .enumerate()
                .filter_map(|(k, v)| v.map(|v| (k as i64, v))),
        );
        out.extend(self.sparse.drain());
        self.len = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::IntMap;

    #[test]
    fn dense_sparse_and_migrated_keys_all_resolve() {
        let mut map = IntMap::default();
        for k in [5_i64, -3, 1_000_000_000, 9_000, 4_095, 20_000] {
            *map.get_or_insert_with(k, || 0) += k;
        }
        // 9_000 and 20_000 started sparse; growing past them must move them.
        for k in 0..30_000 {
            map.get_or_insert_with(k, || 0);
        }
        assert_eq!(map.get(9_000), Some(&9_000));
        assert_eq!(map.get(20_000), Some(&20_000));
        assert_eq!(map.get(-3), Some(&-3));
        assert_eq!(map.get(1_000_000_000), Some(&1_000_000_000));
        assert_eq!(map.len(), 30_002);
        assert_eq!(map.iter().count(), 30_002);
        assert_eq!(map.drain().len(), 30_002);
        assert_eq!(map.get(5), None);
    }
}
