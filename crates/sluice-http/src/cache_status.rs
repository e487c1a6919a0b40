//! The `Cache-Status` response header field, RFC 9211.

use http::header::HeaderValue;

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
    pub fn to_header_value(&self, name: &str) -> HeaderValue {
        let _ = name;
        todo!()
    }
}
