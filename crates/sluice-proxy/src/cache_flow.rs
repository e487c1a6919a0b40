//! The cache path of a GET or HEAD: lookup, reuse decision (RFC 9111 §4), collapsing onto a
//! fetch in flight, validation, storing while streaming, and serving stale on error.
//!
//! ```text
//! lookup ─ found ─ fresh / max-stale ──────────────────────────► hit
//!    │           ├ stale-while-revalidate ─ background fetch ──► stale hit
//!    │           └ must validate ─┐
//!    └ miss / vary-miss ──────────┴► join collapse ─ follower ─► share the leader's outcome
//!                                          └ leader ─► origin (conditional when stale)
//!                                                 304 ─► freshen, hit
//!                                                 storable ─► fill (pump task) + stream
//!                                                 otherwise ─► pass through
//!                                                 error ─► stale-if-error or 5xx
//! ```

use crate::body::{OutBody, ProxyBody};
use crate::deadline::TimerSlot;
use crate::error::{Kind, ProxyError, Side};
use crate::head_framing::FramedStatus;
use crate::meta::{Directives, Received};
use crate::outcome::ResultCode;
use crate::resolve::{Connect, Resolved};
use crate::respond::{self, ObjectBody};
use crate::service::{origin_request, within_deadline, Forward, Passed};
use crate::source::{Dest, SourceBody};
use crate::state::State;
use crate::tiers::{DiskHit, Tiers};
use crate::txn::{module_phase, OriginBodyPhase, Txn};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, response, Method, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use sluice_http::cache_status::{self, CacheStatus, Fwd};
use sluice_http::conditional::Precondition;
use sluice_http::reuse::{self, Reuse, StoredFreshness};
use sluice_http::vary;
use sluice_http::CacheControl;
use sluice_module::{LookupOutcome, LookupOverride, Subject};
use sluice_store::disk::DiskBody;
use sluice_store::{Fill, Join, Leader, Lookup, Object, ObjectMeta, Outcome, Suspended};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

/// True when the cache handles this request: GET or HEAD without a body.
pub fn applies(client: &request::Parts, body: &OutBody) -> bool {
    (client.method == Method::GET || client.method == Method::HEAD) && http_body::Body::is_end_stream(body)
}

/// What a fetch needs, independent of the client (a background revalidation has none).
#[derive(Debug, Clone)]
struct FetchSpec {
    target: Dest,
    uri: Uri,
    key: String,
    out_headers: HeaderMap,
    /// The client's request fields (for the Vary key of what gets stored).
    client_headers: HeaderMap,
    reverse: bool,
    /// The route's `default_ttl` (the lifetime of a response without an explicit one).
    default_ttl: Option<std::time::Duration>,
    /// A server error answering a validation serves the stale object when the stale window
    /// allows (`cache.stale_if_server_error` or the route's; reverse routes only).
    stale_if_server_error: bool,
    /// The `stale-while-revalidate` window given to responses without one (the route's or
    /// `cache.stale_while_revalidate`; reverse routes only).
    stale_while_revalidate: Option<u64>,
}

/// What a fetch produced.
enum Fetched {
    /// The origin confirmed the stale object (304); here it is, freshened, and stored unless
    /// the freshened headers forbid it (the reason given, as for [`Fetched::Pass`]: the
    /// stored response was dropped and only this client gets the freshened one).
    Refreshed(Arc<Object>, Option<&'static str>),
    /// The origin confirmed a suspended entry (304): its freshened metadata, no body.
    Confirmed(Arc<ObjectMeta>),
    /// A storable response; its body is filling (and will be stored when complete).
    /// `hold` reads nothing: it keeps the fill's start until the caller's own reader exists
    /// (a fill that outgrows the object limit drops what every reader has read).
    Filling { meta: Arc<ObjectMeta>, fill: Arc<Fill>, hold: sluice_store::FillReader },
    /// A response that is not stored, streamed through; `detail` says why.
    Pass { parts: Box<response::Parts>, body: SourceBody, detail: &'static str },
    /// The origin answered a validation with a server error and `stale-if-error` (or
    /// `stale_if_server_error`) allows the stale object. (A validation that gets no answer
    /// at all is an `Err`; the caller decides whether to serve stale.)
    ServeStale,
    /// A module answered at `req_out`.
    Local(Box<sluice_module::LocalResponse>),
}

/// What a conditional fetch validates: a stored object, or a suspended entry (metadata
/// only; see docs/store.md, "Suspended objects").
#[derive(Debug, Clone, Copy)]
enum Stale<'a> {
    Object(&'a Arc<Object>),
    Suspended(&'a Arc<Suspended>),
}

impl<'a> Stale<'a> {
    fn meta(self) -> &'a ObjectMeta {
        match self {
            Stale::Object(object) => &object.meta,
            Stale::Suspended(entry) => &entry.meta,
        }
    }

    /// The object with a body, which may be served stale.
    fn object(self) -> Option<&'a Arc<Object>> {
        match self {
            Stale::Object(object) => Some(object),
            Stale::Suspended(_) => None,
        }
    }
}

/// True when the client's own conditional (`If-None-Match`, `If-Modified-Since`) matches
/// `meta`'s validators, so a 304 from the origin answers it without a body.
fn client_matches(client: &request::Parts, meta: &ObjectMeta) -> bool {
    (client.headers.contains_key(header::IF_NONE_MATCH) || client.headers.contains_key(header::IF_MODIFIED_SINCE))
        && sluice_http::conditional::evaluate(&client.method, &client.headers, meta.status, &meta.headers)
            == Precondition::NotModified
}

/// Serves a GET/HEAD through the cache.
pub async fn serve(
    state: &Arc<State>,
    timers: &TimerSlot,
    txn: &mut Txn,
    forward: Forward,
    key: String,
) -> Result<Response<ProxyBody>, ProxyError> {
    let now = state.clock.now();
    let req_cc = CacheControl::from_headers(&forward.client.headers);
    let pragma = sluice_http::cache_control::pragma_no_cache(&forward.client.headers);
    let (mut stored, mut miss_reason) = match state.store.lookup(&key, |m| selects(m, &forward.client.headers)) {
        Lookup::Found(o) => (Some(o), Fwd::Stale),
        Lookup::VaryMiss => (None, Fwd::VaryMiss),
        Lookup::Miss => (None, Fwd::UriMiss),
    };
    // A memory miss consults the disk tier (docs/store.md, "The disk tier under the proxy").
    let mut from_disk = false;
    if stored.is_none() && state.store.disk().is_some() {
        match state.store.lookup_disk(&key, |m| selects(m, &forward.client.headers)).await {
            DiskHit::Loaded(object) => (stored, from_disk, miss_reason) = (Some(object), true, Fwd::Stale),
            DiskHit::Open { meta, body } => {
                let fresh = reuse::decide(&meta_freshness(&meta, now), &req_cc, pragma) == Reuse::Fresh;
                if fresh && txn.modules.is_empty() {
                    return Ok(disk_stream_hit(state, txn, &forward.client, &meta, body, now));
                }
                // To validate it, or for modules that may ask to: read it (not promoted).
                stored = Tiers::read_open(meta, body).await;
                from_disk = stored.is_some();
                if from_disk {
                    miss_reason = Fwd::Stale;
                }
            }
            DiskHit::VaryMiss => miss_reason = Fwd::VaryMiss,
            DiskHit::Miss => {}
        }
    }
    // Nothing with a body: a suspended entry may lend its validators and history.
    let mut suspended =
        if stored.is_none() { state.store.suspended(&key, |m| selects(m, &forward.client.headers)) } else { None };
    let mut reuse_verdict = stored.as_ref().map(|o| reuse::decide(&freshness(o, now), &req_cc, pragma));
    // A conditional client whose validators match a suspended entry that is fresh for this
    // request: its 304 needs no body, so the cache answers it without the origin.
    let mut answers_conditional = suspended.as_ref().is_some_and(|s| {
        client_matches(&forward.client, &s.meta)
            && reuse::decide(&meta_freshness(&s.meta, now), &req_cc, pragma) == Reuse::Fresh
    });
    if !txn.modules.is_empty() {
        let outcome = match reuse_verdict {
            Some(Reuse::Fresh) => LookupOutcome::Hit,
            Some(_) => LookupOutcome::Stale,
            None if answers_conditional => LookupOutcome::Hit,
            None => LookupOutcome::Miss,
        };
        let mut decision = LookupOverride::Keep;
        if let Some(local) = module_phase!(txn, Respond, Subject::Lookup(&mut decision), |m, info| m.cache_lookup(
            info,
            outcome,
            &mut decision
        ))?
        .respond
        {
            return Ok(respond::local(state, *local));
        }
        match decision {
            LookupOverride::Keep => {}
            LookupOverride::ForceMiss => {
                stored = None;
                suspended = None;
                reuse_verdict = None;
                answers_conditional = false;
                miss_reason = Fwd::Request;
            }
            LookupOverride::ForceRevalidate => {
                reuse_verdict = reuse_verdict.map(|_| Reuse::Validate);
                answers_conditional = false;
            }
        }
    }
    if let Some(entry) = suspended.as_ref().filter(|_| answers_conditional) {
        if let Some(response) = suspended_hit(state, txn, &forward.client, &entry.meta, now) {
            return Ok(response);
        }
    }
    if let (Some(object), Some(verdict)) = (&stored, reuse_verdict) {
        match verdict {
            Reuse::Fresh => {
                let code = if from_disk { ResultCode::DiskHit } else { ResultCode::MemHit };
                return Ok(hit(state, txn, &forward.client, object, now, code, None));
            }
            Reuse::StaleAllowed => {
                return Ok(hit(state, txn, &forward.client, object, now, ResultCode::StaleHit, None))
            }
            Reuse::StaleWhileRevalidate => {
                let spec = spec(state, &forward, &key);
                revalidate_in_background(state, spec, Arc::clone(object), req_cc.clone(), txn.info.client);
                return Ok(hit(state, txn, &forward.client, object, now, ResultCode::StaleHit, None));
            }
            Reuse::Validate => {}
        }
    }
    if req_cc.only_if_cached {
        return Err(ProxyError::new(Kind::NotCached, Side::Client, "only-if-cached and no usable stored response"));
    }
    // A conditional client whose validators match a suspended entry's: ask the origin with
    // them (a 304 needs no body). Any other client gets a full fetch (the entry's hits carry
    // over to what is stored).
    let revalidating = suspended.filter(|s| client_matches(&forward.client, &s.meta));
    let validate = stored.as_ref().map(Stale::Object).or(revalidating.as_ref().map(Stale::Suspended));
    // Why a stored response is checked with the origin (RFC 9211 §2.2): it was fresh, but the
    // request's directives (or a module) did not let the cache use it (`fwd=request`), or it
    // is stale, or its own `no-cache` asks for every use to be checked (`fwd=stale`).
    let validation_reason = match validate {
        Some(v) if meta_freshness(v.meta(), now).is_fresh() && !v.meta().cc.no_cache => Fwd::Request,
        _ => Fwd::Stale,
    };
    // A miss for a range far into the object: the client would wait for everything before
    // it; it goes to the origin as asked, and nothing is stored.
    if validate.is_none()
        && sluice_http::range::first_offset(&forward.client.method, &forward.client.headers)
            .is_some_and(|offset| offset > state.config.cache.range_offset_limit.0)
    {
        return within_deadline(
            state,
            timers,
            crate::service::pass(state, txn, forward, OutBody::Empty, Passed::RangeOffset),
        )
        .await;
    }
    // A client insisting on a fresh answer does not share another request's fetch.
    let collapsible = !(req_cc.no_cache || pragma || req_cc.max_age == Some(0));
    let spec = spec(state, &forward, &key);
    // The leader's origin failure, met by a follower as its own.
    let mut shared_failure = None;
    let leader = if collapsible {
        // The URL's slot first; when the fetch there brings another variant, this request's
        // own variant's slot, where requests for it wait on one fetch of it.
        let mut slot = Cow::Borrowed(key.as_str());
        loop {
            match state.collapser.join(&slot) {
                Join::Leader(leader) => break Some(leader),
                Join::Follower(pending) => {
                    state.metrics.collapsed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let wait = state.config.cache.collapse_wait.0;
                    break match pending.wait(wait).await {
                        Some(Outcome::Filling { meta, fill }) if selects(&meta, &forward.client.headers) => {
                            txn.code = ResultCode::Miss;
                            let cs = CacheStatus { fwd: Some(miss_reason), collapsed: true, ..Default::default() };
                            let (response, _) = respond::from_object(
                                state,
                                &forward.client,
                                &meta,
                                ObjectBody::Filling(fill),
                                &cs,
                                now,
                            );
                            return Ok(response);
                        }
                        Some(Outcome::Stored(object)) if selects(&object.meta, &forward.client.headers) => {
                            return Ok(hit(
                                state,
                                txn,
                                &forward.client,
                                &object,
                                state.clock.now(),
                                ResultCode::MemHit,
                                Some(true),
                            ));
                        }
                        Some(Outcome::OriginFailed { status, reason }) => {
                            shared_failure = Some(shared_origin_failure(status, &reason));
                            None
                        }
                        Some(Outcome::Filling { meta, .. })
                            if matches!(slot, Cow::Borrowed(_)) && !meta.vary.is_empty() =>
                        {
                            slot = Cow::Owned(variant_slot(&key, &meta, &forward.client.headers));
                            continue;
                        }
                        Some(Outcome::Stored(object))
                            if matches!(slot, Cow::Borrowed(_)) && !object.meta.vary.is_empty() =>
                        {
                            slot = Cow::Owned(variant_slot(&key, &object.meta, &forward.client.headers));
                            continue;
                        }
                        // Not shareable, failed, another variant again, or too slow: fetch on our own.
                        _ => None,
                    };
                }
            }
        }
    } else {
        None
    };
    // Set before the origin answers, so that a client leaving meanwhile is logged
    // `TCP_MISS_ABORTED` (or its refresh's), and an origin that fails `TCP_MISS/502`, as
    // Squid logs them; the outcome below sets the final code.
    txn.code = miss_code(validate.is_some(), &req_cc, pragma, false);
    let mut fetched = match shared_failure {
        Some(err) => Err(err),
        None => within_deadline(state, timers, fetch(state, &spec, &req_cc, validate, leader, Some(&mut *txn))).await,
    };
    if let Ok(Fetched::Confirmed(meta)) = &fetched {
        state.metrics.suspended_revalidations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(response) = confirmed(state, txn, &forward.client, meta, validation_reason) {
            return Ok(response);
        }
        // The freshened validators no longer match the client's: fetch the body.
        fetched = within_deadline(state, timers, fetch(state, &spec, &req_cc, None, None, Some(&mut *txn))).await;
    }
    let refresh = validate.is_some();
    let fwd_reason = if refresh { validation_reason } else { miss_reason };
    let now = state.clock.now();
    match fetched {
        Err(err) if refresh => {
            // The origin could not be reached: a disconnected cache may serve what it has.
            let unreachable = state.config.cache.stale_if_unreachable.0;
            if let Some(object) = stored.as_ref().filter(|object| {
                err.is_origin_failure()
                    && reuse::stale_if_unreachable_allows(&freshness(object, now), &req_cc, pragma, unreachable)
            }) {
                tracing::debug!("serving {key} stale: {err}");
                return Ok(hit(state, txn, &forward.client, object, now, ResultCode::RefreshFailOld, None));
            }
            // A stale response that may not be served (`must-revalidate`, no `stale-if-error`,
            // ...) could not be revalidated because the origin failed: RFC 9111 §5.2.2.2 asks
            // for `504 Gateway Timeout` rather than the `502` the failed fetch alone gives.
            txn.code = ResultCode::RefreshFailErr;
            Err(if err.kind == Kind::BadGateway { ProxyError { kind: Kind::GatewayTimeout, ..err } } else { err })
        }
        Err(err) => Err(err),
        Ok(Fetched::Local(local)) => Ok(respond::local(state, *local)),
        Ok(Fetched::Confirmed(_)) => {
            Err(ProxyError::new(Kind::Internal, Side::Proxy, "an unconditional fetch was answered as a validation"))
        }
        Ok(Fetched::ServeStale) => {
            let object = stored.as_ref().expect("ServeStale only with a stored object");
            Ok(hit(state, txn, &forward.client, object, now, ResultCode::RefreshFailOld, None))
        }
        Ok(Fetched::Refreshed(object, unstored)) => {
            // The origin was asked: a 304 to the client's own conditional is still
            // `TCP_REFRESH_UNMODIFIED` (Squid's `TCP_IMS_HIT` is answered without the origin).
            txn.code = miss_code(refresh, &req_cc, pragma, true);
            let cs = CacheStatus {
                fwd: Some(validation_reason),
                fwd_status: Some(304),
                ttl: unstored.is_none().then(|| freshness(&object, now).ttl_secs()),
                detail: unstored,
                ..Default::default()
            };
            let (response, _) =
                respond::from_object(state, &forward.client, &object.meta, ObjectBody::Stored(&object.body), &cs, now);
            Ok(response)
        }
        Ok(Fetched::Filling { meta, fill, hold }) => {
            txn.code = miss_code(refresh, &req_cc, pragma, false);
            let cs = CacheStatus {
                fwd: Some(fwd_reason),
                fwd_status: Some(meta.status.as_u16()),
                stored: true,
                ttl: Some(meta.lifetime.as_secs() as i64 - meta.initial_age.as_secs() as i64),
                ..Default::default()
            };
            let (response, _) =
                respond::from_object(state, &forward.client, &meta, ObjectBody::Filling(fill), &cs, now);
            drop(hold);
            Ok(response)
        }
        Ok(Fetched::Pass { parts, body, detail }) => {
            let mut parts = *parts;
            txn.code = miss_code(refresh, &req_cc, pragma, false);
            if state.config.headers.cache_status {
                let cs = CacheStatus {
                    fwd: Some(fwd_reason),
                    fwd_status: Some(parts.status.as_u16()),
                    detail: Some(detail),
                    ..Default::default()
                };
                parts.headers.append(cache_status::field_name(), cs.to_header_value(&state.name));
            }
            // The client's own conditionals and range were not sent; answer them from this
            // response (unless it is an ESI template, assembled on the way out).
            let esi = crate::esi::skips_conditionals(&forward.client, &parts.headers, &state.name);
            let pre = if esi {
                Precondition::Proceed
            } else {
                sluice_http::conditional::evaluate(
                    &forward.client.method,
                    &forward.client.headers,
                    parts.status,
                    &parts.headers,
                )
            };
            if pre == Precondition::NotModified {
                let mut headers = sluice_http::conditional::not_modified_headers(&parts.headers);
                // Every cache's entry, the origin side's and ours (RFC 9211 §2: a list).
                for cs in parts.headers.get_all(cache_status::field_name()) {
                    headers.append(cache_status::field_name(), cs.clone());
                }
                parts.status = StatusCode::NOT_MODIFIED;
                parts.headers = headers;
                return Ok(Response::from_parts(parts, ProxyBody::empty()));
            }
            let body = if forward.client.method == Method::HEAD {
                ProxyBody::empty()
            } else if esi || !txn.modules.is_empty() {
                ProxyBody::origin(body)
            } else {
                respond::passed_body(&forward.client, &mut parts, body)
            };
            Ok(Response::from_parts(parts, body))
        }
    }
}

fn spec(state: &State, forward: &Forward, key: &str) -> FetchSpec {
    FetchSpec {
        target: forward.target.clone(),
        uri: forward.uri.clone(),
        key: key.to_owned(),
        out_headers: forward.origin_headers(state),
        client_headers: forward.client.headers.clone(),
        reverse: forward.reverse,
        default_ttl: forward.caching.default_ttl,
        // An out-of-band agreement with the origin (RFC 9111 §4.2.4): only an accelerator's.
        stale_if_server_error: forward.reverse
            && forward.caching.stale_if_server_error.unwrap_or(state.config.cache.stale_if_server_error),
        stale_while_revalidate: Some(
            forward.caching.stale_while_revalidate.unwrap_or(state.config.cache.stale_while_revalidate.0).as_secs(),
        )
        .filter(|&secs| forward.reverse && secs > 0),
    }
}

/// Does the stored response `meta` match the request's `Vary` fields?
fn selects(meta: &ObjectMeta, request: &HeaderMap) -> bool {
    meta.vary.is_empty() || vary::vary_key(&meta.vary, request) == meta.vary_key
}

fn freshness(object: &Object, now: SystemTime) -> StoredFreshness<'_> {
    meta_freshness(&object.meta, now)
}

fn meta_freshness(meta: &ObjectMeta, now: SystemTime) -> StoredFreshness<'_> {
    StoredFreshness { lifetime: meta.lifetime, age: meta.age(now), response_cc: &meta.cc }
}

/// The 304 for a conditional client after the origin confirmed a suspended entry
/// (`TCP_REFRESH_UNMODIFIED`, `Cache-Status: fwd=<reason>; fwd-status=304; detail=suspended`);
/// `None` when the freshened metadata no longer satisfies the client's conditional (there is
/// no body to send instead).
fn confirmed(
    state: &State,
    txn: &mut Txn,
    client: &request::Parts,
    meta: &ObjectMeta,
    reason: Fwd,
) -> Option<Response<ProxyBody>> {
    let now = state.clock.now();
    let cs = CacheStatus { fwd: Some(reason), fwd_status: Some(304), ..Default::default() };
    let response = suspended_not_modified(state, client, meta, cs, now)?;
    txn.code = ResultCode::RefreshUnmodified;
    Some(response)
}

/// The 304 for a conditional client from a suspended entry that is fresh for its request,
/// without the origin (`TCP_IMS_HIT`, `Cache-Status: …; hit; detail=suspended`); `None` if
/// the entry does not answer the client's conditional after all.
fn suspended_hit(
    state: &State,
    txn: &mut Txn,
    client: &request::Parts,
    meta: &ObjectMeta,
    now: SystemTime,
) -> Option<Response<ProxyBody>> {
    let response = suspended_not_modified(state, client, meta, CacheStatus { hit: true, ..Default::default() }, now)?;
    txn.code = ResultCode::ImsHit;
    state.metrics.suspended_hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(response)
}

/// A suspended entry's 304 for the client's conditional, with `cs` completed by the entry's
/// TTL and `detail=suspended`; `None` when the conditional does not evaluate to 304.
fn suspended_not_modified(
    state: &State,
    client: &request::Parts,
    meta: &ObjectMeta,
    mut cs: CacheStatus,
    now: SystemTime,
) -> Option<Response<ProxyBody>> {
    cs.ttl = Some(meta_freshness(meta, now).ttl_secs());
    cs.detail = Some("suspended");
    let empty = sluice_store::StoredBody::new(Vec::new());
    let (response, pre) = respond::from_object(state, client, meta, ObjectBody::Stored(&empty), &cs, now);
    (pre == Precondition::NotModified).then_some(response)
}

/// A fresh hit streamed from its file in the disk tier (too large to promote).
fn disk_stream_hit(
    state: &State,
    txn: &mut Txn,
    client: &request::Parts,
    meta: &ObjectMeta,
    body: DiskBody,
    now: SystemTime,
) -> Response<ProxyBody> {
    let cs = CacheStatus {
        hit: true,
        ttl: Some(meta_freshness(meta, now).ttl_secs()),
        detail: Some("disk"),
        ..Default::default()
    };
    let (response, pre) = respond::from_object(state, client, meta, ObjectBody::Disk(body), &cs, now);
    txn.code = if pre == Precondition::NotModified { ResultCode::ImsHit } else { ResultCode::DiskHit };
    response
}

/// A response from a stored object (a hit of some kind).
fn hit(
    state: &State,
    txn: &mut Txn,
    client: &request::Parts,
    object: &Object,
    now: SystemTime,
    code: ResultCode,
    collapsed: Option<bool>,
) -> Response<ProxyBody> {
    let sf = freshness(object, now);
    let cs = CacheStatus {
        hit: true,
        ttl: Some(sf.ttl_secs()),
        collapsed: collapsed.unwrap_or(false),
        detail: (code == ResultCode::DiskHit).then_some("disk"),
        ..Default::default()
    };
    let (response, pre) = respond::from_object(state, client, &object.meta, ObjectBody::Stored(&object.body), &cs, now);
    // Squid's `TCP_IMS_HIT` is a fresh response answering the client's conditional; a stale
    // one keeps its code.
    let fresh = matches!(code, ResultCode::MemHit | ResultCode::DiskHit);
    txn.code = if fresh && pre == Precondition::NotModified { ResultCode::ImsHit } else { code };
    response
}

/// Starts a background revalidation (RFC 5861 `stale-while-revalidate`) unless a fetch for
/// the key is already in flight. It is a transaction of its own ([`Txn::background`]), set
/// off by a request from `client`: the modules run their origin phases on what gets stored,
/// and it is logged and counted with its result (`TCP_REFRESH_*`).
fn revalidate_in_background(
    state: &Arc<State>,
    spec: FetchSpec,
    stale: Arc<Object>,
    req_cc: CacheControl,
    client: std::net::SocketAddr,
) {
    let Join::Leader(leader) = state.collapser.join(&spec.key) else { return };
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let mut txn = Txn::background(&state, client, &spec.uri);
        let fetched = match txn.check_start() {
            Ok(()) => fetch(&state, &spec, &req_cc, Some(Stale::Object(&stale)), Some(leader), Some(&mut txn)).await,
            Err(err) => Err(err),
        };
        let (code, status) = match &fetched {
            Ok(Fetched::Refreshed(..) | Fetched::Confirmed(_)) => {
                (ResultCode::RefreshUnmodified, StatusCode::NOT_MODIFIED)
            }
            Ok(Fetched::Filling { meta, .. }) => (ResultCode::RefreshModified, meta.status),
            Ok(Fetched::Pass { parts, .. }) => (ResultCode::RefreshModified, parts.status),
            Ok(Fetched::ServeStale) => (ResultCode::RefreshFailOld, StatusCode::BAD_GATEWAY),
            Ok(Fetched::Local(local)) => (ResultCode::None, local.status),
            Err(err) => {
                tracing::info!("background revalidation of {} failed: {err}", spec.uri);
                (ResultCode::RefreshFailErr, err.status())
            }
        };
        txn.code = code;
        txn.record_status(status);
        txn.complete(0, fetched.is_ok());
    });
}

/// Request fields a cache must not forward on a fetch it will store: the client's own
/// validators and ranges (the cache fetches the full, current representation and answers
/// them itself).
const CLIENT_ONLY: [header::HeaderName; 6] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

/// The collapse slot of the variant of `key` that `request` selects, given a response of
/// another variant (`meta`, which names the fields it varies on): the key, then each
/// field's normalised value (`vary::vary_key`, whose values never hold control bytes),
/// separated by control bytes.
fn variant_slot(key: &str, meta: &ObjectMeta, request: &HeaderMap) -> String {
    let mut slot = key.to_owned();
    for value in vary::vary_key(&meta.vary, request) {
        slot.push('\u{0}');
        match value {
            Some(value) => slot.push_str(&value),
            None => slot.push('\u{1}'),
        }
    }
    slot
}

/// The error a follower answers with when its leader's origin failed ([`Outcome::OriginFailed`]):
/// the leader's own, as the follower's fetch would have met it. Followers that hold a stale
/// object still serve it as its `stale-if-error` allows.
fn shared_origin_failure(status: u16, reason: &str) -> ProxyError {
    let context = format!("collapsed onto a fetch that failed: {reason}");
    if status == StatusCode::GATEWAY_TIMEOUT.as_u16() {
        ProxyError::gateway_timeout(context)
    } else {
        ProxyError::bad_gateway(context)
    }
}

/// Fetches from the origin for the cache: a GET, conditional when `stale` is given (a stored
/// object, or a suspended entry whose 304 freshens its metadata and gives
/// [`Fetched::Confirmed`]).
async fn fetch(
    state: &Arc<State>,
    spec: &FetchSpec,
    req_cc: &CacheControl,
    stale: Option<Stale<'_>>,
    mut leader: Option<Leader>,
    mut txn: Option<&mut Txn>,
) -> Result<Fetched, ProxyError> {
    let target = match txn.as_mut() {
        Some(txn) => match crate::resolve::resolve(txn, &spec.target).await? {
            Resolved::Connect(target) => target,
            Resolved::Respond(local) => return Ok(Fetched::Local(local)),
        },
        None => Connect::Given(&spec.target),
    };
    // Before the request goes out: a removal of its URL from now on keeps its body out of
    // the store (crate::invalidations).
    let mark = state.store.invalidation_mark();
    // A 304 that does not select the stored response (RFC 9111 §4.3.4) leaves nothing to
    // serve: ask again, unconditionally.
    let mut validating = stale;
    let (origin, request_time) = loop {
        let mut headers = spec.out_headers.clone();
        for name in &CLIENT_ONLY {
            headers.remove(name);
        }
        if let Some(validated) = validating {
            sluice_http::validation::add_validators(&mut headers, &validated.meta().headers);
        }
        let mut parts = origin_request(&spec.uri, Method::GET, headers)?;
        if let Some(txn) = txn.as_mut() {
            if let Some(local) = module_phase!(txn, Respond, Subject::Request(&mut parts), |m, info| m
                .req_out(info, &mut parts))?
            .respond
            {
                return Ok(Fetched::Local(local));
            }
        }
        let request_time = state.clock.now();
        let origin = match crate::source::send(state, &target, Request::from_parts(parts, OutBody::Empty)).await {
            Ok(origin) => origin,
            Err(err) => {
                if let Some(leader) = leader.as_mut().filter(|_| err.is_origin_failure()) {
                    let reason = err.to_string().into();
                    leader.publish(Outcome::OriginFailed { status: err.status().as_u16(), reason });
                }
                return Err(err);
            }
        };
        let unselected_304 = validating.is_some_and(|validated| {
            origin.response.status() == StatusCode::NOT_MODIFIED
                && !sluice_http::validation::not_modified_selects(
                    &validated.meta().headers,
                    origin.response.headers(),
                    true,
                )
        });
        if unselected_304 {
            validating = None;
            continue;
        }
        break (origin, request_time);
    };
    if let Some(txn) = txn.as_mut() {
        txn.peer = origin.peer;
    }
    let response_time = state.clock.now();
    let (mut parts, body) = origin.response.into_parts();
    sluice_http::hop::remove_hop_by_hop(&mut parts.headers);
    if let Some(txn) = txn.as_mut().filter(|txn| !txn.modules.is_empty()) {
        let status = FramedStatus::of(&parts);
        module_phase!(txn, Nothing, Subject::Response(&mut parts), |m, info| m.origin_resp_headers(info, &mut parts))?;
        status.check(&parts)?;
    }
    if let Some(validated) = validating {
        if parts.status == StatusCode::NOT_MODIFIED {
            let mut headers = validated.meta().headers.clone();
            // A module that may rewrite origin bodies may have given the stored one its type.
            let reshaped = txn.as_mut().and_then(|txn| txn.modules.edits()).is_some_and(|e| e.origin_response);
            sluice_http::validation::freshen_from_304(&mut headers, &parts.headers, reshaped);
            let status = validated.meta().status;
            // The freshened response is judged again as a new one would be (RFC 9111 §3,
            // §4.3.4): a 304 may bring `private`, `no-store` or a `Set-Cookie`, which the
            // stored response must not keep for other clients. This client alone gets it;
            // the stored response is dropped.
            let cc = directives(state, spec).cache_control(&headers);
            let unstorable = storability(state, spec, status, &headers, &cc).err();
            let meta = Arc::new(build_meta(state, spec, status, headers, request_time, response_time));
            if let Some(detail) = unstorable {
                state.hit_for_pass.remember(&spec.key, status, detail, response_time);
                state.store.remove(&spec.key);
            }
            let object = match validated {
                Stale::Object(object) if unstorable.is_none() => object,
                Stale::Object(object) => {
                    if let Some(leader) = leader.as_mut() {
                        leader.publish(Outcome::NotShareable);
                    }
                    return Ok(Fetched::Refreshed(Arc::new(object.with_meta(meta)), unstorable));
                }
                Stale::Suspended(_) => {
                    if unstorable.is_none() {
                        state.store.freshen_suspended(Arc::clone(&meta));
                    }
                    if let Some(leader) = leader.as_mut() {
                        leader.publish(Outcome::NotShareable);
                    }
                    return Ok(Fetched::Confirmed(meta));
                }
            };
            let fresh = object.with_meta(meta);
            let stored =
                state.store.insert(fresh).unwrap_or_else(|| Arc::new(object.with_meta(Arc::clone(&object.meta))));
            if let Some(leader) = leader.as_mut() {
                leader.publish(Outcome::Stored(Arc::clone(&stored)));
            }
            return Ok(Fetched::Refreshed(stored, None));
        }
        let failed = matches!(parts.status.as_u16(), 500 | 502 | 503 | 504);
        if let Some(object) = validated.object().filter(|_| failed) {
            let stored = freshness(object, state.clock.now());
            let configured = spec.stale_if_server_error && {
                let pragma = sluice_http::cache_control::pragma_no_cache(&spec.client_headers);
                reuse::stale_if_unreachable_allows(&stored, req_cc, pragma, state.config.cache.stale_if_unreachable.0)
            };
            if configured || reuse::stale_if_error_allows(&stored, req_cc) {
                return Ok(Fetched::ServeStale);
            }
        }
    }
    let cc = directives(state, spec).cache_control(&parts.headers);
    // The active modules see the stored body in the pump; when one may change it, readers of
    // the fill get it without the origin's length (the stored object gets the true one).
    let editors =
        if sluice_http::framing::status_has_body(parts.status) { txn.and_then(Txn::origin_body_phase) } else { None };
    let may_change = editors.as_ref().is_some_and(|e| e.may_change);
    let verdict = storability(state, spec, parts.status, &parts.headers, &cc).and_then(|()| {
        let mut headers = parts.headers.clone();
        if may_change {
            headers.remove(header::CONTENT_LENGTH);
        }
        let meta = build_meta(state, spec, parts.status, headers, request_time, response_time);
        if never_reusable(&meta) {
            return Err("stale-on-arrival");
        }
        Ok(Arc::new(meta))
    });
    match verdict {
        Ok(meta) => {
            let fill = Fill::new(if may_change { None } else { sluice_http::fields::content_length(&parts.headers) });
            let hold = fill.reader();
            if let Some(leader) = leader.as_mut() {
                leader.publish(Outcome::Filling { meta: Arc::clone(&meta), fill: Arc::clone(&fill) });
            }
            let pumped = Pumped { fill: Arc::clone(&fill), meta: Arc::clone(&meta), mark };
            tokio::spawn(pump(Arc::clone(state), body, pumped, leader, editors));
            Ok(Fetched::Filling { meta, fill, hold })
        }
        Err(detail) => {
            if let Some(leader) = leader.as_mut() {
                leader.publish(Outcome::NotShareable);
            }
            state.hit_for_pass.remember(&spec.key, parts.status, detail, response_time);
            if stale.is_some() && !parts.status.is_server_error() {
                // A new, unstorable response supersedes what we had; a server error does not
                // (RFC 9111 §4.3.3: the stored response may still serve, e.g. stale-if-error).
                state.store.remove(&spec.key);
            }
            Ok(Fetched::Pass { parts: Box::new(parts), body, detail })
        }
    }
}

/// The result code of a response fetched from the origin, as Squid logs it: a stored
/// response the origin confirmed (`unmodified`, its 304: `TCP_REFRESH_UNMODIFIED`, also when
/// the client forced the check: nothing was fetched again), a refresh the client forced that
/// brought a new response (`no-cache` with a stored response: `TCP_CLIENT_REFRESH_MISS`), a
/// refresh of a stale stored one (`TCP_REFRESH_MODIFIED`), or a miss (nothing stored,
/// `no-cache` or not: `TCP_MISS`).
fn miss_code(refresh: bool, req_cc: &CacheControl, pragma: bool, unmodified: bool) -> ResultCode {
    if !refresh {
        ResultCode::Miss
    } else if unmodified {
        ResultCode::RefreshUnmodified
    } else if req_cc.no_cache || pragma {
        ResultCode::ClientRefreshMiss
    } else {
        ResultCode::RefreshModified
    }
}

/// A response stale on arrival with no validator and no stale-serving window could never be
/// reused: storing it (or sharing it with collapsed requests) would serve nothing but waste.
fn never_reusable(meta: &ObjectMeta) -> bool {
    meta.lifetime.is_zero()
        && !meta.headers.contains_key(header::ETAG)
        && !meta.headers.contains_key(header::LAST_MODIFIED)
        && meta.cc.stale_while_revalidate.is_none()
        && meta.cc.stale_if_error.is_none()
}

/// Why a response with `status` and `headers` (`cc` their cache directives) is not stored,
/// or `Ok` when it is.
fn storability(
    state: &State,
    spec: &FetchSpec,
    status: StatusCode,
    headers: &HeaderMap,
    cc: &CacheControl,
) -> Result<(), &'static str> {
    let fields = directives(state, spec).freshness_fields(headers);
    sluice_http::storable::storable(&Method::GET, &spec.client_headers, status, &fields, cc).map_err(|r| r.token())?;
    if !state.config.cache.store_set_cookie && headers.contains_key(header::SET_COOKIE) {
        return Err("set-cookie");
    }
    if sluice_http::fields::content_length(headers).is_some_and(|len| len > state.store.max_object()) {
        return Err("too-large");
    }
    Ok(())
}

fn directives<'a>(state: &'a State, spec: &FetchSpec) -> Directives<'a> {
    let cache = &state.config.cache;
    Directives {
        cdn: spec.reverse && cache.cdn_cache_control,
        surrogate: (spec.reverse && cache.surrogate_control).then_some(state.name.as_str()),
    }
}

fn build_meta(
    state: &State,
    spec: &FetchSpec,
    status: StatusCode,
    headers: HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> ObjectMeta {
    let received =
        Received { key: spec.key.clone(), status, headers, request: &spec.client_headers, request_time, response_time };
    let heuristic = sluice_http::freshness::Heuristic { fixed: spec.default_ttl, ..state.heuristic };
    let mut meta = crate::meta::describe(received, directives(state, spec), &heuristic);
    // The configured window is the cache's own: clients still get the origin's fields, and
    // the directives that forbid serving stale (`must-revalidate`, `no-cache`, ...) still do.
    if meta.cc.stale_while_revalidate.is_none() {
        meta.cc.stale_while_revalidate = spec.stale_while_revalidate;
    }
    meta
}

/// What [`pump`] fills: the fill, the metadata it is stored with, and the fetch's mark in
/// the sequence of removals (taken before its request went out).
struct Pumped {
    fill: Arc<Fill>,
    meta: Arc<ObjectMeta>,
    mark: crate::invalidations::Mark,
}

/// Reads an origin body into `fill`, through the modules' `origin_resp_body` phase when
/// `editors` is given (every piece, the last with `is_end()`), and stores the object when it
/// is complete. A body that fails (truncated, reset, silent, or a module failing closed, or
/// changing its length undeclared) fails the fill and is never stored; one that grows past
/// the object limit, or past what the fills storing may hold together
/// (`cache.filling_memory`, [`crate::fill_budget`]), or that a module failed open part-way
/// through (edited up to there, not after), is streamed to its readers but not stored; one
/// whose URL was removed while it was fetched (purged, deleted, invalidated) is not stored
/// either.
async fn pump(
    state: Arc<State>,
    mut body: SourceBody,
    pumped: Pumped,
    mut leader: Option<Leader>,
    mut editors: Option<OriginBodyPhase>,
) {
    let Pumped { fill, meta, mark } = pumped;
    let max = state.store.max_object();
    // False once the body will not be stored: no one else joins, and it streams to its
    // readers in a bounded window instead of being held whole (`Fill::stop_keeping`).
    let mut storing = true;
    // What this fill holds of the budget of all fills storing; given back when it ends.
    let mut held = crate::fill_budget::Held::new(state.store.fill_budget());
    let mut modules_saw_end = false;
    let editing = editors.is_some();
    // The piece as the modules left it, and whether one of them failed open on the body.
    let mut edit = |data: Bytes, end: bool| -> Result<(Bytes, bool), String> {
        match &mut editors {
            Some(phase) => phase.run(data, end).map(|data| (data, phase.failed_open())),
            None => Ok((data, false)),
        }
    };
    while let Some(frame) = body.frame().await {
        let data = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Err(e) => {
                tracing::info!("not storing {}: {e}", meta.key);
                fill.fail(e.to_string());
                return;
            }
        };
        state.metrics.origin_body_bytes.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let end = http_body::Body::is_end_stream(&body);
        modules_saw_end |= end;
        let failed_open = match edit(data, end) {
            Ok((data, failed_open)) => {
                fill.push(data);
                failed_open
            }
            Err(e) => {
                fill.fail(e);
                return;
            }
        };
        if storing && failed_open {
            storing = false;
            drop(leader.take());
            fill.stop_keeping();
            tracing::info!("not storing {}: a module failed open part-way through its body", meta.key);
        }
        if storing && fill.len() > max {
            // The URL is passed by for a while, as other responses too large to store are.
            storing = false;
            drop(leader.take());
            fill.stop_keeping();
            state.hit_for_pass.remember(&meta.key, meta.status, "too-large", state.clock.now());
            tracing::debug!("not storing {}: its body passed cache.max_object", meta.key);
        }
        if storing && !held.take(fill.len().saturating_sub(held.bytes())) {
            storing = false;
            drop(leader.take());
            fill.stop_keeping();
            held.release();
            state.metrics.fills_over_budget.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                "not storing {}: the responses being stored hold {} bytes (cache.filling_memory {})",
                meta.key,
                state.store.fill_budget().held(),
                state.store.fill_budget().max()
            );
        }
        if !storing && !std::future::poll_fn(|cx| fill.poll_room(cx)).await {
            // Every reader is gone: nobody wants the rest.
            fill.fail("no reader left for a body not to be stored");
            return;
        }
    }
    if editing && !modules_saw_end {
        match edit(Bytes::new(), true) {
            Ok((data, failed_open)) => {
                fill.push(data);
                storing &= !failed_open;
            }
            Err(e) => {
                fill.fail(e);
                return;
            }
        }
    }
    if storing {
        let stored = fill.body();
        let mut stored_meta = (*meta).clone();
        stored_meta.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(stored.len()));
        if state.store.insert_fetched(Object::new(Arc::new(stored_meta), stored), mark).is_none() {
            tracing::debug!("{} not stored (removed while it was fetched, or refused by the tiers)", meta.key);
        }
    }
    // Dropped only after the store: a file source's body then removes what was stored if
    // the file changed while it was read (source/inflight.rs).
    drop(body);
    // Stored first, then the collapse slot closes, then readers see the end: a client that
    // has read the whole body finds the object in the store.
    drop(leader);
    fill.complete();
}
