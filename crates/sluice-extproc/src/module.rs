//! The module: it talks to the helper with `Flow::Defer`, one exchange per message on the
//! transaction's gRPC stream, and applies each answer when the host resumes the phase
//! (`Txn::resumed`), to the head or the held body the phase works on.

use crate::config::{BodyMode, ExtProcConfig, OnUnavailable, ResponsePhase};
use crate::headers;
use crate::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use crate::pb::envoy::service::ext_proc::v3::{
    body_mutation, common_response::ResponseStatus, processing_request, processing_response, BodyMutation,
    CommonResponse, HeaderMutation, HttpBody, ProcessingRequest, ProcessingResponse,
};
use crate::supervisor::{Counters, HelperStatus, Shared, Supervisor};
use bytes::Bytes;
use futures_util::FutureExt;
use http::{request, response, Method, StatusCode};
use parking_lot::Mutex;
use sluice_module::{BodyChunk, BodyEdits, Flow, LocalResponse, LogFields, Module, Subject, Txn, TxnInfo, TxnOutcome};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;

/// Which way a message goes: the request or the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Request,
    Response,
}

/// Which message of a transaction an exchange is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    RequestHeaders,
    RequestBody,
    ResponseHeaders,
    ResponseBody,
}

impl Part {
    fn dir(self) -> Dir {
        match self {
            Part::RequestHeaders | Part::RequestBody => Dir::Request,
            Part::ResponseHeaders | Part::ResponseBody => Dir::Response,
        }
    }

    /// Its name in the access log field (`extproc=req:ok,resp-body:ok`).
    fn tag(self) -> &'static str {
        match self {
            Part::RequestHeaders => "req",
            Part::RequestBody => "req-body",
            Part::ResponseHeaders => "resp",
            Part::ResponseBody => "resp-body",
        }
    }
}

/// What the helper decided about one body (`buffered` body mode).
#[derive(Default)]
struct BodyDecision {
    /// Decided with the headers (`CONTINUE_AND_REPLACE`): the body is not sent.
    early: bool,
    /// What to do to it; none: keep it.
    mutation: Option<BodyMutation>,
}

/// What the helper decided for one transaction, until it is applied (the deferred exchange
/// fills it, `resumed` applies it).
#[derive(Default)]
struct Pending {
    /// No more messages for this transaction: the helper answered immediately or closed the
    /// stream cleanly, or the stream broke.
    finished: bool,
    request: Option<HeaderMutation>,
    response: Option<HeaderMutation>,
    /// The helper's answers about the bodies, applied when the body phase resumes.
    request_body: BodyDecision,
    response_body: BodyDecision,
    /// The header mutation answered with the response body: the head is not sent yet.
    response_after_body: Option<HeaderMutation>,
    /// A response to send instead of the origin's (response-phase immediate response, or a
    /// failure with `on_unavailable = "fail"`).
    replace: Option<LocalResponse>,
    /// Short notes for the access log (`extproc=req:ok,resp:ok`).
    notes: Vec<String>,
}

type Slot = Arc<Mutex<Pending>>;

/// The transaction's gRPC stream to the helper.
enum Stream {
    NotOpen,
    Open(Box<OpenStream>),
    Closed,
}

struct OpenStream {
    tx: tokio::sync::mpsc::Sender<ProcessingRequest>,
    rx: tonic::Streaming<ProcessingResponse>,
}

struct Inner {
    supervisor: Supervisor,
}

impl Inner {
    fn shared(&self) -> &Arc<Shared> {
        &self.supervisor.shared
    }
    fn config(&self) -> &ExtProcConfig {
        &self.supervisor.shared.config
    }
}

/// A supervised ext_proc helper and the module that uses it.
#[derive(Clone)]
pub struct ExtProc {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ExtProc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtProc").field("name", &self.inner.config().name).finish_non_exhaustive()
    }
}

impl ExtProc {
    /// Starts supervising the helper (spawned at once, in the background) and builds the
    /// modules. Fails only when the configuration is invalid or no runtime can be built.
    pub fn start(config: ExtProcConfig) -> Result<Self, String> {
        config.validate()?;
        let supervisor = Supervisor::start(config).map_err(|e| format!("cannot start the supervisor: {e}"))?;
        Ok(Self { inner: Arc::new(Inner { supervisor }) })
    }

    /// [`ExtProc::start`] from the settings table of a `[[module]]` entry.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, String> {
        Self::start(ExtProcConfig::from_settings(settings)?)
    }

    /// The module that talks to the helper, named after the configuration.
    pub fn module(&self) -> Arc<dyn Module> {
        Arc::new(ExtProcModule { inner: Arc::clone(&self.inner) })
    }

    /// The helper's state and history.
    pub fn status(&self) -> HelperStatus {
        self.inner.shared().status()
    }

    /// Messages waiting for the helper's answer now.
    pub fn in_flight(&self) -> usize {
        self.inner.shared().in_flight()
    }

    /// Traffic counters.
    pub fn counters(&self) -> &Counters {
        &self.inner.shared().counters
    }

    /// Kills the running helper; the supervisor restarts it as after a crash.
    pub fn kill_helper(&self) {
        self.inner.shared().kill_helper();
    }
}

/// The module that sends messages to the helper and applies its answers.
pub struct ExtProcModule {
    inner: Arc<Inner>,
}

fn status_json(shared: &Shared) -> serde_json::Value {
    let c = &shared.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let mut value = serde_json::to_value(shared.status()).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("in_flight".into(), shared.in_flight().into());
        map.insert("max_in_flight".into(), shared.config.max_in_flight.into());
        map.insert("answered".into(), load(&c.answered).into());
        map.insert("bypassed".into(), load(&c.bypassed).into());
        map.insert("failed".into(), load(&c.failed).into());
        map.insert("queue_full".into(), load(&c.queue_full).into());
        map.insert("helper_down".into(), load(&c.helper_down).into());
        map.insert("errors".into(), load(&c.errors).into());
        map.insert("immediate".into(), load(&c.immediate).into());
        map.insert("socket".into(), shared.config.socket.to_string_lossy().into_owned().into());
    }
    value
}

impl Module for ExtProcModule {
    fn name(&self) -> &str {
        &self.inner.config().name
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(ExtProcTxn {
            inner: Arc::clone(&self.inner),
            slot: Slot::default(),
            stream: Arc::new(tokio::sync::Mutex::new(Stream::NotOpen)),
            buffering: [false; 2],
        }))
    }

    /// `GET status`: the helper's state, history and counters as JSON. `POST restart`: kill
    /// the helper and start it again at once (not counted as a failure: no backoff); other
    /// methods on these paths get 405 with `Allow`.
    fn admin(&self, method: &Method, path: &str, _body: &[u8]) -> Option<LocalResponse> {
        let shared = self.inner.shared();
        match (method, path) {
            (&Method::GET, "/status") => {
                let mut response = LocalResponse::text(StatusCode::OK, format!("{:#}\n", status_json(shared)));
                response.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                Some(response)
            }
            (&Method::POST, "/restart") => {
                shared.restart_helper();
                Some(LocalResponse::text(StatusCode::ACCEPTED, "restarting\n"))
            }
            (_, "/status") => Some(method_not_allowed("GET")),
            (_, "/restart") => Some(method_not_allowed("POST")),
            _ => None,
        }
    }
}

/// 405 for an admin path that exists but not for this method.
fn method_not_allowed(allow: &'static str) -> LocalResponse {
    let mut response = LocalResponse::text(StatusCode::METHOD_NOT_ALLOWED, format!("use {allow}\n"));
    response.headers.insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    response
}

/// Cancels the spawned exchange when the host drops the deferred work (deadline, client gone).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct ExtProcTxn {
    inner: Arc<Inner>,
    slot: Slot,
    stream: Arc<tokio::sync::Mutex<Stream>>,
    /// This state answered `Buffer` for the request body, the response body (`buffered`
    /// mode): the body phase then gets the whole body, once.
    buffering: [bool; 2],
}

impl Pending {
    fn body(&mut self, dir: Dir) -> &mut BodyDecision {
        match dir {
            Dir::Request => &mut self.request_body,
            Dir::Response => &mut self.response_body,
        }
    }
}

/// The verdict when the helper cannot answer, per `on_unavailable`.
fn unavailable(shared: &Shared, slot: &Slot, part: Part, why: &str) -> Flow {
    let mut pending = slot.lock();
    let (dir, tag) = (part.dir(), part.tag());
    match shared.config.on_unavailable {
        OnUnavailable::Bypass => {
            Counters::bump(&shared.counters.bypassed);
            pending.notes.push(format!("{tag}:bypass({why})"));
            Flow::Continue
        }
        OnUnavailable::Fail => {
            Counters::bump(&shared.counters.failed);
            pending.notes.push(format!("{tag}:fail({why})"));
            pending.finished = true;
            let local = LocalResponse::text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("503 Service Unavailable: helper {} unavailable ({why})\n", shared.config.name),
            );
            match dir {
                Dir::Request => Flow::Respond(local),
                Dir::Response => {
                    pending.replace = Some(local);
                    Flow::Continue
                }
            }
        }
    }
}

/// Why an exchange produced no answer.
enum Failure {
    Timeout,
    Broken(String),
}

/// Sends `message` on the transaction's stream (opening it first if needed) and waits for the
/// answer. `Ok(None)`: the helper closed the stream cleanly, or an earlier message ended it:
/// go on without it.
async fn exchange(
    channel: tonic::transport::Channel,
    stream: Arc<tokio::sync::Mutex<Stream>>,
    message: ProcessingRequest,
    timeout: Duration,
    max_message: usize,
) -> Result<Option<ProcessingResponse>, Failure> {
    let mut guard = stream.lock().await;
    // Taken out, so a cancelled or failed exchange leaves the stream closed: its answer
    // could otherwise be read as the answer to the next message.
    let current = std::mem::replace(&mut *guard, Stream::Closed);
    let work = async move {
        let (tx, mut rx) = match current {
            Stream::Closed => return Ok(None),
            Stream::Open(open) => {
                let OpenStream { tx, rx } = *open;
                tx.send(message).await.map_err(|_| Failure::Broken("stream closed".into()))?;
                (tx, rx)
            }
            Stream::NotOpen => {
                let (tx, requests) = tokio::sync::mpsc::channel(4);
                tx.send(message).await.map_err(|_| Failure::Broken("stream closed".into()))?;
                // tonic's default limit (4 MiB) would refuse bodies that the configuration
                // allows (`max_body_bytes`, 8 MiB by default), and answers as large.
                let mut client = ExternalProcessorClient::new(channel)
                    .max_decoding_message_size(max_message)
                    .max_encoding_message_size(max_message);
                let rx = client
                    .process(ReceiverStream::new(requests))
                    .await
                    .map_err(|status| Failure::Broken(format!("open: {}", describe(&status))))?
                    .into_inner();
                (tx, rx)
            }
        };
        match rx.message().await {
            Ok(Some(answer)) => Ok(Some((answer, Stream::Open(Box::new(OpenStream { tx, rx }))))),
            Ok(None) => Ok(None),
            Err(status) => Err(Failure::Broken(format!("stream: {}", describe(&status)))),
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Err(failure)) => Err(failure),
        Ok(Ok(None)) => Ok(None),
        Ok(Ok(Some((answer, open)))) => {
            *guard = open;
            Ok(Some(answer))
        }
    }
}

/// A gRPC status for the log: its code and, when it has one, its message (what the helper or
/// tonic said went wrong).
fn describe(status: &tonic::Status) -> String {
    match status.message() {
        "" => format!("{:?}", status.code()),
        message => format!("{:?}: {message}", status.code()),
    }
}

/// The name of an answer's kind, as in the protocol (`response_headers`), for the log.
fn answer_kind(answer: &processing_response::Response) -> &'static str {
    use processing_response::Response;
    match answer {
        Response::RequestHeaders(_) => "request_headers",
        Response::ResponseHeaders(_) => "response_headers",
        Response::RequestBody(_) => "request_body",
        Response::ResponseBody(_) => "response_body",
        Response::RequestTrailers(_) => "request_trailers",
        Response::ResponseTrailers(_) => "response_trailers",
        Response::ImmediateResponse(_) => "immediate_response",
    }
}

impl Part {
    /// The answer this message expects, as named in the protocol.
    fn expected(self) -> &'static str {
        match self {
            Part::RequestHeaders => "request_headers",
            Part::RequestBody => "request_body",
            Part::ResponseHeaders => "response_headers",
            Part::ResponseBody => "response_body",
        }
    }
}

/// Why an answer does not fit the message it answers, for the log.
fn mismatch(part: Part, answer: Option<&processing_response::Response>) -> String {
    match answer {
        None => format!("an empty answer (expected {} or immediate_response)", part.expected()),
        Some(answer) => format!(
            "an answer for another phase: expected {} (or immediate_response), got {}",
            part.expected(),
            answer_kind(answer)
        ),
    }
}

/// The verdict for the helper's answer to a `part` message.
fn answered(shared: &Shared, slot: &Slot, part: Part, answer: ProcessingResponse) -> Flow {
    use processing_response::Response;
    let (dir, tag) = (part.dir(), part.tag());
    let common: Option<CommonResponse> = match (part, answer.response) {
        (Part::RequestHeaders, Some(Response::RequestHeaders(h)))
        | (Part::ResponseHeaders, Some(Response::ResponseHeaders(h))) => h.response,
        (Part::RequestBody, Some(Response::RequestBody(b))) | (Part::ResponseBody, Some(Response::ResponseBody(b))) => {
            b.response
        }
        (_, Some(Response::ImmediateResponse(immediate))) => {
            Counters::bump(&shared.counters.answered);
            Counters::bump(&shared.counters.immediate);
            let local = headers::immediate(&immediate);
            let mut pending = slot.lock();
            pending.finished = true;
            let details = if immediate.details.is_empty() { String::new() } else { format!("({})", immediate.details) };
            pending.notes.push(format!("{tag}:immediate{details}"));
            return match dir {
                Dir::Request => Flow::Respond(local),
                Dir::Response => {
                    pending.replace = Some(local);
                    Flow::Continue
                }
            };
        }
        (_, other) => {
            Counters::bump(&shared.counters.errors);
            tracing::warn!("extproc {}: helper sent {}", shared.config.name, mismatch(part, other.as_ref()));
            slot.lock().finished = true;
            return unavailable(shared, slot, part, "protocol");
        }
    };
    Counters::bump(&shared.counters.answered);
    let mut pending = slot.lock();
    pending.notes.push(format!("{tag}:ok"));
    let Some(common) = common else { return Flow::Continue };
    let replaces = common.status == ResponseStatus::ContinueAndReplace as i32;
    let buffered = match dir {
        Dir::Request => shared.config.request_body == BodyMode::Buffered,
        Dir::Response => shared.config.response_body == BodyMode::Buffered,
    };
    match part {
        Part::RequestHeaders | Part::ResponseHeaders => {
            match dir {
                Dir::Request => pending.request = common.header_mutation,
                Dir::Response => pending.response = common.header_mutation,
            }
            // CONTINUE_AND_REPLACE: the body is decided now and not sent. Only a body held for
            // the helper (`buffered`) can be replaced.
            if replaces && buffered {
                *pending.body(dir) = BodyDecision { early: true, mutation: common.body_mutation };
            } else if replaces || common.body_mutation.is_some() {
                tracing::debug!(
                    "extproc {}: a body mutation on {tag} needs its body mode `buffered`; ignored",
                    shared.config.name
                );
            }
        }
        Part::RequestBody | Part::ResponseBody => {
            pending.body(dir).mutation = common.body_mutation;
            match (dir, common.header_mutation) {
                (Dir::Response, mutation) => pending.response_after_body = mutation,
                (Dir::Request, Some(_)) => tracing::debug!(
                    "extproc {}: header mutations answered with the request body are not applied \
                     (the request was routed)",
                    shared.config.name
                ),
                (Dir::Request, None) => {}
            }
        }
    }
    Flow::Continue
}

/// Applies a body answer to the body.
fn apply_body(mutation: Option<BodyMutation>, body: &mut BodyChunk) {
    match mutation.and_then(|m| m.mutation) {
        Some(body_mutation::Mutation::Body(replacement)) => body.replace(Bytes::from(replacement)),
        Some(body_mutation::Mutation::ClearBody(true)) => body.clear(),
        Some(body_mutation::Mutation::ClearBody(false)) | None => {}
    }
}

/// `local` as the answer in place of a response whose fields are `original`: the original
/// `Date` kept, `no-store` added.
fn replacing(local: LocalResponse, original: &http::HeaderMap) -> LocalResponse {
    let LocalResponse { status, mut headers, body } = local;
    if let Some(date) = original.get(http::header::DATE) {
        headers.insert(http::header::DATE, date.clone());
    }
    headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    LocalResponse { status, headers, body }
}

/// Puts `local` (see [`replacing`]) in place of a response head not sent yet; returns its
/// body, to put in place of the original (held whole for the helper).
fn replace_head(local: LocalResponse, head: &mut response::Parts) -> Bytes {
    let LocalResponse { status, headers, body } = replacing(local, &head.headers);
    head.status = status;
    head.headers = headers;
    body
}

impl ExtProcTxn {
    /// Sends one message: decides at once when the helper is down or the queue is full, else
    /// defers to the exchange.
    fn send(&mut self, part: Part, message: processing_request::Request) -> Flow {
        let shared = Arc::clone(self.inner.shared());
        if self.slot.lock().finished {
            return Flow::Continue;
        }
        let Some(channel) = shared.channel() else {
            Counters::bump(&shared.counters.helper_down);
            return unavailable(&shared, &self.slot, part, "down");
        };
        let Ok(permit) = Arc::clone(&shared.permits).try_acquire_owned() else {
            Counters::bump(&shared.counters.queue_full);
            return unavailable(&shared, &self.slot, part, "queue full");
        };
        let timeout = shared.config.message_timeout();
        let max_message = shared.config.max_message_bytes();
        let message = ProcessingRequest { request: Some(message), observability_mode: false };
        let (stream, slot) = (Arc::clone(&self.stream), Arc::clone(&self.slot));
        let handle = shared.handle.clone();
        let task = handle.spawn(async move {
            let result = exchange(channel, stream, message, timeout, max_message).await;
            drop(permit);
            match result {
                Ok(Some(answer)) => answered(&shared, &slot, part, answer),
                Ok(None) => {
                    let mut pending = slot.lock();
                    pending.finished = true;
                    pending.notes.push(format!("{}:closed", part.tag()));
                    Flow::Continue
                }
                Err(failure) => {
                    Counters::bump(&shared.counters.errors);
                    slot.lock().finished = true;
                    let why = match failure {
                        Failure::Timeout => "timeout".to_owned(),
                        Failure::Broken(why) => {
                            tracing::warn!("extproc {}: exchange failed: {why}", shared.config.name);
                            "broken".to_owned()
                        }
                    };
                    unavailable(&shared, &slot, part, &why)
                }
            }
        });
        let mut task = AbortOnDrop(task);
        let work = async move {
            match (&mut task.0).await {
                Ok(flow) => flow,
                // Only a panic gets here (cancellation drops this future first): let the host
                // apply the failure policy.
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        };
        // The exchange times itself out first, so `on_unavailable` decides; the host's
        // deadline is a backstop.
        Flow::Defer { work: work.boxed(), deadline: timeout + Duration::from_millis(500) }
    }
}

impl ExtProcTxn {
    /// The verdict after a `dir` headers exchange whose verdict was `verdict`: hold the body
    /// for the helper (`Buffer`) when its mode is `buffered` and the helper still wants
    /// messages, or decided the body early (`CONTINUE_AND_REPLACE`).
    fn then_buffer(&mut self, dir: Dir, verdict: Flow) -> Flow {
        let config = self.inner.config();
        let mode = if dir == Dir::Request { config.request_body } else { config.response_body };
        if !matches!(verdict, Flow::Continue) || mode != BodyMode::Buffered {
            return verdict;
        }
        let mut pending = self.slot.lock();
        if pending.finished && !pending.body(dir).early {
            return verdict;
        }
        self.buffering[dir as usize] = true;
        Flow::Buffer { max: config.max_body_bytes }
    }

    /// A body phase with the whole `dir` body (`buffered` mode): applies an early decision at
    /// once, else sends the body and defers; `resumed` applies the answer. Body phases that
    /// get a body this state did not buffer go on untouched.
    fn body_phase(&mut self, part: Part, chunk: &mut BodyChunk) -> Flow {
        let dir = part.dir();
        if !std::mem::take(&mut self.buffering[dir as usize]) {
            return Flow::Continue;
        }
        {
            let mut pending = self.slot.lock();
            if pending.body(dir).early {
                let mutation = pending.body(dir).mutation.take();
                apply_body(mutation, chunk);
                return Flow::Continue;
            }
        }
        let message = HttpBody { body: chunk.data().to_vec(), end_of_stream: true };
        let message = match part {
            Part::RequestBody => processing_request::Request::RequestBody(message),
            _ => processing_request::Request::ResponseBody(message),
        };
        match self.send(part, message) {
            deferred @ Flow::Defer { .. } => deferred,
            // Decided without the helper (down, queue full, stream ended): through `resumed`
            // all the same, which has the response head a replacement needs.
            decided => Flow::Defer { work: Box::pin(std::future::ready(decided)), deadline: Duration::from_secs(1) },
        }
    }
}

impl Txn for ExtProcTxn {
    /// The bodies sent in `buffered` mode may change (the host frames them with their new
    /// length). A replaced response is the host's to send ([`ExtProcTxn::replace_response`]).
    fn edits_body(&self) -> BodyEdits {
        let config = self.inner.config();
        BodyEdits {
            request: config.request_body == BodyMode::Buffered,
            origin_response: false,
            client_response: config.response_body == BodyMode::Buffered,
        }
    }

    fn req_headers(&mut self, _: &TxnInfo, req: &mut request::Parts) -> Flow {
        if !self.inner.config().request_headers {
            return self.then_buffer(Dir::Request, Flow::Continue);
        }
        match self
            .send(Part::RequestHeaders, processing_request::Request::RequestHeaders(headers::request_message(req)))
        {
            deferred @ Flow::Defer { .. } => deferred,
            decided => self.request_headers_answered(req, decided),
        }
    }

    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.body_phase(Part::RequestBody, chunk)
    }

    fn origin_resp_headers(&mut self, _: &TxnInfo, resp: &mut response::Parts) -> Flow {
        if self.inner.config().response_headers != ResponsePhase::Origin {
            return Flow::Continue;
        }
        self.send_response_headers(resp)
    }

    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut response::Parts) -> Flow {
        match self.inner.config().response_headers {
            ResponsePhase::Client => self.send_response_headers(resp),
            // Sent before the store; a replacement decided there is made here, towards the
            // client (it was not stored).
            ResponsePhase::Origin => {
                let replace = self.slot.lock().replace.take();
                match replace {
                    Some(local) => self.replace_response(local, resp),
                    None => Flow::Continue,
                }
            }
            ResponsePhase::None => self.then_buffer(Dir::Response, Flow::Continue),
        }
    }

    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.body_phase(Part::ResponseBody, chunk)
    }

    /// After an exchange: the helper's answer applied to what the phase works on (a head, or
    /// a held body with, for a response, its head: not sent yet); a headers phase may go on
    /// to hold the body for the helper.
    fn resumed(&mut self, _: &TxnInfo, subject: Subject<'_>, deferred: Flow) -> Flow {
        match subject {
            Subject::Request(req) => self.request_headers_answered(req, deferred),
            Subject::Response(resp) => self.response_headers_answered(resp, deferred),
            Subject::RequestBody(body) => {
                let mutation = self.slot.lock().request_body.mutation.take();
                apply_body(mutation, body);
                deferred
            }
            Subject::ResponseBody { head, body } => {
                let mut pending = self.slot.lock();
                if let Some(local) = pending.replace.take() {
                    body.replace(replace_head(local, head));
                    return deferred;
                }
                if let Some(mutation) = pending.response_after_body.take() {
                    headers::apply_response(&mutation, head);
                }
                apply_body(pending.response_body.mutation.take(), body);
                deferred
            }
            _ => deferred,
        }
    }

    fn log(&mut self, _: &TxnInfo, _: &TxnOutcome, fields: &mut LogFields) {
        let pending = self.slot.lock();
        if !pending.notes.is_empty() {
            fields.add(self.inner.config().name.clone(), pending.notes.join(","));
        }
    }
}

impl ExtProcTxn {
    /// Sends the response headers: the answer is applied in `resumed`, or at once when the
    /// helper could not be asked.
    fn send_response_headers(&mut self, resp: &mut response::Parts) -> Flow {
        let message = processing_request::Request::ResponseHeaders(headers::response_message(resp));
        match self.send(Part::ResponseHeaders, message) {
            deferred @ Flow::Defer { .. } => deferred,
            decided => self.response_headers_answered(resp, decided),
        }
    }

    /// Applies the helper's answer to the request headers (`verdict`: the exchange's).
    fn request_headers_answered(&mut self, req: &mut request::Parts, verdict: Flow) -> Flow {
        if let Some(mutation) = self.slot.lock().request.take() {
            headers::apply_request(&mutation, req);
        }
        self.then_buffer(Dir::Request, verdict)
    }

    /// Applies the helper's answer to the response headers (`verdict`: the exchange's). Before
    /// the store (`response_headers = "origin"`) a replacement only marks the response
    /// `no-store`; it is made towards the client. Towards the client it is made now.
    fn response_headers_answered(&mut self, resp: &mut response::Parts, verdict: Flow) -> Flow {
        let (mutation, replace) = {
            let mut pending = self.slot.lock();
            (pending.response.take(), pending.replace.is_some())
        };
        if let Some(mutation) = mutation {
            headers::apply_response(&mutation, resp);
        }
        match self.inner.config().response_headers {
            ResponsePhase::Origin => {
                if replace {
                    resp.headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
                }
                verdict
            }
            _ => {
                let replace = self.slot.lock().replace.take();
                match replace {
                    Some(local) => self.replace_response(local, resp),
                    None => self.then_buffer(Dir::Response, verdict),
                }
            }
        }
    }

    /// Answers with `local` in place of the whole response, head and body, before anything
    /// is sent: the host drops the original body (`Flow::Respond` from `client_resp_headers`),
    /// so nothing of a blocked response reaches the client, however long it is, and responses
    /// that are not replaced keep their framing (their length, their ranges).
    fn replace_response(&mut self, local: LocalResponse, resp: &response::Parts) -> Flow {
        Flow::Respond(replacing(local, &resp.headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_failures_carry_the_status_message_and_name_both_phases() {
        let status = tonic::Status::unknown("processor crashed: KeyError 'x-mode'");
        assert_eq!(describe(&status), "Unknown: processor crashed: KeyError 'x-mode'");
        assert_eq!(describe(&tonic::Status::cancelled("")), "Cancelled");
        let other = processing_response::Response::RequestHeaders(Default::default());
        assert_eq!(
            mismatch(Part::ResponseHeaders, Some(&other)),
            "an answer for another phase: expected response_headers (or immediate_response), got request_headers"
        );
        assert!(mismatch(Part::RequestBody, None).contains("expected request_body"));
    }
}
