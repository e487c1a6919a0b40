//! The entry point of every request: checks, routing, and the choice between the cache path,
//! pass-through, a CONNECT tunnel and local answers.

use crate::body::{OutBody, ProxyBody};
use crate::client_body::ClientBody;
use crate::config::Mode;
use crate::deadline::{Elapsed, TimerSlot};
use crate::error::{Kind, ProxyError, Side};
use crate::head_framing::FramedStatus;
use crate::options_form::{AsteriskForm, OptionsForms};
use crate::outcome::ResultCode;
use crate::respond;
use crate::route::RouteCaching;
use crate::source::Dest;
use crate::state::State;
use crate::txn::{module_phase, Txn};
use crate::upstream::Target;
use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{request, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use sluice_http::cache_status::Fwd;
use sluice_http::surrogate::SURROGATE_CAPABILITY;
use sluice_module::Subject;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What a connection knows about itself.
#[derive(Debug)]
pub struct ConnInfo {
    pub client: SocketAddr,
    /// The client's IP address as a field value ([`client_ip_value`]), for `X-Forwarded-For`:
    /// formatted once per connection, not per request.
    pub client_ip: HeaderValue,
    pub mode: Mode,
    pub tls: bool,
    /// The client passed the listener ACL.
    pub allowed: bool,
    /// The client is a peer in `access.forwarded_for_from`: each request's `X-Forwarded-For`
    /// names its own client ([`crate::forwarded`]).
    pub forwards_clients: bool,
    /// The connection's peer is in `access.forwarded_for_from` (and stays so when a
    /// request's `X-Forwarded-For` names another client): the `X-Forwarded-Proto` of its
    /// requests is believed and passed on; anyone else's is replaced.
    pub from_trusted_peer: bool,
    /// Set on plaintext connections whose stream sends disk bodies with `sendfile` (see
    /// [`crate::zero_copy`]).
    pub zero_copy: Option<crate::zero_copy::SendfileQueue>,
    /// When the connection was last active, for its idle timer ([`crate::idle`]); `None` for
    /// the proxy's own requests.
    pub activity: Option<Arc<crate::idle::Activity>>,
    /// The forms of its `OPTIONS` requests, noted by its framing guard (HTTP/1 connections;
    /// see [`crate::options_form`]).
    pub options_forms: Option<Arc<OptionsForms>>,
    /// Where the service tells its framing guard whether a request that may switch
    /// protocols did (HTTP/1 connections; see [`crate::switch_outcome`]).
    pub switches: Option<Arc<crate::switch_outcome::SwitchOutcome>>,
    /// The tally of the HTTP/2 requests its client cancelled (client connections; see
    /// [`crate::cancels`]).
    pub cancels: Option<Arc<crate::cancels::Cancels>>,
    /// The timers of its transaction deadlines ([`within_deadline`]), reused request after
    /// request.
    pub timers: TimerSlot,
    /// The client certificate its TLS listener verified, as origins are told of it
    /// ([`crate::client_cert::forwarded_value`]).
    pub client_cert: Option<Arc<HeaderValue>>,
}

impl ConnInfo {
    /// This connection as seen by generation `state` (after a configuration reload): the
    /// client's access decided by its ACLs, the rest as accepted.
    pub(crate) fn under(&self, state: &crate::state::State) -> Self {
        self.seen_as(state, self.client)
    }

    /// This connection with `client` as its client, that client's access decided by the
    /// ACLs of `state`; the same listener settings, activity, framing notes, `sendfile`
    /// queue and `X-Forwarded-For` value (the peer's), new deadline timers.
    pub(crate) fn seen_as(&self, state: &crate::state::State, client: SocketAddr) -> Self {
        Self {
            client,
            client_ip: self.client_ip.clone(),
            mode: self.mode,
            tls: self.tls,
            allowed: state.client_acl.allows(client.ip()),
            forwards_clients: state.forwarded_for_acl.allows(client.ip()),
            from_trusted_peer: self.from_trusted_peer,
            zero_copy: self.zero_copy.clone(),
            activity: self.activity.clone(),
            options_forms: self.options_forms.clone(),
            switches: self.switches.clone(),
            cancels: self.cancels.clone(),
            timers: TimerSlot::default(),
            client_cert: self.client_cert.clone(),
        }
    }
}

/// The text of `ip` as a header field value.
pub fn client_ip_value(ip: IpAddr) -> HeaderValue {
    // An IP address's text is ASCII digits, hex letters, `.` and `:`: always a valid value.
    HeaderValue::try_from(ip.to_string()).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// `X-Forwarded-For` and `X-Forwarded-Proto`, as constants (no name parsing per request).
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// A request on its way to an origin.
#[derive(Debug)]
pub struct Forward {
    /// Where to connect: an origin, or a file data source.
    pub target: Dest,
    /// The absolute URI fetched (cache key and log).
    pub uri: Uri,
    /// The client's request head (after module edits).
    pub client: request::Parts,
    /// The `Host` to send to the origin.
    pub host: HeaderValue,
    /// The client's IP address as text ([`ConnInfo::client_ip`]) and whether it came over
    /// TLS (`X-Forwarded-*`).
    pub client_ip: HeaderValue,
    pub client_tls: bool,
    /// The client's own `X-Forwarded-Proto` may stand ([`ConnInfo::from_trusted_peer`]).
    pub proto_from_peer: bool,
    /// Reached through a reverse-proxy route (`CDN-Cache-Control` applies).
    pub reverse: bool,
    /// The route's caching settings (`default_ttl`, the query rules that made `uri`'s query).
    pub caching: RouteCaching,
    /// The route's header rules (`request_headers` applies to what goes to the origin).
    pub headers: Option<Arc<crate::header_rules::RouteHeaders>>,
}

impl Forward {
    /// The header fields for the origin: the client's without hop-by-hop fields, with `Host`,
    /// `Via`, `X-Forwarded-For` and `X-Forwarded-Proto`. Built only when a request goes
    /// forward (never on a hit).
    pub fn origin_headers(&self, state: &State) -> HeaderMap {
        self.origin_headers_from(self.client.headers.clone(), state)
    }

    /// [`Self::origin_headers`], moving the client's fields out instead of copying them: for
    /// a request that needs them no more (pass-through).
    pub fn take_origin_headers(&mut self, state: &State) -> HeaderMap {
        let headers = std::mem::take(&mut self.client.headers);
        self.origin_headers_from(headers, state)
    }

    fn origin_headers_from(&self, mut headers: HeaderMap, state: &State) -> HeaderMap {
        // An HTTP/2 origin is told that trailers are welcome when an HTTP/2 client said so
        // (gRPC needs it): this proxy passes them on to such a client. (HTTP/1.1 sends only
        // trailers announced in the head, which an HTTP/2 origin need not announce.)
        let te_trailers = self.client.version == Version::HTTP_2
            && self.target.origin().is_some_and(|target| target.http2)
            && sluice_http::hop::te_accepts_trailers(&headers);
        sluice_http::hop::remove_hop_by_hop(&mut headers);
        if te_trailers {
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
        }
        if state.config.headers.forwarded {
            self.append_forwarded(&mut headers);
        }
        headers.insert(header::HOST, self.host.clone());
        if state.config.headers.via {
            headers.append(header::VIA, state.via(self.client.version));
        }
        if self.reverse {
            let esi = self.client.extensions.get::<crate::esi::EsiRoute>().is_some();
            if let Some(capability) = state.surrogate_capability(esi) {
                headers.append(SURROGATE_CAPABILITY, capability.clone());
            }
        }
        if state.config.headers.x_forwarded_for {
            // A prior value that is not visible ASCII is replaced, not extended.
            let value = match headers.get(&X_FORWARDED_FOR).filter(|prior| prior.to_str().is_ok()) {
                Some(prior) => {
                    let client = self.client_ip.as_bytes();
                    let mut joined = BytesMut::with_capacity(prior.len() + 2 + client.len());
                    joined.extend_from_slice(prior.as_bytes());
                    joined.extend_from_slice(b", ");
                    joined.extend_from_slice(client);
                    HeaderValue::from_maybe_shared(joined.freeze()).ok()
                }
                None => Some(self.client_ip.clone()),
            };
            if let Some(value) = value {
                headers.insert(X_FORWARDED_FOR, value);
            }
            // Only a trusted balancer's word on the scheme stands: a client's own would reach
            // the origin (and responses stored for everyone) as if this proxy had said it.
            let proto = HeaderValue::from_static(if self.client_tls { "https" } else { "http" });
            if self.proto_from_peer {
                headers.entry(X_FORWARDED_PROTO).or_insert(proto);
            } else {
                headers.insert(X_FORWARDED_PROTO, proto);
            }
        }
        if state.config.headers.forward_client_cert {
            // Only this proxy's word on a client certificate reaches the origin.
            headers.remove(crate::client_cert::X_FORWARDED_CLIENT_CERT);
            if let Some(crate::client_cert::Verified(cert)) = self.client.extensions.get() {
                headers.insert(crate::client_cert::X_FORWARDED_CLIENT_CERT, HeaderValue::clone(cert));
            }
        }
        if let Some(rules) = &self.headers {
            rules.request.apply(&mut headers);
        }
        headers
    }

    /// Appends an RFC 7239 `Forwarded` element for this request (`headers.forwarded`): the
    /// client, the `Host` it asked for (read from `headers` before it is replaced) and the
    /// protocol it came over. Earlier elements are kept, unless one is not visible ASCII.
    fn append_forwarded(&self, headers: &mut HeaderMap) {
        let client = self.client_ip.to_str().ok().and_then(|ip| ip.parse().ok());
        // HTTP/2 requests carry it as `:authority`, in the URI.
        let host =
            headers.get(header::HOST).and_then(|h| h.to_str().ok()).or(self.client.uri.authority().map(|a| a.as_str()));
        let proto = if self.client_tls { "https" } else { "http" };
        let element = sluice_http::forwarded::element(client, host, proto);
        let prior: Vec<&str> =
            headers.get_all(header::FORWARDED).iter().map(|v| v.to_str()).collect::<Result<_, _>>().unwrap_or_default();
        let value = if prior.is_empty() { element } else { format!("{}, {element}", prior.join(", ")) };
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(header::FORWARDED, value);
        }
    }
}

/// Serves one request. Never fails: errors become responses. The connection counts as busy
/// (not idle, [`crate::idle`]) until the response head is produced, and while its body
/// waits on its source ([`ProxyBody::watch_waits`]).
pub async fn handle(
    state: Arc<State>,
    conn: Arc<ConnInfo>,
    mut req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let _busy = conn.activity.as_ref().map(crate::idle::Activity::busy);
    let tally = conn.cancels.as_ref().filter(|_| req.version() == Version::HTTP_2).map(crate::cancels::Tally::new);
    let conn = if conn.forwards_clients { crate::forwarded::for_request(&state, conn, req.headers()) } else { conn };
    if OptionsForms::mark(conn.options_forms.as_deref(), &mut req) {
        return Ok(crate::refused::uri_too_long(&state, conn.client));
    }
    let mut txn = Txn::start(&state, conn.client, &req, conn.tls);
    let method = req.method().clone();
    let version = req.version();
    // The guard holds what the client sends after this request until told how it went.
    let switches = conn.switches.as_ref().filter(|_| {
        crate::switch_outcome::SwitchOutcome::may_switch(
            &method,
            req.version(),
            req.headers().contains_key(http::header::UPGRADE),
        )
    });
    // hyper writes no body for HEAD: nothing to send with `sendfile`.
    let zero_copy =
        conn.zero_copy.as_ref().filter(|_| req.version() <= Version::HTTP_11 && req.method() != Method::HEAD);
    let result = route(&state, &conn, &mut txn, req).await;
    let response = match result {
        Ok(Routed::Response(response)) => response,
        Ok(Routed::Tunnel(response, tunnel)) => {
            let (parts, body) = response.into_parts();
            if let Some(switches) = switches {
                switches.decide(parts.status == StatusCode::SWITCHING_PROTOCOLS || parts.status.is_success());
            }
            txn.responding(&parts);
            // The tunnel is a request in progress on the client connection for as long as it
            // lives: an HTTP/2 connection whose only traffic is a quiet tunnel (a `CONNECT`
            // or RFC 8441 stream) is not idle; the tunnel's own quiet is bounded by
            // `client.tunnel_idle_timeout`.
            let busy = conn.activity.as_ref().map(crate::idle::Activity::busy);
            let run = tunnel.run(Arc::clone(&state), txn);
            tokio::spawn(async move {
                run.await;
                drop(busy);
            });
            if let Some(tally) = tally {
                tally.completed();
            }
            return Ok(Response::from_parts(parts, body));
        }
        Err(err) => {
            if err.kind == Kind::Forbidden {
                txn.code = ResultCode::Denied;
            }
            if err.side != Side::Client {
                tracing::info!(txn = txn.info.id, "{}: {err}", txn.url);
            }
            // A forward proxy's client asked for that origin and may learn what went wrong
            // there (as Squid's error pages say); a reverse proxy's may not.
            respond::error_explained(&state, &err, !txn.reverse)
        }
    };
    let mut response = respond::finalize(&state, txn, response, &method).await;
    if let Some(switches) = switches {
        let status = response.status();
        let switched = status == StatusCode::SWITCHING_PROTOCOLS || (method == Method::CONNECT && status.is_success());
        switches.decide(switched);
    }
    if method == Method::CONNECT && version <= Version::HTTP_11 && !response.status().is_success() {
        // A client may send tunnel bytes right after its CONNECT: with no tunnel they are
        // no request to read. The connection ends with the refusal, as hyper's own end.
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(queue) = zero_copy {
        if response.body_mut().prefer_zero_copy(queue) {
            state.store.counters().zero_copy_hits.fetch_add(1, Relaxed);
        }
    }
    response.body_mut().watch_waits(conn.activity.as_ref());
    if let Some(tally) = tally {
        tally.completed();
    }
    Ok(response)
}

/// Counts `req` against the rate limits (`[[rate_limit]]`); `429` when one refuses it.
fn rate_limit(state: &State, conn: &ConnInfo, txn: &mut Txn, req: &request::Parts) -> Result<(), ProxyError> {
    let host = if state.rate_limits.by_host() { requested_host(&req.uri, &req.headers) } else { None };
    // `CONNECT host:port` and `OPTIONS *` have no path: they count as `/`.
    let path = Some(req.uri.path()).filter(|p| p.starts_with('/')).unwrap_or("/");
    let refused = match state.rate_limits.check(state.clock.now(), conn.client.ip(), host, path) {
        Ok(()) => return Ok(()),
        Err(refused) => refused,
    };
    txn.code = ResultCode::Denied;
    let retry_after_secs = refused.retry_after.as_secs() + u64::from(refused.retry_after.subsec_nanos() > 0);
    Err(ProxyError::new(
        Kind::TooManyRequests { retry_after_secs: retry_after_secs.max(1) },
        Side::Client,
        format!("client {} is over the rate limit `{}`", conn.client.ip(), refused.limit),
    ))
}

/// Counts the request among its client's requests in progress (until `txn` ends); `429`
/// when the client has `client.max_requests_per_client` already.
fn count_in_flight(state: &State, conn: &ConnInfo, txn: &mut Txn) -> Result<(), ProxyError> {
    let limit = state.config.client.max_requests_per_client;
    txn.in_flight = state.in_flight.enter(conn.client.ip(), limit);
    if txn.in_flight.is_some() {
        return Ok(());
    }
    state.metrics.client_in_flight_refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    txn.code = ResultCode::Denied;
    Err(ProxyError::new(
        Kind::TooManyRequests { retry_after_secs: 1 },
        Side::Client,
        format!("client {} has {limit} requests in progress (client.max_requests_per_client)", conn.client.ip()),
    ))
}

/// What routing produced.
pub enum Routed {
    /// A response to finalize (Via, module phase, log).
    Response(Response<ProxyBody>),
    /// A CONNECT's 200 or an upgrade's 101 and its tunnel; the tunnel task owns and logs
    /// the transaction.
    Tunnel(Response<ProxyBody>, crate::connect::Tunnel),
}

async fn route(
    state: &Arc<State>,
    conn: &ConnInfo,
    txn: &mut Txn,
    req: Request<Incoming>,
) -> Result<Routed, ProxyError> {
    if !conn.allowed {
        state.metrics.client_denied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        txn.code = ResultCode::Denied;
        return Err(ProxyError::new(
            Kind::Forbidden,
            Side::Client,
            format!("client {} is not allowed", conn.client.ip()),
        ));
    }
    check_target(&req)?;
    let (mut parts, body) = req.into_parts();
    normalize_path(&mut parts.uri)?;
    if !state.rate_limits.is_empty() {
        rate_limit(state, conn, txn, &parts)?;
    }
    if state.config.client.max_requests_per_client > 0 {
        count_in_flight(state, conn, txn)?;
    }
    txn.check_start()?;
    let requested = module_phase!(txn, RespondOrBufferRequest, Subject::Request(&mut parts), |m, info| m
        .req_headers(info, &mut parts))?;
    if let Some(local) = requested.respond {
        return Ok(Routed::Response(respond::local(state, *local)));
    }
    check_method_edit(txn.sent_method(), &parts.method)?;
    if parts.method == Method::CONNECT && !crate::upgrade::is_extended_connect(&parts) {
        if !conn.mode.forwards() {
            return Err(ProxyError::new(
                Kind::Forbidden,
                Side::Client,
                "CONNECT is not allowed on a reverse-proxy listener",
            ));
        }
        if let Some(auth) = &state.proxy_auth {
            authenticate(auth, txn, &parts.headers).await?;
        }
        let (response, tunnel) =
            within_deadline(state, &conn.timers, crate::connect::open(state, txn, Request::from_parts(parts, body)))
                .await?;
        return Ok(Routed::Tunnel(response, tunnel));
    }
    // Before the target is resolved: `Max-Forwards: 0` makes this proxy the final recipient,
    // which answers `OPTIONS *` and requests without a route too (RFC 9110 §7.6.2).
    if let Some(response) = answer_max_forwards(state, &mut parts)? {
        return Ok(Routed::Response(response));
    }
    let Resolved { target, uri, reverse, host, esi, caching, max_body_size, headers } =
        resolve_target(state, conn, &parts)?;
    txn.route_headers.clone_from(&headers);
    txn.reverse = reverse;
    if reverse && is_server_wide_options(&parts) {
        parts.extensions.insert(AsteriskForm);
    }
    if let Some(auth) = state.proxy_auth.as_ref().filter(|_| !reverse) {
        authenticate(auth, txn, &parts.headers).await?;
    }
    if state.access_log.is_some() {
        txn.url = uri.to_string();
    }
    if via_has(&parts.headers, &state.name) {
        return Err(ProxyError::new(
            Kind::Loop,
            Side::Client,
            format!("forwarding loop: Via already names {}", state.name),
        ));
    }
    // On an ESI route, what assembly needs once the response is there (the request moves).
    let esi_request = esi.map(|route| {
        parts.extensions.insert(crate::esi::EsiRoute::clone(&route));
        (route, client_url(conn, &parts), parts.headers.clone())
    });
    if let Some(cert) = conn.client_cert.as_ref().filter(|_| state.config.headers.forward_client_cert) {
        // An extension of the request, not a field of every one; only when it goes on.
        parts.extensions.insert(crate::client_cert::Verified(Arc::clone(cert)));
    }
    let mut forward = Forward {
        target,
        uri,
        client: parts,
        host,
        client_ip: conn.client_ip.clone(),
        client_tls: conn.tls,
        proto_from_peer: conn.from_trusted_peer,
        reverse,
        caching,
        headers,
    };
    if forward.client.method.as_str() == "PURGE" {
        return purge(state, conn, txn, &forward).await.map(Routed::Response);
    }
    let body_limit = max_body_size.unwrap_or(state.config.client.max_body_size.0);
    let http2 = forward.client.version == Version::HTTP_2;
    let mut body = ClientBody::new(body, Some(body_limit).filter(|&limit| limit > 0), http2)?;
    let mut has_body = !http_body::Body::is_end_stream(&body);
    if has_body && state.config.cache.enabled && may_be_bodyless(&forward.client, &body) {
        // Boxed: rare, and its state would otherwise enlarge every request's future. A body
        // that has not ended or shown data within the wait goes on as a body (streamed).
        if let Ok(settled) = tokio::time::timeout(SETTLE_WAIT, Box::pin(body.settle_empty())).await {
            has_body = !settled?;
        }
    }
    if let Some(switch) = crate::upgrade::requested(&state.config.access.upgrade_protocols, &forward, has_body) {
        return within_deadline(state, &conn.timers, crate::upgrade::open(state, txn, forward, switch)).await;
    }
    if forward.client.method == Method::CONNECT {
        // An extended CONNECT (RFC 8441) that may not switch: a plain CONNECT never gets here.
        return Err(ProxyError::new(
            Kind::Forbidden,
            Side::Client,
            "extended CONNECT: its :protocol is not in access.upgrade_protocols, or its route has no HTTP origin",
        ));
    }
    let body = match requested.buffer {
        // A module asked for the whole request body at `req_headers` (req_body.rs).
        Some(max) if has_body => {
            // Boxed: rare, and its state would otherwise enlarge every request's future.
            match within_deadline(state, &conn.timers, Box::pin(crate::req_body::buffer(txn, body, max))).await? {
                crate::req_body::Buffered::Body(body) => body,
                crate::req_body::Buffered::Respond(local) => {
                    return Ok(Routed::Response(respond::local(state, *local)))
                }
            }
        }
        _ if has_body => OutBody::Client(body),
        _ => OutBody::Empty,
    };
    let cacheable = state.config.cache.enabled && crate::cache_flow::applies(&forward.client, &body);
    let key = if cacheable { sluice_http::key::primary_key(&forward.uri) } else { None };
    let reverse = forward.reverse;
    let method = forward.client.method.clone();
    let mut response = match key {
        Some(_) if forward.caching.bypass => {
            within_deadline(state, &conn.timers, pass(state, txn, forward, body, Passed::Route)).await?
        }
        Some(key) if !state.hit_for_pass.applies(&key, state.clock.now()) => {
            whole_for_body_editors(txn, &mut forward.client.headers, true);
            crate::cache_flow::serve(state, &conn.timers, txn, forward, key).await?
        }
        Some(_) => within_deadline(state, &conn.timers, pass(state, txn, forward, body, Passed::HitForPass)).await?,
        None => within_deadline(state, &conn.timers, pass(state, txn, forward, body, Passed::Method)).await?,
    };
    if let Some((route, url, headers)) = esi_request {
        let request = crate::esi::Request { method: &method, url, headers: &headers };
        response = crate::esi::apply(state, &route, request, response);
    }
    if reverse {
        // Cache tags and `Surrogate-Control` are instructions to this cache (a CDN's, a
        // surrogate's), not to clients: like Fastly and Cloudflare, do not pass them on from
        // a reverse route (docs/content.md, docs/config.md).
        sluice_http::surrogate::strip_for_client(response.headers_mut(), state.config.cache.surrogate_control);
    }
    Ok(Routed::Response(response))
}

/// A module that may change the body the client gets would make a `206`'s `Content-Range`
/// wrong: for such a request the client's `Range` (and `If-Range`) is dropped, and the answer
/// is the whole, edited body (RFC 9110 §14.2 lets a server ignore `Range`). `stored`: the
/// cache answers, from a body the origin phases already shaped, so only `client_response`
/// edits count; otherwise `origin_response` edits do too. Free without modules; with them,
/// the modules' edits are asked first (each module is asked once per transaction, and the
/// body's framing needs the answer later anyway), so that the `Range` lookup runs only when
/// some module may change the body.
#[inline(always)]
fn whole_for_body_editors(txn: &mut Txn, headers: &mut HeaderMap, stored: bool) {
    if !txn.modules.is_empty() {
        whole_for_module_edits(txn, headers, stored);
    }
}

/// [`whole_for_body_editors`] when some module takes part.
fn whole_for_module_edits(txn: &mut Txn, headers: &mut HeaderMap, stored: bool) {
    let edits = txn.modules.edits();
    if edits.is_some_and(|e| e.client_response || (!stored && e.origin_response)) && headers.contains_key(header::RANGE)
    {
        headers.remove(header::RANGE);
        headers.remove(header::IF_RANGE);
    }
}

/// The URL a client asked for, as it named it: its scheme, `Host` (or the request
/// target's authority), path and query. Relative ESI includes resolve against it.
fn client_url(conn: &ConnInfo, parts: &request::Parts) -> Uri {
    let authority = named_authority(&parts.uri, &parts.headers).unwrap_or("localhost");
    absolute_url(conn.tls, authority, &parts.uri).parse().unwrap_or_else(|_| Uri::from_static("http://localhost/"))
}

/// The authority a request names: its target's, else its `Host` when that is a valid
/// authority without userinfo; `None` without either.
pub(crate) fn named_authority<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> Option<&'a str> {
    match uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| !h.contains('@') && h.parse::<http::uri::Authority>().is_ok()),
    }
}

/// `uri`'s path and query under `authority`, `https` over TLS, else `http`.
pub(crate) fn absolute_url(tls: bool, authority: &str, uri: &Uri) -> String {
    let scheme = if tls { "https" } else { "http" };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{scheme}://{authority}{path}")
}

/// Bounds work that waits on an origin by `client.transaction_timeout` (504 past it), on a
/// timer from `timers` (its connection's). Hits never wait, so they do not pay for a timer.
pub fn within_deadline<'a, T>(
    state: &State,
    timers: &'a TimerSlot,
    work: impl std::future::Future<Output = Result<T, ProxyError>> + 'a,
) -> impl std::future::Future<Output = Result<T, ProxyError>> + 'a {
    // A plain function rather than an `async fn`, and the timeout's error made by the
    // `Within` itself rather than by a `map` around it: the work future, the size of a whole
    // transaction (4 KiB), is copied once, into the `Within`; each extra copy is about 400
    // instructions of `memcpy` per transaction.
    let deadline = state.config.client.transaction_timeout.0;
    timers.within_then(deadline, work, GatewayTimeout(deadline))
}

/// The outcome of a transaction bounded by `client.transaction_timeout` (its value): a 504
/// past it.
struct GatewayTimeout(std::time::Duration);

impl<T> crate::deadline::Then<Result<Result<T, ProxyError>, Elapsed>> for GatewayTimeout {
    type Output = Result<T, ProxyError>;

    fn then(self, outcome: Result<Result<T, ProxyError>, Elapsed>) -> Result<T, ProxyError> {
        let deadline = self.0;
        outcome.unwrap_or_else(|Elapsed| {
            Err(ProxyError::gateway_timeout(format!("transaction took longer than {deadline:?}")))
        })
    }
}

/// How long a `GET` or `HEAD` whose head did not end it is given to show an empty body
/// ([`ClientBody::settle_empty`]): clients that end such a request with an empty `DATA` frame
/// or last chunk send it with the head. One that has sent neither the end nor any data by
/// then is passed on with its body streamed, as before (and, if it never sends it, gets the
/// `408` of a stalled upload).
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// Whether a request the cache could serve, whose head did not end it, may still have an
/// empty body to wait for (client_body.rs): a `GET` or `HEAD` announcing no length (an
/// announced one is not zero: that would have ended it), and not asking to switch protocols
/// (what follows such a request waits for the service's decision, `switch_outcome.rs`).
fn may_be_bodyless(client: &request::Parts, body: &ClientBody) -> bool {
    (client.method == Method::GET || client.method == Method::HEAD)
        && http_body::Body::size_hint(body).exact().is_none()
        && !client.headers.contains_key(http::header::UPGRADE)
}

/// Refuses a module's change of a request's method to `HEAD` (500, the module's failure): the
/// response is framed for the method the client sent, and a `HEAD`'s answer has no body for
/// a client that asked for one. Other changes of method are the module's to make.
pub(crate) fn check_method_edit(sent: &Method, now: &Method) -> Result<(), ProxyError> {
    if *now == Method::HEAD && *sent != Method::HEAD {
        return Err(ProxyError::new(
            Kind::Internal,
            Side::Module,
            format!("a module changed the request's method from {sent} to HEAD, whose answer has no body"),
        ));
    }
    Ok(())
}

/// Whether `Transfer-Encoding` names `chunked` and nothing else (the framing guard has
/// already refused a `chunked` that is not last, or repeated).
fn only_chunked(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|coding| !coding.is_empty())
        .all(|coding| coding.eq_ignore_ascii_case(b"chunked"))
}

/// Refuses what a request target and `Host` may not be (400), before anything is routed,
/// limited or stored by them:
/// - userinfo (`http://user:password@host/`: RFC 9110 §4.2.4, "treat its presence as an
///   error"; it disguises the authority, and the password would reach logs and origins);
/// - a target form the method does not take (RFC 9112 §3.2): authority form (`host:port`)
///   for anything but `CONNECT`, anything else for a `CONNECT` (but an RFC 8441 extended
///   one), `*` for anything but `OPTIONS`; a port that is not digits;
/// - a request with two `Host` fields, or an HTTP/1.1 one (but a `CONNECT`) without one,
///   whatever its target's form (RFC 9112 §3.2), a `Host` that is not `host[:port]` (RFC
///   9110 §7.2: `a.test:@evil.test` would route as `a.test` and reach the origin as it is),
///   and an HTTP/2 `Host` naming another host than `:authority` (RFC 9113 §8.3.1);
/// - a `CONNECT` with content (RFC 9110 §9.3.6: what follows its head is the tunnel's);
/// - a transfer coding other than `chunked` (501, RFC 9112 §6.1).
///
/// An absolute-form request's `Host` is otherwise ignored: its target names the host
/// (RFC 9112 §3.2.2; `Forward::host` replaces the field). Ambiguous framing never gets this
/// far: the connection's framing guard (`framing.rs`) rejects it.
fn check_target<B: http_body::Body>(req: &Request<B>) -> Result<(), ProxyError> {
    let uri = req.uri();
    if let Some(authority) = uri.authority() {
        if authority.as_str().contains('@') {
            return Err(ProxyError::bad_request("userinfo (user:password@) in the request target is refused"));
        }
        if !sluice_http::target::is_valid_host(authority.as_str().as_bytes()) {
            return Err(ProxyError::bad_request("the request target's authority is not host[:port]"));
        }
    }
    let authority_form = uri.scheme().is_none() && uri.authority().is_some();
    let connect = req.method() == Method::CONNECT && req.extensions().get::<hyper::ext::Protocol>().is_none();
    if connect != authority_form {
        return Err(ProxyError::bad_request(if connect {
            "CONNECT takes a host:port target"
        } else {
            "a host:port target is for CONNECT only"
        }));
    }
    if uri.path() == "*" && req.method() != Method::OPTIONS {
        return Err(ProxyError::bad_request("a * target is for OPTIONS only"));
    }
    let headers = req.headers();
    // (A request without content, most of them, is known as such without a field lookup.)
    if !req.body().is_end_stream() {
        if connect {
            // What follows a CONNECT's head is the tunnel's, not content (RFC 9110 §9.3.6).
            return Err(ProxyError::bad_request("a CONNECT request has no content"));
        }
        if headers.contains_key(header::TRANSFER_ENCODING) && !only_chunked(headers) {
            // hyper takes the chunked coding off; any other would reach the origin as if it
            // were the content, its name dropped with the hop-by-hop field (RFC 9112 §6.1).
            return Err(ProxyError::new(
                Kind::NotImplemented,
                Side::Client,
                "a request body with a transfer coding other than chunked is not supported",
            ));
        }
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    // RFC 9112 §3.2: whatever the target's form (an absolute target's authority replaces the
    // field's value, but the message must still be well-formed). A `CONNECT` without `Host`
    // is let through: its target is all there is to it, and some clients leave the field out.
    if hosts.next().is_some() {
        return Err(ProxyError::bad_request("more than one Host header"));
    }
    if host.is_none() && req.version() == Version::HTTP_11 && !connect {
        return Err(ProxyError::bad_request("HTTP/1.1 request without Host"));
    }
    if let Some(host) = host {
        if !sluice_http::target::is_valid_host(host.as_bytes()) {
            return Err(ProxyError::bad_request("Host is not host[:port]"));
        }
        // The hosts compared, not the ports: a default port may be spelled out in one only.
        let named = |authority: &str| strip_port(authority).to_ascii_lowercase();
        let differs = |authority: &http::uri::Authority| {
            host.to_str().map_or(true, |host| named(authority.as_str()) != named(host))
        };
        if req.version() == Version::HTTP_2 && uri.authority().is_some_and(differs) {
            return Err(ProxyError::bad_request("Host names another authority than :authority"));
        }
    }
    Ok(())
}

/// Puts the request's path in its normal form (`sluice_http::target::normalize_path`: dot
/// segments removed, unreserved characters decoded) before anything reads it: routes, rate
/// limits, modules, the cache key and the origin all see the one form, so that no spelling
/// of a path escapes what applies to it. Most paths are normal already and stay untouched.
fn normalize_path(uri: &mut Uri) -> Result<(), ProxyError> {
    let Some(normal) = uri.path_and_query().and_then(|pq| sluice_http::target::normalize_path(pq.as_str())) else {
        return Ok(());
    };
    let mut parts = std::mem::take(uri).into_parts();
    parts.path_and_query = Some(
        PathAndQuery::try_from(normal).map_err(|e| ProxyError::bad_request("invalid request path").with_cause(e))?,
    );
    *uri = Uri::from_parts(parts).map_err(|e| ProxyError::bad_request("invalid request target").with_cause(e))?;
    Ok(())
}

/// Where a request goes.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub target: Dest,
    /// The absolute URI fetched (cache key and log).
    pub uri: Uri,
    /// A reverse route matched.
    pub reverse: bool,
    /// The `Host` to send.
    pub host: HeaderValue,
    /// The matched route's ESI settings, when it has `esi = true`.
    pub esi: Option<Arc<crate::esi::EsiRoute>>,
    /// The matched route's caching settings.
    pub caching: RouteCaching,
    /// The matched route's `max_body_size`, when it sets one (`Some(0)`: no limit).
    pub max_body_size: Option<u64>,
    /// The matched route's header rules, when it has any.
    pub headers: Option<Arc<crate::header_rules::RouteHeaders>>,
}

/// Proxy authentication of a forward-proxy request (`[proxy_auth]`): the user its
/// `Proxy-Authorization` proves goes to the log; without a valid one, `407`.
async fn authenticate(
    auth: &crate::proxy_auth::ProxyAuth,
    txn: &mut Txn,
    headers: &HeaderMap,
) -> Result<(), ProxyError> {
    match auth.user(headers).await {
        Some(user) => {
            txn.user = Some(user);
            Ok(())
        }
        None => {
            txn.code = ResultCode::Denied;
            Err(ProxyError::new(Kind::ProxyAuthRequired, Side::Client, "proxy authentication required"))
        }
    }
}

/// Maps the request to an origin: a reverse route first, then forward proxying of an
/// absolute URI. A file route's URI names the file (`file://localhost/...`); a request
/// path that would leave the route's directory is refused here (403).
pub(crate) fn resolve_target(state: &State, conn: &ConnInfo, parts: &request::Parts) -> Result<Resolved, ProxyError> {
    let host = requested_host(&parts.uri, &parts.headers);
    if conn.mode.reverses() {
        let root = PathAndQuery::from_static("/");
        // `OPTIONS *` asks about the server as a whole: routed as its root, and sent to that
        // route's origin as `OPTIONS *` ([`AsteriskForm`], marked by `route`).
        let path_and_query =
            if is_server_wide_options(parts) { &root } else { parts.uri.path_and_query().unwrap_or(&root) };
        if let Some(route) = state.routes.find(host, path_and_query.path()) {
            let origin = match &route.backend {
                crate::route::Backend::Origin(origin) => origin,
                crate::route::Backend::Pool(pool) => return pooled(route, pool, path_and_query, parts),
                crate::route::Backend::Files(files) => {
                    let uri = files.uri_for(route.tail(path_and_query.path()))?;
                    let host = authority_value(&uri)?;
                    let esi = route.esi.clone();
                    return Ok(Resolved {
                        target: Dest::Files(Arc::clone(files)),
                        uri,
                        reverse: true,
                        host,
                        esi,
                        caching: RouteCaching::default(),
                        max_body_size: route.max_body_size,
                        headers: route.headers.clone(),
                    });
                }
            };
            let uri = route
                .target(origin, path_and_query)
                .map_err(|e| ProxyError::bad_request("cannot map the request URI").with_cause(e))?;
            // The URI's scheme and authority are the origin's: its precomputed target and Host
            // (but for a preserved Host, below).
            let target = origin.target.clone();
            let (uri, host) = match preserved_host(route, parts) {
                Some(host) => (keyed_by_host(uri, &host)?, host),
                None => (uri, origin.host.clone()),
            };
            let esi = route.esi.clone();
            let caching = route.caching.clone();
            let max_body_size = route.max_body_size;
            return Ok(Resolved {
                target: Dest::Origin(target),
                uri,
                reverse: true,
                host,
                esi,
                caching,
                max_body_size,
                headers: route.headers.clone(),
            });
        }
    }
    let absolute = parts.uri.scheme().is_some() && parts.uri.authority().is_some();
    if conn.mode.forwards() && absolute {
        let mut target = Target::of(&parts.uri)
            .ok_or_else(|| ProxyError::bad_request(format!("unsupported URI scheme in {}", parts.uri)))?;
        target.dest_acl = state.dest_acl.clone();
        let host = authority_value(&parts.uri)?;
        return Ok(Resolved {
            target: Dest::Origin(target),
            uri: parts.uri.clone(),
            reverse: false,
            host,
            esi: None,
            caching: RouteCaching::default(),
            max_body_size: None,
            headers: None,
        });
    }
    if conn.mode.reverses() {
        return Err(ProxyError::new(
            Kind::NoRoute,
            Side::Client,
            format!("no route for {}{}", host.unwrap_or(""), parts.uri.path()),
        ));
    }
    Err(ProxyError::bad_request("not a proxy request: use an absolute URI (GET http://host/path) or CONNECT"))
}

/// [`resolve_target`] for a route to an origin pool: the URI (and so the cache key) of its
/// first origin, whichever answers; the `Host` of the origin chosen.
fn pooled(
    route: &crate::route::Route,
    pool: &Arc<crate::origin_pool::OriginPool>,
    path_and_query: &PathAndQuery,
    parts: &request::Parts,
) -> Result<Resolved, ProxyError> {
    let uri = route
        .target(pool.canonical(), path_and_query)
        .map_err(|e| ProxyError::bad_request("cannot map the request URI").with_cause(e))?;
    let member = pool.pick(uri.path_and_query().map_or("/", |pq| pq.as_str()));
    let (uri, host) = match preserved_host(route, parts) {
        Some(host) => (keyed_by_host(uri, &host)?, host),
        None => (uri, pool.members()[member].origin.host.clone()),
    };
    let target = Dest::Pool(crate::source::PoolMember { pool: Arc::clone(pool), member });
    Ok(Resolved {
        target,
        uri,
        reverse: true,
        host,
        esi: route.esi.clone(),
        caching: route.caching.clone(),
        max_body_size: route.max_body_size,
        headers: route.headers.clone(),
    })
}

/// The `Host` a `preserve_host` route sends on: the request target's authority when it has
/// one (RFC 9112 §3.2.2: an absolute-form request's `Host` is ignored; HTTP/2's
/// `:authority`), else the client's `Host` (whose syntax `check_target` checked); `None`
/// when the route does not preserve it or there is none to preserve.
fn preserved_host(route: &crate::route::Route, parts: &request::Parts) -> Option<HeaderValue> {
    if !route.preserve_host {
        return None;
    }
    let host = match parts.uri.authority() {
        Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
        None => parts.headers.get(header::HOST).cloned(),
    };
    host.filter(|h| !h.is_empty())
}

/// `uri` (the origin's) with `host` as its authority: with a preserved `Host` the origin may
/// answer each host differently (virtual hosts), so the cache keys, logs and invalidates
/// by the host the client named.
fn keyed_by_host(uri: Uri, host: &HeaderValue) -> Result<Uri, ProxyError> {
    let mut parts = uri.into_parts();
    parts.authority = Some(
        http::uri::Authority::try_from(host.as_bytes())
            .map_err(|e| ProxyError::bad_request("Host is not an authority").with_cause(e))?,
    );
    Uri::from_parts(parts).map_err(|e| ProxyError::bad_request("cannot map the request URI").with_cause(e))
}

/// Whether `parts` is `OPTIONS *` (RFC 9112 §3.2.4): about the server, not a resource.
fn is_server_wide_options(parts: &request::Parts) -> bool {
    parts.method == Method::OPTIONS && parts.uri.path() == "*"
}

/// The host a request asks for, without port: its absolute URI's, else its `Host` field's.
fn requested_host<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> Option<&'a str> {
    uri.host().or_else(|| headers.get(header::HOST)?.to_str().ok().map(strip_port))
}

/// `host` without its `:port`, and an IPv6 literal without its brackets. Byte searches: on
/// every request, where `str`'s `char` searcher cost about 160 instructions.
fn strip_port(host: &str) -> &str {
    let bytes = host.as_bytes();
    if bytes.first() == Some(&b'[') {
        let end = bytes.iter().position(|&b| b == b']').unwrap_or(bytes.len());
        return &host[1..end];
    }
    match bytes.iter().rposition(|&b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

fn authority_value(uri: &Uri) -> Result<HeaderValue, ProxyError> {
    let authority = uri.authority().map_or("", |a| a.as_str());
    HeaderValue::from_str(authority).map_err(|e| ProxyError::bad_request("invalid authority").with_cause(e))
}

/// True when some `Via` entry was received by `name` (our own pseudonym): a loop.
pub(crate) fn via_has(headers: &HeaderMap, name: &str) -> bool {
    headers.get_all(header::VIA).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|entry| {
        let mut words = entry.split_whitespace();
        let _protocol = words.next();
        words.next().is_some_and(|by| by.eq_ignore_ascii_case(name))
    })
}

/// OPTIONS and TRACE with `Max-Forwards: 0` are answered here (RFC 9110 §7.6.2); otherwise
/// `Max-Forwards` is decremented.
fn answer_max_forwards(state: &State, parts: &mut request::Parts) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    if parts.method != Method::OPTIONS && parts.method != Method::TRACE {
        return Ok(None);
    }
    let Some(value) = parts.headers.get(header::MAX_FORWARDS) else { return Ok(None) };
    let hops: u32 = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| ProxyError::bad_request("Max-Forwards is not a number"))?;
    if hops > 0 {
        parts.headers.insert(header::MAX_FORWARDS, HeaderValue::from(hops - 1));
        return Ok(None);
    }
    Ok(Some(if parts.method == Method::TRACE { respond::trace(state, parts) } else { respond::options(state) }))
}

/// The request head for the origin: method, origin-form URI of `uri`, outgoing fields.
pub fn origin_request(uri: &Uri, method: Method, headers: HeaderMap) -> Result<request::Parts, ProxyError> {
    // The origin-form target is the path and query already parsed: cloned (shared bytes),
    // not written out and parsed again.
    let target = uri.path_and_query().map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.method = method;
    parts.uri = target;
    parts.version = Version::HTTP_11;
    parts.headers = headers;
    join_cookies(&mut parts.headers);
    Ok(parts)
}

/// Joins `Cookie` fields into one, with `"; "` (RFC 9113 §8.2.3): an HTTP/2 client may send
/// each cookie in a field of its own, and an HTTP/1.1 origin reads one `Cookie` field (RFC
/// 6265 §5.4); one that reads the first would lose the others.
fn join_cookies(headers: &mut HeaderMap) {
    let mut values = headers.get_all(header::COOKIE).iter();
    if values.next().is_none() || values.next().is_none() {
        return;
    }
    let joined: Vec<u8> =
        headers.get_all(header::COOKIE).iter().map(HeaderValue::as_bytes).collect::<Vec<_>>().join(&b"; "[..]);
    match HeaderValue::from_bytes(&joined) {
        Ok(value) => {
            headers.insert(header::COOKIE, value);
        }
        Err(_) => tracing::debug!("cookie fields left as they are: joined, they are not a field value"),
    }
}

/// Why the cache leaves a request to [`pass`], as `Cache-Status` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    /// A method the cache does not answer (`fwd=method`).
    Method,
    /// The URL's last response could not be stored (`fwd=bypass; detail=hit-for-pass`).
    HitForPass,
    /// A miss for a range beyond `cache.range_offset_limit` (`fwd=bypass;
    /// detail=range-offset`).
    RangeOffset,
    /// A request of a route with `cache = false` (`fwd=bypass; detail=route`).
    Route,
}

impl Passed {
    fn fwd(self) -> Fwd {
        match self {
            Passed::Method => Fwd::Method,
            Passed::HitForPass | Passed::RangeOffset | Passed::Route => Fwd::Bypass,
        }
    }

    fn detail(self) -> Option<&'static str> {
        match self {
            Passed::Method => None,
            Passed::HitForPass => Some("hit-for-pass"),
            Passed::RangeOffset => Some("range-offset"),
            Passed::Route => Some("route"),
        }
    }
}

/// Forwards a request the cache does not handle, streaming both bodies, and invalidates
/// stored responses after unsafe methods (RFC 9111 §4.4). `reason`: why the cache is not
/// involved.
pub async fn pass(
    state: &State,
    txn: &mut Txn,
    mut forward: Forward,
    body: OutBody,
    reason: Passed,
) -> Result<Response<ProxyBody>, ProxyError> {
    let esi_route = forward.client.extensions.get::<crate::esi::EsiRoute>().is_some();
    whole_for_body_editors(txn, &mut forward.client.headers, false);
    let mut headers = forward.take_origin_headers(state);
    if esi_route && forward.client.method == Method::GET {
        // The answer may be an ESI template, which cannot be sent in part or as "not
        // modified" (docs/esi.md, "Streaming and framing").
        for name in &crate::esi::CLIENT_ONLY {
            headers.remove(name);
        }
    }
    let target = match crate::resolve::resolve(txn, &forward.target).await? {
        crate::resolve::Resolved::Connect(target) => target,
        crate::resolve::Resolved::Respond(local) => return Ok(respond::local(state, *local)),
    };
    let mut parts = origin_request(&forward.uri, forward.client.method.clone(), headers)?;
    if parts.method == Method::OPTIONS && forward.client.extensions.get::<AsteriskForm>().is_some() {
        parts.uri = Uri::from_static("*");
    }
    if let Some(local) =
        module_phase!(txn, Respond, Subject::Request(&mut parts), |m, info| m.req_out(info, &mut parts))?.respond
    {
        return Ok(respond::local(state, *local));
    }
    // The modules see a streaming body chunk by chunk as it goes out (req_body.rs).
    let out_body = match body {
        body @ (OutBody::Client(_) | OutBody::Prefixed(_)) if !txn.modules.is_empty() => {
            match crate::req_body::PhasedRequestBody::of(txn, body) {
                Ok(phased) => OutBody::Phased(Box::new(phased)),
                Err(body) => body,
            }
        }
        body => body,
    };
    // Set before the origin answers, so that a client leaving meanwhile is logged
    // `TCP_MISS_ABORTED`, and an origin that fails `TCP_MISS/502`, as Squid logs them.
    txn.code = ResultCode::Miss;
    let origin = crate::source::send(state, &target, Request::from_parts(parts, out_body)).await?;
    txn.peer = origin.peer;
    let (mut parts, body) = origin.response.into_parts();
    sluice_http::hop::remove_hop_by_hop(&mut parts.headers);
    if !txn.modules.is_empty() {
        let status = FramedStatus::of(&parts);
        module_phase!(txn, Nothing, Subject::Response(&mut parts), |m, info| m.origin_resp_headers(info, &mut parts))?;
        status.check(&parts)?;
    }
    invalidate(state, &forward, parts.status, &parts.headers);
    if state.config.headers.cache_status {
        let status = sluice_http::cache_status::CacheStatus {
            fwd: Some(reason.fwd()),
            fwd_status: Some(parts.status.as_u16()),
            detail: reason.detail(),
            ..Default::default()
        };
        parts.headers.append("cache-status", status.to_header_value(&state.name));
    }
    Ok(Response::from_parts(parts, ProxyBody::origin(body)))
}

/// Invalidation after an unsafe method (RFC 9111 §4.4): the stored responses of the target
/// and of the same-origin `Location` and `Content-Location` URLs go. A route's query rules
/// made the stored URLs' queries, so a URL the origin wrote goes both as written and as the
/// rules rewrite it.
fn invalidate(state: &State, forward: &Forward, status: StatusCode, response: &HeaderMap) {
    for uri in sluice_http::invalidation::targets(&forward.client.method, &forward.uri, status, response) {
        let rewritten = forward.caching.query.as_ref().and_then(|rules| rules.rewrite_uri(&uri));
        for key in [Some(&uri), rewritten.as_ref()].into_iter().flatten().filter_map(sluice_http::key::primary_key) {
            state.store.remove(&key);
            state.hit_for_pass.forget(&key);
        }
    }
}

/// `PURGE`: removes every stored variant of the URI. 200 when something was removed (its
/// disk files deleted for good: the answer waits for that), 404 otherwise; 403 for clients
/// outside `access.purge_allow`.
async fn purge(
    state: &State,
    conn: &ConnInfo,
    txn: &mut Txn,
    forward: &Forward,
) -> Result<Response<ProxyBody>, ProxyError> {
    if !state.purge_acl.allows(conn.client.ip()) {
        txn.code = ResultCode::Denied;
        return Err(ProxyError::new(Kind::Forbidden, Side::Client, "PURGE is not allowed from this client"));
    }
    let key = sluice_http::key::primary_key(&forward.uri)
        .ok_or_else(|| ProxyError::bad_request("PURGE needs an absolute URI"))?;
    let removed = state.store.remove(&key);
    state.hit_for_pass.forget(&key);
    state.store.purges_settled().await;
    let status = if removed > 0 { StatusCode::OK } else { StatusCode::NOT_FOUND };
    Ok(respond::text(state, status, format!("purged {removed} object(s) for {key}\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn via_loop_detection_reads_every_entry() {
        let mut h = HeaderMap::new();
        h.append(header::VIA, HeaderValue::from_static("1.1 upstream, 1.1 Sluice (x)"));
        assert!(via_has(&h, "sluice"));
        assert!(!via_has(&h, "other"));
    }

    #[test]
    fn origin_requests_carry_the_origin_form_target() {
        for (uri, target) in [("http://h:81/a/b?x=1&y", "/a/b?x=1&y"), ("http://h", "/"), ("https://h/", "/")] {
            let parts = origin_request(&uri.parse().unwrap(), Method::GET, HeaderMap::new()).unwrap();
            assert_eq!(parts.uri.path_and_query().map(|p| p.as_str()), Some(target), "{uri}");
            assert_eq!(parts.uri.authority(), None);
            assert_eq!(parts.version, Version::HTTP_11);
        }
    }

    #[test]
    fn rfc9113_8_2_3_cookie_fields_are_joined_for_the_origin() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1"));
        headers.append(header::COOKIE, HeaderValue::from_static("b=2"));
        headers.append(header::COOKIE, HeaderValue::from_static("c=3"));
        let parts = origin_request(&"http://h/".parse().unwrap(), Method::GET, headers).unwrap();
        let cookies: Vec<_> = parts.headers.get_all(header::COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1; b=2; c=3"]);
        let mut one = HeaderMap::new();
        one.insert(header::COOKIE, HeaderValue::from_static("a=1; b=2"));
        let parts = origin_request(&"http://h/".parse().unwrap(), Method::GET, one).unwrap();
        assert_eq!(parts.headers.get(header::COOKIE).unwrap(), "a=1; b=2");
    }

    #[test]
    fn host_ports_are_stripped_for_routing() {
        assert_eq!(strip_port("example.com:8080"), "example.com");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
