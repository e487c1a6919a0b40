//! Validation of stored responses with the origin, RFC 9111 §4.3.

use crate::dates::header_date;
use crate::etag;
use crate::hop::{connection_listed, is_hop_by_hop};
use http::header::{
    HeaderMap, HeaderName, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_MATCH,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, TRANSFER_ENCODING,
};

/// Adds `If-None-Match` (from a stored `ETag`) and `If-Modified-Since` (from a stored
/// `Last-Modified`) to `outgoing`, replacing conditionals already present. Returns false
/// when the stored response has no validator (then no conditional is added).
///
/// Every precondition field (`If-Match`, `If-None-Match`, `If-Modified-Since`,
/// `If-Unmodified-Since`, `If-Range`) already in `outgoing` is removed in both cases: the
/// client's preconditions are about the client's copy, and the cache answers them itself
/// from the (re)validated response ([`crate::conditional::evaluate`]), whereas the origin's
/// answer must be about the stored response. Only a syntactically valid `ETag` and a valid
/// HTTP-date `Last-Modified` count as validators.
pub fn add_validators(outgoing: &mut HeaderMap, stored: &HeaderMap) -> bool {
    for name in [IF_MATCH, IF_NONE_MATCH, IF_MODIFIED_SINCE, IF_UNMODIFIED_SINCE, IF_RANGE] {
        outgoing.remove(name);
    }
    let mut added = false;
    if let Some(value) = stored.get(ETAG).filter(|v| etag::parse(v.as_bytes()).is_some()) {
        outgoing.insert(IF_NONE_MATCH, value.clone());
        added = true;
    }
    if let Some(value) = stored.get(LAST_MODIFIED).filter(|v| crate::dates::parse_http_date(v).is_some()) {
        outgoing.insert(IF_MODIFIED_SINCE, value.clone());
        added = true;
    }
    added
}

/// Does a 304 with headers `not_modified` select the stored response `stored` (§4.3.4)?
/// `only_candidate`: `stored` is the one stored response the request could have selected,
/// and the request's preconditions are its validators ([`add_validators`]).
///
/// Strong ETag match when the 304 has a strong ETag; else, when the 304 carries weak
/// validators (a weak ETag, `Last-Modified`), all of them must match the stored ones (weak
/// ETag comparison, `Last-Modified` equality); else, with no validator in the 304, true when
/// `stored` is the only candidate.
///
/// That last case goes beyond §4.3.4's letter, which selects a lone candidate only if it has
/// no validator either (its example: a client's `If-Modified-Since` taken from elsewhere). A
/// server answering the cache's own `If-Modified-Since` need not repeat `Last-Modified` in
/// its 304 (RFC 9110 §15.4.5 lists `ETag`, `Date`, `Vary`, `Content-Location`,
/// `Cache-Control` and `Expires` only), and many do not (Python's `http.server`, for one):
/// by the letter, every revalidation of a response validated by date alone would take a
/// second, unconditional fetch. The 304 answers preconditions built from `stored` and from
/// nothing else, so it can only be about `stored`; Squid, Varnish, nginx and browsers use it
/// the same way.
pub fn not_modified_selects(stored: &HeaderMap, not_modified: &HeaderMap, only_candidate: bool) -> bool {
    let stored_tag = etag::stored(stored);
    let new_tag = etag::stored(not_modified);
    if let Some(tag) = new_tag.filter(|t| !t.weak) {
        return stored_tag.is_some_and(|s| s.strong_eq(&tag));
    }
    let new_last_modified = header_date(not_modified, &LAST_MODIFIED);
    if new_tag.is_some() || new_last_modified.is_some() {
        let tag_ok = new_tag.is_none_or(|t| stored_tag.is_some_and(|s| s.weak_eq(&t)));
        let date_ok = new_last_modified.is_none_or(|d| header_date(stored, &LAST_MODIFIED) == Some(d));
        return tag_ok && date_ok;
    }
    only_candidate
}

/// Freshens stored header fields from a 304 (§3.2, §4.3.4): every field in `not_modified`
/// replaces the stored field of that name, except hop-by-hop fields, the fields describing
/// the stored bytes themselves (`Content-Length`, `Content-Encoding`, `Content-Range`,
/// `Content-MD5`, `Transfer-Encoding`), and an `ETag` of a different strength or not a valid
/// entity tag. `Content-Type` is replaced too, unless `body_reshaped`: the stored body is not
/// the origin's bytes (a module rewrote it) and its type may be the module's, a field the
/// stored processing depends on, which §3.2 lets a cache keep.
pub fn freshen_from_304(stored: &mut HeaderMap, not_modified: &HeaderMap, body_reshaped: bool) {
    let listed = connection_listed(not_modified);
    let stored_weak = etag::stored(stored).map(|t| t.weak);
    for name in not_modified.keys() {
        if is_hop_by_hop(name, &listed) || describes_stored_bytes(name) || (body_reshaped && name == CONTENT_TYPE) {
            continue;
        }
        if name == ETAG {
            let new_weak = etag::stored(not_modified).map(|t| t.weak);
            if new_weak.is_none() || (stored_weak.is_some() && stored_weak != new_weak) {
                continue;
            }
        }
        stored.remove(name);
        for value in not_modified.get_all(name) {
            stored.append(name.clone(), value.clone());
        }
    }
}

/// `Content-MD5` (RFC 1864, obsolete but still sent): a digest of the stored bytes.
const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");

/// Fields describing the stored bytes themselves, which a 304 must not rewrite.
fn describes_stored_bytes(name: &HeaderName) -> bool {
    [CONTENT_LENGTH, CONTENT_ENCODING, CONTENT_RANGE, CONTENT_MD5, TRANSFER_ENCODING].contains(name)
}

#[cfg(test)]
mod tests;
