//! One HTTP/1.1 connection to an origin, driven inline by the transaction that holds it: no
//! background task, no channel, no cross-task wakeup. Writing a request and reading the
//! response head happen in [`Connection::exchange`]; the body is read by
//! [`super::PooledBody`], which owns the connection until the body ends.

use super::names::FieldNames;
use super::wire::{self, RequestFraming, ResponseHead, WireError};
use crate::body::OutBody;
use crate::deadline::{Elapsed, TimerSlot};
use bytes::BytesMut;
use http::{request, Method};
use http_body_util::BodyExt;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// The first read buffer of a connection; reads of large bodies ask for more.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// A plain or TLS byte stream to an origin, with its slot under `upstream.max_connections`
/// (none for a stream not counted: tests' own).
pub enum Stream {
    Plain(TcpStream, Option<OwnedSemaphorePermit>),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>, Option<OwnedSemaphorePermit>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s, _) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s, _) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s, _) => Pin::new(s).poll_write(cx, data),
            Stream::Tls(s, _) => Pin::new(s.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s, _) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s, _) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s, _) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s, _) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Why an exchange failed, and whether the origin had sent anything (a reused connection
/// that fails before any response byte may be retried for an idempotent request).
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Wire(#[from] WireError),
    #[error("origin closed the connection before a response")]
    ClosedBeforeResponse,
    #[error("reading the request body: {0}")]
    RequestBody(#[source] crate::body::BoxError),
}

impl ExchangeError {
    /// True when nothing at all came back from the origin.
    pub fn nothing_received(&self) -> bool {
        match self {
            ExchangeError::ClosedBeforeResponse => true,
            ExchangeError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            ),
            ExchangeError::Wire(_) | ExchangeError::RequestBody(_) => false,
        }
    }
}

/// An open connection to an origin. Dropping it closes it (and frees its per-host slot).
pub struct Connection {
    pub(super) io: Stream,
    /// Bytes read but not yet consumed.
    pub(super) buf: BytesMut,
    /// The field names of the last response head read here.
    pub(super) names: FieldNames,
    pub peer: IpAddr,
    /// The timer of its response timeouts, reused exchange after exchange (by the tasks of
    /// whichever clients send requests on it).
    pub(super) timers: TimerSlot,
    /// The exchange is waiting for the client's next piece of request body (not for the
    /// origin): a timeout then is the client's ([`Connection::was_waiting_for_client`]).
    waiting_for_client: bool,
    /// The per-host connection slot, held for the connection's life.
    _permit: Option<OwnedSemaphorePermit>,
}

impl Connection {
    pub fn new(io: Stream, peer: IpAddr, permit: Option<OwnedSemaphorePermit>) -> Self {
        Self {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
            names: FieldNames::default(),
            peer,
            timers: TimerSlot::shared(),
            waiting_for_client: false,
            _permit: permit,
        }
    }

    /// Whether an idle connection can carry a request: the origin has neither closed it nor
    /// sent anything unasked. Costs no system call unless the socket became readable.
    pub fn is_reusable(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        matches!(Pin::new(&mut self.io).poll_read(&mut cx, &mut probe), Poll::Pending)
    }

    /// [`Self::exchange`], bounded by `timeout` from now (`Err(Elapsed)` past it), on this
    /// connection's reused timer ([`crate::deadline`]).
    pub async fn exchange_within(
        &mut self,
        timeout: Duration,
        head: &[u8],
        body: OutBody,
        method: &Method,
    ) -> Result<Result<ResponseHead, ExchangeError>, Elapsed> {
        // Out of the connection while the exchange borrows it.
        let timers = std::mem::take(&mut self.timers);
        let exchanged = timers.within(timeout, self.exchange(head, body, method)).await;
        self.timers = timers;
        exchanged
    }

    /// Whether the last exchange, when it was cut off, was waiting for the client's request
    /// body rather than for the origin.
    pub fn was_waiting_for_client(&self) -> bool {
        self.waiting_for_client
    }

    /// Sends the request and reads the response head, skipping interim (1xx) responses.
    async fn exchange(&mut self, head: &[u8], body: OutBody, method: &Method) -> Result<ResponseHead, ExchangeError> {
        if let OutBody::Empty = body {
            self.io.write_all(head).await?;
        } else {
            let mut body = body;
            let chunked = http_body::Body::size_hint(&body).exact().is_none();
            self.io.write_all(head).await?;
            loop {
                self.waiting_for_client = true;
                let next = body.frame().await;
                self.waiting_for_client = false;
                let Some(frame) = next else { break };
                let frame = frame.map_err(ExchangeError::RequestBody)?;
                let Ok(data) = frame.into_data() else { continue };
                if data.is_empty() {
                    continue;
                }
                if chunked {
                    self.io.write_all(format!("{:x}\r\n", data.len()).as_bytes()).await?;
                    self.io.write_all(&data).await?;
                    self.io.write_all(b"\r\n").await?;
                } else {
                    self.io.write_all(&data).await?;
                }
            }
            if chunked {
                self.io.write_all(b"0\r\n\r\n").await?;
            }
        }
        self.io.flush().await?;
        loop {
            if let Some(head) = wire::parse_response_head(&mut self.buf, method, &mut self.names)? {
                if head.parts.status.is_informational() {
                    if head.parts.status == http::StatusCode::SWITCHING_PROTOCOLS {
                        return Err(WireError("unrequested protocol switch").into());
                    }
                    continue;
                }
                return Ok(head);
            }
            if self.read_more(READ_CHUNK).await? == 0 {
                return Err(if self.buf.is_empty() {
                    ExchangeError::ClosedBeforeResponse
                } else {
                    WireError("connection closed inside the response head").into()
                });
            }
        }
    }

    async fn read_more(&mut self, want: usize) -> io::Result<usize> {
        self.buf.reserve(want);
        self.io.read_buf(&mut self.buf).await
    }

    /// Polls for more bytes into the buffer, asking room for at least `want`; `Ready(Ok(0))`
    /// at end of stream.
    pub fn poll_read_more(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        self.buf.reserve(want);
        let read = self.io.read_buf(&mut self.buf);
        tokio::pin!(read);
        std::future::Future::poll(read, cx)
    }
}

/// How the request body of `parts` is framed on the wire.
pub fn request_framing(parts: &request::Parts, body: &OutBody) -> RequestFraming {
    match body {
        OutBody::Empty => {
            let expects_body = matches!(parts.method, Method::POST | Method::PUT | Method::PATCH);
            if expects_body || parts.headers.contains_key(http::header::CONTENT_LENGTH) {
                RequestFraming::Length(0)
            } else {
                RequestFraming::None
            }
        }
        body => match http_body::Body::size_hint(body).exact() {
            Some(n) => RequestFraming::Length(n),
            None => RequestFraming::Chunked,
        },
    }
}
