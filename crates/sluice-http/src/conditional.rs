//! Answering a client's conditional request from a stored response, RFC 9110 §13.2.2.

use crate::dates::{header_date, parse_http_date};
use crate::etag;
use http::header::{
    HeaderMap, HeaderName, CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_UNMODIFIED_SINCE, LAST_MODIFIED, VARY,
};
use http::{Method, StatusCode};
use std::time::SystemTime;

/// The outcome of evaluating preconditions against a stored (selected) representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// No precondition, or all passed: send the representation (maybe a range of it).
    Proceed,
    /// `If-None-Match`/`If-Modified-Since` say the client's copy is current: send 304.
    NotModified,
    /// `If-Match`/`If-Unmodified-Since` failed: send 412.
    Failed,
}

/// Evaluates preconditions in the order of RFC 9110 §13.2.2: `If-Match` (strong comparison),
/// else `If-Unmodified-Since`; then `If-None-Match` (weak comparison; for GET/HEAD a match
/// gives `NotModified`, for other methods `Failed`), else `If-Modified-Since` (GET/HEAD
/// only; the stored `Last-Modified`, or `Date` when absent, is the last modification).
/// `stored_status` is the stored response's status: preconditions only apply to 2xx
/// representations (otherwise `Proceed`). Unparseable dates are ignored.
///
/// Details: a date field with more than one line is ignored like an invalid one (§13.1.3,
/// §13.1.4); `If-Unmodified-Since` is ignored when the stored response has no valid
/// `Last-Modified`; list members that are not valid entity tags never match, so an
/// `If-Match` made only of them fails; `*` matches the stored representation.
pub fn evaluate(method: &Method, request: &HeaderMap, stored_status: StatusCode, stored: &HeaderMap) -> Precondition {
    // §13.2.1: preconditions are ignored when the response would not be 2xx anyway.
    if !stored_status.is_success() {
        return Precondition::Proceed;
    }
    let current_tag = etag::stored(stored);
    let last_modified = header_date(stored, &LAST_MODIFIED);

    // Steps 1 and 2.
    if let Some(list) = etag::list(request, &IF_MATCH) {
        if !list.matches(current_tag.as_ref(), true) {
            return Precondition::Failed;
        }
    } else if let (Some(since), Some(modified)) = (single_date(request, &IF_UNMODIFIED_SINCE), last_modified) {
        if modified > since {
            return Precondition::Failed;
        }
    }

    // Steps 3 and 4.
    let safe_read = method == Method::GET || method == Method::HEAD;
    if let Some(list) = etag::list(request, &IF_NONE_MATCH) {
        if list.matches(current_tag.as_ref(), false) {
            return if safe_read { Precondition::NotModified } else { Precondition::Failed };
        }
    } else if safe_read {
        // RFC 9111 §4.3.2: without Last-Modified, a cache uses the stored Date.
        let modified = last_modified.or_else(|| header_date(stored, &DATE));
        if let (Some(since), Some(modified)) = (single_date(request, &IF_MODIFIED_SINCE), modified) {
            if modified <= since {
                return Precondition::NotModified;
            }
        }
    }
    Precondition::Proceed
}

/// A date precondition field with exactly one valid HTTP-date line.
fn single_date(request: &HeaderMap, name: &HeaderName) -> Option<SystemTime> {
    let mut lines = request.get_all(name).iter();
    let first = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    parse_http_date(first)
}

/// The header fields a 304 generated from a stored 200 carries (RFC 9110 §15.4.5):
/// `Cache-Control`, `Content-Location`, `Date`, `ETag`, `Expires`, `Vary`, and
/// `Last-Modified` (allowed and useful).
pub fn not_modified_headers(stored: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES, VARY, LAST_MODIFIED] {
        for value in stored.get_all(&name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
