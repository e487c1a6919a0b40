//! May a stored response answer this request, and how (RFC 9111 §4, §4.2.4, §5.2.1; RFC 5861)?

use crate::CacheControl;
use std::time::Duration;

/// What the cache knows about one stored response at the time of the request.
#[derive(Debug, Clone, Copy)]
pub struct StoredFreshness<'a> {
    /// Freshness lifetime (§4.2.1).
    pub lifetime: Duration,
    /// Current age (§4.2.3).
    pub age: Duration,
    /// The stored response's effective directives.
    pub response_cc: &'a CacheControl,
}

impl StoredFreshness<'_> {
    /// True while `lifetime > age`.
    pub fn is_fresh(&self) -> bool {
        self.lifetime > self.age
    }

    /// `lifetime - age` in seconds, negative when stale (the `ttl` of RFC 9211).
    pub fn ttl_secs(&self) -> i64 {
        self.lifetime.as_secs() as i64 - self.age.as_secs() as i64
    }
}

/// The verdict of [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Serve the stored response as is.
    Fresh,
    /// Serve stale because the request allows it (`max-stale`, §4.2.4).
    StaleAllowed,
    /// Serve stale and revalidate in the background (`stale-while-revalidate`, RFC 5861 §3).
    StaleWhileRevalidate,
    /// Validate with the origin before use (stale, `no-cache` in request or response,
    /// `Pragma: no-cache`, request `max-age`/`min-fresh` not met).
    Validate,
}

/// Decides how the stored response may answer a request with directives `request_cc` (and
/// `pragma_no_cache`, see [`crate::cache_control::pragma_no_cache`]).
///
/// Rules, in order: response `no-cache`, request `no-cache` or Pragma, request `max-age`
/// exceeded, request `min-fresh` not met → `Validate`. Fresh → `Fresh`. Stale: when the
/// response forbids stale for a shared cache ([`CacheControl::forbids_stale_for_shared`]) →
/// `Validate`; request `max-stale` covering the staleness → `StaleAllowed`; response
/// `stale-while-revalidate=N` with staleness ≤ N → `StaleWhileRevalidate`; else `Validate`.
pub fn decide(stored: &StoredFreshness<'_>, request_cc: &CacheControl, pragma_no_cache: bool) -> Reuse {
    let _ = (stored, request_cc, pragma_no_cache);
    todo!()
}

/// May a stale response be served because validation failed (origin unreachable, or
/// answered 500, 502, 503 or 504)? True when the response or the request carries
/// `stale-if-error=N` with staleness ≤ N (RFC 5861 §4) and the response does not forbid stale
/// for a shared cache.
pub fn stale_if_error_allows(stored: &StoredFreshness<'_>, request_cc: &CacheControl) -> bool {
    let _ = (stored, request_cc);
    todo!()
}
