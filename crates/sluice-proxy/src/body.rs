//! Message bodies.
//!
//! - [`OutBody`]: a request body going to an origin.
//! - [`ProxyBody`]: a response body going to a client, from wherever it comes (a stored
//!   object, a fill in progress, an origin stream, a local response). It carries the
//!   transaction's [`Finish`] and runs it exactly once, when the body ends, fails, or is
//!   dropped because the client went away.

use crate::upstream::PooledBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use sluice_store::{BodyChunks, FillReader};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Errors of response bodies, boxed at this seam.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body towards an origin.
#[derive(Debug)]
pub enum OutBody {
    Empty,
    /// The client's body, streamed through.
    Client(Incoming),
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            OutBody::Empty => Poll::Ready(None),
            OutBody::Client(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Empty => true,
            OutBody::Client(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Empty => SizeHint::with_exact(0),
            OutBody::Client(body) => body.size_hint(),
        }
    }
}

/// Runs when a response body is done: logging, metrics, module `resp_done`/`log`, and the
/// drop of per-transaction module state.
pub trait Finish: Send {
    /// `body_bytes` were sent; `completed` is false when the body failed or the client left.
    fn finish(self: Box<Self>, body_bytes: u64, completed: bool);
}

enum Source {
    Empty,
    Chunks(BodyChunks),
    Fill(FillReader),
    Origin(PooledBody),
}

/// A response body towards a client.
pub struct ProxyBody {
    source: Source,
    sent: u64,
    finish: Option<Box<dyn Finish>>,
}

impl std::fmt::Debug for ProxyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyBody").field("sent", &self.sent).finish_non_exhaustive()
    }
}

impl ProxyBody {
    fn of(source: Source) -> Self {
        Self { source, sent: 0, finish: None }
    }

    /// No body.
    pub fn empty() -> Self {
        Self::of(Source::Empty)
    }

    /// One buffer.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self::chunks(BodyChunks::new([bytes.into()]))
    }

    /// Stored chunks (a hit, a range of one).
    pub fn chunks(chunks: BodyChunks) -> Self {
        Self::of(Source::Chunks(chunks))
    }

    /// A body still being filled (a miss being stored, or a collapsed request).
    pub fn fill(reader: FillReader) -> Self {
        Self::of(Source::Fill(reader))
    }

    /// An origin body streamed through.
    pub fn origin(body: PooledBody) -> Self {
        Self::of(Source::Origin(body))
    }

    /// Attaches the transaction's finisher.
    pub fn with_finish(mut self, finish: Box<dyn Finish>) -> Self {
        self.finish = Some(finish);
        self
    }

    fn done(&mut self, completed: bool) {
        if let Some(finish) = self.finish.take() {
            finish.finish(self.sent, completed);
        }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled: Poll<Option<Result<Frame<Bytes>, BoxError>>> = match &mut this.source {
            Source::Empty => Poll::Ready(None),
            Source::Chunks(chunks) => Poll::Ready(chunks.next_chunk().map(|c| Ok(Frame::data(c)))),
            Source::Fill(reader) => Pin::new(reader).poll_frame(cx).map_err(Into::into),
            Source::Origin(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
        };
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
                if this.is_end_stream() {
                    this.done(true);
                }
            }
            Poll::Ready(Some(Err(_))) => this.done(false),
            Poll::Ready(None) => this.done(true),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Empty => true,
            Source::Chunks(chunks) => chunks.is_empty(),
            Source::Fill(reader) => reader.is_end_stream(),
            Source::Origin(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Empty => SizeHint::with_exact(0),
            Source::Chunks(chunks) => SizeHint::with_exact(chunks.remaining()),
            Source::Fill(reader) => reader.size_hint(),
            Source::Origin(body) => body.size_hint(),
        }
    }
}

impl Drop for ProxyBody {
    fn drop(&mut self) {
        // Hyper drops bodies it never polls (HEAD, 304): those were complete.
        let completed = self.is_end_stream();
        self.done(completed);
    }
}
