//! The modules' `req_body` phase on a client's request body going to an origin: chunk by
//! chunk as it streams ([`PhasedRequestBody`], after `req_out`), or once on the whole body
//! when a module asked to buffer it at `req_headers` ([`buffer`], before anything is sent,
//! so that the module may still answer locally or defer).

use crate::body::{BoxError, OutBody, PrefixedBody, SameLength};
use crate::chain::{BufferSide, SharedChain};
use crate::client_body::ClientBody;
use crate::error::ProxyError;
use crate::txn::{module_phase, Txn};
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use sluice_module::{BodyChunk, LocalResponse, Subject, TxnInfo};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A client's request body streamed to an origin through the modules' `req_body` phase.
/// Each data frame is one call (`chunk.is_end()` on the last; an empty last call when the
/// end is only known after the last data). A `Respond` abandons the request on its way (the
/// origin sees its body cut short, and the connection is not reused) and the client gets the
/// module's answer instead of the origin's ([`ModuleBodyError::answer`]); if the origin
/// answered already, the client has that answer. `Buffer` and `Defer` cannot apply once the
/// request is on its way (a module that needs the whole body first asks for it with `Buffer`
/// at `req_headers`).
pub struct PhasedRequestBody {
    /// The client's body ([`OutBody::Client`]), or the part of it a buffering module that
    /// failed open had read, then the rest ([`OutBody::Prefixed`]).
    body: OutBody,
    chain: SharedChain,
    info: TxnInfo,
    /// Some module declared that it may change the request body
    /// ([`sluice_module::BodyEdits::request`]): the body goes out chunked. Otherwise it
    /// keeps its announced length, and a module changing it fails the request.
    may_change: bool,
    /// The modules have seen the last piece.
    ended: bool,
    /// The announced length kept through the phase (unless it may change).
    length: SameLength,
}

impl std::fmt::Debug for PhasedRequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhasedRequestBody").field("may_change", &self.may_change).finish_non_exhaustive()
    }
}

impl PhasedRequestBody {
    /// `body` through the `req_body` phase of `txn`'s modules; `body` back when no module
    /// is active any more (it then streams as it is).
    pub fn of(txn: &mut Txn, body: OutBody) -> Result<Self, OutBody> {
        match txn.modules.edits() {
            Some(edits) => Ok(Self {
                body,
                chain: txn.modules.share(),
                info: txn.info.clone(),
                may_change: edits.request,
                ended: false,
                length: SameLength::default(),
            }),
            None => Err(body),
        }
    }

    fn run(&mut self, data: Bytes, end: bool) -> Result<Bytes, ModuleBodyError> {
        let announced = data.len();
        let mut chunk = BodyChunk::new(data, end);
        let info = &self.info;
        let answer = self
            .chain
            .body_phase(&mut chunk, crate::chain::Honours::Respond, |m, c| m.req_body(info, c))
            .map_err(|e| ModuleBodyError::failed(e.to_string()))?;
        if let Some(answer) = answer {
            return Err(ModuleBodyError { what: "a module answered the request itself".into(), answer: Some(answer) });
        }
        if !self.may_change && !self.length.keeps(announced, chunk.data().len(), end) {
            return Err(ModuleBodyError::failed(
                "a module changed a request body's length without declaring it in edits_body",
            ));
        }
        self.ended = end;
        Ok(chunk.into_data())
    }
}

impl Body for PhasedRequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            let polled = match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(polled) => polled,
            };
            let (data, end) = match polled {
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => (data, this.body.is_end_stream()),
                    // Trailers are not forwarded to origins.
                    Err(_) => continue,
                },
                None => (Bytes::new(), true),
            };
            match this.run(data, end) {
                // An emptied piece is not sent: an empty chunk would end a chunked body.
                Ok(data) if data.is_empty() && end => return Poll::Ready(None),
                Ok(data) if data.is_empty() => continue,
                Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(e) => return Poll::Ready(Some(Err(e.into()))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        if self.may_change {
            SizeHint::default()
        } else {
            self.body.size_hint()
        }
    }
}

/// A module ended a streaming request body: a closed failure, or a length change it did not
/// declare (the request fails with 500, as a module's fault, not the client's), or a local
/// answer, which the client gets instead.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct ModuleBodyError {
    what: String,
    /// The module's local answer, if that is what ended the body.
    pub answer: Option<Box<LocalResponse>>,
}

impl ModuleBodyError {
    fn failed(what: impl Into<String>) -> Self {
        Self { what: what.into(), answer: None }
    }
}

/// What buffering a request body for the modules produced.
pub enum Buffered {
    /// The body to send (the modules' output, complete).
    Body(OutBody),
    /// A module answered locally.
    Respond(Box<LocalResponse>),
}

/// Reads the whole request body (at most `max` bytes, the smallest limit the modules asked
/// for at `req_headers`), then runs the `req_body` phase once on all of it, as a request
/// phase: a module may answer locally or defer. A body over `max` fails the modules that
/// asked to buffer it, and only those (closed: the request fails; open: they sit out the rest
/// of the transaction, and the body goes on unchanged, read part first, through the others).
pub async fn buffer(txn: &mut Txn, mut body: ClientBody, max: usize) -> Result<Buffered, ProxyError> {
    let mut whole = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(crate::client_body::failed)?;
        let Ok(data) = frame.into_data() else { continue };
        if whole.len() + data.len() > max {
            txn.modules
                .fail_buffering(BufferSide::Request, &format!("buffered request body exceeds {max} bytes"))
                .map_err(crate::txn::module_error)?;
            whole.extend_from_slice(&data);
            let prefixed = PrefixedBody { prefix: Some(whole.freeze()), rest: body };
            return Ok(Buffered::Body(OutBody::Prefixed(Box::new(prefixed))));
        }
        whole.extend_from_slice(&data);
    }
    let mut chunk = BodyChunk::new(whole.freeze(), true);
    if let Some(local) =
        module_phase!(txn, Respond, Subject::RequestBody(&mut chunk), |m, info| m.req_body(info, &mut chunk))?.respond
    {
        return Ok(Buffered::Respond(local));
    }
    Ok(Buffered::Body(OutBody::Full(Some(chunk.into_data()))))
}
