//! gRPC streams out of a plugin (`proxy_grpc_stream`, the SDK's `open_grpc_stream`): a
//! stream to one of the plugin's clusters, on the plugin version's pooled HTTP/2 client
//! (`crate::callout::CallClients`), that lives until either side ends it.
//!
//! The plugin sends messages (`proxy_grpc_send`, the last with end of stream), half-closes
//! (`proxy_grpc_close`) or cancels (`proxy_grpc_cancel`: nothing more is delivered). What
//! comes back is delivered to the context that opened the stream, in its instance, as it
//! arrives and in order, from the plugin version's event thread (`crate::delivery`):
//! `proxy_on_grpc_receive_initial_metadata`, `proxy_on_grpc_receive` per message,
//! `proxy_on_grpc_receive_trailing_metadata`, then `proxy_on_grpc_close` with the status
//! (`proxy_get_status`). A stream that fails ends in `proxy_on_grpc_close` with the status
//! the gRPC specification gives (`crate::grpc`). A stream does not hold its transaction: a
//! context that is deleted cancels its streams, as in Envoy; the plugin version's end (an
//! unload or reload, once its transactions are over) cancels all of them.

use crate::abi::Status;
use crate::callout::{CallBody, CallClient};
use crate::delivery::Delivery;
use crate::grpc::{self, code, GrpcStatus};
use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, StreamBody};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Weak;
use tokio::sync::mpsc;

/// What a stream delivers to its context.
#[derive(Debug)]
pub(crate) enum StreamEventKind {
    InitialMetadata(HeaderMap),
    Message(Bytes),
    TrailingMetadata(HeaderMap),
    Close(GrpcStatus),
}

/// One delivery: to context `context` of instance `instance`, for stream `token`.
#[derive(Debug)]
pub(crate) struct StreamEvent {
    pub instance: u64,
    pub context: u32,
    pub token: u32,
    pub kind: StreamEventKind,
}

/// Where a stream's events go.
#[derive(Debug, Clone)]
pub(crate) struct StreamOwner {
    pub instance: u64,
    pub context: u32,
    pub token: u32,
    pub delivery: Weak<Delivery>,
}

impl StreamOwner {
    fn deliver(&self, kind: StreamEventKind) {
        if let Some(delivery) = self.delivery.upgrade() {
            let StreamOwner { instance, context, token, .. } = *self;
            delivery.stream_event(StreamEvent { instance, context, token, kind });
        }
    }
}

/// An open stream: what the plugin sends goes through `sender` (dropped at half-close);
/// `task` runs the exchange.
struct OpenStream {
    context: u32,
    sender: Option<mpsc::UnboundedSender<Bytes>>,
    task: tokio::task::AbortHandle,
}

/// The open streams of one plugin version, by instance and token.
#[derive(Default)]
pub(crate) struct Streams {
    open: Mutex<HashMap<(u64, u32), OpenStream>>,
}

impl Streams {
    /// Opens a stream with `head` through `client` on `runtime`; its events go to `owner`,
    /// messages over `max_message` bytes end it (`RESOURCE_EXHAUSTED`).
    pub(crate) fn open(
        &self,
        runtime: &tokio::runtime::Handle,
        client: CallClient,
        head: Request<()>,
        owner: StreamOwner,
        max_message: usize,
    ) {
        let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
        let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let message = receiver.recv().await?;
            Some((Ok::<_, Infallible>(http_body::Frame::data(message)), receiver))
        });
        let request = head.map(|()| -> CallBody { StreamBody::new(frames).boxed() });
        let key = (owner.instance, owner.token);
        let context = owner.context;
        // Registered before the exchange can deliver anything (delivery checks it is open).
        let mut open = self.open.lock();
        let task = runtime.spawn(run(client, request, owner, max_message));
        open.insert(key, OpenStream { context, sender: Some(sender), task: task.abort_handle() });
    }

    /// Sends `message` on stream `token` of `instance`, then half-closes it when `end`.
    /// `NotFound` for no such stream, `BadArgument` for one already half-closed.
    pub(crate) fn send(&self, instance: u64, token: u32, message: &[u8], end: bool) -> Result<(), Status> {
        let mut open = self.open.lock();
        let stream = open.get_mut(&(instance, token)).ok_or(Status::NotFound)?;
        let sender = stream.sender.as_ref().ok_or(Status::BadArgument)?;
        // The exchange may have ended already: its close is on its way to the plugin.
        let _ = sender.send(grpc::frame(message));
        if end {
            stream.sender = None;
        }
        Ok(())
    }

    /// Half-closes stream `token` of `instance` (the plugin sends no more); `false` for no
    /// such stream.
    pub(crate) fn close(&self, instance: u64, token: u32) -> bool {
        self.open.lock().get_mut(&(instance, token)).map(|stream| stream.sender = None).is_some()
    }

    /// Cancels stream `token` of `instance`: nothing more is sent or delivered; `false` for
    /// no such stream.
    pub(crate) fn cancel(&self, instance: u64, token: u32) -> bool {
        let stream = self.open.lock().remove(&(instance, token));
        stream.map(|stream| stream.task.abort()).is_some()
    }

    /// Cancels the streams context `context` of `instance` opened (it is being deleted).
    pub(crate) fn cancel_context(&self, instance: u64, context: u32) {
        self.open.lock().retain(|&(owner, _), stream| {
            let keep = owner != instance || stream.context != context;
            if !keep {
                stream.task.abort();
            }
            keep
        });
    }

    /// Whether stream `token` of `instance` is still open (its events are still wanted).
    pub(crate) fn is_open(&self, instance: u64, token: u32) -> bool {
        self.open.lock().contains_key(&(instance, token))
    }

    /// Forgets stream `token` of `instance`, which ended.
    pub(crate) fn ended(&self, instance: u64, token: u32) {
        self.open.lock().remove(&(instance, token));
    }
}

impl Drop for Streams {
    /// The plugin version is gone: its streams end with it.
    fn drop(&mut self) {
        for stream in self.open.get_mut().values() {
            stream.task.abort();
        }
    }
}

/// The exchange: sends the request (its body fed by the plugin), delivers what comes back,
/// then the status it ended with.
async fn run(client: CallClient, request: Request<CallBody>, owner: StreamOwner, max_message: usize) {
    let (Ok(status) | Err(status)) = exchange(client, request, &owner, max_message).await;
    owner.deliver(StreamEventKind::Close(status));
}

/// Delivers the answer's metadata and messages; the status in its trailers, or why it
/// failed.
async fn exchange(
    client: CallClient,
    request: Request<CallBody>,
    owner: &StreamOwner,
    max_message: usize,
) -> Result<GrpcStatus, GrpcStatus> {
    let response = client
        .request(request)
        .await
        .map_err(|err| GrpcStatus::new(code::UNAVAILABLE, crate::callout::describe(&err)))?;
    let (head, mut body) = response.into_parts();
    grpc::check_answer(&head)?;
    owner.deliver(StreamEventKind::InitialMetadata(head.headers));
    let mut deframer = grpc::Deframer::default();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|err| GrpcStatus::new(code::UNAVAILABLE, format!("body: {}", crate::callout::describe(&err))))?;
        match frame.into_data() {
            Ok(data) => {
                deframer.push(&data);
                while let Some(message) = deframer.next_message(max_message)? {
                    owner.deliver(StreamEventKind::Message(message));
                }
            }
            Err(frame) => {
                let Ok(trailers) = frame.into_trailers() else { continue };
                let status = grpc::status_in(&trailers);
                owner.deliver(StreamEventKind::TrailingMetadata(trailers));
                if !deframer.is_empty() {
                    return Err(GrpcStatus::new(code::INTERNAL, "malformed answer: a message cut short"));
                }
                return status.ok_or_else(|| GrpcStatus::new(code::INTERNAL, "the answer has no grpc-status"));
            }
        }
    }
    Err(GrpcStatus::new(code::INTERNAL, "the answer ended without grpc-status"))
}
