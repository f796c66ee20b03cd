//! The record-batch decoder the node loads coordinator state and controller records and looks
//! offsets up by timestamp with (the vendored kafka-protocol's `RecordBatchDecoder`): inputs the
//! fuzzer found that once aborted the process, and decompression bombs, must now fail or decode;
//! real batches of every codec still decode.

mod common;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

/// A batch whose header claims a billion records (found by the `record_batch` fuzz target):
/// the decoder the node loads coordinator and controller records with reserved room for all of
/// them up front, and the allocation failure aborted the process. It must fail or decode.
#[test]
fn a_batch_claiming_a_billion_records_does_not_abort_the_decoder() {
    let input: &[u8] = &[
        0x7f, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x8f, 0x5e, 0x5e, 0xff,
        0xef, 0x02, 0x94, 0x24, 0xdd, 0x76, 0x7f, 0x00, 0xff, 0xff, 0xff, 0x00, 0x3e, 0x3e, 0x3e,
        0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x8e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
        0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
        0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x00, 0x05, 0xe4, 0xe4, 0xe4, 0x60, 0x60, 0x60,
        0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60,
        0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60, 0x60,
        0x60, 0xe4, 0xe4, 0x2a, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xe4, 0xdf,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x1c, 0x1b, 0x1b, 0x1b, 0x1b, 0xff, 0x09,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe4, 0xe4,
        0xc4, 0xe4, 0xe4, 0x2b, 0x0a,
    ];
    assert_eq!(
        &input[57..61],
        &0x3e3e_3e3e_i32.to_be_bytes(),
        "the claimed record count"
    );
    let mut bytes = Bytes::copy_from_slice(input);
    let decoded = RecordBatchDecoder::decode_all(&mut bytes);
    assert!(
        decoded.is_err(),
        "a batch with fewer records than it claims is refused"
    );
}

/// A v2 batch of one record whose (compressed) records section is `records`, with a valid CRC.
fn compressed_batch(codec: i16, records: &[u8]) -> Bytes {
    let mut body = Vec::new(); // from attributes to the end: what the CRC covers
    body.extend_from_slice(&codec.to_be_bytes()); // attributes: the compression codec
    body.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    body.extend_from_slice(&0i64.to_be_bytes()); // base timestamp
    body.extend_from_slice(&0i64.to_be_bytes()); // max timestamp
    body.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    body.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    body.extend_from_slice(&1i32.to_be_bytes()); // record count
    body.extend_from_slice(records);
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    batch.extend_from_slice(&((4 + 1 + 4 + body.len()) as i32).to_be_bytes()); // batch length
    batch.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    batch.extend_from_slice(&body);
    Bytes::from(batch)
}

/// Decompression bombs: a few hundred KiB of gzip or zstd that inflate past the decoder's
/// 256 MiB bound (vendor/kafka-protocol's README.logjam.md, change 3). Unbounded, a handful of
/// them in a log asked the allocator for gigabytes; now decoding fails and nothing is
/// allocated past the bound.
#[test]
fn a_compressed_batch_inflating_past_the_bound_fails_to_decode() {
    use std::io::{Read, Write};
    const INFLATED: u64 = 300 << 20;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::copy(&mut std::io::repeat(0).take(INFLATED), &mut gzip).unwrap();
    let gzip = gzip.finish().unwrap();
    let zstd = zstd::stream::encode_all(std::io::repeat(0).take(INFLATED), 1).unwrap();
    for (codec, name, records) in [(1, "gzip", gzip), (4, "zstd", zstd)] {
        assert!(
            records.len() < 2 << 20,
            "{name} bomb is {} bytes",
            records.len()
        );
        let mut batch = compressed_batch(codec, &records);
        let error = RecordBatchDecoder::decode(&mut batch).expect_err(name);
        assert!(error.to_string().contains("more than"), "{name}: {error}");
    }
    // The bound leaves real batches alone: a compressed batch of one small record decodes.
    let mut small = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // One record: length 7, attributes, timestamp and offset deltas 0, no key, value "x".
    small
        .write_all(&[0x0e, 0, 0, 0, 0x01, 0x02, b'x', 0])
        .unwrap();
    let mut batch = compressed_batch(1, &small.finish().unwrap());
    let decoded = RecordBatchDecoder::decode(&mut batch).expect("a small gzip batch decodes");
    assert_eq!(decoded.records.len(), 1);
}

/// The bound leaves real batches of every codec alone: a batch of three records encoded with
/// each compression decodes back unchanged through the bounded decompressors.
#[test]
fn batches_of_every_codec_round_trip_through_the_bounded_decoder() {
    use kafka_protocol::records::Compression;
    let value = vec![b'v'; 1000];
    let timestamps = [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002];
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut batch = common::timed_batch(&timestamps, &value, compression);
        let decoded = RecordBatchDecoder::decode(&mut batch)
            .unwrap_or_else(|error| panic!("{compression:?}: {error}"));
        assert_eq!(decoded.compression, compression);
        let seen: Vec<(i64, Option<Bytes>)> = decoded
            .records
            .iter()
            .map(|r| (r.timestamp, r.value.clone()))
            .collect();
        let expected: Vec<(i64, Option<Bytes>)> = timestamps
            .iter()
            .map(|t| (*t, Some(Bytes::from(value.clone()))))
            .collect();
        assert_eq!(seen, expected, "{compression:?}");
    }
}
