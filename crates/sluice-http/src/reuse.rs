//! May a stored response answer this request, and how (RFC 9111 §4, §4.2.4, §5.2.1; RFC 5861)?

use crate::cache_control::MaxStale;
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

    /// `lifetime - age` in seconds, negative when stale (the `ttl` of RFC 9211). Saturates
    /// at the `i64` range.
    pub fn ttl_secs(&self) -> i64 {
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        secs(self.lifetime).saturating_sub(secs(self.age))
    }

    /// How long the response has been stale (`age - lifetime`, zero while fresh).
    pub fn staleness(&self) -> Duration {
        self.age.saturating_sub(self.lifetime)
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
///
/// "`max-age` exceeded" means `age > max-age`; "`min-fresh` not met" means
/// `lifetime < age + min-fresh`; staleness is `age - lifetime` ([`StoredFreshness::staleness`]).
pub fn decide(stored: &StoredFreshness<'_>, request_cc: &CacheControl, pragma_no_cache: bool) -> Reuse {
    let response_cc = stored.response_cc;
    if response_cc.no_cache || request_cc.no_cache || pragma_no_cache {
        return Reuse::Validate;
    }
    // §5.2.1.1: the client wants a response no older than max-age.
    if request_cc.max_age.is_some_and(|max| stored.age > secs(max)) {
        return Reuse::Validate;
    }
    // §5.2.1.3: the client wants it to stay fresh for at least min-fresh more.
    if request_cc.min_fresh.is_some_and(|min| stored.lifetime < stored.age.saturating_add(secs(min))) {
        return Reuse::Validate;
    }
    if stored.is_fresh() {
        return Reuse::Fresh;
    }
    // §4.2.4: never serve stale against must-revalidate, proxy-revalidate or s-maxage.
    if response_cc.forbids_stale_for_shared() {
        return Reuse::Validate;
    }
    let staleness = stored.staleness();
    let allowed_by_request = match request_cc.max_stale {
        Some(MaxStale::Any) => true,
        Some(MaxStale::Seconds(n)) => staleness <= secs(n),
        None => false,
    };
    if allowed_by_request {
        return Reuse::StaleAllowed;
    }
    if response_cc.stale_while_revalidate.is_some_and(|n| staleness <= secs(n)) {
        return Reuse::StaleWhileRevalidate;
    }
    Reuse::Validate
}

/// May a stale response be served because validation failed (origin unreachable, or
/// answered 500, 502, 503 or 504)? True when the response or the request carries
/// `stale-if-error=N` with staleness ≤ N (RFC 5861 §4) and the response does not forbid stale
/// for a shared cache.
///
/// A response `no-cache` also forbids it: RFC 9111 §4.2.4 lists `no-cache` among the
/// directives that prohibit generating a stale response, and §5.2.2.4 requires a successful
/// validation before every reuse.
pub fn stale_if_error_allows(stored: &StoredFreshness<'_>, request_cc: &CacheControl) -> bool {
    let response_cc = stored.response_cc;
    if response_cc.forbids_stale_for_shared() || response_cc.no_cache {
        return false;
    }
    let staleness = stored.staleness();
    [response_cc.stale_if_error, request_cc.stale_if_error].into_iter().flatten().any(|n| staleness <= secs(n))
}

/// May a stale response be served because its validation could not reach the origin at all
/// (refused, reset or timed out before a response head)? RFC 9111 §4.2.4 lets a
/// *disconnected* cache serve stale unless an explicit directive prohibits it.
///
/// True when [`stale_if_error_allows`] does, or when the staleness is at most `window`
/// (configuration; zero disables) and neither the response (`no-cache`, `must-revalidate`,
/// `proxy-revalidate`, `s-maxage`) nor the request (`no-cache`, or `pragma_no_cache` when it
/// has no `Cache-Control`) asks for a validated answer.
pub fn stale_if_unreachable_allows(
    stored: &StoredFreshness<'_>,
    request_cc: &CacheControl,
    pragma_no_cache: bool,
    window: Duration,
) -> bool {
    if stale_if_error_allows(stored, request_cc) {
        return true;
    }
    let response_cc = stored.response_cc;
    let prohibited = response_cc.forbids_stale_for_shared() || response_cc.no_cache;
    let validation_asked = request_cc.no_cache || pragma_no_cache;
    !window.is_zero() && !prohibited && !validation_asked && stored.staleness() <= window
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[cfg(test)]
mod tests;
