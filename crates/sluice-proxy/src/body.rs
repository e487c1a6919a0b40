//! Message bodies.
//!
//! - [`OutBody`]: a request body going to an origin (through the modules' `req_body` phase:
//!   [`crate::req_body`]).
//! - [`ProxyBody`]: a response body going to a client, from wherever it comes (a stored
//!   object, a fill in progress, an origin stream, a local response). It owns the
//!   transaction once the head is sent: it runs the modules' body phases on each chunk, and
//!   ends the transaction exactly once, when the body ends, fails, or is dropped because the
//!   client went away.

use crate::client_body::ClientBody;
use crate::held_failure::HeldFailure;
use crate::idle::{Activity, Busy};
use crate::source::SourceBody;
use crate::txn::Txn;
use crate::zero_copy::{self, SendfileQueue};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use sluice_module::BodyChunk;
use sluice_store::disk::{DiskBody, DiskBodyStream};
use sluice_store::{BodyChunks, FillReader, RangeCut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Errors of response bodies, boxed at this seam.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body towards an origin.
#[derive(Debug)]
pub enum OutBody {
    Empty,
    /// The client's body, streamed through.
    Client(ClientBody),
    /// The client's body, streamed through the modules' `req_body` phase.
    Phased(Box<crate::req_body::PhasedRequestBody>),
    /// A whole body, buffered for the modules (taken when sent).
    Full(Option<Bytes>),
    /// The part of the client's body already read, then the rest of it (a buffering
    /// module that failed open). Boxed: rare, and it would make every request body larger.
    Prefixed(Box<PrefixedBody>),
}

/// See [`OutBody::Prefixed`].
#[derive(Debug)]
pub struct PrefixedBody {
    /// Taken when sent.
    pub prefix: Option<Bytes>,
    pub rest: ClientBody,
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            OutBody::Empty => Poll::Ready(None),
            OutBody::Client(body) => Pin::new(body).poll_frame(cx),
            OutBody::Phased(body) => Pin::new(body.as_mut()).poll_frame(cx),
            OutBody::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            OutBody::Prefixed(body) => match body.prefix.take() {
                Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                None => Pin::new(&mut body.rest).poll_frame(cx),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Empty => true,
            OutBody::Client(body) => body.is_end_stream(),
            OutBody::Phased(body) => body.is_end_stream(),
            OutBody::Full(data) => data.as_ref().is_none_or(Bytes::is_empty),
            OutBody::Prefixed(body) => body.prefix.is_none() && body.rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Empty => SizeHint::with_exact(0),
            OutBody::Client(body) => body.size_hint(),
            OutBody::Phased(body) => body.size_hint(),
            OutBody::Full(data) => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            OutBody::Prefixed(body) => {
                let read = body.prefix.as_ref().map_or(0, |p| p.len() as u64);
                let rest = body.rest.size_hint();
                match rest.exact() {
                    Some(n) => SizeHint::with_exact(read + n),
                    None => SizeHint::default(),
                }
            }
        }
    }
}

enum Source {
    Empty,
    Chunks(BodyChunks),
    Fill(FillReader),
    Origin(SourceBody),
    /// A body in the disk tier, not yet polled: it is read through [`Source::Disk`], or
    /// sent with `sendfile` through [`Source::ZeroCopy`] when the connection allows.
    DiskFile(DiskBody),
    /// A body in the disk tier, read from its file.
    Disk(DiskBodyStream),
    /// A body in the disk tier, yielded as placeholder frames whose file ranges the
    /// connection's stream sends with `sendfile` (see [`crate::zero_copy`]).
    ZeroCopy {
        body: DiskBody,
        queued: u64,
        queue: SendfileQueue,
    },
    /// An ESI template being assembled.
    Esi(Box<crate::esi::Assembler>),
    /// What was read of a body, then the rest of it (a response held for a buffering module
    /// that failed open). Boxed: rare, and it would make every body larger.
    Resumed(Box<Resumed>),
    /// One range of an origin body passed through (a `206` for a response not stored).
    /// Boxed, as [`Source::Resumed`].
    OriginRange(Box<OriginRange>),
}

/// See [`Source::OriginRange`].
struct OriginRange {
    body: SourceBody,
    /// The range; the origin body is dropped (and its connection closed) once it is given,
    /// whatever follows it.
    cut: RangeCut,
}

impl OriginRange {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        while !self.cut.is_done() {
            let frame = match std::task::ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => return Poll::Ready(None),
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(frame)) => frame,
            };
            if let Some(part) = frame.into_data().ok().and_then(|data| self.cut.cut(&data)) {
                return Poll::Ready(Some(Ok(Frame::data(part))));
            }
        }
        Poll::Ready(None)
    }

    /// Bytes still to give.
    fn remaining(&self) -> u64 {
        self.cut.remaining().unwrap_or(0)
    }
}

/// See [`Source::Resumed`].
struct Resumed {
    /// Taken when sent.
    read: Option<Bytes>,
    rest: ProxyBody,
}

impl Resumed {
    fn size_hint(&self) -> SizeHint {
        let read = self.read.as_ref().map_or(0, |r| r.len() as u64);
        match self.rest.size_hint().exact() {
            Some(n) => SizeHint::with_exact(read + n),
            None => SizeHint::default(),
        }
    }
}

/// Which module body phases a response body runs, chunk by chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyPhases {
    /// `origin_resp_body` (a pass-through response, straight from the origin).
    pub origin: bool,
    /// `client_resp_body`.
    pub client: bool,
    /// Some module taking part declared that it may change this body
    /// ([`sluice_module::Txn::edits_body`]); otherwise the modules only see it, and the
    /// body keeps its exact length (so the client's `Content-Length` and hyper's fast
    /// path for bodies of known length stay).
    pub may_change: bool,
}

impl BodyPhases {
    fn any(self) -> bool {
        self.origin || self.client
    }
}

/// Keeps a body's announced length while modules that declared no length change see it
/// piece by piece. They may hold bytes back and give them with a later piece (a Proxy-Wasm
/// plugin that pauses), but never give more than they got so far, and by the end exactly
/// as much: the `Content-Length` sent before the body stays true.
#[derive(Debug, Default, Clone, Copy)]
pub struct SameLength {
    /// Bytes the modules got and have not given yet.
    held: u64,
}

impl SameLength {
    /// Accounts for one piece: the modules got `got` bytes and gave `gave`; `end` when it
    /// was the last. False when they changed the body's length.
    pub fn keeps(&mut self, got: usize, gave: usize, end: bool) -> bool {
        let available = self.held + got as u64;
        let gave = gave as u64;
        if gave > available || (end && gave != available) {
            return false;
        }
        self.held = available - gave;
        true
    }
}

/// A response body towards a client.
pub struct ProxyBody {
    source: Source,
    sent: u64,
    txn: Option<Box<Txn>>,
    phases: BodyPhases,
    /// The modules have seen the last piece of the body.
    phases_ended: bool,
    /// The announced length kept through the phases (unless they may change it).
    length: SameLength,
    /// The client connection's activity, for a body that may wait on its source
    /// ([`ProxyBody::watch_waits`]).
    activity: Option<Arc<Activity>>,
    /// Marks the connection busy while the body waits on its source.
    waiting: Option<Busy>,
    /// The source's failure, held back until the data given before it has been written
    /// ([`ProxyBody::poll_frame`]); boxed, as it is rare and the body is moved often.
    failure: Option<Box<HeldFailure>>,
}

impl std::fmt::Debug for ProxyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyBody").field("sent", &self.sent).finish_non_exhaustive()
    }
}

impl ProxyBody {
    fn of(source: Source) -> Self {
        Self {
            source,
            sent: 0,
            txn: None,
            phases: BodyPhases::default(),
            phases_ended: false,
            length: SameLength::default(),
            activity: None,
            waiting: None,
            failure: None,
        }
    }

    /// Counts the time this body waits on its source (an origin, a fill, the disk) as the
    /// client connection being busy, not idle ([`crate::idle`]): a response whose origin is
    /// quiet (a server stream, a long poll) is not the client's silence, where one the
    /// client does not read is. Nothing for a body that never waits (stored chunks, one
    /// sent with `sendfile`, whose waits are on the client).
    pub fn watch_waits(&mut self, activity: Option<&Arc<Activity>>) {
        if !matches!(self.source, Source::Empty | Source::Chunks(_) | Source::ZeroCopy { .. }) {
            self.activity = activity.cloned();
        }
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

    /// An origin (or other data source) body streamed through.
    pub fn origin(body: SourceBody) -> Self {
        Self::of(Source::Origin(body))
    }

    /// A body in its file in the disk tier (a disk hit too large to promote): read in
    /// steps, unless [`ProxyBody::prefer_zero_copy`] switches it to `sendfile`.
    pub fn disk(body: DiskBody) -> Self {
        Self::of(Source::DiskFile(body))
    }

    /// Sends this body with `sendfile` through `queue`'s connection when it is an unread
    /// disk body that no module phase sees; returns whether it will. Call once the
    /// response is final (after [`ProxyBody::with_txn`]), and only for a plaintext
    /// HTTP/1.x response on a connection whose stream is a
    /// [`crate::zero_copy::ZeroCopyStream`] over the same `queue`.
    pub fn prefer_zero_copy(&mut self, queue: &SendfileQueue) -> bool {
        if self.phases.any() || self.sent > 0 {
            return false;
        }
        let Source::DiskFile(body) = &self.source else { return false };
        let body = body.clone();
        self.source = Source::ZeroCopy { body, queued: 0, queue: queue.clone() };
        true
    }

    /// `read`, the part of a body already read, then the rest of it, `rest`.
    pub fn resumed(read: Bytes, rest: ProxyBody) -> Self {
        Self::of(Source::Resumed(Box::new(Resumed { read: Some(read), rest })))
    }

    /// The bytes of `range` of an origin body, passed through: a `206` for a response the
    /// cache does not store. No module phase may run on it (it would see only the range).
    pub fn origin_range(body: SourceBody, range: std::ops::Range<u64>) -> Self {
        Self::of(Source::OriginRange(Box::new(OriginRange { body, cut: RangeCut::range(range) })))
    }

    /// An ESI template's assembled body (length unknown).
    pub fn esi(assembler: crate::esi::Assembler) -> Self {
        Self::of(Source::Esi(Box::new(assembler)))
    }

    /// True when this body streams straight from the origin (not from the store).
    pub fn is_from_origin(&self) -> bool {
        match &self.source {
            Source::Origin(_) => true,
            Source::Resumed(body) => body.rest.is_from_origin(),
            _ => false,
        }
    }

    /// Hands the transaction to the body, which runs `phases` on each chunk and ends the
    /// transaction when the body is done.
    pub fn with_txn(mut self, txn: Box<Txn>, phases: BodyPhases) -> Self {
        self.txn = Some(txn);
        self.phases = phases;
        self
    }

    fn done(&mut self, completed: bool) {
        if let Some(mut txn) = self.txn.take() {
            txn.record_end(self.sent, completed);
        }
    }

    /// True when the source announced an exact length and all of it was sent.
    fn sent_all_announced(&self) -> bool {
        let hint = match &self.source {
            Source::Empty => return true,
            Source::Chunks(chunks) => return chunks.is_empty(),
            Source::Fill(reader) => reader.size_hint(),
            Source::Origin(body) => body.size_hint(),
            Source::DiskFile(body) => return body.is_empty(),
            Source::Disk(body) => body.size_hint(),
            Source::ZeroCopy { body, queued, .. } => return *queued == body.len(),
            Source::Esi(body) => body.size_hint(),
            Source::Resumed(body) => body.size_hint(),
            Source::OriginRange(range) => return range.cut.is_done(),
        };
        hint.exact() == Some(0)
    }

    fn source_ended(&self) -> bool {
        match &self.source {
            Source::Empty => true,
            Source::Chunks(chunks) => chunks.is_empty(),
            Source::Fill(reader) => reader.is_end_stream(),
            Source::Origin(body) => body.is_end_stream(),
            Source::DiskFile(body) => body.is_empty(),
            Source::Disk(body) => body.is_end_stream(),
            Source::ZeroCopy { body, queued, .. } => *queued == body.len(),
            Source::Esi(body) => body.is_end_stream(),
            Source::Resumed(body) => body.read.is_none() && body.rest.is_end_stream(),
            Source::OriginRange(range) => range.cut.is_done(),
        }
    }

    fn poll_source(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.source {
            Source::Empty => Poll::Ready(None),
            Source::Chunks(chunks) => Poll::Ready(chunks.next_chunk().map(|c| Ok(Frame::data(c)))),
            Source::Fill(reader) => Pin::new(reader).poll_frame(cx).map_err(Into::into),
            Source::Origin(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Source::DiskFile(body) => {
                let mut stream = body.clone().into_stream();
                let polled = Pin::new(&mut stream).poll_frame(cx).map_err(Into::into);
                self.source = Source::Disk(stream);
                polled
            }
            Source::Disk(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Source::ZeroCopy { body, queued, queue } => {
                let n = (body.len() - *queued).min(zero_copy::PLACEHOLDER_LEN as u64);
                if n == 0 {
                    return Poll::Ready(None);
                }
                queue.push(body.slice(*queued..*queued + n));
                *queued += n;
                Poll::Ready(Some(Ok(Frame::data(zero_copy::placeholder(n as usize)))))
            }
            Source::Esi(body) => Pin::new(body.as_mut()).poll_frame(cx),
            Source::Resumed(body) => match body.read.take() {
                Some(read) => Poll::Ready(Some(Ok(Frame::data(read)))),
                None => Pin::new(&mut body.rest).poll_frame(cx),
            },
            Source::OriginRange(range) => range.poll(cx),
        }
    }

    /// Runs the body phases on one piece; `None` when a closed module failure must cut the
    /// response.
    fn run_phases(&mut self, data: Bytes, end: bool) -> Result<Bytes, BoxError> {
        let phases = self.phases;
        let Some(txn) = self.txn.as_mut() else { return Ok(data) };
        let announced = data.len();
        let mut chunk = BodyChunk::new(data, end);
        if phases.origin {
            txn.body_phase(&mut chunk, |m, info, c| m.origin_resp_body(info, c))?;
        }
        if phases.client {
            txn.body_phase(&mut chunk, |m, info, c| m.client_resp_body(info, c))?;
        }
        if !phases.may_change && !self.length.keeps(announced, chunk.data().len(), end) {
            // The length was announced; a longer or shorter body would be cut or overrun.
            return Err("a module changed a response body's length without declaring it in edits_body".into());
        }
        if end {
            self.phases_ended = true;
        }
        Ok(chunk.into_data())
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Some(failure) = this.failure.as_mut() {
            return match failure.poll(cx) {
                Poll::Ready(err) => {
                    this.failure = None;
                    this.done(false);
                    Poll::Ready(Some(Err(err)))
                }
                Poll::Pending => Poll::Pending,
            };
        }
        loop {
            let polled = match this.poll_source(cx) {
                Poll::Pending => {
                    if this.waiting.is_none() {
                        this.waiting = this.activity.as_ref().map(Activity::busy);
                    }
                    return Poll::Pending;
                }
                Poll::Ready(polled) => polled,
            };
            this.waiting = None;
            let polled = match polled {
                Some(Ok(frame)) if this.phases.any() => match frame.into_data() {
                    Ok(data) => {
                        let end = this.source_ended();
                        match this.run_phases(data, end) {
                            // An emptied piece is not sent: an empty chunk would end a
                            // chunked body early.
                            Ok(data) if data.is_empty() && !end => continue,
                            Ok(data) if data.is_empty() => None,
                            Ok(data) => {
                                // Whether the body ends here is known (`end`; the phases
                                // have seen it): the source is not asked again.
                                this.sent += data.len() as u64;
                                if end {
                                    this.done(true);
                                }
                                return Poll::Ready(Some(Ok(Frame::data(data))));
                            }
                            Err(e) => Some(Err(e)),
                        }
                    }
                    Err(frame) => Some(Ok(frame)),
                },
                None if this.phases.any() && !this.phases_ended => match this.run_phases(Bytes::new(), true) {
                    Ok(data) if data.is_empty() => None,
                    Ok(data) => Some(Ok(Frame::data(data))),
                    Err(e) => Some(Err(e)),
                },
                other => other,
            };
            match polled {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        this.sent += data.len() as u64;
                    }
                    if this.is_end_stream() {
                        this.done(true);
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Some(Err(err)) if this.sent > 0 => {
                    // Data given before the failure may still sit in the connection's
                    // write buffer, which a failed body discards (crate::held_failure).
                    this.failure = Some(Box::new(HeldFailure::new(err)));
                    return Pin::new(this).poll_frame(cx);
                }
                Some(Err(err)) => {
                    this.done(false);
                    return Poll::Ready(Some(Err(err)));
                }
                None => {
                    this.done(true);
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.source_ended() && (!self.phases.any() || self.phases_ended)
    }

    fn size_hint(&self) -> SizeHint {
        if self.phases.may_change {
            return SizeHint::default();
        }
        match &self.source {
            Source::Empty => SizeHint::with_exact(0),
            Source::Chunks(chunks) => SizeHint::with_exact(chunks.remaining()),
            Source::Fill(reader) => reader.size_hint(),
            Source::Origin(body) => body.size_hint(),
            Source::DiskFile(body) => SizeHint::with_exact(body.len()),
            Source::Disk(body) => body.size_hint(),
            Source::ZeroCopy { body, queued, .. } => SizeHint::with_exact(body.len() - queued),
            Source::Esi(body) => body.size_hint(),
            Source::Resumed(body) => body.size_hint(),
            Source::OriginRange(range) => SizeHint::with_exact(range.remaining()),
        }
    }
}

impl Drop for ProxyBody {
    fn drop(&mut self) {
        // Hyper stops polling once a body announced by Content-Length is sent, and drops
        // bodies it never polls (HEAD, 304): those were complete.
        let completed = self.is_end_stream() || self.sent_all_announced();
        if completed && self.phases.any() && !self.phases_ended {
            // The modules still get their end-of-body call; with the length announced they
            // could not change the body anyway.
            let _ = self.run_phases(Bytes::new(), true);
        }
        self.done(completed);
    }
}

#[cfg(test)]
mod tests {
    use super::SameLength;

    #[test]
    fn bytes_held_back_and_given_later_keep_the_length() {
        let mut length = SameLength::default();
        assert!(length.keeps(10, 0, false), "all of a piece held");
        assert!(length.keeps(10, 5, false), "some given");
        assert!(length.keeps(10, 25, true), "the rest with the last piece");
        let mut length = SameLength::default();
        assert!(length.keeps(10, 10, false));
        assert!(length.keeps(0, 0, true), "an empty last piece");
    }

    #[test]
    fn giving_more_than_got_or_less_by_the_end_changes_the_length() {
        assert!(!SameLength::default().keeps(10, 11, false), "more than got so far");
        let mut length = SameLength::default();
        assert!(length.keeps(10, 0, false));
        assert!(!length.keeps(10, 19, true), "less by the end");
        assert!(!SameLength::default().keeps(5, 4, true));
    }
}
