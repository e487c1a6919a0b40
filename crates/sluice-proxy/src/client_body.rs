//! A client's request body under the size limit of its request (`client.max_body_size`, or
//! its route's `max_body_size`), like nginx's `client_max_body_size` and Squid's
//! `request_body_max_size`.
//!
//! A body announced larger than the limit (`Content-Length`, in HTTP/1.1 and HTTP/2 alike)
//! is refused before any of it is read or anything is sent to an origin: `413 Content Too
//! Large`, and the connection is closed (so an `Expect: 100-continue` client never sends
//! it). A body without an announced length (chunked, or HTTP/2 without `Content-Length`)
//! fails as soon as it passes the limit: the request to the origin is abandoned mid-body
//! (the origin sees a cut request, which it must not act on) and the client gets the `413`
//! if no response head had come yet.
//!
//! A `GET` or `HEAD` whose head did not end the request may still have an empty body: an
//! HTTP/2 client that ends the stream with an empty `DATA` frame, an HTTP/1.1 client sending
//! `Transfer-Encoding: chunked` and only the last chunk. [`ClientBody::settle_empty`] reads
//! up to its first data so the cache can take such a request as the bodyless one it is.
//!
//! An HTTP/2 request whose data frames add up to more than its `Content-Length` is malformed
//! (RFC 9113 §8.1.1), and an intermediary must not forward it. The h2 crate resets the stream
//! when the data passes the length, but by then the data up to the length may already have
//! gone to the origin as a complete request. So the piece that completes the announced length
//! is held until the stream's end confirms it (normally the same frame carries `END_STREAM`,
//! and nothing waits); when the stream fails instead, the origin sees a cut request.

use crate::body::BoxError;
use crate::error::{Kind, ProxyError, Side};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The request body passed the limit while it was read.
#[derive(Debug, thiserror::Error)]
#[error("the request body is larger than {limit} bytes")]
pub struct BodyTooLarge {
    pub limit: u64,
}

/// A client's request body, read through the size limit of its request.
#[derive(Debug)]
pub struct ClientBody {
    body: Incoming,
    /// The limit; `u64::MAX` for none (then nothing is counted).
    limit: u64,
    /// Data bytes read so far (while there is a limit).
    read: u64,
    /// A frame read ahead by [`ClientBody::settle_empty`], given back first. Boxed: rare,
    /// and a frame (trailers) would make every request body larger.
    ahead: Option<Box<Frame<Bytes>>>,
    /// An HTTP/2 body with an announced length: the bytes of it not read yet (`u64::MAX`
    /// otherwise, when nothing is held back).
    announced_rest: u64,
    /// The piece that completed the announced length, held until the stream ends. Boxed: rare.
    held: Option<Box<Bytes>>,
}

impl ClientBody {
    /// `body` under `limit` (`None`: no limit); `http2` when it came on an HTTP/2 stream
    /// (whose last piece is then held until the stream's end confirms the announced length).
    /// `Err` (413) when its announced length is over the limit already.
    pub fn new(body: Incoming, limit: Option<u64>, http2: bool) -> Result<Self, ProxyError> {
        let announced = body.size_hint().exact();
        let limit = limit.unwrap_or(u64::MAX);
        if let Some(announced) = announced.filter(|&n| n > limit) {
            return Err(too_large(limit, format!("a request body of {announced} bytes")));
        }
        let announced_rest = announced.filter(|_| http2).unwrap_or(u64::MAX);
        Ok(Self { body, limit, read: 0, ahead: None, announced_rest, held: None })
    }

    /// Whether the body, which its request did not announce the length of, turns out empty:
    /// reads until the end of the body (`true`) or its first non-empty data or trailers
    /// (`false`; kept, and given back first when the body is read). The caller bounds the
    /// wait; dropping the future part-way loses nothing. `Err` as [`failed`] when the body
    /// fails.
    pub async fn settle_empty(&mut self) -> Result<bool, ProxyError> {
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut *self).poll_frame(cx)).await {
                None => return Ok(true),
                Some(Err(cause)) => return Err(failed(cause)),
                Some(Ok(frame)) if frame.data_ref().is_some_and(Bytes::is_empty) => {}
                Some(Ok(frame)) => {
                    self.ahead = Some(Box::new(frame));
                    return Ok(false);
                }
            }
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(frame) = this.ahead.take() {
            return Poll::Ready(Some(Ok(*frame)));
        }
        loop {
            let frame = match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                // The end confirms the held piece. A failure drops it: the origin's request
                // stays cut.
                Poll::Ready(None) => return Poll::Ready(this.held.take().map(|held| Ok(Frame::data(*held)))),
                other => return other.map_err(Into::into),
            };
            if let Some(data) = frame.data_ref().filter(|_| this.limit != u64::MAX) {
                this.read += data.len() as u64;
                if this.read > this.limit {
                    return Poll::Ready(Some(Err(Box::new(BodyTooLarge { limit: this.limit }))));
                }
            }
            if this.announced_rest == u64::MAX {
                return Poll::Ready(Some(Ok(frame)));
            }
            match (frame.data_ref(), this.held.take()) {
                // After the held piece only empty data or trailers can come (more data is
                // an error of the stream): the trailers end it.
                (Some(data), Some(held)) if data.is_empty() => this.held = Some(held),
                (_, Some(held)) => {
                    this.ahead = Some(Box::new(frame));
                    return Poll::Ready(Some(Ok(Frame::data(*held))));
                }
                (Some(data), None) => {
                    this.announced_rest = this.announced_rest.saturating_sub(data.len() as u64);
                    if this.announced_rest > 0 || data.is_empty() || this.body.is_end_stream() {
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    this.held = frame.into_data().ok().map(Box::new);
                }
                (None, None) => return Poll::Ready(Some(Ok(frame))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_none() && self.held.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.body.size_hint();
        let ahead = self.ahead.as_deref().map(|frame| frame.data_ref().map_or(0, |data| data.len() as u64));
        let kept = ahead.unwrap_or(0) + self.held.as_deref().map_or(0, |held| held.len() as u64);
        if ahead.is_none() && self.held.is_none() {
            return rest;
        }
        rest.exact().map_or_else(SizeHint::default, |n| SizeHint::with_exact(n + kept))
    }
}

/// The error a client gets when reading its request body failed: `413` when it passed the
/// limit, `400` when it was malformed or cut short.
pub fn failed(cause: BoxError) -> ProxyError {
    match cause.downcast::<BodyTooLarge>() {
        Ok(too) => too_large(too.limit, "the request body".into()),
        Err(cause) => ProxyError::bad_request("the request body failed").with_cause(cause),
    }
}

fn too_large(limit: u64, what: String) -> ProxyError {
    ProxyError::new(Kind::TooLarge, Side::Client, format!("{what} is larger than the {limit} bytes allowed"))
}
