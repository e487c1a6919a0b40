//! HTTP/2 to origins ([`Target::http2`], a route's `http2 = true`): gRPC services, and origins
//! that serve HTTP/2 only.
//!
//! Every request to a target goes as a stream of a shared connection, which hyper's HTTP/2
//! client drives from a task of its own (an HTTP/1.1 connection is driven by the one
//! transaction that holds it; a multiplexed one serves many at once). A target gets a new
//! connection when it has none open, or when every one it has carries as many streams as its
//! origin allows (`SETTINGS_MAX_CONCURRENT_STREAMS`: long gRPC streams would otherwise hold
//! every later request in a queue); requests that come meanwhile wait for that one connect
//! instead of each opening their own. A connection is dropped once closed (the origin's
//! `GOAWAY`, an error) or idle for the idle timeout. `http://` origins are spoken to with prior
//! knowledge (RFC 9113 §3.3), `https://` ones through ALPN `h2`.
//!
//! The request's `Host` goes as `:authority` (RFC 9113 §8.3.1). The response's trailers (a
//! gRPC status) pass on to the client. `upstream.pipeline` and `max_connections_per_host` do
//! not apply.

use super::body::{OriginBodyError, Silence};
use super::{is_idempotent, ByTarget, OriginResponse, PooledBody, SendFailure, Target, Upstream};
use crate::body::OutBody;
use crate::error::ProxyError;
use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{header, Request, Response, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// While streams are open on a connection, it is pinged this often, and closed when a ping
/// goes unanswered this long: an origin that vanished without closing its connections (a
/// crashed host, a dropped route) would otherwise hold every request to it until its response
/// timeout, and the connection would be kept for the next ones.
const PING_INTERVAL: Duration = Duration::from_secs(10);

/// A target's connections; locked (asynchronously) while one is being made.
type Slot = Arc<tokio::sync::Mutex<Conns>>;

/// A target's connections, and how the last attempt to make one failed, if it did.
#[derive(Default)]
struct Conns {
    live: Vec<Live>,
    failed: Option<FailedConnect>,
}

/// A connect that failed: the requests that waited for it fail with it, instead of each
/// trying in turn (behind a silent origin, one connect timeout after another).
struct FailedConnect {
    /// When it failed.
    at: Instant,
    kind: crate::error::Kind,
    context: String,
}

impl FailedConnect {
    fn of(error: &ProxyError) -> Self {
        Self { at: Instant::now(), kind: error.kind, context: error.to_string() }
    }

    fn error(&self) -> ProxyError {
        ProxyError::new(self.kind, crate::error::Side::Origin, self.context.clone())
    }
}

/// The HTTP/2 connections to origins, by target.
#[derive(Default)]
pub(super) struct H2Connections {
    slots: parking_lot::Mutex<ByTarget<Slot>>,
}

/// An open connection.
struct Live {
    sender: SendRequest<OutBody>,
    peer: IpAddr,
    /// When a request last went out on it.
    used: Instant,
    /// Its streams in flight: requests sent whose response body has not ended.
    streams: Arc<AtomicUsize>,
    /// The connection itself, driven by its task: asked how many streams its origin allows
    /// at once (`SETTINGS_MAX_CONCURRENT_STREAMS`, which hyper's I/O task applies when it
    /// comes, and the origin may change at any time). `None` once it has ended: dropped
    /// then, which closes `sender`.
    connection: Arc<parking_lot::Mutex<Option<Connection>>>,
}

/// hyper's HTTP/2 client connection to an origin.
type Connection = hyper::client::conn::http2::Connection<TokioIo<super::Stream>, OutBody, TokioExecutor>;

impl Live {
    /// Whether it may carry another stream now: open, and under its origin's limit.
    fn has_room(&self) -> bool {
        let limit = self.connection.lock().as_ref().map_or(0, Connection::current_max_send_streams);
        !self.sender.is_closed() && self.streams.load(Relaxed) < limit
    }
}

/// One stream in flight on a connection, counted there until dropped (with its response
/// body, or with the request that got none).
pub(super) struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    fn take(streams: &Arc<AtomicUsize>) -> Self {
        streams.fetch_add(1, Relaxed);
        Self(Arc::clone(streams))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl H2Connections {
    /// Forgets the connections idle for longer than `max_idle` or closed. A forgotten
    /// connection ends once its streams in flight have.
    pub(super) fn reap(&self, max_idle: Duration) {
        self.slots.lock().retain(|_, slot| {
            // A slot in use (locked, or about to be: another reference) stays.
            if Arc::strong_count(slot) > 1 {
                return true;
            }
            let Ok(mut conns) = slot.try_lock() else { return true };
            conns.live.retain(|live| {
                !live.sender.is_closed() && (live.streams.load(Relaxed) > 0 || live.used.elapsed() <= max_idle)
            });
            !conns.live.is_empty()
        });
    }

    fn slot(&self, target: &Target) -> Slot {
        let mut slots = self.slots.lock();
        match slots.get(target) {
            Some(slot) => Arc::clone(slot),
            None => Arc::clone(slots.entry(target.clone()).or_default()),
        }
    }
}

impl Upstream {
    /// [`Upstream::send`] for an HTTP/2 target. A request the connection did not take (it
    /// had closed) is sent again, once, on a new one; so is an idempotent request without a
    /// body that the origin refused or whose connection was lost before its response head
    /// ([`may_send_again`]).
    pub(super) async fn send_h2(
        &self,
        target: &Target,
        req: Request<OutBody>,
    ) -> Result<OriginResponse, Box<SendFailure>> {
        let sent = Instant::now();
        let mut req = match as_h2_request(target, req) {
            Ok(req) => req,
            Err((error, req)) => return Err(Box::new(SendFailure { error, request: Some(req) })),
        };
        let timeout = self.response_timeout(target);
        let mut again = true;
        loop {
            // Kept to send again or give back once the request is gone: only when that is safe.
            let replay =
                (matches!(req.body(), OutBody::Empty) && is_idempotent(req.method())).then(|| bodiless_copy(&req));
            let (mut sender, peer, stream) = match self.h2_sender(target).await {
                Ok(found) => found,
                Err(error) => return Err(Box::new(SendFailure { error, request: Some(req) })),
            };
            let mut failed = match tokio::time::timeout(timeout, sender.try_send_request(req)).await {
                Ok(Ok(response)) => return Ok(self.h2_response(target, response, peer, sent, stream)),
                Err(_) => return Err(Box::new(SendFailure { error: self.timed_out(target), request: replay })),
                Ok(Err(failed)) => failed,
            };
            let back = failed.take_message().or_else(|| replay.filter(|_| may_send_again(failed.error())));
            match back {
                Some(back) if again => {
                    tracing::debug!(
                        "HTTP/2 request to {}:{} failed ({}); retrying",
                        target.host,
                        target.port,
                        failed.error()
                    );
                    again = false;
                    req = back;
                }
                back => {
                    self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                    let error =
                        ProxyError::bad_gateway(format!("origin failed ({}:{}, HTTP/2)", target.host, target.port))
                            .with_cause(failed.into_error());
                    return Err(Box::new(SendFailure { error, request: back }));
                }
            }
        }
    }

    /// A sender on one of `target`'s connections with room for a stream, the origin's
    /// address, and the stream's place on it: an open one, else a new one (made within the
    /// connect timeout). Fails at once when a connect made while it waited failed.
    async fn h2_sender(&self, target: &Target) -> Result<(SendRequest<OutBody>, IpAddr, StreamSlot), ProxyError> {
        let slot = self.inner.h2.slot(target);
        let asked = Instant::now();
        let mut conns = slot.lock().await;
        conns.live.retain(|open| !open.sender.is_closed());
        if let Some(open) = conns.live.iter_mut().find(|open| open.has_room()) {
            open.used = Instant::now();
            return Ok((open.sender.clone(), open.peer, StreamSlot::take(&open.streams)));
        }
        if let Some(failed) = conns.failed.as_ref().filter(|failed| failed.at >= asked) {
            return Err(failed.error());
        }
        match self.h2_connect(target).await {
            Ok(open) => {
                let found = (open.sender.clone(), open.peer, StreamSlot::take(&open.streams));
                conns.failed = None;
                conns.live.push(open);
                Ok(found)
            }
            Err(error) => {
                conns.failed = Some(FailedConnect::of(&error));
                Err(error)
            }
        }
    }

    /// A new HTTP/2 connection to `target`, its task spawned.
    async fn h2_connect(&self, target: &Target) -> Result<Live, ProxyError> {
        let (stream, peer) = self.open_stream_speaking(target, true).await?;
        let what = format!("{}:{}", target.host, target.port);
        let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new()).keep_alive_interval(PING_INTERVAL).keep_alive_timeout(PING_INTERVAL);
        let handshake = builder.handshake::<_, OutBody>(TokioIo::new(stream));
        let (sender, connection) = tokio::time::timeout(self.connect_timeout(target), handshake)
            .await
            .map_err(|_| ProxyError::gateway_timeout(format!("HTTP/2 handshake with {what} timed out")))?
            .map_err(|e| ProxyError::bad_gateway(format!("HTTP/2 handshake with {what} failed")).with_cause(e))?;
        let connection = Arc::new(parking_lot::Mutex::new(Some(connection)));
        let driven = Arc::clone(&connection);
        tokio::spawn(async move {
            // Locked for each turn only (a turn hands requests to hyper's I/O task); dropped
            // as it ends, which closes its senders.
            let turns = std::future::poll_fn(|cx| {
                let mut connection = driven.lock();
                let Some(open) = connection.as_mut() else { return Poll::Ready(Ok(())) };
                let turn = Pin::new(open).poll(cx);
                if turn.is_ready() {
                    *connection = None;
                }
                turn
            });
            if let Err(e) = turns.await {
                tracing::debug!("HTTP/2 connection to {what} ended: {e}");
            }
        });
        Ok(Live { sender, peer, used: Instant::now(), streams: Arc::default(), connection })
    }

    /// An origin's HTTP/2 response; its head came `sent.elapsed()` after the request was sent.
    fn h2_response(
        &self,
        target: &Target,
        response: Response<Incoming>,
        peer: IpAddr,
        sent: Instant,
        stream: StreamSlot,
    ) -> OriginResponse {
        self.inner.metrics.durations.record_origin(sent.elapsed());
        let read_timeout = self.read_timeout(target);
        let response = response
            .map(|body| PooledBody::Http2(H2Body { body, silence: Silence::new(read_timeout), _stream: stream }));
        OriginResponse { response, peer }
    }
}

/// `req` as HTTP/2 sends it: an absolute URI (`:scheme`, `:authority`, `:path`) whose
/// authority is the request's `Host`, which it no longer carries. A request whose `Host` is
/// not an authority comes back with the error.
#[allow(clippy::result_large_err)]
fn as_h2_request(
    target: &Target,
    mut req: Request<OutBody>,
) -> Result<Request<OutBody>, (ProxyError, Request<OutBody>)> {
    let authority = match req.headers().get(header::HOST) {
        Some(host) => Authority::try_from(host.as_bytes()).ok(),
        None => req.uri().authority().cloned(),
    };
    let Some(authority) = authority else {
        return Err((ProxyError::bad_request("the request's Host is not an authority"), req));
    };
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(if target.https { Scheme::HTTPS } else { Scheme::HTTP });
    parts.authority = Some(authority);
    parts.path_and_query = Some(req.uri().path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/")));
    match Uri::from_parts(parts) {
        Ok(uri) => *req.uri_mut() = uri,
        Err(e) => return Err((ProxyError::bad_request("the request has no HTTP/2 target").with_cause(e), req)),
    }
    req.headers_mut().remove(header::HOST);
    *req.version_mut() = Version::HTTP_2;
    Ok(req)
}

/// Whether a request may go again after failing with `err`: the origin refused its stream
/// unprocessed (`REFUSED_STREAM`, RFC 9113 §8.7) or is going away (`GOAWAY`), or the
/// connection closed or broke. Not when the origin reset the stream otherwise: it may have
/// acted on the request, and it would likely fail again.
fn may_send_again(err: &hyper::Error) -> bool {
    if err.is_canceled() || err.is_closed() {
        return true;
    }
    let mut cause = std::error::Error::source(err);
    while let Some(error) = cause {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return h2.is_go_away() || h2.is_io() || h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        if error.is::<std::io::Error>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// A copy of a request without a body (its extensions are not copied).
fn bodiless_copy(req: &Request<OutBody>) -> Request<OutBody> {
    let mut copy = Request::new(OutBody::Empty);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    copy
}

/// An origin's response body on an HTTP/2 stream, its trailers included. Fails when the
/// stream is reset or its connection breaks (the body is then not stored), or when the
/// origin is silent for longer than the read timeout.
pub struct H2Body {
    body: Incoming,
    silence: Silence,
    _stream: StreamSlot,
}

impl std::fmt::Debug for H2Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2Body").finish_non_exhaustive()
    }
}

impl Body for H2Body {
    type Data = Bytes;
    type Error = OriginBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, OriginBodyError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.silence.heard();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(OriginBodyError::Http2(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => this.silence.poll_waited(cx).map(|waited| Some(Err(OriginBodyError::Silent(waited)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
