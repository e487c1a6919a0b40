//! `Cache-Control` (RFC 9111 §5.2) and `CDN-Cache-Control` (RFC 9213) parsing.

use http::header::{HeaderMap, HeaderName};

/// The `max-stale` request directive (RFC 9111 §5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxStale {
    /// `max-stale` with no value: any staleness is acceptable.
    Any,
    /// `max-stale=N`: staleness up to N seconds is acceptable.
    Seconds(u64),
}

/// The directives of one `Cache-Control`-style field, merged over all its lines.
///
/// Request and response directives share the struct; each is only consulted where the RFC
/// gives it a meaning. Parsing is total: malformed input never fails, it is read
/// conservatively (RFC 9111 §4.2.1: a duplicated or invalid `max-age`/`s-maxage` value
/// makes the response stale, i.e. is read as `0`). Qualified `no-cache="f"` and
/// `private="f"` are read as their unqualified forms (allowed by §5.2.2.4 and §5.2.2.7).
/// Directive names are case-insensitive; numeric arguments may be quoted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheControl {
    pub max_age: Option<u64>,
    pub s_maxage: Option<u64>,
    pub max_stale: Option<MaxStale>,
    pub min_fresh: Option<u64>,
    pub no_cache: bool,
    pub no_store: bool,
    pub no_transform: bool,
    pub only_if_cached: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    pub must_understand: bool,
    pub private: bool,
    pub public: bool,
    pub immutable: bool,
    /// RFC 5861 §3.
    pub stale_while_revalidate: Option<u64>,
    /// RFC 5861 §4 (valid in requests and responses).
    pub stale_if_error: Option<u64>,
}

impl CacheControl {
    /// Parses every `Cache-Control` line of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        Self::from_field(headers, &http::header::CACHE_CONTROL)
    }

    /// Parses every line of the field `name` (e.g. `CDN-Cache-Control`, which has the same
    /// syntax, RFC 9213 §2.1).
    pub fn from_field(headers: &HeaderMap, name: &HeaderName) -> Self {
        let _ = (headers, name);
        todo!()
    }

    /// The response directives a targeted CDN cache obeys (RFC 9213 §2.1): those of
    /// `CDN-Cache-Control` when that field is present (and then `Cache-Control` is ignored
    /// for caching), else those of `Cache-Control`.
    pub fn effective_for_cdn(headers: &HeaderMap) -> Self {
        let _ = headers;
        todo!()
    }

    /// True when a stale response must not be served without successful validation, for a
    /// shared cache: `must-revalidate`, `proxy-revalidate`, or `s-maxage` (§5.2.2.10).
    pub fn forbids_stale_for_shared(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

/// True for a request carrying `Pragma: no-cache` and no `Cache-Control` field
/// (RFC 9111 §5.4: Pragma is only honoured when Cache-Control is absent).
pub fn pragma_no_cache(request_headers: &HeaderMap) -> bool {
    let _ = request_headers;
    todo!()
}
