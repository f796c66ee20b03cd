//! `Extents`: the unsynced bytes of one file, as a map of non-overlapping byte ranges.

use std::collections::BTreeMap;

/// Bytes written to a file since its last fsync, keyed by start offset.
///
/// Extents never overlap and never touch: a write that overlaps or adjoins existing extents is
/// merged with them, so a file written by appending keeps a single, growing extent.
#[derive(Debug, Default, Clone)]
pub(crate) struct Extents {
    map: BTreeMap<u64, Vec<u8>>,
    /// Sum of the extents' lengths, kept so `bytes()` is O(1).
    bytes: u64,
}

impl Extents {
    /// Number of bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when no bytes are held.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The extents in offset order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.map
            .iter()
            .map(|(&start, bytes)| (start, bytes.as_slice()))
    }

    /// Records `data` at `offset`, replacing whatever was held there.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + len64(data);
        let (start, mut merged) = self.take_extent_reaching(offset);
        let at = usize_of(offset - start);
        if merged.len() < at + data.len() {
            merged.resize(at + data.len(), 0);
        }
        merged[at..at + data.len()].copy_from_slice(data);
        self.swallow_followers(offset, end, &mut merged);
        self.bytes += len64(&merged);
        self.map.insert(start, merged);
    }

    /// Drops every byte at or beyond `size`.
    pub(crate) fn truncate(&mut self, size: u64) {
        let beyond = self.map.split_off(&size);
        self.bytes -= beyond.values().map(|v| len64(v)).sum::<u64>();
        // Only the last extent starting below `size` can reach past it.
        if let Some((&start, last)) = self.map.iter_mut().next_back() {
            let keep = size - start;
            if len64(last) > keep {
                self.bytes -= len64(last) - keep;
                last.truncate(usize_of(keep));
            }
        }
    }

    /// Copies the held bytes that fall in `[offset, offset + buf.len())` over `buf`.
    pub(crate) fn overlay(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + len64(buf);
        let first = self
            .map
            .range(..=offset)
            .next_back()
            .map_or(offset, |(&start, _)| start);
        for (&start, bytes) in self.map.range(first..end) {
            let lo = start.max(offset);
            let hi = (start + len64(bytes)).min(end);
            if lo < hi {
                buf[usize_of(lo - offset)..usize_of(hi - offset)]
                    .copy_from_slice(&bytes[usize_of(lo - start)..usize_of(hi - start)]);
            }
        }
    }

    /// Removes and returns the extent that starts at or before `offset` and reaches it, or an
    /// empty extent starting at `offset` if there is none.
    fn take_extent_reaching(&mut self, offset: u64) -> (u64, Vec<u8>) {
        let reaching = self
            .map
            .range(..=offset)
            .next_back()
            .filter(|(start, bytes)| **start + len64(bytes) >= offset)
            .map(|(&start, _)| start);
        match reaching.and_then(|start| self.map.remove(&start).map(|v| (start, v))) {
            Some((start, bytes)) => {
                self.bytes -= len64(&bytes);
                (start, bytes)
            }
            None => (offset, Vec::new()),
        }
    }

    /// Removes the extents starting in `(offset, end]` (now covered by or adjoining a write
    /// ending at `end`), appending whatever part of them lies beyond `end` to `merged`.
    fn swallow_followers(&mut self, offset: u64, end: u64, merged: &mut Vec<u8>) {
        let followers: Vec<u64> = self.map.range(offset + 1..=end).map(|(&s, _)| s).collect();
        for start in followers {
            if let Some(bytes) = self.map.remove(&start) {
                self.bytes -= len64(&bytes);
                let skip = usize_of(end - start);
                if bytes.len() > skip {
                    merged.extend_from_slice(&bytes[skip..]);
                }
            }
        }
    }
}

fn len64(bytes: &[u8]) -> u64 {
    bytes.len() as u64
}

/// Offsets inside one in-memory extent always fit in memory, hence in `usize`.
fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte-per-slot model: `Some(b)` where a byte is held.
    fn model_apply(model: &mut Vec<Option<u8>>, offset: usize, data: &[u8]) {
        if model.len() < offset + data.len() {
            model.resize(offset + data.len(), None);
        }
        for (i, b) in data.iter().enumerate() {
            model[offset + i] = Some(*b);
        }
    }

    fn check(extents: &Extents, model: &[Option<u8>]) {
        let held = model.iter().filter(|b| b.is_some()).count() as u64;
        assert_eq!(extents.bytes(), held, "byte count");
        // Extents must be sorted, non-empty, not overlapping and not touching.
        let mut prev_end: Option<u64> = None;
        for (start, bytes) in extents.iter() {
            assert!(!bytes.is_empty());
            if let Some(prev) = prev_end {
                assert!(start > prev, "extents touch or overlap at {start}");
            }
            prev_end = Some(start + bytes.len() as u64);
        }
        let mut buf = vec![0xEE; model.len() + 8];
        extents.overlay(0, &mut buf);
        for (i, b) in model.iter().enumerate() {
            assert_eq!(buf[i], b.unwrap_or(0xEE), "byte {i}");
        }
        // A window in the middle sees the same bytes.
        if model.len() > 4 {
            let mut window = vec![0xEE; model.len() / 2];
            let off = model.len() / 4;
            extents.overlay(off as u64, &mut window);
            for (i, b) in window.iter().enumerate() {
                assert_eq!(*b, model[off + i].unwrap_or(0xEE), "window byte {i}");
            }
        }
    }

    #[test]
    fn appends_merge_into_one_extent() {
        let mut e = Extents::default();
        for i in 0..100u64 {
            e.write(i * 3, &[1, 2, 3]);
        }
        assert_eq!(e.iter().count(), 1);
        assert_eq!(e.bytes(), 300);
    }

    #[test]
    fn truncate_cuts_the_straddling_extent() {
        let mut e = Extents::default();
        e.write(0, &[1; 10]);
        e.write(20, &[2; 10]);
        e.truncate(25);
        assert_eq!(e.bytes(), 15);
        e.truncate(5);
        assert_eq!(e.bytes(), 5);
        assert_eq!(e.iter().count(), 1);
        e.truncate(0);
        assert!(e.is_empty());
        assert_eq!(e.bytes(), 0);
    }

    #[test]
    fn random_writes_and_truncates_match_a_byte_model() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _round in 0..50 {
            let mut extents = Extents::default();
            let mut model: Vec<Option<u8>> = Vec::new();
            for _ in 0..200 {
                if next() % 10 == 0 {
                    let size = (next() % 300) as usize;
                    extents.truncate(size as u64);
                    model.truncate(size);
                } else {
                    let offset = (next() % 256) as usize;
                    let len = (next() % 40) as usize;
                    let fill = (next() % 251) as u8;
                    let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                    extents.write(offset as u64, &data);
                    model_apply(&mut model, offset, &data);
                }
                // Trailing unheld slots carry no information.
                while model.last() == Some(&None) {
                    model.pop();
                }
                check(&extents, &model);
            }
        }
    }
}
