//! Connections to origins: our own HTTP/1.1 client (RFC 9112), a pool per (scheme, host,
//! port), connect and response timeouts, optional per-host connection limits, one retry of an
//! idempotent, bodiless request whose reused connection turned out closed, and optional
//! pipelining of GET and HEAD requests (`upstream.pipeline`, [`pipe`]). Routes that ask for
//! it speak HTTP/2 instead, through hyper's client ([`h2`]).
//!
//! The client is ours rather than hyper's because a pass-through response is then read by
//! the very task that writes it to the client: hyper's client drives each connection from a
//! task of its own and hands bytes over through channels, a cross-task wakeup per read that
//! cost about a quarter of a pass-through transaction (`docs/benchmarks.md`).
//!
//! A connection goes back to the pool when its response body has been read to the end; a
//! body dropped early closes its connection (the unread rest would poison the next reply).
//! Idle connections are probed for a close or unasked bytes when taken from the pool, and
//! reaped in the background after the idle timeout.

mod body;
mod conn;
mod h2;
mod names;
mod pipe;
mod wire;

pub use body::PooledBody;
pub use conn::Stream;

use crate::body::OutBody;
use crate::config::UpstreamConfig;
use crate::conn_limit::ConnectionLimit;
use crate::deadline::Elapsed;
use crate::error::{Kind, ProxyError, Side};
use crate::metrics::Metrics;
use body::{Home, Http1Body, Link};
use conn::{Connection, ExchangeError};
use http::{Method, Request, Response};
use parking_lot::Mutex;
use pipe::{Pipe, Ticket};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Where a request goes: scheme, host and port, and the addresses a module pinned the host
/// to (its `resolve` phase); connections are pooled per target, so pinned ones apart. Also
/// how long to wait for it: a route's own timeouts, which do not set it apart (targets that
/// differ only in them are equal and share connections).
#[derive(Debug, Clone)]
pub struct Target {
    pub https: bool,
    /// Lower-case, without brackets. Shared: a target is cloned for every request routed to
    /// it, and a clone then copies a pointer instead of allocating.
    pub host: Arc<str>,
    pub port: u16,
    /// Connect to these, in order, instead of resolving `host` (TLS still names `host`).
    pub pinned: Option<Arc<[SocketAddr]>>,
    /// The name TLS asks for and checks the certificate against (SNI), in place of `host`
    /// (a route's `tls_name`: an origin addressed by IP, or by another name than its
    /// certificate's).
    pub tls_name: Option<Arc<str>>,
    /// Speak HTTP/2 to it (a route's `http2`), over multiplexed connections ([`h2`]).
    pub http2: bool,
    /// The route's timeouts, in place of `[upstream]`'s where it sets them.
    pub timeouts: Option<Arc<RouteTimeouts>>,
    /// The destination ACL a forward request's addresses must pass (`crate::dest_acl`);
    /// `None` for reverse routes. Targets under different ACLs (forward and reverse, or
    /// before and after a reload) never share connections.
    pub dest_acl: Option<Arc<crate::dest_acl::DestAcl>>,
}

/// A route's own origin timeouts (`connect_timeout`, `response_timeout`, `read_timeout` on a
/// `[[route]]`); `None` keeps `[upstream]`'s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteTimeouts {
    pub connect: Option<Duration>,
    pub response: Option<Duration>,
    pub read: Option<Duration>,
}

impl PartialEq for Target {
    /// Everything but the timeouts.
    fn eq(&self, other: &Self) -> bool {
        (self.https, &self.host, self.port, &self.pinned, &self.tls_name, self.http2)
            == (other.https, &other.host, other.port, &other.pinned, &other.tls_name, other.http2)
            && match (&self.dest_acl, &other.dest_acl) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for Target {}

/// Hashes scheme, host and port only: a pinned target (or one with a `tls_name`, or over
/// HTTP/2) shares its host's bucket in the pool map and `Eq` tells them apart, so the common
/// key hashes no extra field.
impl std::hash::Hash for Target {
    /// Inlined, and scheme and port as one word: each origin request hashes a target about
    /// twice, and out of line, feeding foldhash a `bool` and a `u16` apart, that was 84
    /// instructions a hash (callgrind, 1 KiB pass-through).
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u32(u32::from(self.https) << 16 | u32::from(self.port));
        self.host.hash(state);
    }
}

impl Target {
    /// The target of an absolute URI; `None` without a host or with a scheme other than
    /// http/https.
    pub fn of(uri: &http::Uri) -> Option<Self> {
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return None,
        };
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Self {
            https,
            host: host.into(),
            port,
            pinned: None,
            tls_name: None,
            http2: false,
            timeouts: None,
            dest_acl: None,
        })
    }
}

struct Idle {
    conn: Connection,
    since: Instant,
}

/// Connection slots of one origin, and a signal for connections returned to its pool.
#[derive(Clone)]
struct HostLimit {
    permits: Arc<Semaphore>,
    returned: Arc<Notify>,
}

/// A map by origin. foldhash rather than std's SipHash: each origin request looks its
/// target up about twice, and a key is a short host name; its per-process random seed keeps
/// collisions out of a client's reach (and the maps hold only origins with pooled
/// connections or slots).
type ByTarget<V> = foldhash::HashMap<Target, V>;

struct Inner {
    idle: Mutex<ByTarget<Vec<Idle>>>,
    /// Connections carrying pipelined requests (`upstream.pipeline` > 1), in use or idle.
    pipes: Mutex<ByTarget<Vec<Arc<Pipe>>>>,
    /// Connections to HTTP/2 targets.
    h2: h2::H2Connections,
    limits: Mutex<ByTarget<HostLimit>>,
    config: UpstreamConfig,
    metrics: Arc<Metrics>,
    /// The idle reaper runs (started with the first request, inside the runtime).
    reaping: AtomicBool,
}

/// The origin client. Cheap to clone.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
    /// How new connections to `https://` origins are made (`crate::origin_tls`); each
    /// generation has its own, over the same pool ([`Upstream::with_tls`]).
    tls: crate::origin_tls::OriginTls,
    /// The admin listener's bound address, once it listens: no connection is made to it
    /// ([`Upstream::is_own_admin`]). Shared by every generation's client.
    own_admin: Arc<OnceLock<SocketAddr>>,
    /// Slots under `upstream.max_connections`, over every origin: each open origin connection
    /// holds one in its [`Stream`]. Shared by every generation's client, whose reload sets
    /// the limit ([`Upstream::sharing_lasting`]).
    slots: Arc<ConnectionLimit>,
    /// Signalled when a connection goes back to the idle pool: a request waiting for a slot
    /// may close it to take its slot.
    returned_any: Arc<Notify>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

/// An origin's response, with the address it came from.
#[derive(Debug)]
pub struct OriginResponse {
    pub response: Response<PooledBody>,
    pub peer: IpAddr,
}

/// Why [`Upstream::send`] got no response, and the request back when another origin
/// may be asked instead: when it never reached this one (no connection could be made), or
/// when it may be sent again (idempotent, without a body) and nothing came back for it.
#[derive(Debug)]
pub struct SendFailure {
    pub error: ProxyError,
    pub request: Option<Request<OutBody>>,
}

impl From<Box<SendFailure>> for ProxyError {
    fn from(failure: Box<SendFailure>) -> Self {
        failure.error
    }
}

impl Upstream {
    /// The client for `config`, its TLS files read now (`crate::origin_tls::connector`).
    pub fn new(config: UpstreamConfig, metrics: Arc<Metrics>) -> Result<Self, String> {
        let tls = crate::origin_tls::connector(&config.tls)?;
        let inner = Inner {
            idle: Mutex::default(),
            pipes: Mutex::default(),
            h2: h2::H2Connections::default(),
            limits: Mutex::default(),
            config,
            metrics,
            reaping: AtomicBool::new(false),
        };
        let slots = Arc::new(ConnectionLimit::new(inner.config.max_connections));
        Ok(Self { inner: Arc::new(inner), tls, own_admin: Arc::default(), slots, returned_any: Arc::default() })
    }

    /// This client, refusing to connect to the admin listener `other` refuses connections
    /// to (a client built anew by a reload).
    pub fn sharing_own_admin(self, other: &Upstream) -> Self {
        Self { own_admin: Arc::clone(&other.own_admin), ..self }
    }

    /// This client, with `other`'s admin address (as [`Self::sharing_own_admin`]) and its slots
    /// under `upstream.max_connections`, set to this client's limit: the connections `other`
    /// still has open count against it.
    pub fn sharing_lasting(self, other: &Upstream) -> Self {
        other.slots.set(self.inner.config.max_connections);
        Self {
            slots: Arc::clone(&other.slots),
            returned_any: Arc::clone(&other.returned_any),
            ..self.sharing_own_admin(other)
        }
    }

    /// The limit on open origin connections in force (`upstream.max_connections`).
    pub fn connection_limit(&self) -> usize {
        self.slots.limit()
    }

    /// Records the admin listener's bound address: from now on neither an origin request nor
    /// a CONNECT tunnel connects there ([`Upstream::is_own_admin`]).
    pub fn set_own_admin(&self, addr: SocketAddr) {
        let _ = self.own_admin.set(addr);
    }

    /// Whether `stream` is connected to this proxy's own admin listener: to its address, or,
    /// for an admin listener on an unspecified address (`0.0.0.0`, `::`), to its port on a
    /// loopback address or on the address the stream leaves from (this host). Forward-proxy
    /// clients could otherwise reach the admin API through the proxy, whatever name they
    /// give it (`localhost`, a name that resolves to loopback), `Via` or not.
    pub fn is_own_admin(&self, stream: &TcpStream) -> bool {
        let (Some(admin), Ok(peer), Ok(local)) = (self.own_admin.get(), stream.peer_addr(), stream.local_addr()) else {
            return false;
        };
        let canonical = |ip: IpAddr| ip.to_canonical();
        let (admin_ip, peer_ip) = (canonical(admin.ip()), canonical(peer.ip()));
        peer.port() == admin.port()
            && (peer_ip == admin_ip
                || (admin_ip.is_unspecified() && (peer_ip.is_loopback() || peer_ip == canonical(local.ip()))))
    }

    /// The error for a connection [`Upstream::is_own_admin`] refuses (403).
    pub fn own_admin_refused() -> ProxyError {
        ProxyError::new(
            crate::error::Kind::Forbidden,
            crate::error::Side::Client,
            "the admin API does not answer requests forwarded by this proxy",
        )
    }

    /// The same client (its pool and idle connections) making new TLS connections with
    /// `tls`: a reload's files read anew under an unchanged `[upstream]`.
    pub fn with_tls(&self, tls: crate::origin_tls::OriginTls) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            tls,
            own_admin: Arc::clone(&self.own_admin),
            slots: Arc::clone(&self.slots),
            returned_any: Arc::clone(&self.returned_any),
        }
    }

    /// When the client certificate it presents to origins (`upstream.tls.client_cert`), if
    /// any, expires.
    pub fn client_cert_not_after(&self) -> Option<std::time::SystemTime> {
        self.tls.client_cert_not_after
    }

    /// Sends `req` (whose URI is in origin form) to `target` and waits for the response head,
    /// at most the configured response timeout from sending it. A failure gives the request
    /// back when it may go to another origin ([`SendFailure`]; `?` makes it a
    /// [`ProxyError`]). It is boxed: it holds the request, and inline it would make every
    /// result several times larger to move.
    pub async fn send(&self, target: &Target, req: Request<OutBody>) -> Result<OriginResponse, Box<SendFailure>> {
        self.start_reaper();
        self.inner.metrics.origin_requests.fetch_add(1, Relaxed);
        if target.http2 {
            // Boxed: inline, its larger state would enlarge every origin request's future
            // (and every transaction's, which holds one), copied as it moves.
            return Box::pin(self.send_h2(target, req)).await;
        }
        let sent = Instant::now();
        let (parts, body) = req.into_parts();
        let mut head = Vec::with_capacity(512);
        wire::encode_request_head(&parts, conn::request_framing(&parts, &body), &mut head);
        // A pooled connection may have been closed by the origin while idle, and a pipelined
        // request may go unanswered when the origin closes the connection in front of it. An
        // idempotent request without a body that got nothing back is sent again, once, on a
        // fresh connection (RFC 9110 §9.2.2, RFC 9112 §9.3.2).
        let replayable = matches!(body, OutBody::Empty) && is_idempotent(&parts.method);
        // The request back, for another origin: its body when not sent yet, or none needed.
        let give_back = |parts, body: Option<OutBody>, sent: bool| {
            let body = if sent { replayable.then_some(OutBody::Empty) } else { body };
            body.map(|body| Request::from_parts(parts, body))
        };
        let mut fresh = false;
        if replayable && self.inner.config.pipeline > 1 && pipelinable(&parts) {
            match self.send_piped(target, &head, &parts.method, sent).await {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(err)) if err.nothing_received() => {
                    tracing::debug!(
                        "pipelined request to {}:{} unanswered ({err}); retrying",
                        target.host,
                        target.port
                    );
                    fresh = true;
                }
                Ok(Err(err)) => {
                    return Err(Box::new(SendFailure { error: self.exchange_failed(target, err), request: None }))
                }
                Err(error) => return Err(Box::new(SendFailure { error, request: give_back(parts, None, true) })),
            }
        }
        let timeout = self.response_timeout(target);
        let mut body = Some(body);
        loop {
            let connection = if fresh {
                self.fresh_connection(target).await.map(|conn| (conn, false))
            } else {
                self.connection(target).await
            };
            let (mut conn, reused) = match connection {
                Ok(found) => found,
                Err(error) => {
                    // Not sent; a retry on a fresh connection has already sent the body.
                    let sent = body.is_none();
                    return Err(Box::new(SendFailure { error, request: give_back(parts, body.take(), sent) }));
                }
            };
            let out = body.take().unwrap_or(OutBody::Empty);
            match conn.exchange_within(timeout, &head, out, &parts.method).await {
                Err(Elapsed) if conn.was_waiting_for_client() => {
                    // The client stalled its upload: the origin is not to blame (no pool
                    // failure, no retry elsewhere), and the request cannot go on.
                    let error = crate::error::ProxyError::new(
                        crate::error::Kind::RequestTimeout,
                        crate::error::Side::Client,
                        format!("the request body stalled: nothing more from the client within {timeout:?}"),
                    );
                    return Err(Box::new(SendFailure { error, request: None }));
                }
                Err(Elapsed) => {
                    return Err(Box::new(SendFailure {
                        error: self.timed_out(target),
                        request: give_back(parts, None, true),
                    }))
                }
                Ok(Ok(response)) => {
                    let peer = conn.peer;
                    return Ok(self.response(target, Link::Own(conn), peer, response, sent));
                }
                Ok(Err(err)) if reused && replayable && err.nothing_received() => {
                    tracing::debug!(
                        "pooled connection to {}:{} was closed ({err}); retrying",
                        target.host,
                        target.port
                    );
                    fresh = true;
                }
                Ok(Err(err)) => {
                    let again = err.nothing_received();
                    let error = self.exchange_failed(target, err);
                    return Err(Box::new(SendFailure {
                        error,
                        request: if again { give_back(parts, None, true) } else { None },
                    }));
                }
            }
        }
    }

    /// Sends a request on a pipelined connection. The outer error: no connection could be
    /// had, or no response head came within the response timeout; the inner one: the
    /// exchange failed (retryable when nothing came back for it).
    async fn send_piped(
        &self,
        target: &Target,
        head: &[u8],
        method: &Method,
        sent: Instant,
    ) -> Result<Result<OriginResponse, ExchangeError>, ProxyError> {
        let (ticket, writes) = self.enqueue(target, head).await?;
        self.inner.metrics.origin_pipelined.fetch_add(1, Relaxed);
        if writes {
            self.inner.metrics.origin_pipeline_writes.fetch_add(1, Relaxed);
        }
        let timeout = self.response_timeout(target);
        let head = ticket.exchange(writes, method, timeout).await.map_err(|Elapsed| self.timed_out(target))?;
        Ok(head.map(|head| {
            let peer = ticket.with_conn(|conn| conn.peer);
            self.response(target, Link::Piped(ticket), peer, head, sent)
        }))
    }

    /// Queues `head` on a pipelined connection to `target`: the busiest one with room (so
    /// that requests queued together go out in one write), else a new one. At the per-host
    /// connection limit, waits until a pipe has room or a connection slot frees.
    async fn enqueue(&self, target: &Target, head: &[u8]) -> Result<(Ticket, bool), ProxyError> {
        let depth = self.inner.config.pipeline;
        loop {
            let busiest = {
                let mut pipes = self.inner.pipes.lock();
                pipes.get_mut(target).and_then(|list| {
                    list.retain(|pipe| !pipe.is_closed());
                    list.iter().filter(|pipe| pipe.in_flight() < depth).max_by_key(|pipe| pipe.in_flight()).cloned()
                })
            };
            if let Some(pipe) = busiest {
                if let Some(queued) = pipe.enqueue(head, depth) {
                    return Ok(queued);
                }
                continue;
            }
            let Some((conn, _)) = self.connection_or_returned(target).await? else { continue };
            let pipe = Pipe::new(conn);
            let queued = pipe.enqueue(head, depth);
            {
                let mut pipes = self.inner.pipes.lock();
                match pipes.get_mut(target) {
                    Some(list) => list.push(pipe),
                    None => drop(pipes.insert(target.clone(), vec![pipe])),
                }
            }
            // Requests waiting at the connection limit may queue on the new pipe.
            self.notify_returned(target, true);
            if let Some(queued) = queued {
                return Ok(queued);
            }
        }
    }

    /// An origin's response whose body is read from `link`; its head came `sent.elapsed()` after
    /// the request was sent (`sluice_origin_response_seconds`).
    fn response(
        &self,
        target: &Target,
        link: Link,
        peer: IpAddr,
        head: wire::ResponseHead,
        sent: Instant,
    ) -> OriginResponse {
        self.inner.metrics.durations.record_origin(sent.elapsed());
        let home = Home { upstream: self.clone(), target: target.clone(), keep_alive: head.keep_alive };
        let body = PooledBody::Http1(Http1Body::new(link, head.framing, home, self.read_timeout(target)));
        OriginResponse { response: Response::from_parts(head.parts, body), peer }
    }

    /// `upstream.connect_timeout`, or the target's route's own.
    fn connect_timeout(&self, target: &Target) -> Duration {
        target.timeouts.as_ref().and_then(|t| t.connect).unwrap_or(self.inner.config.connect_timeout.0)
    }

    /// `upstream.response_timeout`, or the target's route's own.
    pub(crate) fn response_timeout(&self, target: &Target) -> Duration {
        target.timeouts.as_ref().and_then(|t| t.response).unwrap_or(self.inner.config.response_timeout.0)
    }

    /// `upstream.read_timeout`, or the target's route's own.
    pub(crate) fn read_timeout(&self, target: &Target) -> Duration {
        target.timeouts.as_ref().and_then(|t| t.read).unwrap_or(self.inner.config.read_timeout.0)
    }

    /// The error a client gets when the origin sent no response head within the response
    /// timeout: 504.
    fn timed_out(&self, target: &Target) -> ProxyError {
        self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
        ProxyError::gateway_timeout(format!(
            "no response from {}:{} within {:?}",
            target.host,
            target.port,
            self.response_timeout(target)
        ))
    }

    /// The error a client gets for a failed exchange: 400 when its own request body was
    /// malformed or cut short, 413 when it was too large, 500 when a module broke it, 502
    /// when the origin failed.
    fn exchange_failed(&self, target: &Target, err: ExchangeError) -> ProxyError {
        use crate::error::{Kind, Side};
        let err = match err {
            ExchangeError::RequestBody(cause) if cause.is::<crate::req_body::ModuleBodyError>() => {
                // Kept as the cause: a module's local answer in it goes to the client.
                return ProxyError::new(Kind::Internal, Side::Module, cause.to_string()).with_cause(cause);
            }
            ExchangeError::RequestBody(cause) => return crate::client_body::failed(cause),
            err => err,
        };
        self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
        ProxyError::bad_gateway(format!("origin failed ({}:{})", target.host, target.port)).with_cause(err)
    }

    /// An idle pooled connection that is still open and quiet, if any. An emptied list stays
    /// in the pool for the next [`Self::checkin`] (one hash lookup per request instead of a
    /// removal and a re-insertion); the reaper drops empty lists.
    fn checkout(&self, target: &Target) -> Option<Connection> {
        let max_idle = self.inner.config.idle_timeout.0;
        let mut pools = self.inner.idle.lock();
        let list = pools.get_mut(target)?;
        while let Some(mut idle) = list.pop() {
            if idle.since.elapsed() <= max_idle && idle.conn.is_reusable() {
                return Some(idle.conn);
            }
        }
        None
    }

    /// Returns a connection whose response has been read to its end.
    fn checkin(&self, target: &Target, mut conn: Connection) {
        if !conn.is_reusable() {
            return;
        }
        {
            let mut pools = self.inner.idle.lock();
            // The target is cloned only when its list is new (or was reaped).
            let list = match pools.get_mut(target) {
                Some(list) => list,
                None => pools.entry(target.clone()).or_default(),
            };
            if list.len() >= self.inner.config.max_idle_per_host {
                return;
            }
            list.push(Idle { conn, since: Instant::now() });
        }
        self.returned_any.notify_one();
        self.notify_returned(target, false);
    }

    /// Tells requests waiting for a connection slot to `target` that one may be free: one
    /// of them when a connection went back to the pool or a pipelined one has room again,
    /// all of them when a new pipelined connection opened.
    fn notify_returned(&self, target: &Target, all: bool) {
        if self.inner.config.max_connections_per_host == 0 {
            return;
        }
        let returned = self.inner.limits.lock().get(target).map(|limit| Arc::clone(&limit.returned));
        match returned {
            Some(returned) if all => returned.notify_waiters(),
            Some(returned) => returned.notify_one(),
            None => {}
        }
    }

    /// Starts the task that closes idle connections past the idle timeout, once, from
    /// inside the runtime. It ends when the upstream is dropped.
    fn start_reaper(&self) {
        if self.inner.reaping.load(Relaxed) || self.inner.reaping.swap(true, Relaxed) {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let period = (self.inner.config.idle_timeout.0 / 2).max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                reap(&inner);
            }
        });
    }

    /// The per-host limit of `target`, when connections are limited.
    fn limit(&self, target: &Target) -> Option<HostLimit> {
        let limit = self.inner.config.max_connections_per_host;
        if limit == 0 {
            return None;
        }
        let mut limits = self.inner.limits.lock();
        let entry = limits.entry(target.clone()).or_insert_with(|| HostLimit {
            permits: Arc::new(Semaphore::new(limit)),
            returned: Arc::new(Notify::new()),
        });
        Some(entry.clone())
    }

    /// A connection for `target` and whether it was reused: an idle pooled one, else a new
    /// one within the per-host limit. At the limit, waits until a connection closes (its
    /// permit frees) or one is returned to the pool, whichever comes first.
    async fn connection(&self, target: &Target) -> Result<(Connection, bool), ProxyError> {
        loop {
            if let Some(found) = self.connection_or_returned(target).await? {
                return Ok(found);
            }
        }
    }

    /// Like [`Self::connection`], but `None` as soon as a connection is returned while
    /// waiting at the limit (or a pipelined one has room again): the caller looks again.
    async fn connection_or_returned(&self, target: &Target) -> Result<Option<(Connection, bool)>, ProxyError> {
        if let Some(conn) = self.checkout(target) {
            return Ok(Some((conn, true)));
        }
        let Some(limit) = self.limit(target) else { return Ok(Some((self.connect(target, None).await?, false))) };
        let returned = limit.returned.notified();
        tokio::pin!(returned);
        returned.as_mut().enable();
        if let Ok(permit) = Arc::clone(&limit.permits).try_acquire_owned() {
            return Ok(Some((self.connect(target, Some(permit)).await?, false)));
        }
        tokio::select! {
            permit = Arc::clone(&limit.permits).acquire_owned() => Ok(Some((self.connect(target, permit.ok()).await?, false))),
            () = &mut returned => Ok(None),
        }
    }

    /// A new connection (never a pooled one), within the per-host limit.
    async fn fresh_connection(&self, target: &Target) -> Result<Connection, ProxyError> {
        let permit = match self.limit(target) {
            Some(limit) => limit.permits.acquire_owned().await.ok(),
            None => None,
        };
        self.connect(target, permit).await
    }

    /// Opens a new connection: resolve, TCP connect (each address in turn) within the
    /// connect timeout, TLS for https.
    async fn connect(&self, target: &Target, permit: Option<OwnedSemaphorePermit>) -> Result<Connection, ProxyError> {
        let (io, peer) = self.open_stream(target).await?;
        Ok(Connection::new(io, peer, permit))
    }

    /// A new byte stream to `target` (as [`Self::connect`]'s), for a connection that leaves
    /// HTTP after its first exchange (`crate::upgrade`): never pooled, and not counted against
    /// `upstream.max_connections_per_host`, which would let long-lived upgraded connections
    /// starve the origin's HTTP requests. Returns the stream and the origin's address.
    pub async fn open_stream(&self, target: &Target) -> Result<(Stream, IpAddr), ProxyError> {
        self.open_stream_speaking(target, false).await
    }

    /// [`Self::open_stream`], for HTTP/2 when `http2`: TLS then offers ALPN `h2` alone, and a
    /// server that does not choose it is a `502`.
    async fn open_stream_speaking(&self, target: &Target, http2: bool) -> Result<(Stream, IpAddr), ProxyError> {
        let timeout = self.connect_timeout(target);
        let what = format!("{}:{}", target.host, target.port);
        let slot = self.origin_slot(timeout, &what).await?;
        let stream = match tokio::time::timeout(timeout, connect_tcp(target)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) if crate::dest_acl::is_denied(&e) => return Err(crate::dest_acl::refused(&what)),
            Ok(Err(e)) => {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                return Err(ProxyError::bad_gateway(format!("cannot connect to {what}")).with_cause(e));
            }
            Err(_) => {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                return Err(ProxyError::gateway_timeout(format!("connecting to {what} took longer than {timeout:?}")));
            }
        };
        if self.is_own_admin(&stream) {
            return Err(Self::own_admin_refused());
        }
        self.inner.metrics.origin_connects.fetch_add(1, Relaxed);
        let peer = stream.peer_addr().map(|a| a.ip()).unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let io = if target.https {
            let name = target.tls_name.as_deref().unwrap_or(&target.host);
            let name = rustls::pki_types::ServerName::try_from(name.to_owned())
                .map_err(|e| ProxyError::bad_gateway(format!("invalid TLS name {name}")).with_cause(e))?;
            let connector = if http2 { &self.tls.h2_connector } else { &self.tls.connector };
            let tls = tokio::time::timeout(timeout, connector.connect(name, stream))
                .await
                .map_err(|_| ProxyError::gateway_timeout(format!("TLS handshake with {what} timed out")))?
                .map_err(|e| ProxyError::bad_gateway(format!("TLS handshake with {what} failed")).with_cause(e))?;
            if http2 && tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                return Err(ProxyError::bad_gateway(format!("{what} did not choose HTTP/2 (ALPN h2)")));
            }
            Stream::Tls(Box::new(tls), Some(slot))
        } else {
            Stream::Plain(stream, Some(slot))
        };
        Ok((io, peer))
    }
}

impl Upstream {
    /// A slot under `upstream.max_connections` for a new connection to `what`. At the limit,
    /// closes an idle pooled connection (any origin's) to take its slot, else waits for one to
    /// close or go idle, up to `timeout` (the connect timeout): past it, 503.
    pub(crate) async fn origin_slot(&self, timeout: Duration, what: &str) -> Result<OwnedSemaphorePermit, ProxyError> {
        if let Some(slot) = self.slots.try_take() {
            return Ok(slot);
        }
        self.inner.metrics.origin_connection_waits.fetch_add(1, Relaxed);
        self.slots.note_wait(|limit| {
            format!("upstream.max_connections ({limit}) reached: new origin connections wait for a slot (503 past the connect timeout)")
        });
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let returned = self.returned_any.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if self.close_one_idle() {
                if let Some(slot) = self.slots.try_take() {
                    return Ok(slot);
                }
            }
            tokio::select! {
                slot = self.slots.take_quietly() => return Ok(slot),
                () = &mut returned => {}
                () = tokio::time::sleep_until(deadline) => {
                    self.inner.metrics.origin_connection_refusals.fetch_add(1, Relaxed);
                    let limit = self.slots.limit();
                    tracing::debug!("upstream.max_connections ({limit}) reached: no connection to {what} within {timeout:?}");
                    return Err(ProxyError::new(Kind::Unavailable, Side::Proxy, format!(
                        "upstream.max_connections ({limit}) reached: no connection to {what} within {timeout:?}"
                    )));
                }
            }
        }
    }

    /// Closes the idle pooled HTTP/1.1 connection that has waited longest, if any, which frees
    /// its slot.
    fn close_one_idle(&self) -> bool {
        let closed = {
            let mut pools = self.inner.idle.lock();
            let oldest = pools
                .iter()
                .filter_map(|(target, list)| list.first().map(|idle| (idle.since, target.clone())))
                .min_by_key(|(since, _)| *since);
            oldest.and_then(|(_, target)| pools.get_mut(&target).map(|list| list.remove(0)))
        };
        closed.is_some()
    }
}

/// Closes idle connections past the idle timeout, or closed by their origin (HTTP/2 ones once
/// their streams in flight end).
fn reap(inner: &Inner) {
    let max_idle = inner.config.idle_timeout.0;
    let mut pools = inner.idle.lock();
    pools.retain(|_, list| {
        list.retain_mut(|idle| idle.since.elapsed() <= max_idle && idle.conn.is_reusable());
        !list.is_empty()
    });
    drop(pools);
    inner.pipes.lock().retain(|_, list| {
        list.retain(|pipe| !pipe.is_spent(max_idle));
        !list.is_empty()
    });
    inner.h2.reap(max_idle);
}

/// Whether a request may be queued behind others on one connection: no `Upgrade`, no
/// `Expect`, and no `Connection: close` (its response ends the connection).
fn pipelinable(parts: &http::request::Parts) -> bool {
    matches!(parts.method, Method::GET | Method::HEAD)
        && !parts.headers.contains_key(http::header::UPGRADE)
        && !parts.headers.contains_key(http::header::EXPECT)
        && !parts
            .headers
            .get_all(http::header::CONNECTION)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))))
}

/// Methods whose requests may be repeated automatically (RFC 9110 §9.2.2).
fn is_idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE)
}

async fn connect_tcp(target: &Target) -> std::io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = match &target.pinned {
        Some(pinned) => pinned.to_vec(),
        None => tokio::net::lookup_host((&*target.host, target.port)).await?.collect(),
    };
    let addrs = match &target.dest_acl {
        Some(acl) => acl.filter(&target.host, addrs)?,
        None => addrs,
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} has no address", target.host))
    }))
}
