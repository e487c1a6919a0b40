//! HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, RFC 850 and asctime forms.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::SystemTime;

/// Parses an HTTP-date. `None` for anything invalid (including `0` and `-1`).
pub fn parse_http_date(value: &HeaderValue) -> Option<SystemTime> {
    let _ = value;
    todo!()
}

/// Parses the first line of the date field `name` in `headers`.
pub fn header_date(headers: &HeaderMap, name: &HeaderName) -> Option<SystemTime> {
    headers.get(name).and_then(parse_http_date)
}

/// Formats `t` as an IMF-fixdate header value.
pub fn format_http_date(t: SystemTime) -> HeaderValue {
    let _ = t;
    todo!()
}
