//! HTTP/1.1 bodies as they go over the wire, for tests that generate messages (property tests
//! of the parsers on either side of the proxy).

/// How [`chunked`] writes its framing: every variation RFC 9112 §7.1 allows a sender, so that
/// a parser under test meets them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkStyle {
    /// Chunk sizes in upper-case hex (`1A`) rather than lower-case (`1a`).
    pub upper_hex: bool,
    /// Each chunk-size line carries extensions (`;name=value` and `;"quoted;value"`).
    pub extensions: bool,
    /// The last chunk is followed by two trailer fields.
    pub trailers: bool,
}

/// `chunks` in the chunked transfer coding, last chunk and trailer section included. Empty
/// chunks are skipped: a zero size would end the body.
pub fn chunked<C: AsRef<[u8]>>(chunks: &[C], style: ChunkStyle) -> Vec<u8> {
    let mut wire = Vec::new();
    let extension: &[u8] = if style.extensions { b";name=value;q=\"a;b\"" } else { b"" };
    for chunk in chunks.iter().map(AsRef::as_ref).filter(|c| !c.is_empty()) {
        let size = if style.upper_hex { format!("{:X}", chunk.len()) } else { format!("{:x}", chunk.len()) };
        wire.extend_from_slice(size.as_bytes());
        wire.extend_from_slice(extension);
        wire.extend_from_slice(b"\r\n");
        wire.extend_from_slice(chunk);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0");
    wire.extend_from_slice(extension);
    wire.extend_from_slice(b"\r\n");
    if style.trailers {
        wire.extend_from_slice(b"X-Checksum: 1\r\nExpires: 0\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire
}

/// `input` cut at `points` (in any order; past the end counts as the end), as the pieces a
/// peer's writes or a socket's reads would give: in order, none empty.
pub fn cut_at(input: &[u8], points: impl IntoIterator<Item = usize>) -> Vec<&[u8]> {
    let mut points: Vec<usize> = points.into_iter().map(|p| p.min(input.len())).collect();
    points.sort_unstable();
    points.push(input.len());
    let mut pieces = Vec::new();
    let mut from = 0;
    for point in points {
        if point > from {
            pieces.push(&input[from..point]);
            from = point;
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_dressed_encodings() {
        assert_eq!(chunked(&[&b"hello"[..], b"", &[b'x'; 26]], ChunkStyle::default()), {
            let mut w = b"5\r\nhello\r\n1a\r\n".to_vec();
            w.extend_from_slice(&[b'x'; 26]);
            w.extend_from_slice(b"\r\n0\r\n\r\n");
            w
        });
        let style = ChunkStyle { upper_hex: true, extensions: true, trailers: true };
        assert_eq!(
            chunked(&[[b'y'; 26]], style),
            [
                &b"1A;name=value;q=\"a;b\"\r\n"[..],
                &[b'y'; 26],
                b"\r\n0;name=value;q=\"a;b\"\r\nX-Checksum: 1\r\nExpires: 0\r\n\r\n"
            ]
            .concat()
        );
        assert_eq!(chunked::<&[u8]>(&[], ChunkStyle::default()), b"0\r\n\r\n");
    }

    #[test]
    fn cuts_in_any_order_give_the_pieces_in_order() {
        assert_eq!(cut_at(b"abcdef", [4, 1, 1, 0, 99]), [&b"a"[..], b"bcd", b"ef"]);
        assert_eq!(cut_at(b"abc", []), [&b"abc"[..]]);
        assert!(cut_at(b"", [0, 3]).is_empty());
    }
}
