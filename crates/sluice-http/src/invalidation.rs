//! Invalidation after unsafe methods, RFC 9111 §4.4.

use http::header::HeaderMap;
use http::{Method, StatusCode, Uri};

/// The URIs whose stored responses must be invalidated after a request with an unsafe
/// method (anything but GET, HEAD, OPTIONS, TRACE) to `target` got a non-error (2xx or
/// 3xx) response: the target URI, and the URIs in `Location` and `Content-Location`
/// (resolved against `target`) when they have the same scheme and authority as `target`.
/// Empty for safe methods and error statuses.
pub fn targets(method: &Method, target: &Uri, status: StatusCode, response: &HeaderMap) -> Vec<Uri> {
    let _ = (method, target, status, response);
    todo!()
}
