//! The `Cache-Status` response header field, RFC 9211.

use crate::sf;
use http::header::{HeaderName, HeaderValue};

/// The field's name, built at compile time: a map operation with it parses no name, where one
/// with the string `"cache-status"` parses it each time (on every response).
#[inline]
pub fn field_name() -> HeaderName {
    const { HeaderName::from_static("cache-status") }
}

/// Why the request went forward (RFC 9211 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fwd {
    Bypass,
    Method,
    UriMiss,
    VaryMiss,
    Miss,
    Request,
    Stale,
    Partial,
}

impl Fwd {
    /// The token as written in the header, e.g. `uri-miss`.
    pub fn token(self) -> &'static str {
        match self {
            Fwd::Bypass => "bypass",
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
            Fwd::Partial => "partial",
        }
    }
}

/// One cache's entry in `Cache-Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// `hit`: answered from the cache without going forward.
    pub hit: bool,
    pub fwd: Option<Fwd>,
    /// `fwd-status`: the status the next hop returned, when forwarded.
    pub fwd_status: Option<u16>,
    /// `ttl`: remaining freshness in seconds (negative when stale).
    pub ttl: Option<i64>,
    /// `stored`: the forwarded response was stored.
    pub stored: bool,
    /// `collapsed`: the request was collapsed onto another's fetch.
    pub collapsed: bool,
    /// `detail`: a token explaining the outcome (e.g. why not stored).
    pub detail: Option<&'static str>,
}

impl CacheStatus {
    /// Renders `<name>; hit; ttl=..` / `<name>; fwd=miss; fwd-status=200; stored` etc.
    /// `name` must be a valid sf-token or is quoted as an sf-string.
    ///
    /// Parameters appear in the order `hit`, `fwd`, `fwd-status`, `ttl`, `stored`,
    /// `collapsed`, `detail`; false booleans are omitted. `hit` and `fwd` are exclusive
    /// (RFC 9211 §2.1): when `fwd` is set the request went forward, so `hit` is not
    /// rendered. `ttl` is clamped to the sf-integer range; `detail` is written as a token
    /// when it is one, else as a string. Characters an sf-string cannot hold are dropped.
    pub fn to_header_value(&self, name: &str) -> HeaderValue {
        // One buffer, written in place without `fmt`: this runs on every response.
        // Room for every parameter but a long `detail`: no reallocation on the usual paths
        // (`; fwd=uri-miss; fwd-status=200; stored; detail=hit-for-pass` is 58 bytes).
        let mut out = String::with_capacity(name.len() + 64);
        sf::write_token_or_string(&mut out, name);
        if self.hit && self.fwd.is_none() {
            out.push_str("; hit");
        }
        if let Some(fwd) = self.fwd {
            out.push_str("; fwd=");
            out.push_str(fwd.token());
        }
        if let Some(status) = self.fwd_status {
            out.push_str("; fwd-status=");
            sf::write_integer(&mut out, i64::from(status));
        }
        if let Some(ttl) = self.ttl {
            out.push_str("; ttl=");
            sf::write_integer(&mut out, ttl.clamp(-SF_INTEGER_MAX, SF_INTEGER_MAX));
        }
        if self.stored {
            out.push_str("; stored");
        }
        if self.collapsed {
            out.push_str("; collapsed");
        }
        if let Some(detail) = self.detail {
            out.push_str("; detail=");
            sf::write_token_or_string(&mut out, detail);
        }
        // Only printable ASCII was written, which is always a valid field value.
        HeaderValue::from_maybe_shared(bytes::Bytes::from(out))
            .unwrap_or_else(|_| HeaderValue::from_static("\"sluice\""))
    }
}

/// The largest magnitude of an sf-integer (RFC 8941 §3.3.1: at most 15 digits).
const SF_INTEGER_MAX: i64 = 999_999_999_999_999;

#[cfg(test)]
mod tests;
