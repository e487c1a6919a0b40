//! [`PooledBody`]: an origin response body. Over HTTP/1.1 ([`Http1Body`]) it is read straight
//! off its connection, by whichever task polls it. The connection goes back to the pool when
//! the body has been read to its end and the connection may persist; a body dropped early,
//! failed or close-delimited closes it (the unread rest would poison the next reply). On a
//! pipelined connection the body holds its request's [`Ticket`] instead, and its end passes
//! the turn to the next response. Over HTTP/2 it is a stream of a shared connection
//! ([`super::h2::H2Body`]).

use super::conn::Connection;
use super::pipe::Ticket;
use super::wire::{ChunkedDecoder, Framing, WireError};
use super::{Target, Upstream};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The most bytes one read asks for.
const MAX_READ: usize = 256 * 1024;
/// The least room one read offers.
const MIN_READ: usize = 8 * 1024;

/// An origin body error: the connection broke, the origin broke the framing, ended the body
/// early, or went silent.
#[derive(Debug, thiserror::Error)]
pub enum OriginBodyError {
    #[error("origin body: {0}")]
    Io(#[from] std::io::Error),
    #[error("origin body: {0}")]
    Wire(#[from] WireError),
    #[error("origin closed the connection before the end of the body")]
    Truncated,
    #[error("origin sent nothing for {0:?}")]
    Silent(Duration),
    #[error("origin body (HTTP/2): {0}")]
    Http2(#[source] hyper::Error),
}

enum Remaining {
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
    Done,
}

/// Where a connection goes back when its body ends.
pub(super) struct Home {
    pub upstream: Upstream,
    pub target: Target,
    pub keep_alive: bool,
}

/// The connection a body is read from.
pub(super) enum Link {
    /// Held alone until the body ends.
    Own(Connection),
    /// Shared with the pipelined requests behind this one.
    Piped(Ticket),
}

impl Link {
    fn with<R>(&mut self, f: impl FnOnce(&mut Connection) -> R) -> R {
        match self {
            Link::Own(conn) => f(conn),
            Link::Piped(ticket) => ticket.with_conn(f),
        }
    }
}

/// An origin response body. Fails when the origin is silent for longer than the read
/// timeout, or breaks off the body.
///
/// The HTTP/1.1 variant is the larger and stays inline: it is the common case, and callers
/// box the whole body (`crate::source::SourceBody`) once.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum PooledBody {
    Http1(Http1Body),
    Http2(super::h2::H2Body),
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = OriginBodyError;

    #[inline]
    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, OriginBodyError>>> {
        match self.get_mut() {
            PooledBody::Http1(body) => Pin::new(body).poll_frame(cx),
            PooledBody::Http2(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            PooledBody::Http1(body) => body.is_end_stream(),
            PooledBody::Http2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            PooledBody::Http1(body) => body.size_hint(),
            PooledBody::Http2(body) => body.size_hint(),
        }
    }
}

/// The read timeout of an origin body: how long it may wait for more before it fails. One
/// timer per body, armed at each new wait rather than allocated anew.
pub(super) struct Silence {
    limit: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A wait for data is in progress (the timer is armed for it).
    waiting: bool,
}

impl Silence {
    pub(super) fn new(limit: Duration) -> Self {
        Self { limit, timer: None, waiting: false }
    }

    /// Something came: the next wait starts anew.
    #[inline]
    pub(super) fn heard(&mut self) {
        self.waiting = false;
    }

    /// The body is waiting for more: `Ready` with the limit once it has waited that long.
    pub(super) fn poll_waited(&mut self, cx: &mut Context<'_>) -> Poll<Duration> {
        let limit = self.limit;
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if !self.waiting {
            timer.as_mut().reset(tokio::time::Instant::now() + limit);
            self.waiting = true;
        }
        timer.as_mut().poll(cx).map(|()| limit)
    }
}

/// An HTTP/1.1 origin body, read off the connection it holds (or its pipelined turn of one).
pub struct Http1Body {
    link: Option<Link>,
    remaining: Remaining,
    home: Home,
    silence: Silence,
}

impl std::fmt::Debug for Http1Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1Body").finish_non_exhaustive()
    }
}

impl Http1Body {
    pub(super) fn new(link: Link, framing: Framing, home: Home, read_timeout: Duration) -> Self {
        let remaining = match framing {
            Framing::Empty | Framing::Length(0) => Remaining::Done,
            Framing::Length(n) => Remaining::Length(n),
            Framing::Chunked => Remaining::Chunked(ChunkedDecoder::default()),
            Framing::UntilClose => Remaining::UntilClose,
        };
        let mut body = Self { link: Some(link), remaining, home, silence: Silence::new(read_timeout) };
        if matches!(body.remaining, Remaining::Done) {
            body.release();
        }
        body
    }

    /// The body ended: the connection goes back to the pool if it may carry another request,
    /// or the next pipelined response may be read.
    fn release(&mut self) {
        self.remaining = Remaining::Done;
        match self.link.take() {
            Some(Link::Own(conn)) if self.home.keep_alive => self.home.upstream.checkin(&self.home.target, conn),
            Some(Link::Piped(ticket)) => {
                ticket.finish();
                self.home.upstream.notify_returned(&self.home.target, false);
            }
            _ => {}
        }
    }

    fn fail(&mut self, err: OriginBodyError) -> Poll<Option<Result<Frame<Bytes>, OriginBodyError>>> {
        self.link = None;
        self.remaining = Remaining::Done;
        Poll::Ready(Some(Err(err)))
    }

    /// The next piece of body already read, if any; releases the connection at the end.
    fn buffered(&mut self) -> Result<Option<Bytes>, WireError> {
        let Some(link) = self.link.as_mut() else { return Ok(None) };
        let remaining = &mut self.remaining;
        let (data, ended) = link.with(|conn| -> Result<_, WireError> {
            Ok(match remaining {
                Remaining::Length(left) if !conn.buf.is_empty() => {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(conn.buf.len());
                    *left -= take as u64;
                    (Some(conn.buf.split_to(take).freeze()), *left == 0)
                }
                Remaining::Chunked(decoder) => {
                    let data = decoder.decode(&mut conn.buf)?;
                    (data, decoder.is_done())
                }
                Remaining::UntilClose if !conn.buf.is_empty() => (Some(conn.buf.split().freeze()), false),
                _ => (None, false),
            })
        })?;
        if ended {
            self.release();
        }
        Ok(data)
    }

    /// How much room the next read asks for.
    fn read_size(&self) -> usize {
        match self.remaining {
            Remaining::Length(left) => usize::try_from(left).unwrap_or(MAX_READ).clamp(MIN_READ, MAX_READ),
            _ => MIN_READ * 2,
        }
    }
}

impl Body for Http1Body {
    type Data = Bytes;
    type Error = OriginBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, OriginBodyError>>> {
        let this = &mut *self;
        loop {
            match this.buffered() {
                Ok(Some(data)) => {
                    this.silence.heard();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(None) => {}
                Err(e) => return this.fail(e.into()),
            }
            let want = this.read_size();
            let Some(link) = this.link.as_mut() else { return Poll::Ready(None) };
            match link.with(|conn| conn.poll_read_more(cx, want)) {
                Poll::Ready(Ok(0)) => {
                    if matches!(this.remaining, Remaining::UntilClose) {
                        this.link = None;
                        this.remaining = Remaining::Done;
                        return Poll::Ready(None);
                    }
                    return this.fail(OriginBodyError::Truncated);
                }
                Poll::Ready(Ok(_)) => continue,
                Poll::Ready(Err(e)) => return this.fail(e.into()),
                Poll::Pending => {}
            }
            return match this.silence.poll_waited(cx) {
                Poll::Ready(waited) => this.fail(OriginBodyError::Silent(waited)),
                Poll::Pending => Poll::Pending,
            };
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.remaining, Remaining::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Remaining::Length(left) => SizeHint::with_exact(left),
            Remaining::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
