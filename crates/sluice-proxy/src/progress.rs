//! Which bytes written to a client count as progress for its connection's idle timer
//! ([`crate::idle`]). On HTTP/1.1 every byte does: it is a response. On HTTP/2 only the
//! frames that carry a response do (`HEADERS`, `CONTINUATION`, `DATA` with a payload); the
//! connection's own frames do not (`SETTINGS`, `PING`, `WINDOW_UPDATE`, `RST_STREAM`,
//! `GOAWAY`, `PRIORITY`). Otherwise a client could hold a connection open for ever by pinging
//! it (each `PING` is answered) while the streams it opened stall at a zero window, where an
//! HTTP/1.1 client that stops reading is closed by the same timer.
//!
//! The protocol is told by the first byte the server writes: an HTTP/1.1 response starts
//! `HTTP/`, an HTTP/2 server starts with its `SETTINGS` frame, whose first byte (the top of a
//! 24-bit length) is never `H`. HTTP/2 frames are followed across writes by their 9-byte
//! headers (RFC 9113 §4.1): a few compares per frame, no copy of a payload.

/// The frame types that carry a response (RFC 9113 §6): `DATA`, `HEADERS`, `CONTINUATION`.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;

/// Where a connection's output stands.
#[derive(Debug, Default)]
pub(crate) enum Progress {
    /// Nothing written yet.
    #[default]
    Unknown,
    /// Every byte counts: HTTP/1.1, or a tunnel's bytes.
    Every,
    /// HTTP/2: the header of the frame being written (`have` bytes of it so far), or the
    /// payload bytes of the current frame still to come.
    Http2 { header: [u8; 9], have: u8, payload_left: u32 },
}

impl Progress {
    /// Every byte counts (tunnels).
    pub(crate) fn every() -> Self {
        Progress::Every
    }

    /// Takes a write of `n` bytes, `pieces` in order (asked for only when the protocol needs
    /// them: the common case of HTTP/1.1 is a compare); whether any of them carries a
    /// response.
    #[inline]
    pub(crate) fn wrote<'a, I: IntoIterator<Item = &'a [u8]>>(&mut self, n: usize, pieces: impl FnOnce() -> I) -> bool {
        match self {
            Progress::Every => n > 0,
            _ => self.walk(pieces()),
        }
    }

    /// [`Progress::wrote`] piece by piece.
    fn walk<'a>(&mut self, pieces: impl IntoIterator<Item = &'a [u8]>) -> bool {
        let mut progress = false;
        for piece in pieces {
            if let Progress::Unknown = self {
                match piece.first() {
                    None => continue,
                    Some(b'H') => *self = Progress::Every,
                    Some(_) => *self = Progress::Http2 { header: [0; 9], have: 0, payload_left: 0 },
                }
            }
            progress |= match self {
                Progress::Unknown => false,
                Progress::Every => !piece.is_empty(),
                Progress::Http2 { header, have, payload_left } => frames(piece, header, have, payload_left),
            };
        }
        progress
    }
}

/// Walks `bytes` of an HTTP/2 output; whether a frame carrying a response starts in them.
fn frames(mut bytes: &[u8], header: &mut [u8; 9], have: &mut u8, payload_left: &mut u32) -> bool {
    let mut progress = false;
    while !bytes.is_empty() {
        if *payload_left > 0 {
            let skip = bytes.len().min(*payload_left as usize);
            bytes = &bytes[skip..];
            *payload_left -= skip as u32;
            continue;
        }
        let take = bytes.len().min(9 - *have as usize);
        header[*have as usize..*have as usize + take].copy_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        *have += take as u8;
        if *have == 9 {
            *have = 0;
            let length = u32::from_be_bytes([0, header[0], header[1], header[2]]);
            progress |= match header[3] {
                DATA => length > 0,
                HEADERS | CONTINUATION => true,
                _ => false,
            };
            *payload_left = length;
        }
    }
    progress
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0, 0, 0, 0, 1];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn http1_output_always_counts() {
        let mut progress = Progress::default();
        assert!(progress.walk([&b"HTTP/1.1 200 OK\r\n\r\n"[..]]));
        assert!(progress.walk([&b"\x00\x00\x08\x06"[..]]), "whatever follows");
        assert!(!progress.walk([&b""[..]]));
    }

    #[test]
    fn http2_connection_frames_do_not_count_response_frames_do() {
        let mut progress = Progress::default();
        let settings = frame(0x4, &[0; 6]);
        let ping_ack = frame(0x6, &[7; 8]);
        let window = frame(0x8, &[0, 0, 1, 0]);
        assert!(!progress.walk([&settings[..]]), "the server preface");
        assert!(!progress.walk([&ping_ack[..], &window[..]]));
        assert!(!progress.walk([&frame(0x0, b"")[..]]), "an empty DATA frame");
        assert!(progress.walk([&frame(0x1, b"hpack")[..]]));
        assert!(progress.walk([&frame(0x0, b"body")[..]]));

        // A frame split across writes, its header too; payload bytes that look like headers.
        let data = frame(0x0, &[0x6; 20]);
        assert!(!progress.walk([&data[..4]]), "half a header");
        assert!(progress.walk([&data[4..12]]), "the header completes: a DATA frame with a payload");
        assert!(!progress.walk([&data[12..]]), "the rest of its payload");
        assert!(!progress.walk([&ping_ack[..]]), "the next frame is read where the last one ended");
        let mut pieces = ping_ack.clone();
        pieces.extend(frame(0x9, b"more"));
        assert!(progress.walk([&pieces[..10], &pieces[10..]]), "a CONTINUATION after a PING, in two pieces");
    }
}
