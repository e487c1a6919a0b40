//! `Cache-Control` (RFC 9111 §5.2) and `CDN-Cache-Control` (RFC 9213) parsing.

use crate::parse::{list_members, split_directive};
use crate::sf;
use builder::Builder;
use http::header::{HeaderMap, HeaderName, CACHE_CONTROL, CDN_CACHE_CONTROL, PRAGMA};

mod builder;
#[cfg(test)]
mod tests;

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
///
/// The other numeric directives are also read in the most restrictive way (§4.2.1: "the
/// most restrictive directive should be honored"): `min-fresh` keeps its largest valid
/// value; `max-stale`, `stale-while-revalidate` and `stale-if-error`, which allow serving
/// stale content, keep their smallest value and are dropped altogether when any occurrence
/// is invalid. Values above 2^31 saturate there (RFC 9111 §1.2.2).
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
        Self::from_field(headers, &CACHE_CONTROL)
    }

    /// Parses every line of the field `name` with the `Cache-Control` grammar (RFC 9111
    /// §5.2; e.g. `CDN-Cache-Control`, whose directives have the same meaning, RFC 9213
    /// §2.1). Targeted fields are formally Structured Field Dictionaries with different error
    /// handling: [`CacheControl::from_targeted_field`] and [`CacheControl::effective_for_cdn`]
    /// apply that; this function reads any field leniently.
    pub fn from_field(headers: &HeaderMap, name: &HeaderName) -> Self {
        let mut builder = Builder::default();
        for member in list_members(headers, name) {
            let (directive, value) = split_directive(member);
            builder.apply(&directive.to_ascii_lowercase(), value);
        }
        builder.finish()
    }

    /// Parses a targeted cache-control field such as `CDN-Cache-Control` as RFC 9213 §2.1
    /// specifies: its lines, combined, must form a valid, non-empty Structured Field
    /// Dictionary (RFC 8941 §3.2), otherwise the field is ignored and `None` is returned. A
    /// repeated directive keeps its last value (RFC 8941 §4.2.2); a numeric directive whose
    /// value is not a non-negative Integer is invalid (`max-age`/`s-maxage` then read as `0`,
    /// the others are dropped); a Boolean `?0` value means the directive is absent.
    pub fn from_targeted_field(headers: &HeaderMap, name: &HeaderName) -> Option<Self> {
        let mut combined = Vec::new();
        for (i, line) in headers.get_all(name).iter().enumerate() {
            if i > 0 {
                combined.extend_from_slice(b", ");
            }
            combined.extend_from_slice(line.as_bytes());
        }
        let dict = sf::parse_dictionary(&combined)?;
        if dict.is_empty() {
            return None;
        }
        let mut builder = Builder::default();
        for (key, value) in dict {
            builder.apply_structured(key.as_bytes(), value);
        }
        Some(builder.finish())
    }

    /// The response directives a targeted CDN cache obeys (RFC 9213 §2.2): those of a valid,
    /// non-empty `CDN-Cache-Control` (see [`CacheControl::from_targeted_field`]; `Cache-Control`
    /// is then ignored, and so is `Expires`, see [`cdn_cache_control_in_force`]), else those
    /// of `Cache-Control`.
    pub fn effective_for_cdn(headers: &HeaderMap) -> Self {
        Self::from_targeted_field(headers, &CDN_CACHE_CONTROL).unwrap_or_else(|| Self::from_headers(headers))
    }

    /// True when a stale response must not be served without successful validation, for a
    /// shared cache: `must-revalidate`, `proxy-revalidate`, or `s-maxage` (§5.2.2.10).
    pub fn forbids_stale_for_shared(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

/// True when a valid, non-empty `CDN-Cache-Control` is present, i.e. when a CDN cache
/// (one using [`CacheControl::effective_for_cdn`]) must ignore `Cache-Control` **and
/// `Expires`** (RFC 9213 §2.2). [`crate::freshness::freshness_lifetime`] and
/// [`crate::storable::storable`] cannot tell which directives the caller chose, so they
/// always consult `Expires`; a CDN cache for which this returns true should pass them
/// headers without `Expires`.
pub fn cdn_cache_control_in_force(headers: &HeaderMap) -> bool {
    CacheControl::from_targeted_field(headers, &CDN_CACHE_CONTROL).is_some()
}

/// True for a request carrying `Pragma: no-cache` and no `Cache-Control` field
/// (RFC 9111 §5.4: Pragma is only honoured when Cache-Control is absent).
/// Pragma directive names are case-insensitive tokens (RFC 7234 §5.4).
pub fn pragma_no_cache(request_headers: &HeaderMap) -> bool {
    // Pragma first: most requests carry neither field, and then one lookup answers.
    request_headers.contains_key(PRAGMA)
        && !request_headers.contains_key(CACHE_CONTROL)
        && list_members(request_headers, &PRAGMA)
            .into_iter()
            .any(|m| split_directive(m).0.eq_ignore_ascii_case(b"no-cache"))
}
