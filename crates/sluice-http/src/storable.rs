//! Whether a shared cache may store a response, RFC 9111 §3 (and §3.5, §5.2.2.3).

use crate::freshness::heuristically_cacheable;
use crate::vary::Vary;
use crate::CacheControl;
use http::header::{HeaderMap, AUTHORIZATION, CACHE_CONTROL, EXPIRES};
use http::{Method, StatusCode};

/// Why a response is not stored. Shown in `Cache-Status` `detail` and logs, so each variant
/// has a short stable token ([`NotStorable::token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorable {
    /// Only GET responses are stored.
    Method,
    /// 1xx, 206 (partial content is not stored), 304, or a status not understood while
    /// `must-understand` is present.
    Status,
    /// `no-store` in the request.
    RequestNoStore,
    /// `no-store` in the response (and `must-understand` did not override it).
    ResponseNoStore,
    /// `private` in the response.
    Private,
    /// The request had `Authorization` and the response lacks `public`, `s-maxage` and
    /// `must-revalidate` (§3.5).
    Authorization,
    /// `Vary: *`: such a response can never be reused.
    VaryStar,
    /// None of: `public`, `Expires`, `max-age`, `s-maxage`, a heuristically cacheable status.
    NoFreshnessInformation,
}

impl NotStorable {
    /// A short lowercase token, e.g. `"no-store"`, `"private"`, `"method"`.
    pub fn token(self) -> &'static str {
        match self {
            NotStorable::Method => "method",
            NotStorable::Status => "status",
            NotStorable::RequestNoStore => "request-no-store",
            NotStorable::ResponseNoStore => "no-store",
            NotStorable::Private => "private",
            NotStorable::Authorization => "authorization",
            NotStorable::VaryStar => "vary-star",
            NotStorable::NoFreshnessInformation => "no-freshness-information",
        }
    }
}

/// Decides whether a shared cache may store the response `status`/`response_headers` to a
/// request with `method`/`request_headers`. `cc` is the effective response directives.
/// Status codes understood for `must-understand` (§5.2.2.3) are 200, 203, 204, 300, 301, 308,
/// 404, 405, 410, 414 and 501; with `must-understand` and such a status, `no-store` is ignored.
///
/// Checks run in the order of the [`NotStorable`] variants, and the first failing one is
/// reported. `no-store` in the request is found in its `Cache-Control` (§5.2.1.5). A CDN
/// cache under a valid `CDN-Cache-Control` passes `response_headers` without `Expires`
/// (RFC 9213 §2.2, see [`crate::cache_control::cdn_cache_control_in_force`]).
pub fn storable(
    method: &Method,
    request_headers: &HeaderMap,
    status: StatusCode,
    response_headers: &HeaderMap,
    cc: &CacheControl,
) -> Result<(), NotStorable> {
    if method != Method::GET {
        return Err(NotStorable::Method);
    }
    let understood = understood_status(status);
    // §3: only final responses; 206 and 304 need handling we do not do (partial content is
    // never stored, and a 304 only freshens); must-understand needs an understood status.
    if status.is_informational()
        || status == StatusCode::PARTIAL_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || (cc.must_understand && !understood)
    {
        return Err(NotStorable::Status);
    }
    if CacheControl::from_field(request_headers, &CACHE_CONTROL).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    // §5.2.2.3: a cache that understands the status SHOULD ignore no-store next to
    // must-understand (the origin added no-store for caches that do not).
    if cc.no_store && !(cc.must_understand && understood) {
        return Err(NotStorable::ResponseNoStore);
    }
    if cc.private {
        return Err(NotStorable::Private);
    }
    // §3.5: only directives that explicitly allow shared caching make an authenticated
    // response storable.
    if request_headers.contains_key(AUTHORIZATION) && !(cc.public || cc.s_maxage.is_some() || cc.must_revalidate) {
        return Err(NotStorable::Authorization);
    }
    if Vary::from_headers(response_headers) == Vary::Star {
        return Err(NotStorable::VaryStar);
    }
    let expires = response_headers.contains_key(EXPIRES);
    if !(cc.public || expires || cc.max_age.is_some() || cc.s_maxage.is_some() || heuristically_cacheable(status)) {
        return Err(NotStorable::NoFreshnessInformation);
    }
    Ok(())
}

/// The statuses whose caching requirements this cache implements (for `must-understand`).
fn understood_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}

#[cfg(test)]
mod tests;
