//! Kafka's built-in partitioner (KIP-794, `BuiltInPartitioner`): murmur2 of the key over all
//! partitions for keyed records; "uniform sticky" for records without a key (or with
//! `partitioner.ignore.keys`), staying on one partition until `batch.size` bytes have gone
//! to it and then moving to another one chosen at random.
//!
//! Pure and deterministic given its seed. Adaptive partitioning (weighting the next sticky
//! partition by queue length) is not implemented: the next partition is uniform.

use std::collections::HashMap;

/// Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, seed `0x9747b28c`, little-endian 4-byte
/// blocks. Returns Java's signed int.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut blocks = data.chunks_exact(4);
    for block in blocks.by_ref() {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % numPartitions`.
pub fn partition_for_key(key: &[u8], partition_count: usize) -> i32 {
    assert!(partition_count > 0, "a topic has at least one partition");
    let positive = (murmur2(key) & 0x7fff_ffff) as usize;
    (positive % partition_count) as i32
}

#[derive(Debug, Clone, Copy)]
struct Sticky {
    partition: i32,
    bytes_produced: usize,
}

/// Chooses partitions for records, remembering the sticky partition per topic.
#[derive(Debug)]
pub struct Partitioner {
    batch_size: usize,
    ignore_keys: bool,
    sticky: HashMap<String, Sticky>,
    /// xorshift64 state: randomness is owned and seedable.
    rng: u64,
}

impl Partitioner {
    /// A partitioner with `batch.size`, `partitioner.ignore.keys` and an RNG seed.
    pub fn new(batch_size: usize, ignore_keys: bool, seed: u64) -> Partitioner {
        Partitioner {
            batch_size,
            ignore_keys,
            sticky: HashMap::new(),
            rng: seed | 1,
        }
    }

    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// The partition for a record of `size_bytes` with `key` in a topic of `partition_count`
    /// partitions, and accounts its bytes to the sticky partition.
    pub fn partition(
        &mut self,
        topic: &str,
        key: Option<&[u8]>,
        size_bytes: usize,
        partition_count: usize,
    ) -> i32 {
        if let Some(key) = key.filter(|_| !self.ignore_keys) {
            return partition_for_key(key, partition_count);
        }
        let current = self.sticky.get(topic).copied();
        let mut sticky = match current {
            Some(s)
                if (s.partition as usize) < partition_count
                    && s.bytes_produced < self.batch_size =>
            {
                s
            }
            previous => {
                let mut partition = (self.next_random() % partition_count as u64) as i32;
                if let Some(previous) = previous
                    && partition_count > 1
                    && partition == previous.partition
                {
                    partition = (partition + 1) % partition_count as i32;
                }
                Sticky {
                    partition,
                    bytes_produced: 0,
                }
            }
        };
        sticky.bytes_produced += size_bytes;
        self.sticky.insert(topic.to_owned(), sticky);
        sticky.partition
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors of Kafka's `UtilsTest.testMurmur2`: any difference would send keys to different
    /// partitions than every other Kafka client.
    #[test]
    fn murmur2_matches_kafkas_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input),
                expected,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn keyed_records_always_land_on_the_same_partition() {
        let mut partitioner = Partitioner::new(16384, false, 7);
        let first = partitioner.partition("t", Some(b"k"), 100, 6);
        for _ in 0..100 {
            assert_eq!(partitioner.partition("t", Some(b"k"), 100, 6), first);
        }
        assert_eq!(first, partition_for_key(b"k", 6));
    }

    #[test]
    fn null_keys_stick_until_batch_size_bytes_then_switch() {
        let mut partitioner = Partitioner::new(1000, false, 42);
        let first = partitioner.partition("t", None, 400, 4);
        assert_eq!(partitioner.partition("t", None, 400, 4), first);
        assert_eq!(partitioner.partition("t", None, 400, 4), first); // 1200 >= 1000 now
        let next = partitioner.partition("t", None, 400, 4);
        assert_ne!(next, first);
    }

    #[test]
    fn ignore_keys_makes_keyed_records_sticky() {
        let mut partitioner = Partitioner::new(1_000_000, true, 3);
        let first = partitioner.partition("t", Some(b"a"), 10, 8);
        for key in [b"b", b"c", b"d"] {
            assert_eq!(partitioner.partition("t", Some(key), 10, 8), first);
        }
    }
}
