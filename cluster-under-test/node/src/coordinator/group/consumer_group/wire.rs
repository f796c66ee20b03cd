//! The primitive encodings of Kafka's generated message classes that the consumer-group
//! records use: INT16-prefixed strings in keys, and the flexible (compact, tagged) forms in
//! values. A bounds-checked reader whose every failure is a message, never a panic.

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

/// Writes an INT16-length string (a key field).
pub(super) fn put_string(buf: &mut BytesMut, text: &str) {
    buf.put_i16(text.len() as i16);
    buf.put_slice(text.as_bytes());
}

/// Writes an unsigned varint.
pub(super) fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Writes a COMPACT_STRING.
pub(super) fn put_compact_string(buf: &mut BytesMut, text: &str) {
    put_uvarint(buf, text.len() as u32 + 1);
    buf.put_slice(text.as_bytes());
}

/// Writes a COMPACT_NULLABLE_STRING.
pub(super) fn put_compact_nullable_string(buf: &mut BytesMut, text: Option<&str>) {
    match text {
        None => put_uvarint(buf, 0),
        Some(text) => put_compact_string(buf, text),
    }
}

/// Writes a COMPACT_ARRAY length.
pub(super) fn put_array_len(buf: &mut BytesMut, len: usize) {
    put_uvarint(buf, len as u32 + 1);
}

/// Writes a UUID as Kafka does (16 bytes, most significant first).
pub(super) fn put_uuid(buf: &mut BytesMut, id: Uuid) {
    buf.put_slice(id.as_bytes());
}

/// Writes an empty tagged-field section.
pub(super) fn put_no_tags(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

/// A cursor over a record's bytes.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{n} bytes needed, {} left", self.0.len()));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    pub(super) fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }

    pub(super) fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }

    pub(super) fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(super) fn uuid(&mut self) -> Result<Uuid, String> {
        Ok(Uuid::from_bytes(self.take(16)?.try_into().expect("16")))
    }

    pub(super) fn uvarint(&mut self) -> Result<u32, String> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 5 bytes".to_string())
    }

    fn utf8(&mut self, len: usize) -> Result<String, String> {
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "string is not UTF-8".to_string())
    }

    /// An INT16-length string (null is an error: key fields are never null).
    pub(super) fn string(&mut self) -> Result<String, String> {
        let len = self.i16()?;
        if len < 0 {
            return Err("null string in a key".to_string());
        }
        self.utf8(len as usize)
    }

    pub(super) fn compact_nullable_string(&mut self) -> Result<Option<String>, String> {
        match self.uvarint()? {
            0 => Ok(None),
            len => self.utf8(len as usize - 1).map(Some),
        }
    }

    pub(super) fn compact_string(&mut self) -> Result<String, String> {
        self.compact_nullable_string()?
            .ok_or_else(|| "null where a string is required".to_string())
    }

    /// A COMPACT_ARRAY length (null is an error: these arrays are not nullable).
    pub(super) fn array_len(&mut self) -> Result<usize, String> {
        match self.uvarint()? {
            0 => Err("null array where one is required".to_string()),
            len => {
                let len = len as usize - 1;
                // Every element takes at least one byte: a longer count is a lie.
                if len > self.0.len() {
                    return Err(format!("array of {len} elements in {} bytes", self.0.len()));
                }
                Ok(len)
            }
        }
    }

    /// Skips a tagged-field section (fields this version does not know, as Kafka does).
    pub(super) fn skip_tags(&mut self) -> Result<(), String> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }

    /// Fails when bytes are left over.
    pub(super) fn finish(&self, what: &str) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{what} has {} bytes after its fields",
                self.0.len()
            ))
        }
    }
}
