//! Provides compression utilities for encoding records.
//!
//! This module has implementations of gzip, Snappy, as well as a noop compression format that
//! allows encoding and decoding records into a [`Record`](crate::records::Record).

use crate::protocol::buf::{ByteBuf, ByteBufMut};
use anyhow::Result;

/// logjam patch: the most bytes one compressed record batch may decompress to. Without a bound
/// a few KiB of gzip or zstd (a "decompression bomb") ask for gigabytes and abort the process
/// in the allocator. Kafka's producers build batches inside `buffer.memory` (32 MiB by
/// default), so 256 MiB leaves real batches far inside it.
pub const MAX_DECOMPRESSED_BYTES: usize = 256 * 1024 * 1024;

/// logjam patch: reads `reader` to its end into a buffer, failing past
/// [`MAX_DECOMPRESSED_BYTES`] instead of allocating without bound.
#[allow(dead_code)]
fn read_bounded(reader: impl std::io::Read, codec: &str) -> Result<bytes::Bytes> {
    use std::io::Read as _;
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|error| anyhow::anyhow!("Failed to decompress {codec}: {error}"))?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        anyhow::bail!("{codec} batch decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes");
    }
    Ok(bytes::Bytes::from(out))
}

#[cfg(feature = "gzip")]
mod gzip;
#[cfg(feature = "lz4")]
mod lz4;
mod none;
#[cfg(feature = "snappy")]
mod snappy;
#[cfg(feature = "zstd")]
mod zstd;

#[cfg(feature = "gzip")]
pub use gzip::Gzip;
#[cfg(feature = "lz4")]
pub use lz4::Lz4;
pub use none::None;
#[cfg(feature = "snappy")]
pub use snappy::Snappy;
#[cfg(feature = "zstd")]
pub use zstd::Zstd;

/// A trait for record compression algorithms.
pub trait Compressor<B: ByteBufMut> {
    /// Target buffer type for compression.
    type BufMut: ByteBufMut;
    /// Compresses into provided [`ByteBufMut`], with records encoded by `F` into `R`.
    fn compress<R, F>(buf: &mut B, f: F) -> Result<R>
    where
        F: FnOnce(&mut Self::BufMut) -> Result<R>;
}

/// A trait for record decompression algorithms.
pub trait Decompressor<B: ByteBuf> {
    /// Target buffer type for decompression.
    type Buf: ByteBuf;
    /// Decompress records from `B` mapped using `F` into `R`.
    fn decompress<R, F>(buf: &mut B, f: F) -> Result<R>
    where
        F: FnOnce(&mut Self::Buf) -> Result<R>;
}
