//! Answering a client's conditional request from a stored response, RFC 9110 §13.2.2.

use http::header::HeaderMap;
use http::{Method, StatusCode};

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
pub fn evaluate(method: &Method, request: &HeaderMap, stored_status: StatusCode, stored: &HeaderMap) -> Precondition {
    let _ = (method, request, stored_status, stored);
    todo!()
}

/// The header fields a 304 generated from a stored 200 carries (RFC 9110 §15.4.5):
/// `Cache-Control`, `Content-Location`, `Date`, `ETag`, `Expires`, `Vary`, and
/// `Last-Modified` (allowed and useful).
pub fn not_modified_headers(stored: &HeaderMap) -> HeaderMap {
    let _ = stored;
    todo!()
}
