//! Building responses: from stored objects (with conditionals, ranges and HEAD), errors,
//! local answers; and the last step every response takes ([`finalize`]).

use crate::body::{BodyPhases, ProxyBody};
use crate::chain::{BufferSide, PhaseOutcome};
use crate::error::{Kind, ProxyError};
use crate::head_framing::FramedStatus;
use crate::source::SourceBody;
use crate::state::State;
use crate::txn::{module_phase, Txn};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{request, response, Method, Response, StatusCode, Version};
use sluice_http::cache_status::{self, CacheStatus};
use sluice_http::conditional::{self, Precondition};
use sluice_http::range::{self, RangeOutcome};
use sluice_module::{LocalResponse, Subject};
use sluice_store::disk::DiskBody;
use sluice_store::{BodyChunks, Fill, ObjectMeta, StoredBody};
use std::sync::Arc;
use std::time::SystemTime;

/// The last step of every response: `Via`, the modules' `client_resp_headers` phase (and
/// whole-body buffering when a module asks for it), framing fixed for bodies modules may
/// change, and the transaction handed to the body.
pub async fn finalize(
    state: &State,
    mut txn: Box<Txn>,
    response: Response<ProxyBody>,
    method: &Method,
) -> Response<ProxyBody> {
    let (mut parts, mut body) = response.into_parts();
    // An intermediary sends its own HTTP version, not the origin's (RFC 9110 §6.2): a
    // response passed on from an HTTP/1.0 origin would otherwise go out as HTTP/1.0, and
    // hyper would close the client's keep-alive connection after it. (hyper answers an
    // HTTP/1.0 client in HTTP/1.0 on its own; HTTP/2 ignores the field.)
    parts.version = Version::HTTP_11;
    if let Some(rules) = &txn.route_headers {
        rules.response.apply(&mut parts.headers);
    }
    if state.config.headers.via {
        parts.headers.append(header::VIA, state.via(Version::HTTP_11));
    }
    let mut phases = BodyPhases::default();
    if !txn.modules.is_empty() {
        let status = FramedStatus::of(&parts);
        match module_phase!(txn, RespondOrBufferResponse, Subject::Response(&mut parts), |m, info| m
            .client_resp_headers(info, &mut parts))
        .and_then(|outcome| status.check(&parts).map(|()| outcome))
        {
            Ok(PhaseOutcome { respond: Some(answer), .. }) => {
                // A module's answer replaces the response, head and body, before anything is
                // sent; the original body is dropped (a fill's other readers go on). The
                // modules after it do not see the response, and no body phase runs on it.
                (parts, body) = local(state, *answer).into_parts();
                if state.config.headers.via {
                    parts.headers.append(header::VIA, state.via(Version::HTTP_11));
                }
            }
            Ok(outcome) => {
                let status_has_body = sluice_http::framing::status_has_body(parts.status);
                let has_body = *method != Method::HEAD && status_has_body;
                if *method == Method::HEAD && status_has_body {
                    drop_length_modules_may_change(&mut txn, &mut parts.headers, &body);
                }
                // No body phase without a body, or once every module is done.
                if let Some(found) = if has_body { body_phases(&mut txn, &body) } else { None } {
                    phases = found;
                    match outcome.buffer {
                        Some(max) => match buffer_whole_body(&mut txn, &mut parts, body, max, phases).await {
                            Ok(Buffered::Whole(whole)) => {
                                parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(whole.len()));
                                body = ProxyBody::full(whole);
                                phases = BodyPhases::default();
                            }
                            Ok(Buffered::Overflowed(resumed)) => {
                                // The buffering modules failed open and sit the rest out: the
                                // others see the body as it streams.
                                body = *resumed;
                                phases = body_phases(&mut txn, &body).unwrap_or_default();
                                if phases.may_change {
                                    parts.headers.remove(header::CONTENT_LENGTH);
                                }
                            }
                            Err(err) => return error_response(state, txn, &err),
                        },
                        None if phases.may_change => {
                            parts.headers.remove(header::CONTENT_LENGTH);
                        }
                        None => {}
                    }
                }
            }
            Err(err) => return error_response(state, txn, &err),
        }
    }
    if parts.status.canonical_reason().is_none() && parts.extensions.get::<hyper::ext::ReasonPhrase>().is_none() {
        parts.extensions.insert(class_phrase(parts.status));
    }
    txn.responding(&parts);
    Response::from_parts(parts, body.with_txn(txn, phases))
}

/// The reason phrase of a status hyper knows no phrase of, which it would write as `<none>`:
/// the name of its class (RFC 9110 §15). An origin's own phrase goes on instead
/// (`upstream::wire`).
fn class_phrase(status: StatusCode) -> hyper::ext::ReasonPhrase {
    hyper::ext::ReasonPhrase::from_static(match status.as_u16() {
        100..=199 => b"Informational",
        200..=299 => b"Successful",
        300..=399 => b"Redirection",
        400..=499 => b"Client Error",
        _ => b"Server Error",
    })
}

/// A `HEAD` response's `Content-Length` must be the one a `GET` would get (RFC 9110 §8.6):
/// when an active module may change the body that `GET` would carry, the length the store or
/// origin gave is not known to be it, so none is sent (which §8.6 allows).
fn drop_length_modules_may_change(txn: &mut Txn, headers: &mut http::HeaderMap, body: &ProxyBody) {
    let may_change = txn
        .modules
        .edits()
        .is_some_and(|edits| edits.client_response || (body.is_from_origin() && edits.origin_response));
    if may_change {
        headers.remove(header::CONTENT_LENGTH);
    }
}

/// The body phases `body` runs for the modules still active; `None` when there are none.
/// Every active module sees the body (`origin_resp_body` too, for a body straight from the
/// origin); only a declared edit ([`sluice_module::BodyEdits`]) lets it change length.
fn body_phases(txn: &mut Txn, body: &ProxyBody) -> Option<BodyPhases> {
    let edits = txn.modules.edits()?;
    let origin = body.is_from_origin();
    Some(BodyPhases { origin, client: true, may_change: edits.client_response || (origin && edits.origin_response) })
}

fn error_response(state: &State, mut txn: Box<Txn>, err: &ProxyError) -> Response<ProxyBody> {
    let response = error(state, err);
    let (parts, body) = response.into_parts();
    txn.responding(&parts);
    Response::from_parts(parts, body.with_txn(txn, BodyPhases::default()))
}

/// What holding a response body for the modules produced.
enum Buffered {
    /// The whole body, through the body phases.
    Whole(Bytes),
    /// The body outgrew the limit and the modules that asked for it failed open: what was
    /// read, then the rest, untouched so far.
    Overflowed(Box<ProxyBody>),
}

/// Reads the whole body (at most `max` bytes), then runs the body phases once on all of it
/// (where a module may defer, and is handed the body and `head`, not sent yet, back when its
/// work is done).
/// A body over `max` fails the modules that asked to buffer it, and only those (closed: an
/// error; open: [`Buffered::Overflowed`]).
async fn buffer_whole_body(
    txn: &mut Txn,
    head: &mut http::response::Parts,
    mut body: ProxyBody,
    max: usize,
    phases: BodyPhases,
) -> Result<Buffered, ProxyError> {
    use http_body_util::BodyExt;
    let mut whole = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ProxyError::bad_gateway("body failed while buffered for a module").with_cause(e))?;
        if let Ok(data) = frame.into_data() {
            if whole.len() + data.len() > max {
                txn.modules
                    .fail_buffering(BufferSide::Response, &format!("buffered body exceeds {max} bytes"))
                    .map_err(crate::txn::module_error)?;
                whole.extend_from_slice(&data);
                return Ok(Buffered::Overflowed(Box::new(ProxyBody::resumed(whole.freeze(), body))));
            }
            whole.extend_from_slice(&data);
        }
    }
    // Called once with the whole body, the body phases may defer, like header phases.
    let mut chunk = sluice_module::BodyChunk::new(whole.freeze(), true);
    if phases.origin {
        module_phase!(txn, Nothing, Subject::ResponseBody { head: &mut *head, body: &mut chunk }, |m, info| m
            .origin_resp_body(info, &mut chunk))?;
    }
    module_phase!(txn, Nothing, Subject::ResponseBody { head: &mut *head, body: &mut chunk }, |m, info| m
        .client_resp_body(info, &mut chunk))?;
    Ok(Buffered::Whole(chunk.into_data()))
}

/// A plain-text response generated by the proxy.
pub fn text(state: &State, status: StatusCode, body: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::DATE, state.dates.value());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The response for an error: its status and a one-line explanation. Malformed requests also
/// close the connection, since the rest of the stream cannot be trusted.
pub fn error(state: &State, err: &ProxyError) -> Response<ProxyBody> {
    error_explained(state, err, true)
}

/// [`error`], explaining an origin's failure only when `explain_origin`: the explanation
/// names the origin's address, its certificate's names and what it did wrong, which the
/// clients of a reverse proxy (the public) have no business learning. The proxy's log has
/// it either way.
pub fn error_explained(state: &State, err: &ProxyError, explain_origin: bool) -> Response<ProxyBody> {
    if let Some(answer) = err.module_answer() {
        return local(state, answer.clone());
    }
    let status = err.status();
    let reason = status.canonical_reason().unwrap_or("");
    let body = if explain_origin || err.side != crate::error::Side::Origin {
        format!("{} {reason}: {err}\n", status.as_u16())
    } else {
        format!("{} {reason}: the origin gave no usable answer\n", status.as_u16())
    };
    let mut response = text(state, status, body);
    // The rest of the request may still be on its way (a body not read): not worth reading.
    if matches!(err.kind, Kind::BadRequest | Kind::TooLarge | Kind::RequestTimeout | Kind::NotImplemented) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if let Kind::TooManyRequests { retry_after_secs } = err.kind {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    }
    if let Some(auth) = state.proxy_auth.as_ref().filter(|_| err.kind == Kind::ProxyAuthRequired) {
        response.headers_mut().insert(header::PROXY_AUTHENTICATE, auth.challenge());
    }
    if state.config.headers.cache_status && err.kind == Kind::NotCached {
        let cs =
            CacheStatus { fwd: Some(cache_status::Fwd::Miss), detail: Some("only-if-cached"), ..Default::default() };
        response.headers_mut().insert(cache_status::field_name(), cs.to_header_value(&state.name));
    }
    response
}

/// A module's local answer.
pub fn local(state: &State, local: LocalResponse) -> Response<ProxyBody> {
    let LocalResponse { mut status, mut headers, mut body } = local;
    // Framed by the host (docs/modules.md, "Framing is the host's"): hyper sets the length of the
    // body given; a module's own `Content-Length` or hop-by-hop fields do not go out.
    sluice_http::hop::remove_hop_by_hop(&mut headers);
    headers.remove(header::CONTENT_LENGTH);
    if !(200..=599).contains(&status.as_u16()) {
        tracing::warn!("a module answered with status {}; sent as 500", status.as_u16());
        status = StatusCode::INTERNAL_SERVER_ERROR;
    }
    if !sluice_http::framing::status_has_body(status) {
        body = Bytes::new();
    }
    let mut response = Response::new(ProxyBody::full(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response.headers_mut().entry(header::DATE).or_insert_with(|| state.dates.value());
    response
}

/// `OPTIONS` with `Max-Forwards: 0`: what this proxy allows.
pub fn options(state: &State) -> Response<ProxyBody> {
    let mut response = text(state, StatusCode::OK, Bytes::new());
    response.headers_mut().insert(
        header::ALLOW,
        HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT, PURGE"),
    );
    response
}

/// `TRACE` with `Max-Forwards: 0`: the request as received (RFC 9110 §9.3.8), without
/// credentials and cookies.
pub fn trace(state: &State, parts: &request::Parts) -> Response<ProxyBody> {
    use std::fmt::Write;
    let mut echo = format!("{} {} {:?}\r\n", parts.method, parts.uri, parts.version);
    for (name, value) in &parts.headers {
        if matches!(name.as_str(), "authorization" | "proxy-authorization" | "cookie") {
            continue;
        }
        let _ = write!(echo, "{}: {}\r\n", name, String::from_utf8_lossy(value.as_bytes()));
    }
    echo.push_str("\r\n");
    let mut response = text(state, StatusCode::OK, echo);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("message/http"));
    response
}

/// The body of a stored or storing object.
#[derive(Debug, Clone)]
pub enum ObjectBody<'a> {
    Stored(&'a StoredBody),
    Filling(Arc<Fill>),
    /// A verified body in the disk tier, streamed from its file.
    Disk(DiskBody),
}

/// A response from a stored (or storing) object to `client`: a 304 or 412 when the client's
/// preconditions say so, a 206 or 416 for a `Range` on a complete object (or on one still
/// arriving, when its length is announced), headers only for HEAD; `Age` and `Cache-Status`
/// set.
pub fn from_object(
    state: &State,
    client: &request::Parts,
    meta: &ObjectMeta,
    body: ObjectBody<'_>,
    cache_status: &CacheStatus,
    now: SystemTime,
) -> (Response<ProxyBody>, Precondition) {
    // An ESI template is assembled on the way out: the client's preconditions and ranges
    // cannot apply to it.
    let esi = crate::esi::skips_conditionals(client, &meta.headers, &state.name);
    let precondition = if has_preconditions(&client.headers) && !esi {
        conditional::evaluate(&client.method, &client.headers, meta.status, &meta.headers)
    } else {
        Precondition::Proceed
    };
    let mut headers = match precondition {
        // Room for Age, Cache-Status, Via, Accept-Ranges and a few module headers: free when
        // the stored map was built with that room (`sluice_store::stored_headers`).
        Precondition::Proceed => {
            let mut headers = meta.headers.clone();
            headers.reserve(sluice_store::SERVE_HEADROOM);
            headers
        }
        Precondition::NotModified => conditional::not_modified_headers(&meta.headers),
        Precondition::Failed => HeaderMap::new(),
    };
    headers.insert(header::AGE, HeaderValue::from(meta.age(now).as_secs()));
    if state.config.headers.cache_status {
        headers.append(sluice_http::cache_status::field_name(), cache_status.to_header_value(&state.name));
    }
    let (status, body) = match precondition {
        Precondition::NotModified => (StatusCode::NOT_MODIFIED, ProxyBody::empty()),
        Precondition::Failed => {
            headers.insert(header::DATE, state.dates.value());
            (StatusCode::PRECONDITION_FAILED, ProxyBody::empty())
        }
        Precondition::Proceed => match body {
            ObjectBody::Stored(stored) if esi => {
                (meta.status, ProxyBody::chunks(BodyChunks::new(stored.chunks().iter().cloned())))
            }
            ObjectBody::Stored(stored) => stored_body(meta, stored, client, &mut headers),
            ObjectBody::Filling(fill) if esi => (meta.status, ProxyBody::fill(fill.reader())),
            ObjectBody::Filling(fill) => filling_body(meta, &fill, client, &mut headers),
            ObjectBody::Disk(disk) if esi => (meta.status, ProxyBody::disk(disk)),
            ObjectBody::Disk(disk) => disk_body(meta, disk, client, &mut headers),
        },
    };
    let body = if client.method == Method::HEAD { ProxyBody::empty() } else { body };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    (response, precondition)
}

/// True when a request carries a precondition (RFC 9110 §13.1); most hits do not, and then
/// evaluation is skipped.
fn has_preconditions(headers: &HeaderMap) -> bool {
    const PRECONDITIONS: [HeaderName; 4] =
        [header::IF_NONE_MATCH, header::IF_MODIFIED_SINCE, header::IF_MATCH, header::IF_UNMODIFIED_SINCE];
    sluice_http::fields::has_any(headers, &PRECONDITIONS)
}

/// What the client's `Range` asks of a stored response of `len` bytes: ranges apply to 200
/// responses only (RFC 9110 §14.2), which also advertise `Accept-Ranges`.
fn range_outcome(meta: &ObjectMeta, client: &request::Parts, headers: &mut HeaderMap, len: u64) -> RangeOutcome {
    if meta.status != StatusCode::OK {
        return RangeOutcome::Full;
    }
    headers.entry(header::ACCEPT_RANGES).or_insert(HeaderValue::from_static("bytes"));
    range::evaluate(&client.method, &client.headers, &meta.headers, len)
}

/// A 416 for a body of `len` bytes (`Content-Range: bytes */len`, no body).
fn unsatisfiable(headers: &mut HeaderMap, len: u64) -> (StatusCode, ProxyBody) {
    headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("ascii"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
    (StatusCode::RANGE_NOT_SATISFIABLE, ProxyBody::empty())
}

/// The header fields of a single-range 206; returns the range to send.
fn single_range(headers: &mut HeaderMap, r: &std::ops::Range<u64>, len: u64) -> std::ops::Range<u64> {
    headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&range::content_range(r, len)).expect("ascii"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(r.end - r.start));
    r.clone()
}

/// Status and body for a complete stored object, honouring `Range` on a 200.
fn stored_body(
    meta: &ObjectMeta,
    stored: &StoredBody,
    client: &request::Parts,
    headers: &mut HeaderMap,
) -> (StatusCode, ProxyBody) {
    let len = stored.len();
    match range_outcome(meta, client, headers, len) {
        RangeOutcome::Full => {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            (meta.status, ProxyBody::chunks(BodyChunks::new(stored.chunks().iter().cloned())))
        }
        RangeOutcome::Unsatisfiable => unsatisfiable(headers, len),
        RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
            let r = single_range(headers, &ranges[0], len);
            (StatusCode::PARTIAL_CONTENT, ProxyBody::chunks(BodyChunks::new(stored.slice(r))))
        }
        RangeOutcome::Partial(ranges) => {
            let boundary = format!("sluice-{:016x}", rand::random::<u64>());
            let content_type = meta.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            let (parts, closing) = range::multipart_layout(&ranges, len, content_type, &boundary);
            let mut chunks = Vec::new();
            for part in parts {
                chunks.push(Bytes::from(part.head));
                chunks.extend(stored.slice(part.range));
            }
            chunks.push(Bytes::from(closing));
            let total: u64 = chunks.iter().map(|c| c.len() as u64).sum();
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(total));
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}")).expect("ascii"),
            );
            (StatusCode::PARTIAL_CONTENT, ProxyBody::chunks(BodyChunks::new(chunks)))
        }
    }
}

/// Status and body for an object still arriving, honouring a single `Range` on a 200 whose
/// length the origin announced: the range streams as its bytes arrive. A multi-range request,
/// or one for a body of unknown length, gets the whole body, which RFC 9110 §14.2 allows.
fn filling_body(
    meta: &ObjectMeta,
    fill: &Arc<Fill>,
    client: &request::Parts,
    headers: &mut HeaderMap,
) -> (StatusCode, ProxyBody) {
    let Some(len) = fill.expected_len() else {
        return (meta.status, ProxyBody::fill(fill.reader()));
    };
    match range_outcome(meta, client, headers, len) {
        RangeOutcome::Unsatisfiable => unsatisfiable(headers, len),
        RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
            let r = single_range(headers, &ranges[0], len);
            (StatusCode::PARTIAL_CONTENT, ProxyBody::fill(fill.range_reader(r)))
        }
        RangeOutcome::Full | RangeOutcome::Partial(_) => (meta.status, ProxyBody::fill(fill.reader())),
    }
}

/// The body of a response passed on from the origin, not stored, honouring a single `Range`
/// of the client's (which the cache did not send: it asked for the whole response, to store
/// it) on a 200 whose length the origin announced: a `206` streams that range of it, a `416`
/// answers one beyond it. Anything else passes whole, which RFC 9110 §14.2 allows. For a
/// transaction no module takes part in (a body phase would see only the range).
pub fn passed_body(client: &request::Parts, parts: &mut response::Parts, body: SourceBody) -> ProxyBody {
    let announced = sluice_http::fields::content_length(&parts.headers);
    let Some(len) = announced.filter(|_| parts.status == StatusCode::OK) else {
        return ProxyBody::origin(body);
    };
    match range::evaluate(&client.method, &client.headers, &parts.headers, len) {
        RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
            let r = single_range(&mut parts.headers, &ranges[0], len);
            parts.status = StatusCode::PARTIAL_CONTENT;
            ProxyBody::origin_range(body, r)
        }
        RangeOutcome::Unsatisfiable => {
            let (status, empty) = unsatisfiable(&mut parts.headers, len);
            parts.status = status;
            empty
        }
        RangeOutcome::Full | RangeOutcome::Partial(_) => ProxyBody::origin(body),
    }
}

/// Status and body for a disk body streamed from its file, honouring a single `Range` on a
/// 200 (a multi-range request gets the whole body, which RFC 9110 §14.2 allows).
fn disk_body(
    meta: &ObjectMeta,
    disk: DiskBody,
    client: &request::Parts,
    headers: &mut HeaderMap,
) -> (StatusCode, ProxyBody) {
    let len = disk.len();
    match range_outcome(meta, client, headers, len) {
        RangeOutcome::Unsatisfiable => unsatisfiable(headers, len),
        RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
            let r = single_range(headers, &ranges[0], len);
            (StatusCode::PARTIAL_CONTENT, ProxyBody::disk(disk.slice(r)))
        }
        RangeOutcome::Full | RangeOutcome::Partial(_) => {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            (meta.status, ProxyBody::disk(disk))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preconditions_are_found_among_few_fields_and_among_many() {
        for extra in [0, 20] {
            let mut headers = HeaderMap::new();
            for i in 0..extra {
                headers.insert(HeaderName::try_from(format!("x-f{i}")).unwrap(), HeaderValue::from_static("v"));
            }
            headers.insert(header::HOST, HeaderValue::from_static("a"));
            assert!(!has_preconditions(&headers), "{extra} extra fields");
            for name in
                [header::IF_NONE_MATCH, header::IF_MODIFIED_SINCE, header::IF_MATCH, header::IF_UNMODIFIED_SINCE]
            {
                let mut with = headers.clone();
                with.insert(name.clone(), HeaderValue::from_static("x"));
                assert!(has_preconditions(&with), "{name} among {extra} extra fields");
            }
        }
    }
}
