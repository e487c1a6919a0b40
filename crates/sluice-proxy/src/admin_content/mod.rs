//! The admin API's content endpoints (seed 000's `DR_Obj*` functions over HTTP, seed 002's
//! RPC fetch). Every operation goes through the same [`CacheApi`] modules use, so the admin
//! API, `sluice ctl` and modules cannot disagree. The token is checked by `admin.rs` before
//! anything here runs. `docs/content.md` documents every endpoint.
//!
//! | endpoint | operation |
//! |---|---|
//! | `GET /cache?url=` | query: every stored variant as JSON |
//! | `DELETE /cache?url=` \| `?prefix=` \| `?tag=` | delete by key, URL prefix or tag |
//! | `PUT /cache?url=[&status=][&ttl=]` | push a response (headers = the request's, body streamed) |
//! | `GET /cache/body?url=[&range=]` | read the stored body, whole or a byte range, streamed |
//! | `POST /cache/expire?url=[&ttl=\|&at=]` | expire now or set a new expiry |
//! | `POST /cache/validate?url=` | revalidate now with a conditional request |
//! | `POST /fetch?url=` (or the URL as the body) | fetch through the cache; the response with `Cache-Status` |
//! | `POST /prefetch?url=` | fetch without the body; JSON |

mod json;
pub(crate) mod params;

use crate::body::ProxyBody;
use crate::content_fetch::{self, Purpose};
use crate::state::State;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use params::{Query, RangeError};
use serde_json::{json, Value};
use sluice_module::{CacheError, FetchMode};
use std::sync::Arc;

/// True for the paths served here.
pub fn serves(path: &str) -> bool {
    matches!(path, "/cache" | "/cache/body" | "/cache/expire" | "/cache/validate" | "/fetch" | "/prefetch")
}

/// Serves one authorized content request.
pub async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Response<ProxyBody> {
    let query = Query::parse(req.uri().query());
    // Fetched and stored responses keep their own `Cache-Control`; the rest are ours.
    let content = matches!(req.uri().path(), "/fetch" | "/cache/body");
    let result = match (req.method().clone(), req.uri().path()) {
        (Method::GET | Method::HEAD, "/cache") => query_objects(state, &query),
        (Method::DELETE, "/cache") => delete(state, &query).await,
        (Method::PUT, "/cache") => push(state, &query, req).await,
        (Method::GET | Method::HEAD, "/cache/body") => read(state, &query, &req).await,
        (Method::POST, "/cache/expire") => expire(state, &query).await,
        (Method::POST, "/cache/validate") => validate(state, &query).await,
        (Method::POST, "/fetch") => fetch(state, query, req, false).await,
        (Method::POST, "/prefetch") => fetch(state, query, req, true).await,
        (_, path) => Err(method_not_allowed(path)),
    };
    match result {
        Ok(response) if content => response,
        Ok(mut response) => {
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(refusal) => {
            let mut response = *refusal;
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    }
}

/// Runs content-management work that may block (reading a disk-only object's body back) on
/// the blocking pool, off the runtime's workers.
async fn off_runtime<T: Send + 'static>(state: &Arc<State>, work: impl FnOnce(&State) -> T + Send + 'static) -> T {
    let state = Arc::clone(state);
    match tokio::task::spawn_blocking(move || work(&state)).await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// An answer, or a refusal (boxed: refusals are rare and a response is large).
type Answer = Result<Response<ProxyBody>, Refusal>;
type Refusal = Box<Response<ProxyBody>>;

/// A plain-text refusal.
fn text(status: StatusCode, message: impl Into<String>) -> Refusal {
    let mut message = message.into();
    if !message.ends_with('\n') {
        message.push('\n');
    }
    let mut response = Response::new(ProxyBody::full(message));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    Box::new(response)
}

fn json_reply(status: StatusCode, value: &Value) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(format!("{value}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn method_not_allowed(path: &str) -> Refusal {
    let allow = match path {
        "/cache" => "GET, HEAD, PUT, DELETE",
        "/cache/body" => "GET, HEAD",
        _ => "POST",
    };
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, format!("{path} allows {allow}"));
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// The HTTP answer to a failed content operation.
fn failure(err: CacheError) -> Refusal {
    let status = match &err {
        CacheError::BadUrl(_) | CacheError::Invalid(_) => StatusCode::BAD_REQUEST,
        CacheError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        CacheError::NotFound(_) => StatusCode::NOT_FOUND,
        CacheError::BadRange(_) => StatusCode::RANGE_NOT_SATISFIABLE,
        CacheError::Origin(_) => StatusCode::BAD_GATEWAY,
        CacheError::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
    };
    text(status, err.to_string())
}

/// The `url` parameter, required.
fn url<'a>(query: &'a Query, endpoint: &str) -> Result<&'a str, Refusal> {
    query.get("url").filter(|u| !u.is_empty()).ok_or_else(|| {
        text(StatusCode::BAD_REQUEST, format!("{endpoint} needs ?url=<absolute http(s) URL, percent-encoded>"))
    })
}

fn only(query: &Query, known: &[&str]) -> Result<(), Refusal> {
    match query.unknown(known) {
        Some(name) => {
            Err(text(StatusCode::BAD_REQUEST, format!("unknown parameter {name:?} (known: {})", known.join(", "))))
        }
        None => Ok(()),
    }
}

/// `GET /cache?url=`: 200 with the variants, 404 (same shape, no variants) when none.
fn query_objects(state: &State, query: &Query) -> Answer {
    only(query, &["url"])?;
    let url = url(query, "GET /cache")?;
    let key = crate::content::key_of(url).map_err(failure)?;
    let now = state.clock.now();
    let listing = state.store.listing(&key);
    let status = if listing.is_empty() { StatusCode::NOT_FOUND } else { StatusCode::OK };
    let variants: Vec<Value> = listing
        .iter()
        .map(|l| json::listed(&crate::content::info_of(&l.meta, l.size, l.hits, now), l.state.as_str()))
        .collect();
    Ok(json_reply(status, &json!({ "key": key, "variants": variants })))
}

/// `DELETE /cache?url=|prefix=|tag=`: 200 with the count, 404 when nothing matched. It
/// answers once the disk files of what it removed are deleted for good (unlinked, their
/// directories synced), so an acknowledged delete survives a crash.
async fn delete(state: &State, query: &Query) -> Answer {
    only(query, &["url", "prefix", "tag"])?;
    let given: Vec<&str> = ["url", "prefix", "tag"].into_iter().filter(|n| query.get(n).is_some()).collect();
    let (what, value) = match given.as_slice() {
        [one] => (*one, query.get(one).unwrap_or_default()),
        _ => return Err(text(StatusCode::BAD_REQUEST, "DELETE /cache needs exactly one of ?url=, ?prefix= or ?tag=")),
    };
    let removed = match what {
        "url" => state.content.delete(value),
        "prefix" => state.content.delete_prefix(value),
        _ if value.is_empty() || value.contains(|c: char| c.is_ascii_whitespace() || c == ',') => {
            Err(CacheError::Invalid(format!("{value:?} is not one tag (no spaces or commas)")))
        }
        _ => state.content.delete_tag(value),
    }
    .map_err(failure)?;
    state.store.purges_settled().await;
    let mut body = json!({ "removed": removed });
    match what {
        "url" => body["key"] = Value::String(crate::content::key_of(value).unwrap_or_else(|_| value.to_owned())),
        _ => body[what] = Value::String(value.to_owned()),
    }
    let status = if removed > 0 { StatusCode::OK } else { StatusCode::NOT_FOUND };
    if removed == 0 && what == "tag" {
        body["error"] = Value::String(format!("no stored object has tag {value:?}"));
    }
    Ok(json_reply(status, &body))
}

/// `PUT /cache?url=[&status=][&ttl=]`: stores the request's header fields and body as the
/// response for `url`, streaming the body into the store; 201 with the stored object.
async fn push(state: &State, query: &Query, req: Request<Incoming>) -> Answer {
    only(query, &["url", "status", "ttl"])?;
    let url = url(query, "PUT /cache")?.to_owned();
    let status = match query.get("status") {
        None => StatusCode::OK,
        Some(s) => s
            .parse::<u16>()
            .ok()
            .and_then(|n| StatusCode::from_u16(n).ok())
            // A final status of a whole response: not 1xx, nor 206 and 304, which answer a
            // request (a range, a condition) rather than stand for the URL.
            .filter(|s| (200..600).contains(&s.as_u16()) && !matches!(s.as_u16(), 206 | 304))
            .ok_or_else(|| {
                text(
                    StatusCode::BAD_REQUEST,
                    format!("status={s} is not the final status of a whole response (200-599, not 206 or 304)"),
                )
            })?,
    };
    let ttl = match query.get("ttl") {
        None => None,
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| text(StatusCode::BAD_REQUEST, format!("ttl={t} is not a number of seconds")))?,
        ),
    };
    let max = state.store.max_object();
    let declared = sluice_http::fields::content_length(req.headers());
    if let Some(size) = declared.filter(|size| *size > max) {
        return Err(failure(CacheError::TooLarge { size, max }));
    }
    let headers = params::pushed_headers(req.headers());
    let mut injection = state.content.inject_start(&url, status, headers).map_err(failure)?;
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| text(StatusCode::BAD_REQUEST, format!("request body failed: {e}")))?;
        if let Ok(data) = frame.into_data() {
            injection.write(data).map_err(failure)?;
        }
    }
    let mut info = injection.finish().map_err(failure)?;
    if let Some(ttl) = ttl {
        let expiry = if ttl == 0 {
            sluice_module::Expiry::Now
        } else {
            sluice_module::Expiry::In(std::time::Duration::from_secs(ttl))
        };
        state.content.set_expiry(&url, expiry).map_err(failure)?;
        if let Some(updated) = state.content.query(&url).ok().and_then(|v| v.into_iter().find(|i| i.vary.is_empty())) {
            info = updated;
        }
    }
    let mut value = json::variant(&info);
    value["key"] = Value::String(info.key.clone());
    Ok(json_reply(StatusCode::CREATED, &value))
}

/// `GET /cache/body?url=[&range=]`: the stored response's header fields and body (200, or
/// 206 for a range, with `Content-Range`); its stored status in `Sluice-Stored-Status`.
/// The range may also come as a `Range: bytes=` header field.
async fn read(state: &Arc<State>, query: &Query, req: &Request<Incoming>) -> Answer {
    only(query, &["url", "range"])?;
    let url = url(query, "GET /cache/body")?;
    let owned = url.to_owned();
    let reader = off_runtime(state, move |state| state.content.open(&owned))
        .await
        .map_err(failure)?
        .ok_or_else(|| failure(CacheError::NotFound(crate::content::key_of(url).unwrap_or_else(|_| url.to_owned()))))?;
    let range = query
        .get("range")
        .map(str::to_owned)
        .or_else(|| req.headers().get(header::RANGE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()));
    let size = reader.size;
    let (status, reader) = match range {
        None => (StatusCode::OK, reader),
        Some(spec) => match params::byte_range(&spec, size) {
            Ok(r) => (StatusCode::PARTIAL_CONTENT, reader.range(r).map_err(failure)?),
            Err(RangeError::Syntax(why)) => return Err(text(StatusCode::BAD_REQUEST, format!("bad range: {why}"))),
            Err(RangeError::Unsatisfiable(why)) => {
                let mut response = text(StatusCode::RANGE_NOT_SATISFIABLE, why);
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    response.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return Err(response);
            }
        },
    };
    let mut headers = reader.headers.clone();
    sluice_http::hop::remove_hop_by_hop(&mut headers);
    headers.insert("sluice-stored-status", HeaderValue::from(reader.status.as_u16()));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(reader.remaining()));
    if status == StatusCode::PARTIAL_CONTENT {
        let r = &reader.range;
        if let Ok(v) = HeaderValue::from_str(&sluice_http::range::content_range(r, size)) {
            headers.insert(header::CONTENT_RANGE, v);
        }
    }
    let body = if req.method() == Method::HEAD {
        ProxyBody::empty()
    } else {
        ProxyBody::chunks(sluice_store::BodyChunks::new(reader.into_chunks()))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// `POST /cache/expire?url=[&ttl=|&at=]`: 200 with the updated variants, 404 when none.
async fn expire(state: &Arc<State>, query: &Query) -> Answer {
    only(query, &["url", "ttl", "at"])?;
    let url = url(query, "POST /cache/expire")?;
    let expiry = params::expiry(query).map_err(|why| text(StatusCode::BAD_REQUEST, why))?;
    let owned = url.to_owned();
    let updated = off_runtime(state, move |state| state.content.set_expiry(&owned, expiry)).await.map_err(failure)?;
    let key = crate::content::key_of(url).map_err(failure)?;
    let variants: Vec<Value> = state.content.query(url).map_err(failure)?.iter().map(json::variant).collect();
    let status = if updated > 0 { StatusCode::OK } else { StatusCode::NOT_FOUND };
    Ok(json_reply(status, &json!({ "key": key, "updated": updated, "variants": variants })))
}

/// `POST /cache/validate?url=`: a conditional request to the origin now; 200 with the
/// outcome (`not-modified`, `replaced`, `failed`), 404 when nothing is stored, 502 when
/// the origin gave no response.
async fn validate(state: &Arc<State>, query: &Query) -> Answer {
    only(query, &["url"])?;
    let url = url(query, "POST /cache/validate")?;
    let fetched = content_fetch::fetch(state, url, Purpose::Revalidate).await.map_err(failure)?;
    let validated = content_fetch::revalidation(&fetched).map_err(failure)?;
    let result = fetched.code.as_str();
    // Read the body so a replacement is stored before the answer.
    let _ = content_fetch::into_fetch_response(fetched, FetchMode::Prefetch).await;
    let outcome = match validated.outcome {
        sluice_module::Revalidation::NotModified => "not-modified",
        sluice_module::Revalidation::Replaced => "replaced",
        sluice_module::Revalidation::Failed => "failed",
    };
    let key = crate::content::key_of(url).map_err(failure)?;
    let variants: Vec<Value> = state.content.query(url).map_err(failure)?.iter().map(json::variant).collect();
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "key": key,
            "outcome": outcome,
            "origin_status": validated.origin_status.map(|s| s.as_u16()),
            "cache_status": validated.cache_status,
            "result": result,
            "variants": variants,
        }),
    ))
}

/// `POST /fetch` and `POST /prefetch`. The URL is `?url=`, or the request body (the URL as
/// text, or `url=<percent-encoded>`). `/fetch` answers with the response itself (status,
/// header fields with `Cache-Status`, body streamed) plus `Sluice-Result`; `/prefetch` (or
/// `/fetch?prefetch=1`) reads the body into the cache and answers JSON.
async fn fetch(state: &Arc<State>, query: Query, req: Request<Incoming>, prefetch: bool) -> Answer {
    only(&query, &["url", "prefetch"])?;
    let prefetch = prefetch || query.flag("prefetch");
    let url = match query.get("url") {
        Some(url) => url.to_owned(),
        None => {
            let body = http_body_util::Limited::new(req.into_body(), 8192)
                .collect()
                .await
                .map_err(|_| text(StatusCode::PAYLOAD_TOO_LARGE, "the URL in the body is limited to 8 KiB"))?
                .to_bytes();
            url_from_body(&body)
                .ok_or_else(|| text(StatusCode::BAD_REQUEST, "POST /fetch needs ?url=<URL> or the URL as the body"))?
        }
    };
    let fetched = content_fetch::fetch(state, &url, Purpose::Fetch).await.map_err(failure)?;
    let result = fetched.code.as_str();
    if !prefetch {
        let mut response = fetched.response;
        response.headers_mut().insert("sluice-result", HeaderValue::from_static(result));
        return Ok(response);
    }
    let failed = fetched.error.clone();
    let got = content_fetch::into_fetch_response(fetched, FetchMode::Prefetch).await;
    let got = match (got, failed) {
        (Ok(got), None) => got,
        (Err(e), _) => return Err(failure(e)),
        (_, Some(why)) => return Err(failure(CacheError::Origin(why))),
    };
    let key = crate::content::key_of(&url).map_err(failure)?;
    let stored = state.store.is_stored(&key);
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "key": key,
            "status": got.status.as_u16(),
            "size": got.size,
            "cache_status": got.cache_status,
            "result": got.result,
            "hit": got.hit,
            "stored": stored,
        }),
    ))
}

fn url_from_body(body: &Bytes) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?.trim();
    let url = match text.strip_prefix("url=") {
        Some(encoded) => crate::admin::percent_decode(encoded),
        None => text.to_owned(),
    };
    (!url.is_empty()).then_some(url)
}
