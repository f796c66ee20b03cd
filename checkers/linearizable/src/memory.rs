//! Byte accounting for the search's own structures (visited cache, state
//! table, linked list, stack, bitsets), so the memory budget is decided from
//! numbers the search computes itself: the same history gives the same
//! answer on every machine, whatever the allocator or the OS report.
//!
//! Sizes come from `Vec`/`HashMap` capacities; a hash map's table is
//! estimated as hashbrown lays it out (power-of-two buckets at a load factor
//! of 7/8, one control byte per bucket plus a group of padding).

use std::mem::size_of;

/// Bytes of a vector's allocation.
pub(crate) fn vec_bytes<T>(vec: &Vec<T>) -> u64 {
    (vec.capacity() * size_of::<T>()) as u64
}

/// Bytes a push would newly allocate (0 when it fits): `Vec` doubles, with a
/// minimum of 4 elements.
pub(crate) fn vec_push_growth<T>(vec: &Vec<T>, pushed: usize) -> u64 {
    let needed = vec.len() + pushed;
    if needed <= vec.capacity() {
        return 0;
    }
    (needed.max(vec.capacity() * 2).max(4) * size_of::<T>()) as u64
}

/// Buckets hashbrown uses for a map of `capacity`.
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..=3 => 4,
        4..=7 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// Bytes of a hash map's table for `capacity` entries of `entry` bytes.
pub(crate) fn map_bytes(capacity: usize, entry: usize) -> u64 {
    let buckets = buckets(capacity);
    if buckets == 0 {
        0
    } else {
        (buckets * (entry + 1) + 16) as u64
    }
}

/// Bytes one more insert would newly allocate in a map holding `len` of
/// `capacity` (0 when it fits): the table doubles its buckets.
pub(crate) fn map_insert_growth(len: usize, capacity: usize, entry: usize) -> u64 {
    if len < capacity {
        return 0;
    }
    let buckets = (buckets(capacity) * 2).max(4);
    (buckets * (entry + 1) + 16) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_growth_is_zero_until_full_then_doubles() {
        let mut vec: Vec<u64> = Vec::with_capacity(4);
        assert_eq!(vec_push_growth(&vec, 1), 0);
        vec.extend([1, 2, 3, 4]);
        assert_eq!(vec_push_growth(&vec, 1), 64);
        assert_eq!(vec_bytes(&vec), 32);
    }

    #[test]
    fn map_growth_doubles_buckets() {
        assert_eq!(map_insert_growth(3, 7, 12), 0);
        assert_eq!(map_bytes(7, 12), 8 * 13 + 16);
        assert_eq!(map_insert_growth(7, 7, 12), 16 * 13 + 16);
    }
}
