//! Fetching a URL through the cache with no client connection: the admin API's `POST /fetch`
//! and `POST /cache/validate`, and modules' [`CacheApi::fetch`] / [`CacheApi::validate`]
//! (seed 000's `ObjFetch` / `ObjValidate`, seed 002's RPC fetch).
//!
//! The request is a GET for the URL with no special header fields, run through the proxy's
//! own pipeline from the modules' `req_headers` phase on: the same lookup, reuse decision,
//! collapsing with requests in flight, storing, `Cache-Status`, module phases and access-log
//! line as a proxy client's request. So a fetch and a client never disagree about what is
//! stored.
//!
//! [`CacheApi::fetch`]: sluice_module::CacheApi::fetch
//! [`CacheApi::validate`]: sluice_module::CacheApi::validate

use crate::body::ProxyBody;
use crate::config::Mode;
use crate::error::ProxyError;
use crate::outcome::ResultCode;
use crate::respond;
use crate::service::{ConnInfo, Forward};
use crate::state::State;
use crate::txn::{module_phase, Txn};
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use sluice_module::{CacheError, FetchMode, FetchResponse, Revalidation, Subject, Validated};
use std::net::SocketAddr;
use std::sync::Arc;

/// What the fetch is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Get the URL: a fresh stored response is a hit.
    Fetch,
    /// Validate the stored response now (as a request with `Cache-Control: no-cache`): a
    /// conditional request to the origin; fails with `NotFound` when nothing is stored.
    Revalidate,
}

/// A response produced by [`fetch`], ready to send (finalized: `Via`, module phases, and
/// the transaction travels with the body and is logged when it ends).
#[derive(Debug)]
pub struct Fetched {
    pub response: Response<ProxyBody>,
    /// How the cache produced it.
    pub code: ResultCode,
    /// Set when no origin response was obtained: `response` is then the proxy's error page.
    pub error: Option<String>,
}

/// The address internal fetches are logged with.
const INTERNAL: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Fetches `url` (an absolute http(s) URL) through the cache.
pub async fn fetch(state: &Arc<State>, url: &str, purpose: Purpose) -> Result<Fetched, CacheError> {
    let key = crate::content::key_of(url)?;
    if !state.config.cache.enabled {
        return Err(CacheError::Invalid("the cache is disabled (cache.enabled = false)".into()));
    }
    if purpose == Purpose::Revalidate && !state.store.is_stored(&key) {
        return Err(CacheError::NotFound(key));
    }
    let uri: Uri = url.parse().map_err(|_| CacheError::BadUrl(url.to_owned()))?;
    let mut builder = Request::get(uri);
    if purpose == Purpose::Revalidate {
        builder = builder.header(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    let request = builder.body(()).map_err(|e| CacheError::BadUrl(format!("{url}: {e}")))?;
    Ok(fetch_as(state, request, Mode::Forward).await)
}

/// Runs a GET `request` through the cache as if a client of a `mode` listener sent it:
/// [`Mode::Forward`] for an origin URL (the admin API, modules), [`Mode::Reverse`] for a
/// URL as clients name it, mapped by the routes (ESI includes). Origin failures become the
/// proxy's error response, with [`Fetched::error`] set.
pub async fn fetch_as(state: &Arc<State>, request: Request<()>, mode: Mode) -> Fetched {
    let mut txn = Txn::start(state, INTERNAL, &request, false);
    let (mut parts, ()) = request.into_parts();
    let result = async {
        txn.check_start()?;
        if let Some(local) = module_phase!(txn, RespondOrBufferRequest, Subject::Request(&mut parts), |m, info| m
            .req_headers(info, &mut parts))?
        .respond
        {
            return Ok(respond::local(state, *local));
        }
        crate::service::check_method_edit(txn.sent_method(), &parts.method)?;
        let conn = ConnInfo {
            client: INTERNAL,
            client_ip: crate::service::client_ip_value(INTERNAL.ip()),
            mode,
            tls: false,
            allowed: true,
            forwards_clients: false,
            from_trusted_peer: false,
            zero_copy: None,
            activity: None,
            options_forms: None,
            switches: None,
            cancels: None,
            timers: Default::default(),
            client_cert: None,
        };
        let resolved = crate::service::resolve_target(state, &conn, &parts)?;
        if state.access_log.is_some() {
            txn.url = resolved.uri.to_string();
        }
        let key = sluice_http::key::primary_key(&resolved.uri)
            .ok_or_else(|| ProxyError::bad_request(format!("no cache key for {}", resolved.uri)))?;
        // Keys of a reverse-only deployment are origin URLs fetched under its rules
        // (`CDN-Cache-Control`); so are those a route maps.
        let reverse = resolved.reverse || !state.config.listener.iter().any(|l| l.mode.forwards());
        let forward = Forward {
            target: resolved.target,
            uri: resolved.uri,
            client: parts,
            host: resolved.host,
            client_ip: conn.client_ip.clone(),
            client_tls: false,
            proto_from_peer: false,
            reverse,
            caching: resolved.caching,
            headers: resolved.headers,
        };
        crate::cache_flow::serve(state, &conn.timers, &mut txn, forward, key).await
    }
    .await;
    let (response, error) = match result {
        Ok(response) => (response, None),
        Err(err) => (respond::error(state, &err), Some(err.to_string())),
    };
    let code = txn.code;
    let response = respond::finalize(state, txn, response, &Method::GET).await;
    Fetched { response, code, error }
}

/// The `Cache-Status` value of a response ("" without one).
pub fn cache_status<B>(response: &Response<B>) -> String {
    response.headers().get("cache-status").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

/// Reads a fetched response for [`CacheApi::fetch`](sluice_module::CacheApi::fetch): the
/// whole body, or (prefetch) only its size.
pub async fn into_fetch_response(fetched: Fetched, mode: FetchMode) -> Result<FetchResponse, CacheError> {
    if let Some(error) = fetched.error {
        return Err(CacheError::Origin(error));
    }
    let cache_status = cache_status(&fetched.response);
    let (parts, mut body) = fetched.response.into_parts();
    let mut size = 0u64;
    let mut whole = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| CacheError::Origin(format!("body failed after {size} bytes: {e}")))?;
        if let Ok(data) = frame.into_data() {
            size += data.len() as u64;
            if mode == FetchMode::Body {
                whole.extend_from_slice(&data);
            }
        }
    }
    Ok(FetchResponse {
        status: parts.status,
        headers: parts.headers,
        cache_status,
        result: fetched.code.as_str(),
        hit: fetched.code.is_hit(),
        size,
        body: Bytes::from(whole),
    })
}

/// What a [`Purpose::Revalidate`] fetch did, from how the cache served it.
pub fn revalidation(fetched: &Fetched) -> Result<Validated, CacheError> {
    if let Some(error) = &fetched.error {
        return Err(CacheError::Origin(error.clone()));
    }
    let status = fetched.response.status();
    let (outcome, origin_status) = match fetched.code {
        ResultCode::RefreshUnmodified | ResultCode::ImsHit => {
            (Revalidation::NotModified, Some(StatusCode::NOT_MODIFIED))
        }
        ResultCode::RefreshFailOld => (Revalidation::Failed, None),
        _ => (Revalidation::Replaced, Some(status)),
    };
    Ok(Validated { outcome, origin_status, cache_status: cache_status(&fetched.response) })
}
