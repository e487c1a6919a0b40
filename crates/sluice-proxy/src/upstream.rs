//! Connections to origins: a pool per (scheme, host, port), connect and response timeouts,
//! optional per-host connection limits, and one retry of a request the pooled connection
//! never sent (the origin closed it while idle).
//!
//! A connection goes back to the pool when its response body has been read to the end; a
//! body dropped early closes its connection (the unread rest would poison the next reply).

use crate::body::OutBody;
use crate::config::UpstreamConfig;
use crate::error::ProxyError;
use crate::metrics::Metrics;
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Where a request goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
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
        Some(Self { https, host, port })
    }
}

struct Idle {
    sender: SendRequest<OutBody>,
    peer: IpAddr,
    since: Instant,
}

/// Connection slots of one origin, and a signal for connections returned to its pool.
#[derive(Clone)]
struct HostLimit {
    permits: Arc<Semaphore>,
    returned: Arc<Notify>,
}

struct Inner {
    idle: Mutex<HashMap<Target, Vec<Idle>>>,
    limits: Mutex<HashMap<Target, HostLimit>>,
    config: UpstreamConfig,
    tls: tokio_rustls::TlsConnector,
    metrics: Arc<Metrics>,
}

/// The origin client. Cheap to clone.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
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

impl Upstream {
    pub fn new(config: UpstreamConfig, metrics: Arc<Metrics>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let inner = Inner {
            idle: Mutex::default(),
            limits: Mutex::default(),
            config,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            metrics,
        };
        Self { inner: Arc::new(inner) }
    }

    /// Sends `req` (whose URI is in origin form) to `target` and waits for the response head,
    /// at most the configured response timeout.
    pub async fn send(&self, target: &Target, req: Request<OutBody>) -> Result<OriginResponse, ProxyError> {
        let timeout = self.inner.config.response_timeout.0;
        match tokio::time::timeout(timeout, self.send_inner(target, req)).await {
            Ok(result) => result,
            Err(_) => {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                Err(ProxyError::gateway_timeout(format!(
                    "no response from {}:{} within {timeout:?}",
                    target.host, target.port
                )))
            }
        }
    }

    async fn send_inner(&self, target: &Target, mut req: Request<OutBody>) -> Result<OriginResponse, ProxyError> {
        self.inner.metrics.origin_requests.fetch_add(1, Relaxed);
        // A pooled connection may have been closed by the origin while idle; a request it
        // never sent is retried once on a fresh connection.
        for attempt in 0..2 {
            let (mut sender, peer) =
                if attempt == 0 { self.connection(target).await? } else { self.fresh_connection(target).await? };
            match sender.try_send_request(req).await {
                Ok(response) => {
                    let slot = ReturnSlot { upstream: self.clone(), target: target.clone(), sender, peer };
                    let response = response.map(|body| PooledBody::new(body, slot, self.inner.config.read_timeout.0));
                    return Ok(OriginResponse { response, peer });
                }
                Err(mut err) => match err.take_message() {
                    Some(unsent) if attempt == 0 => req = unsent,
                    _ => {
                        self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                        return Err(ProxyError::bad_gateway(format!("origin {}:{} failed", target.host, target.port))
                            .with_cause(err.into_error()));
                    }
                },
            }
        }
        unreachable!("the second attempt always returns")
    }

    /// An idle pooled connection that is still open and ready, if any.
    async fn checkout(&self, target: &Target) -> Option<(SendRequest<OutBody>, IpAddr)> {
        let max_idle = self.inner.config.idle_timeout.0;
        loop {
            let idle = {
                let mut pools = self.inner.idle.lock();
                let list = pools.get_mut(target)?;
                let idle = list.pop()?;
                if list.is_empty() {
                    pools.remove(target);
                }
                idle
            };
            if idle.since.elapsed() > max_idle || idle.sender.is_closed() {
                continue;
            }
            let mut sender = idle.sender;
            if sender.ready().await.is_ok() {
                return Some((sender, idle.peer));
            }
        }
    }

    fn checkin(&self, target: Target, sender: SendRequest<OutBody>, peer: IpAddr) {
        if sender.is_closed() {
            return;
        }
        let returned = {
            let mut pools = self.inner.idle.lock();
            let list = pools.entry(target.clone()).or_default();
            if list.len() >= self.inner.config.max_idle_per_host {
                return;
            }
            list.push(Idle { sender, peer, since: Instant::now() });
            self.inner.limits.lock().get(&target).map(|limit| Arc::clone(&limit.returned))
        };
        // A request waiting for a connection slot can take this one.
        if let Some(returned) = returned {
            returned.notify_one();
        }
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

    /// A connection for `target`: an idle pooled one, else a new one within the per-host
    /// limit. At the limit, waits until a connection closes (its permit frees) or one is
    /// returned to the pool, whichever comes first.
    async fn connection(&self, target: &Target) -> Result<(SendRequest<OutBody>, IpAddr), ProxyError> {
        loop {
            if let Some(conn) = self.checkout(target).await {
                return Ok(conn);
            }
            let Some(limit) = self.limit(target) else { return self.connect(target, None).await };
            let returned = limit.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if let Ok(permit) = Arc::clone(&limit.permits).try_acquire_owned() {
                return self.connect(target, Some(permit)).await;
            }
            tokio::select! {
                permit = Arc::clone(&limit.permits).acquire_owned() => return self.connect(target, permit.ok()).await,
                () = &mut returned => continue,
            }
        }
    }

    /// A new connection (never a pooled one), within the per-host limit.
    async fn fresh_connection(&self, target: &Target) -> Result<(SendRequest<OutBody>, IpAddr), ProxyError> {
        let permit = match self.limit(target) {
            Some(limit) => limit.permits.acquire_owned().await.ok(),
            None => None,
        };
        self.connect(target, permit).await
    }

    /// Opens a new connection: resolve, TCP connect (each address in turn) within the
    /// connect timeout, TLS for https, HTTP/1.1 handshake.
    async fn connect(
        &self,
        target: &Target,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<(SendRequest<OutBody>, IpAddr), ProxyError> {
        let timeout = self.inner.config.connect_timeout.0;
        let what = format!("{}:{}", target.host, target.port);
        let stream = match tokio::time::timeout(timeout, connect_tcp(&target.host, target.port)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                return Err(ProxyError::bad_gateway(format!("cannot connect to {what}")).with_cause(e));
            }
            Err(_) => {
                self.inner.metrics.origin_errors.fetch_add(1, Relaxed);
                return Err(ProxyError::gateway_timeout(format!("connecting to {what} took longer than {timeout:?}")));
            }
        };
        self.inner.metrics.origin_connects.fetch_add(1, Relaxed);
        let peer = stream.peer_addr().map(|a| a.ip()).unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let sender = if target.https {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| ProxyError::bad_gateway(format!("invalid TLS name {}", target.host)).with_cause(e))?;
            let tls = tokio::time::timeout(timeout, self.inner.tls.connect(name, stream))
                .await
                .map_err(|_| ProxyError::gateway_timeout(format!("TLS handshake with {what} timed out")))?
                .map_err(|e| ProxyError::bad_gateway(format!("TLS handshake with {what} failed")).with_cause(e))?;
            handshake(TokioIo::new(tls), permit).await
        } else {
            handshake(TokioIo::new(stream), permit).await
        };
        sender
            .map(|s| (s, peer))
            .map_err(|e| ProxyError::bad_gateway(format!("HTTP handshake with {what} failed")).with_cause(e))
    }
}

async fn connect_tcp(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host} has no address"))))
}

async fn handshake<I>(io: I, permit: Option<OwnedSemaphorePermit>) -> hyper::Result<SendRequest<OutBody>>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::Builder::new().handshake(io).await?;
    tokio::spawn(async move {
        // The permit (if any) is held for the connection's life.
        let _permit = permit;
        if let Err(e) = conn.await {
            tracing::debug!("origin connection ended: {e}");
        }
    });
    Ok(sender)
}

struct ReturnSlot {
    upstream: Upstream,
    target: Target,
    sender: SendRequest<OutBody>,
    peer: IpAddr,
}

/// An origin response body. Returns its connection to the pool when read to the end; fails
/// when the origin is silent for longer than the read timeout.
pub struct PooledBody {
    inner: Incoming,
    slot: Option<ReturnSlot>,
    read_timeout: Duration,
    silence: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A wait for data is in progress (the timer is armed for it).
    waiting: bool,
}

impl std::fmt::Debug for PooledBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBody").finish_non_exhaustive()
    }
}

/// An origin body error: the connection broke, or the origin went silent.
#[derive(Debug, thiserror::Error)]
pub enum OriginBodyError {
    #[error("origin body: {0}")]
    Http(#[from] hyper::Error),
    #[error("origin sent nothing for {0:?}")]
    Silent(Duration),
}

impl PooledBody {
    fn new(inner: Incoming, slot: ReturnSlot, read_timeout: Duration) -> Self {
        let mut body = Self { inner, slot: Some(slot), read_timeout, silence: None, waiting: false };
        if body.inner.is_end_stream() {
            body.release();
        }
        body
    }

    fn release(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.upstream.checkin(slot.target, slot.sender, slot.peer);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = OriginBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, OriginBodyError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.waiting = false;
                if this.inner.is_end_stream() {
                    this.release();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.slot = None;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.release();
                Poll::Ready(None)
            }
            Poll::Pending => {
                // One timer per body, re-armed at each new wait rather than allocated anew.
                let timeout = this.read_timeout;
                let deadline = tokio::time::Instant::now() + timeout;
                let silence = this.silence.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if !this.waiting {
                    silence.as_mut().reset(deadline);
                    this.waiting = true;
                }
                match silence.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.slot = None;
                        Poll::Ready(Some(Err(OriginBodyError::Silent(timeout))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

use std::future::Future as _;
