//! Turning a response into cache-object metadata: directives, Vary key, age and freshness,
//! computed once so hits do no header parsing.

use http::header::{self, HeaderMap};
use http::StatusCode;
use sluice_http::freshness::Heuristic;
use sluice_http::surrogate;
use sluice_http::vary::{self, Vary};
use sluice_http::CacheControl;
use sluice_store::ObjectMeta;
use std::borrow::Cow;
use std::time::SystemTime;

/// How a response's caching directives are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Directives<'a> {
    /// The response came through a reverse-proxy route and `CDN-Cache-Control` is obeyed
    /// (RFC 9213): it replaces `Cache-Control`, and `Expires` is ignored while it governs.
    pub cdn: bool,
    /// The response came through a reverse-proxy route and `Surrogate-Control` is obeyed,
    /// as the surrogate of this name: its caching directives replace `CDN-Cache-Control`,
    /// `Cache-Control` and `Expires` ([`sluice_http::surrogate::cache_control_for`]).
    pub surrogate: Option<&'a str>,
}

impl Directives<'_> {
    /// The effective response directives.
    pub fn cache_control(self, headers: &HeaderMap) -> CacheControl {
        if let Some(cc) = self.surrogate.and_then(|name| surrogate::cache_control_for(headers, name)) {
            return cc;
        }
        if self.cdn {
            CacheControl::effective_for_cdn(headers)
        } else {
            CacheControl::from_headers(headers)
        }
    }

    /// The header fields freshness and storability are computed from: without `Expires`
    /// while a targeted field governs.
    pub fn freshness_fields(self, headers: &HeaderMap) -> Cow<'_, HeaderMap> {
        let targeted = self.surrogate.is_some_and(|name| surrogate::cache_control_for(headers, name).is_some())
            || (self.cdn && sluice_http::cache_control::cdn_cache_control_in_force(headers));
        if targeted {
            let mut without = headers.clone();
            without.remove(header::EXPIRES);
            Cow::Owned(without)
        } else {
            Cow::Borrowed(headers)
        }
    }
}

/// A response as received, to be described for the store.
#[derive(Debug)]
pub struct Received<'a> {
    pub key: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The request that fetched it (for the Vary key).
    pub request: &'a HeaderMap,
    pub request_time: SystemTime,
    pub response_time: SystemTime,
}

/// The metadata of a stored response.
pub fn describe(received: Received<'_>, directives: Directives<'_>, heuristic: &Heuristic) -> ObjectMeta {
    let Received { key, status, headers, request, request_time, response_time } = received;
    let cc = directives.cache_control(&headers);
    let vary = match Vary::from_headers(&headers) {
        Vary::Fields(fields) => fields,
        Vary::None | Vary::Star => Vec::new(),
    };
    let vary_key = if vary.is_empty() { Vec::new() } else { vary::vary_key(&vary, request) };
    let initial_age = sluice_http::age::corrected_initial_age(&headers, request_time, response_time);
    let (lifetime, lifetime_source) = sluice_http::freshness::freshness_lifetime(
        status,
        &directives.freshness_fields(&headers),
        &cc,
        response_time,
        heuristic,
    );
    ObjectMeta {
        key,
        status,
        headers: sluice_store::stored_headers(headers),
        vary,
        vary_key,
        request_time,
        response_time,
        initial_age,
        lifetime,
        lifetime_source,
        cc,
    }
}
