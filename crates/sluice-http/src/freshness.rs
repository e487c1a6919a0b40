//! Freshness lifetime, RFC 9111 §4.2.1 and heuristics §4.2.2.

use crate::dates::header_date;
use crate::CacheControl;
use http::header::{HeaderMap, DATE, EXPIRES, LAST_MODIFIED};
use http::StatusCode;
use std::time::{Duration, SystemTime};

/// How heuristic freshness is computed when a response has no explicit lifetime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heuristic {
    /// Fraction of `Date - Last-Modified` (RFC 9111 §4.2.2 suggests 10%).
    pub last_modified_fraction: f64,
    /// Upper bound of a heuristic lifetime.
    pub max: Duration,
    /// When set, the heuristic lifetime of every response a heuristic applies to, with or
    /// without `Last-Modified`, in place of the fraction (and not capped by `max`): an
    /// operator's default TTL for the origins of a reverse route (Varnish's `default_ttl`,
    /// nginx's `proxy_cache_valid`). §4.2.2 leaves the heuristic to the cache.
    pub fixed: Option<Duration>,
}

impl Default for Heuristic {
    fn default() -> Self {
        Self { last_modified_fraction: 0.1, max: Duration::from_secs(24 * 3600), fixed: None }
    }
}

/// Where a freshness lifetime came from (reported in `Cache-Status` detail and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeSource {
    SMaxAge,
    MaxAge,
    Expires,
    Heuristic,
    /// No explicit lifetime and no heuristic applies: the response is stale at once.
    None,
}

/// The freshness lifetime of a response for a **shared** cache (§4.2.1): `s-maxage`, else
/// `max-age`, else `Expires - Date` (an invalid `Expires` means already expired; a missing
/// `Date` means the `response_time` the caller passes as `date_fallback`), else a heuristic
/// lifetime when the status is heuristically cacheable (§4.2.2, [`heuristically_cacheable`])
/// or `public` is present, and `Last-Modified` is earlier than `Date`, unless a legacy
/// `Pragma: no-cache` stands without `Cache-Control`.
/// `cc` is the effective response directives (see [`CacheControl::effective_for_cdn`]).
///
/// Details: only the first `Expires`/`Date` line counts (§4.2.1 allows using the first
/// occurrence). A CDN cache must ignore `Expires` under a valid `CDN-Cache-Control` (RFC 9213
/// §2.2): it passes `headers` without `Expires` then, see
/// [`crate::cache_control::cdn_cache_control_in_force`]. The heuristic lifetime is
/// `heuristic.fixed` when set, else `fraction × (Date − Last-Modified)` truncated to whole
/// seconds and capped at `heuristic.max`; a negative or NaN fraction gives 0.
pub fn freshness_lifetime(
    status: StatusCode,
    headers: &HeaderMap,
    cc: &CacheControl,
    date_fallback: SystemTime,
    heuristic: &Heuristic,
) -> (Duration, LifetimeSource) {
    if let Some(s) = cc.s_maxage {
        return (Duration::from_secs(s), LifetimeSource::SMaxAge);
    }
    if let Some(m) = cc.max_age {
        return (Duration::from_secs(m), LifetimeSource::MaxAge);
    }
    let date = header_date(headers, &DATE).unwrap_or(date_fallback);
    if headers.contains_key(EXPIRES) {
        // §5.3: an invalid Expires, notably "0", is a time in the past.
        let lifetime =
            header_date(headers, &EXPIRES).and_then(|expires| expires.duration_since(date).ok()).unwrap_or_default();
        return (lifetime, LifetimeSource::Expires);
    }
    // `Pragma: no-cache` has no defined meaning in a response (RFC 9111 §5.4), but an origin
    // sending it without `Cache-Control` means "do not cache": no heuristic, as Squid,
    // Varnish, nginx, Traffic Server and Apache httpd read it too.
    if (heuristically_cacheable(status) || cc.public) && !crate::cache_control::pragma_no_cache(headers) {
        if let Some(fixed) = heuristic.fixed {
            return (fixed, LifetimeSource::Heuristic);
        }
        let since_modified = header_date(headers, &LAST_MODIFIED).and_then(|lm| date.duration_since(lm).ok());
        if let Some(since) = since_modified.filter(|d| !d.is_zero()) {
            return (heuristic_lifetime(since, heuristic), LifetimeSource::Heuristic);
        }
    }
    (Duration::ZERO, LifetimeSource::None)
}

/// `fraction × since_modified`, in whole seconds, at most `heuristic.max`.
fn heuristic_lifetime(since_modified: Duration, heuristic: &Heuristic) -> Duration {
    let secs = since_modified.as_secs_f64() * heuristic.last_modified_fraction;
    let lifetime = if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        // `try_from_secs_f64` fails only on overflow here (infinite fraction): use the cap.
        Duration::try_from_secs_f64(secs.trunc()).unwrap_or(heuristic.max)
    };
    lifetime.min(heuristic.max)
}

/// Status codes defined as heuristically cacheable (RFC 9110 §15.1): 200, 203, 204, 206,
/// 300, 301, 308, 404, 405, 410, 414, 501.
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}

#[cfg(test)]
mod tests;
