//! Whether a shared cache may store a response, RFC 9111 §3 (and §3.5, §5.2.2.3).

use crate::CacheControl;
use http::header::HeaderMap;
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
        todo!()
    }
}

/// Decides whether a shared cache may store the response `status`/`response_headers` to a
/// request with `method`/`request_headers`. `cc` is the effective response directives.
/// Status codes understood for `must-understand` (§5.2.2.3) are 200, 203, 204, 300, 301, 308,
/// 404, 405, 410, 414 and 501; with `must-understand` and such a status, `no-store` is ignored.
pub fn storable(
    method: &Method,
    request_headers: &HeaderMap,
    status: StatusCode,
    response_headers: &HeaderMap,
    cc: &CacheControl,
) -> Result<(), NotStorable> {
    let _ = (method, request_headers, status, response_headers, cc);
    todo!()
}
