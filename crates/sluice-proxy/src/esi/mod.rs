//! Edge Side Includes (docs/esi.md): when a response is assembled, and how its head changes.
//!
//! A response is processed when its request came through a route with `esi = true`, it
//! answers a GET or HEAD, and its origin sent `Surrogate-Control: content="ESI/1.0"`. The
//! store keeps the raw template with its own freshness; assembly happens on every delivery
//! ([`apply`], called once where client responses leave the cache path), so hits and misses
//! alike are assembled, each include fetched through the cache with its own freshness.
//!
//! - `parse.rs`: the streaming parser (pure).
//! - `assemble.rs`: the assembled body, fragment fetches, limits.

mod assemble;
pub mod parse;

pub use assemble::{Assembler, CONCURRENCY};

use crate::body::ProxyBody;
use crate::state::State;
use http::header::{self, HeaderMap, HeaderName};
use http::{Method, Response, StatusCode, Uri};
use sluice_http::surrogate::{self, SURROGATE_CONTROL};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The ESI settings of a route with `esi = true`. Also the marker, in a client request's
/// extensions, that the request came through such a route (the cache path then answers
/// neither ranges nor preconditions from a template: see [`skips_conditionals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EsiRoute {
    /// Hosts (lower case, no port) includes may name besides the page's own.
    pub hosts: Vec<String>,
}

/// True when `headers` carry `Surrogate-Control: content="ESI/1.0"` addressed to every
/// surrogate or (`;name` suffix) to this one, `name`.
pub fn is_template(headers: &HeaderMap, name: &str) -> bool {
    surrogate::directives_for(headers, name).iter().any(|directive| {
        directive.name == "content"
            && directive.value.is_some_and(|value| {
                let value = String::from_utf8_lossy(value);
                value.trim_matches('"').split_whitespace().any(|c| c.eq_ignore_ascii_case("ESI/1.0"))
            })
    })
}

/// True when the cache must serve a stored `meta_headers` response to `client` whole and
/// unconditionally: an ESI template requested through an ESI route (its validators and byte
/// offsets are the template's, not those of what the client gets).
pub fn skips_conditionals(client: &http::request::Parts, meta_headers: &HeaderMap, name: &str) -> bool {
    client.extensions.get::<EsiRoute>().is_some() && is_template(meta_headers, name)
}

/// The request fields a pass-through on an ESI route does not forward: a template cannot
/// be answered in part or as "not modified".
pub const CLIENT_ONLY: [HeaderName; 6] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
];

/// The document being assembled, and the page it belongs to.
#[derive(Debug)]
pub struct Page {
    pub(crate) state: Arc<State>,
    /// The document's URL as the client names it (relative `src` resolve against it).
    pub(crate) base: Uri,
    /// Its host (lower case, no port).
    pub(crate) host: String,
    /// Its route's ESI settings.
    pub(crate) route: Arc<EsiRoute>,
    /// The request fields sent with each include (from the client's request).
    pub(crate) headers: HeaderMap,
    /// 0 for the page, 1 for its fragments, ...
    pub(crate) depth: u32,
    /// Shared by the whole page.
    pub(crate) budget: Arc<Budget>,
}

/// The limits of one page, nested fragments included.
#[derive(Debug)]
pub struct Budget {
    pub(crate) includes: AtomicUsize,
    pub(crate) fetches: tokio::sync::Semaphore,
}

impl Page {
    fn same_host(&self, host: &str) -> bool {
        self.host == host
    }

    fn allows(&self, host: &str) -> bool {
        self.same_host(host) || self.route.hosts.iter().any(|h| h == host)
    }
}

/// The client request a response answers, as [`apply`] needs it.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a Method,
    /// The URL the client asked for (scheme from the connection, authority from `Host`).
    pub url: Uri,
    pub headers: &'a HeaderMap,
}

/// The response towards the client of a request through an ESI route: `Surrogate-Control`
/// removed; a template answering a GET assembled (HEAD: only its head changes): no
/// `Content-Length` (hyper sends it chunked), no `ETag` or `Accept-Ranges`.
pub fn apply(
    state: &Arc<State>,
    route: &Arc<EsiRoute>,
    request: Request<'_>,
    mut response: Response<ProxyBody>,
) -> Response<ProxyBody> {
    let template = is_template(response.headers(), &state.name);
    response.headers_mut().remove(SURROGATE_CONTROL);
    let status = response.status();
    let has_body = !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status == StatusCode::PARTIAL_CONTENT);
    let encoded = response.headers().get(header::CONTENT_ENCODING).is_some_and(|v| v != "identity");
    if !template || !has_body || !(request.method == Method::GET || request.method == Method::HEAD) {
        return response;
    }
    if encoded {
        tracing::warn!("ESI template {} has a Content-Encoding: not processed", request.url);
        return response;
    }
    let headers = response.headers_mut();
    for name in [header::CONTENT_LENGTH, header::ETAG, header::ACCEPT_RANGES] {
        headers.remove(name);
    }
    if request.method == Method::HEAD {
        return response;
    }
    state.metrics.esi_pages.fetch_add(1, Relaxed);
    let page = Page {
        state: Arc::clone(state),
        host: request.url.host().unwrap_or("").to_ascii_lowercase(),
        base: request.url,
        route: Arc::clone(route),
        headers: fragment_headers(request.headers),
        depth: 0,
        budget: Arc::new(Budget { includes: AtomicUsize::new(0), fetches: tokio::sync::Semaphore::new(CONCURRENCY) }),
    };
    response.map(|template| ProxyBody::esi(Assembler::new(Arc::new(page), template)))
}

/// The fields of the client's request sent with its includes: all but hop-by-hop, framing,
/// `Host` (the fragment's), ranges and preconditions (the include is a whole, new GET), and
/// `Accept-Encoding` (fragments are spliced into the page, so they must come unencoded).
fn fragment_headers(client: &HeaderMap) -> HeaderMap {
    let mut headers = client.clone();
    sluice_http::hop::remove_hop_by_hop(&mut headers);
    for name in CLIENT_ONLY.iter().chain(&[
        header::HOST,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::ACCEPT_ENCODING,
        header::EXPECT,
    ]) {
        headers.remove(name);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn sc(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(SURROGATE_CONTROL, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn surrogate_control_content_esi() {
        assert!(is_template(&sc(r#"content="ESI/1.0""#), "sluice"));
        assert!(is_template(&sc(r#"max-age=60, content="ESI/1.0 ESI-Inline/1.0""#), "sluice"));
        assert!(is_template(&sc(r#"content="ESI/1.0";sluice"#), "sluice"));
        assert!(!is_template(&sc(r#"content="ESI/1.0";other"#), "sluice"));
        assert!(!is_template(&sc("max-age=60"), "sluice"));
        assert!(!is_template(&sc(r#"content="ESI-Inline/1.0""#), "sluice"));
        assert!(!is_template(&HeaderMap::new(), "sluice"));
    }

    #[test]
    fn includes_do_not_inherit_ranges_preconditions_or_encodings() {
        let mut client = HeaderMap::new();
        for (n, v) in
            [("range", "bytes=0-1"), ("if-none-match", "\"x\""), ("accept-encoding", "gzip"), ("cookie", "a=1")]
        {
            client.insert(HeaderName::from_static(n), HeaderValue::from_static(v));
        }
        let h = fragment_headers(&client);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::COOKIE));
    }
}
