//! The fixed header at the start of every object file.
//!
//! ```text
//! offset size field
//!      0    8 magic          b"SLUICEOB"
//!      8    2 version        FORMAT_VERSION (little-endian, like every integer here)
//!     10    2 flags          0 (reserved)
//!     12    4 meta_len       bytes of encoded metadata, starting at HEADER_LEN
//!     16    8 body_offset    where the body starts (>= HEADER_LEN + meta_len; 4 KiB-aligned for large bodies)
//!     24    8 body_len       body bytes; the file is exactly body_offset + body_len long
//!     32    8 id             the variant id (xxh3 of key and Vary key), also in the file name
//!     40    8 generation     write sequence number, also in the file name; the highest wins
//!     48    8 meta_hash      xxh3-64 of the metadata bytes
//!     56    8 body_hash      xxh3-64 of the body bytes
//!     64   56 reserved       zeros
//!    120    8 header_hash    xxh3-64 of bytes 0..120
//! ```

use twox_hash::XxHash3_64;

pub const MAGIC: &[u8; 8] = b"SLUICEOB";
pub const FORMAT_VERSION: u16 = 1;
pub const HEADER_LEN: usize = 128;
/// Bodies at least this large (or of unknown length) start on a page boundary, so the page
/// cache pages `sendfile` moves hold body bytes only.
pub const ALIGN_BODIES_FROM: u64 = 64 * 1024;
pub const PAGE: u64 = 4096;
/// Metadata larger than this is refused (and treated as corrupt when read back).
pub const MAX_META_LEN: usize = 1 << 20;

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub meta_len: u32,
    pub body_offset: u64,
    pub body_len: u64,
    pub id: u64,
    pub generation: u64,
    pub meta_hash: u64,
    pub body_hash: u64,
}

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    BadMagic,
    BadChecksum,
    UnsupportedVersion(u16),
    Inconsistent,
}

impl Header {
    /// The file length this header describes.
    pub fn file_len(&self) -> u64 {
        self.body_offset + self.body_len
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.meta_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.body_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.body_len.to_le_bytes());
        b[32..40].copy_from_slice(&self.id.to_le_bytes());
        b[40..48].copy_from_slice(&self.generation.to_le_bytes());
        b[48..56].copy_from_slice(&self.meta_hash.to_le_bytes());
        b[56..64].copy_from_slice(&self.body_hash.to_le_bytes());
        let hash = XxHash3_64::oneshot(&b[..HEADER_LEN - 8]);
        b[HEADER_LEN - 8..].copy_from_slice(&hash.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, HeaderError> {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if &b[0..8] != MAGIC {
            return Err(HeaderError::BadMagic);
        }
        if XxHash3_64::oneshot(&b[..HEADER_LEN - 8]) != u64_at(HEADER_LEN - 8) {
            return Err(HeaderError::BadChecksum);
        }
        let version = u16_at(8);
        if version != FORMAT_VERSION {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let header = Header {
            meta_len: u32_at(12),
            body_offset: u64_at(16),
            body_len: u64_at(24),
            id: u64_at(32),
            generation: u64_at(40),
            meta_hash: u64_at(48),
            body_hash: u64_at(56),
        };
        let meta_end = HEADER_LEN as u64 + u64::from(header.meta_len);
        if header.meta_len as usize > MAX_META_LEN
            || header.body_offset < meta_end
            || header.body_offset.checked_add(header.body_len).is_none()
        {
            return Err(HeaderError::Inconsistent);
        }
        Ok(header)
    }
}

/// Where the body starts for metadata of `meta_len` bytes and a body expected to be
/// `expected_body` bytes (`None`: unknown).
pub fn body_offset(meta_len: usize, expected_body: Option<u64>) -> u64 {
    let end = (HEADER_LEN + meta_len) as u64;
    match expected_body {
        Some(n) if n < ALIGN_BODIES_FROM => end,
        _ => end.div_ceil(PAGE) * PAGE,
    }
}

/// Bytes of disk an object file of `file_len` bytes is charged for: whole 4 KiB blocks.
pub fn charge(file_len: u64) -> u64 {
    file_len.div_ceil(PAGE).max(1) * PAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            meta_len: 300,
            body_offset: 4096,
            body_len: 1 << 22,
            id: 0xabcd,
            generation: 7,
            meta_hash: 1,
            body_hash: 2,
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(Header::decode(&header().encode()), Ok(header()));
    }

    #[test]
    fn any_flipped_byte_is_refused() {
        let good = header().encode();
        for i in 0..HEADER_LEN {
            let mut b = good;
            b[i] ^= 0x40;
            assert!(Header::decode(&b).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn large_bodies_are_page_aligned_small_ones_follow_the_metadata() {
        assert_eq!(body_offset(100, Some(1 << 20)), 4096);
        assert_eq!(body_offset(100, None), 4096);
        assert_eq!(body_offset(100, Some(10)), 228);
        assert_eq!(body_offset(5000, Some(1 << 20)), 8192);
    }
}
