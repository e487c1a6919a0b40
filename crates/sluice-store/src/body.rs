//! Stored bodies: the complete bytes of an object, as the chunks they arrived in.

use bytes::{Bytes, BytesMut};
use std::ops::Range;

/// Objects up to this size are coalesced into one chunk when they complete, so a hit is
/// sent with a single write.
const COALESCE_LIMIT: usize = 256 * 1024;

/// A complete body. Cheap to share: chunks are reference-counted [`Bytes`].
#[derive(Debug, Clone, Default)]
pub struct StoredBody {
    chunks: Vec<Bytes>,
    len: u64,
}

impl StoredBody {
    /// A body made of `chunks`; small multi-chunk bodies are coalesced into one chunk.
    pub fn new(chunks: Vec<Bytes>) -> Self {
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        let chunks = if chunks.len() > 1 && len as usize <= COALESCE_LIMIT {
            let mut one = BytesMut::with_capacity(len as usize);
            for c in &chunks {
                one.extend_from_slice(c);
            }
            vec![one.freeze()]
        } else {
            chunks.into_iter().filter(|c| !c.is_empty()).collect()
        };
        Self { chunks, len }
    }

    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a zero-length body.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All chunks, in order.
    pub fn chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    /// The chunks covering `range` (half-open, within `0..len`), sliced without copying.
    pub fn slice(&self, range: Range<u64>) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut offset = 0u64;
        for chunk in &self.chunks {
            let end = offset + chunk.len() as u64;
            if end > range.start && offset < range.end {
                let from = range.start.saturating_sub(offset) as usize;
                let to = (range.end.min(end) - offset) as usize;
                out.push(chunk.slice(from..to));
            }
            offset = end;
            if offset >= range.end {
                break;
            }
        }
        out
    }
}

/// An iterator-like cursor over chunks to send, used by response bodies.
#[derive(Debug, Default)]
pub struct BodyChunks {
    chunks: std::collections::VecDeque<Bytes>,
}

impl BodyChunks {
    /// Chunks to send in order.
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        Self { chunks: chunks.into_iter().filter(|c| !c.is_empty()).collect() }
    }

    /// The next chunk, if any.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        self.chunks.pop_front()
    }

    /// Bytes not yet taken.
    pub fn remaining(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }

    /// True when every chunk was taken.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_are_coalesced_into_one_chunk() {
        let body = StoredBody::new(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]);
        assert_eq!(body.chunks().len(), 1);
        assert_eq!(body.len(), 4);
    }

    #[test]
    fn slice_crosses_chunk_boundaries_without_copying() {
        let big = vec![Bytes::from(vec![1u8; COALESCE_LIMIT]), Bytes::from(vec![2u8; 10])];
        let body = StoredBody::new(big);
        assert_eq!(body.chunks().len(), 2);
        let parts = body.slice(COALESCE_LIMIT as u64 - 2..COALESCE_LIMIT as u64 + 3);
        let flat: Vec<u8> = parts.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(flat, vec![1, 1, 2, 2, 2]);
    }
}
