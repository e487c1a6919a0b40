//! Validation of stored responses with the origin, RFC 9111 §4.3.

use http::header::HeaderMap;

/// Adds `If-None-Match` (from a stored `ETag`) and `If-Modified-Since` (from a stored
/// `Last-Modified`) to `outgoing`, replacing conditionals already present. Returns false
/// when the stored response has no validator (then no conditional is added).
pub fn add_validators(outgoing: &mut HeaderMap, stored: &HeaderMap) -> bool {
    let _ = (outgoing, stored);
    todo!()
}

/// Does a 304 with headers `not_modified` select the stored response `stored` (§4.3.4)?
/// Strong ETag match when the 304 has a strong ETag; else `Last-Modified` equality when the
/// 304 has one; else true when the stored response is the only candidate (the caller passes
/// `only_candidate`).
pub fn not_modified_selects(stored: &HeaderMap, not_modified: &HeaderMap, only_candidate: bool) -> bool {
    let _ = (stored, not_modified, only_candidate);
    todo!()
}

/// Freshens stored header fields from a 304 (§3.2, §4.3.4): every field in `not_modified`
/// replaces the stored field of that name, except hop-by-hop fields, `Content-Length`,
/// `Content-Encoding`, `Content-Type`, `Content-Range`, `Transfer-Encoding` and `ETag` of a
/// different strength (the stored body's description stays the stored body's).
pub fn freshen_from_304(stored: &mut HeaderMap, not_modified: &HeaderMap) {
    let _ = (stored, not_modified);
    todo!()
}
