//! Body pieces as body phases see and edit them.

use bytes::{Bytes, BytesMut};

/// The body data of one body-phase call: one chunk as it streams, or the whole body after
/// [`crate::Flow::Buffer`]. A module may read, replace, prepend, append, inject (insert at an
/// offset) or drop the data; the next module sees the result.
#[derive(Debug, Clone, Default)]
pub struct BodyChunk {
    data: Bytes,
    end: bool,
    changed: bool,
}

impl BodyChunk {
    /// A piece of body; `end` when it is the last one.
    pub fn new(data: Bytes, end: bool) -> Self {
        Self { data, end, changed: false }
    }

    /// The bytes of this piece.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// True on the last call for this body (then more data may still be appended).
    pub fn is_end(&self) -> bool {
        self.end
    }

    /// True when a module changed this piece.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// Replaces the data.
    pub fn replace(&mut self, data: impl Into<Bytes>) {
        self.data = data.into();
        self.changed = true;
    }

    /// Inserts `data` before this piece.
    pub fn prepend(&mut self, data: &[u8]) {
        let mut out = BytesMut::with_capacity(data.len() + self.data.len());
        out.extend_from_slice(data);
        out.extend_from_slice(&self.data);
        self.replace(out.freeze());
    }

    /// Appends `data` after this piece (on the last piece: at the end of the body).
    pub fn append(&mut self, data: &[u8]) {
        let mut out = BytesMut::with_capacity(data.len() + self.data.len());
        out.extend_from_slice(&self.data);
        out.extend_from_slice(data);
        self.replace(out.freeze());
    }

    /// Injects `data` at byte offset `at` of this piece (say, after an HTML `<body>` tag the
    /// module found in it). `at` past the end appends.
    pub fn inject(&mut self, at: usize, data: &[u8]) {
        let at = at.min(self.data.len());
        let mut out = BytesMut::with_capacity(data.len() + self.data.len());
        out.extend_from_slice(&self.data[..at]);
        out.extend_from_slice(data);
        out.extend_from_slice(&self.data[at..]);
        self.replace(out.freeze());
    }

    /// Drops this piece's data.
    pub fn clear(&mut self) {
        self.replace(Bytes::new());
    }

    /// Takes the data out (the host uses this to pass it on).
    pub fn into_data(self) -> Bytes {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_compose_and_mark_the_piece_changed() {
        let mut chunk = BodyChunk::new(Bytes::from_static(b"middle"), true);
        assert!(!chunk.is_changed());
        chunk.prepend(b"<");
        chunk.append(b">");
        assert_eq!(chunk.data().as_ref(), b"<middle>");
        assert!(chunk.is_changed());
        chunk.inject(4, b"-");
        assert_eq!(chunk.data().as_ref(), b"<mid-dle>");
        chunk.inject(99, b"!");
        assert_eq!(chunk.data().as_ref(), b"<mid-dle>!");
        chunk.clear();
        assert!(chunk.data().is_empty());
    }
}
