//! Freshness lifetime, RFC 9111 §4.2.1 and heuristics §4.2.2.

use crate::CacheControl;
use http::header::HeaderMap;
use http::StatusCode;
use std::time::Duration;

/// How heuristic freshness is computed when a response has no explicit lifetime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heuristic {
    /// Fraction of `Date - Last-Modified` (RFC 9111 §4.2.2 suggests 10%).
    pub last_modified_fraction: f64,
    /// Upper bound of a heuristic lifetime.
    pub max: Duration,
}

impl Default for Heuristic {
    fn default() -> Self {
        Self { last_modified_fraction: 0.1, max: Duration::from_secs(24 * 3600) }
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
/// or `public` is present, and `Last-Modified` is earlier than `Date`.
/// `cc` is the effective response directives (see [`CacheControl::effective_for_cdn`]).
pub fn freshness_lifetime(
    status: StatusCode,
    headers: &HeaderMap,
    cc: &CacheControl,
    date_fallback: std::time::SystemTime,
    heuristic: &Heuristic,
) -> (Duration, LifetimeSource) {
    let _ = (status, headers, cc, date_fallback, heuristic);
    todo!()
}

/// Status codes defined as heuristically cacheable (RFC 9110 §15.1): 200, 203, 204, 206,
/// 300, 301, 308, 404, 405, 410, 414, 501.
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}
