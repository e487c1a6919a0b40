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

/// Cuts one byte range out of a body that arrives in chunks, chunk by chunk, without copying:
/// what a range reader of a fill, or of an origin body passed through, gives.
#[derive(Debug, Clone, Copy)]
pub struct RangeCut {
    /// Bytes still to pass over before the first one given.
    skip: u64,
    /// Bytes still to give (`None`: up to the end of the body).
    remaining: Option<u64>,
}

impl RangeCut {
    /// The whole body.
    pub fn whole() -> Self {
        Self { skip: 0, remaining: None }
    }

    /// The bytes of `range` (half-open).
    pub fn range(range: Range<u64>) -> Self {
        Self { skip: range.start, remaining: Some(range.end.saturating_sub(range.start)) }
    }

    /// The part of the next chunk that falls in the range; `None` when none of it does (it
    /// lies before the range, or the range is all given).
    pub fn cut(&mut self, chunk: &Bytes) -> Option<Bytes> {
        let len = chunk.len() as u64;
        if len <= self.skip || self.is_done() {
            self.skip = self.skip.saturating_sub(len);
            return None;
        }
        // `skip < len`, and the end is cut to what remains: both fit the chunk.
        let end = self.remaining.map_or(len, |remaining| len.min(self.skip + remaining));
        let part =
            if self.skip == 0 && end == len { chunk.clone() } else { chunk.slice(self.skip as usize..end as usize) };
        self.skip = 0;
        if let Some(remaining) = self.remaining.as_mut() {
            *remaining -= part.len() as u64;
        }
        Some(part)
    }

    /// The range is all given (never, for the whole body).
    pub fn is_done(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Bytes still to give, when the range has an end.
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
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

    #[test]
    fn a_range_cut_gives_the_range_across_chunks_and_nothing_after() {
        let chunks = [Bytes::from_static(b"abc"), Bytes::from_static(b"defg"), Bytes::from_static(b"hij")];
        let run = |mut cut: RangeCut| -> Vec<String> {
            chunks.iter().filter_map(|c| cut.cut(c)).map(|b| String::from_utf8(b.to_vec()).unwrap()).collect()
        };
        assert_eq!(run(RangeCut::whole()), ["abc", "defg", "hij"]);
        assert_eq!(run(RangeCut::range(2..8)), ["c", "defg", "h"]);
        assert_eq!(run(RangeCut::range(4..5)), ["e"]);
        assert_eq!(run(RangeCut::range(3..7)), ["defg"], "a chunk exactly is not copied or cut");
        let mut cut = RangeCut::range(0..3);
        assert_eq!(cut.cut(&chunks[0]).as_deref(), Some(&b"abc"[..]));
        assert!(cut.is_done());
        assert_eq!(cut.remaining(), Some(0));
    }
}
