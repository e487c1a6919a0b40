//! Range requests answered from a complete stored representation, RFC 9110 §14.

use http::header::HeaderMap;
use http::Method;
use std::ops::Range;

/// What to send for a request that may carry `Range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Send the whole representation with its own status (no `Range`, not GET, a failed
    /// `If-Range`, a `Range` unit other than `bytes`, or a syntactically invalid `Range`,
    /// all of which §14.2 says to ignore).
    Full,
    /// Send 206 with these byte ranges (half-open), in request order, overlapping ones
    /// coalesced; one range means a single-part 206, several a `multipart/byteranges` one.
    Partial(Vec<Range<u64>>),
    /// Send 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Evaluates `Range` (and `If-Range`, strong comparison against the stored `ETag` or exact
/// `Last-Modified` date) of a GET against a stored 200 of `len` bytes with headers `stored`.
/// At most 64 ranges are honoured; more is treated as invalid (`Full`).
pub fn evaluate(method: &Method, request: &HeaderMap, stored: &HeaderMap, len: u64) -> RangeOutcome {
    let _ = (method, request, stored, len);
    todo!()
}

/// The `Content-Range` value `bytes first-last/len` of one part.
pub fn content_range(range: &Range<u64>, len: u64) -> String {
    format!("bytes {}-{}/{}", range.start, range.end - 1, len)
}

/// One part of a `multipart/byteranges` body: the part's header block (starting with the
/// boundary delimiter line) and the byte range that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub head: String,
    pub range: Range<u64>,
}

/// Lays out a `multipart/byteranges` body (RFC 9110 §14.6): returns the parts and the
/// closing delimiter; the body is `part.head, bytes[part.range]` for each part, then the
/// closing delimiter. `content_type` is the stored `Content-Type`, if any.
pub fn multipart_layout(ranges: &[Range<u64>], len: u64, content_type: Option<&str>, boundary: &str) -> (Vec<Part>, String) {
    let _ = (ranges, len, content_type, boundary);
    todo!()
}
