//! Reading a stored object in pieces (seed 000's `DR_ObjReadStart` / `ReadPart` / `ReadDone`).

use crate::CacheError;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use std::collections::VecDeque;
use std::ops::Range;

/// An open stored response: its head, and its body handed out chunk by chunk without
/// copying. Holding a reader keeps the bytes alive even if the object is evicted or deleted
/// meanwhile; dropping it is `ReadDone`.
#[derive(Debug, Clone)]
pub struct ObjectReader {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Length of the whole stored body.
    pub size: u64,
    /// The part of the body this reader yields (`0..size` unless narrowed by [`Self::range`]).
    pub range: Range<u64>,
    chunks: VecDeque<Bytes>,
}

impl ObjectReader {
    /// A reader over a whole body made of `chunks`.
    pub fn new(status: StatusCode, headers: HeaderMap, chunks: impl IntoIterator<Item = Bytes>) -> Self {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let size = chunks.iter().map(|c| c.len() as u64).sum();
        Self { status, headers, size, range: 0..size, chunks }
    }

    /// Narrows the reader to the bytes `range` of the body (half-open). Fails with
    /// [`CacheError::BadRange`] unless `range` is non-empty and inside `0..size`.
    pub fn range(mut self, range: Range<u64>) -> Result<Self, CacheError> {
        if range.start >= range.end || range.end > self.size {
            return Err(CacheError::BadRange(format!(
                "bytes {}-{} are not within the {}-byte body",
                range.start,
                range.end.saturating_sub(1),
                self.size
            )));
        }
        let mut out = VecDeque::new();
        let mut offset = 0u64;
        for chunk in self.chunks.drain(..) {
            let end = offset + chunk.len() as u64;
            if end > range.start && offset < range.end {
                let from = range.start.saturating_sub(offset) as usize;
                let to = (range.end.min(end) - offset) as usize;
                out.push_back(chunk.slice(from..to));
            }
            offset = end;
        }
        self.chunks = out;
        self.range = range;
        Ok(self)
    }

    /// Bytes still to be read.
    pub fn remaining(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }

    /// The next piece of the body (`ReadPart`), `None` at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        self.chunks.pop_front()
    }

    /// Everything left, in one buffer (copies unless it is a single chunk).
    pub fn read_to_end(mut self) -> Bytes {
        if self.chunks.len() == 1 {
            return self.chunks.pop_front().unwrap_or_default();
        }
        let mut all = bytes::BytesMut::with_capacity(self.remaining() as usize);
        self.chunks.iter().for_each(|c| all.extend_from_slice(c));
        all.freeze()
    }

    /// The remaining chunks, for a streamed response body.
    pub fn into_chunks(self) -> VecDeque<Bytes> {
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> ObjectReader {
        let chunks = [Bytes::from_static(b"hello "), Bytes::from_static(b""), Bytes::from_static(b"world")];
        ObjectReader::new(StatusCode::OK, HeaderMap::new(), chunks)
    }

    #[test]
    fn ranges_slice_across_chunks() {
        assert_eq!(reader().size, 11);
        assert_eq!(reader().range(4..8).unwrap().read_to_end(), "o wo");
        assert_eq!(reader().range(0..11).unwrap().read_to_end(), "hello world");
        let mut r = reader().range(6..11).unwrap();
        assert_eq!(r.remaining(), 5);
        assert_eq!(r.next_chunk().unwrap(), "world");
        assert!(r.next_chunk().is_none());
    }

    #[test]
    fn empty_or_outside_ranges_are_refused() {
        assert!(matches!(reader().range(3..3), Err(CacheError::BadRange(_))));
        assert!(matches!(reader().range(5..12), Err(CacheError::BadRange(_))));
        assert!(matches!(reader().range(11..12), Err(CacheError::BadRange(_))));
    }
}
