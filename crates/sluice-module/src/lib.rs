//! The Sluice module contract.
//!
//! A module adds behaviour to a running proxy without touching its core (seed 000: the
//! DataReactor API). The proxy asks each module, once per transaction, for its
//! per-transaction state ([`Module::new_txn`]); `None` means the module sits the transaction
//! out and costs nothing more. The state's phase methods ([`Txn`]) are then called in the
//! order of the phase chart below, and the state is dropped exactly once when the
//! transaction ends, also when it is aborted.
//!
//! ```text
//!  req_headers ─► req_body* ─► cache_lookup ─┬─ hit ──────────────────────────────────────┐
//!                                            └─ miss / stale ─► resolve ─► req_out ─►      │
//!                                     origin_resp_headers ─► origin_resp_body*  (stored)   │
//!                                                                                          ▼
//!                                client_resp_headers ─► client_resp_body* ─► resp_done ─► log ─► drop
//! ```
//! (`*`: called per chunk, or once with the whole body after [`Flow::Buffer`].)
//!
//! Every phase returns a [`Flow`] verdict; phases default to [`Flow::Continue`], so a module
//! implements only what it needs. Modules run in configured order; each body phase sees the
//! previous module's output. The host, not the module, fixes message framing when a body is
//! changed: a module that may change a body says so ([`Txn::edits_body`]) and the host then
//! sends it chunked, or with the new `Content-Length` when the body was buffered. A module
//! never writes a response's framing fields itself (`Content-Length`, `Transfer-Encoding`,
//! `Connection` and the other hop-by-hop fields): the host does not check a compiled-in
//! module's head edits on every response (that would cost every hit), so such a field
//! would go out or be stored as written. Proxy-Wasm plugins and ext_proc processors, which
//! are not the operator's own code, have those writes filtered where they make them.
//!
//! Everything a module may touch of the cache is behind [`CacheApi`], reachable from every
//! phase through [`TxnInfo::cache`]; CPU work goes to the bounded [`CpuPool`] at
//! [`TxnInfo::cpu`].

mod body;
mod cache_api;
mod cache_read;
mod cpu_pool;
mod resolution;

pub use body::BodyChunk;
pub use cache_api::{
    CacheApi, CacheError, CacheFuture, EmptyCache, Expiry, FetchMode, FetchResponse, Injection, ObjectInfo,
    ObjectReader, Revalidation, Validated,
};
pub use cpu_pool::{CpuError, CpuJob, CpuPool};
pub use resolution::Resolution;

use futures_util::future::BoxFuture;
use http::{request, response, HeaderMap, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the proxy tells a module about the transaction on every call.
#[derive(Clone)]
pub struct TxnInfo {
    /// Unique (per process) transaction id.
    pub id: u64,
    /// The client's address.
    pub client: SocketAddr,
    /// The cache, for content management from any phase.
    pub cache: Arc<dyn CacheApi>,
    /// The proxy's bounded pool for CPU work (`[cpu_pool]` in the configuration), to await
    /// from [`Flow::Defer`].
    pub cpu: CpuPool,
    /// True for the proxy's own background revalidation of a stale stored response
    /// (`stale-while-revalidate`), started by a request from `client` that was answered from
    /// the cache: no client waits for it. Its phases are `resolve`, `req_out`,
    /// `origin_resp_headers`, `origin_resp_body`, then `resp_done` and `log`; what they change
    /// is what gets stored.
    pub background: bool,
}

impl std::fmt::Debug for TxnInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnInfo")
            .field("id", &self.id)
            .field("client", &self.client)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

/// A response a module produces itself.
#[derive(Debug, Clone)]
pub struct LocalResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
}

impl LocalResponse {
    /// A response with `status`, a `text/plain` body and no other headers.
    pub fn text(status: StatusCode, body: impl Into<bytes::Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
        Self { status, headers, body: body.into() }
    }
}

/// A phase's verdict.
pub enum Flow {
    /// Go on with the transaction.
    Continue,
    /// Go on, and call this module no more for this transaction (its state is dropped at the
    /// end of the transaction as usual).
    Done,
    /// Answer the client with this response instead. Honoured in request phases
    /// (`req_headers`, `req_body`, `cache_lookup`, `resolve`, `req_out`; in a streaming
    /// `req_body` the request already on its way to the origin is abandoned, and the client
    /// gets this answer unless the origin answered first) and in `client_resp_headers`, where
    /// it replaces the response, head and body, before anything is sent (no body phase runs
    /// on it); elsewhere it is logged and treated as `Continue`. The host frames it: its
    /// `Content-Length` and hop-by-hop fields are dropped, and a status outside 200-599 goes
    /// out as 500.
    Respond(LocalResponse),
    /// Hold the message (from a headers phase, `req_headers` or `client_resp_headers`:
    /// headers included) until its whole body has arrived, at most `max` bytes, then call
    /// the body phase once with all of it; elsewhere it is logged and treated as `Continue`.
    /// A body larger than `max` fails the modules that asked to buffer it, each as configured:
    /// open, the module sits out the rest of the transaction and the message goes on
    /// unchanged; closed, the transaction fails. The other modules go on.
    Buffer { max: usize },
    /// Async work (an external call, CPU work on [`TxnInfo::cpu`]): the host awaits the future,
    /// at most `deadline`, then hands what the phase works on back to this module with the
    /// verdict the work yielded ([`Txn::resumed`], which by default returns that verdict), and
    /// goes on with the next module (past the deadline: the module's failure policy). The
    /// future is dropped, cancelling the work, if the client goes away. Honoured in the header
    /// phases (`req_headers`, `cache_lookup`, `resolve`, `req_out`, `origin_resp_headers`,
    /// `client_resp_headers`) and in the body phases called once with a whole buffered body
    /// (`req_body` after `Buffer` at `req_headers`, `client_resp_body` after `Buffer` at
    /// `client_resp_headers`); a body phase called per chunk logs it and goes on.
    Defer { work: BoxFuture<'static, Flow>, deadline: Duration },
}

/// What a phase works on, handed back to a module when its deferred work is done
/// ([`Txn::resumed`]): the same head, body or decision the phase was called with, so the
/// work's result can be written into it before the next module sees it.
pub enum Subject<'a> {
    /// `req_headers`, `req_out`: the request head.
    Request(&'a mut request::Parts),
    /// `origin_resp_headers`, `client_resp_headers`: the response head.
    Response(&'a mut response::Parts),
    /// A buffered `req_body`: the whole request body.
    RequestBody(&'a mut BodyChunk),
    /// A buffered `client_resp_body` (or the `origin_resp_body` of a response that goes
    /// straight from the origin to this client): the whole body, and the response head,
    /// which has not been sent yet, so its status and fields may still change with the body
    /// (a transcoder's new `Content-Type`). The host sets `Content-Length` after.
    ResponseBody { head: &'a mut response::Parts, body: &'a mut BodyChunk },
    /// `cache_lookup`: the decision.
    Lookup(&'a mut LookupOverride),
    /// `resolve`: the resolution (pin addresses with [`Resolution::set`]).
    Resolution(&'a Resolution),
}

impl std::fmt::Debug for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Subject::Request(_) => "Subject::Request",
            Subject::Response(_) => "Subject::Response",
            Subject::RequestBody(_) => "Subject::RequestBody",
            Subject::ResponseBody { .. } => "Subject::ResponseBody",
            Subject::Lookup(_) => "Subject::Lookup",
            Subject::Resolution(_) => "Subject::Resolution",
        })
    }
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flow::Continue => f.write_str("Continue"),
            Flow::Done => f.write_str("Done"),
            Flow::Respond(r) => write!(f, "Respond({})", r.status),
            Flow::Buffer { max } => write!(f, "Buffer {{ max: {max} }}"),
            Flow::Defer { deadline, .. } => write!(f, "Defer {{ deadline: {deadline:?} }}"),
        }
    }
}

/// What the cache lookup found, as shown to [`Txn::cache_lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupOutcome {
    /// A fresh stored response will be served.
    Hit,
    /// A stored response exists but must be validated (or is served stale).
    Stale,
    /// Nothing usable is stored.
    Miss,
}

/// A module's decision at [`Txn::cache_lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LookupOverride {
    /// Keep the cache's decision.
    #[default]
    Keep,
    /// Treat a hit or stale response as a miss (fetch a full response and store it).
    ForceMiss,
    /// Validate a fresh response with the origin before serving it.
    ForceRevalidate,
}

/// Which bodies a module's state may change (see [`Txn::edits_body`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BodyEdits {
    /// The request body (`req_body`).
    pub request: bool,
    /// The response body before the store (`origin_resp_body`).
    pub origin_response: bool,
    /// The response body towards this client (`client_resp_body`).
    pub client_response: bool,
}

/// How a transaction ended, for [`Txn::resp_done`] and [`Txn::log`].
#[derive(Debug, Clone)]
pub struct TxnOutcome {
    /// Status sent to the client.
    pub status: StatusCode,
    /// Body bytes sent to the client.
    pub body_bytes: u64,
    /// The Squid result code, e.g. `TCP_MEM_HIT`, `TCP_MISS`.
    pub result: &'static str,
    /// False when the client went away or the body failed mid-way.
    pub completed: bool,
}

/// Extra fields a module adds to the access log line (`name=value`, appended in order).
#[derive(Debug, Default)]
pub struct LogFields {
    pub fields: Vec<(String, String)>,
}

impl LogFields {
    /// Appends `name=value` to the log line.
    pub fn add(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.fields.push((name.into(), value.into()));
    }
}

/// Per-transaction state and phase callbacks of one module.
///
/// Methods are called in phase order, never concurrently, from the transaction's task; a
/// method that is not overridden continues. The state is dropped exactly once. A panic in a
/// method fails the transaction open (the module is skipped from then on) or closed (the
/// client gets 500), as configured for the module; the proxy lives on.
pub trait Txn: Send {
    /// Which bodies this state may change. Asked of a module still active the first time the
    /// host needs the answer: when the request head is final (whether a `Range` can be
    /// honoured), or when it decides how a body is framed (the request body as it goes out,
    /// the origin body as a fill starts, the response as it goes to the client). The answer
    /// is kept for the rest of the transaction: keep it the same throughout. The host
    /// sends a body that may change without `Content-Length` (or with the new one when
    /// buffered); a body no module declared keeps its length, and changing its length anyway
    /// cuts the response (or fails the fill or the request). A module that may change the
    /// body the client gets turns a `Range` request into a request for the whole body (200,
    /// never a 206 whose `Content-Range` the edit would break).
    fn edits_body(&self) -> BodyEdits {
        BodyEdits::default()
    }

    /// The client's request head has been parsed and passed the proxy's checks. Edit it
    /// (URL, headers) or answer locally with [`Flow::Respond`].
    fn req_headers(&mut self, info: &TxnInfo, req: &mut request::Parts) -> Flow {
        let _ = (info, req);
        Flow::Continue
    }

    /// A piece of the request body (only for requests that have one). Called per piece as
    /// the body streams to the origin (after `req_out`: only `Continue` and `Done` apply), or
    /// once with the whole body, before the cache or the origin is asked, when a module
    /// answered [`Flow::Buffer`] at `req_headers` (then `Respond` and `Defer` apply too).
    fn req_body(&mut self, info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let _ = (info, chunk);
        Flow::Continue
    }

    /// The request is about to go to an origin over a new or pooled connection (misses,
    /// validations and requests the cache does not handle; never hits, file sources or
    /// CONNECT). See or pin the addresses it connects to ([`Resolution`]); answer locally with
    /// [`Flow::Respond`], or look the name up asynchronously with [`Flow::Defer`] and set the
    /// answer on a clone of `resolution`. Connections to pinned addresses are pooled apart
    /// from the system resolver's.
    fn resolve(&mut self, info: &TxnInfo, resolution: &Resolution) -> Flow {
        let _ = (info, resolution);
        Flow::Continue
    }

    /// The cache was consulted (GET and HEAD only). Inspect the outcome; override it through
    /// `decision`.
    fn cache_lookup(&mut self, info: &TxnInfo, outcome: LookupOutcome, decision: &mut LookupOverride) -> Flow {
        let _ = (info, outcome, decision);
        Flow::Continue
    }

    /// The request is about to go to the origin (after hop-by-hop removal, `Via`, and, for a
    /// cache fetch, the cache's own validators).
    fn req_out(&mut self, info: &TxnInfo, req: &mut request::Parts) -> Flow {
        let _ = (info, req);
        Flow::Continue
    }

    /// The origin's response head arrived; changes here are what gets stored. The host has
    /// removed the hop-by-hop fields; leave the framing fields alone (see the crate docs). A
    /// change of status to or from one without a body (1xx, 204, 304), or outside 200-599,
    /// fails the transaction as this module's failure.
    fn origin_resp_headers(&mut self, info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        let _ = (info, resp);
        Flow::Continue
    }

    /// A piece of the origin's response body; changes here are what gets stored. Called for
    /// every active module, whether or not it declared edits; a length change needs
    /// [`BodyEdits::origin_response`] (undeclared, it fails the fill: nothing is stored).
    fn origin_resp_body(&mut self, info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let _ = (info, chunk);
        Flow::Continue
    }

    /// The response head about to go to this client (hits included). Leave the framing
    /// fields alone, and the status within what the body allows, as in
    /// [`Txn::origin_resp_headers`].
    fn client_resp_headers(&mut self, info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        let _ = (info, resp);
        Flow::Continue
    }

    /// A piece of the response body about to go to this client (hits included).
    fn client_resp_body(&mut self, info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let _ = (info, chunk);
        Flow::Continue
    }

    /// This state's [`Flow::Defer`] is done: `deferred` is the verdict its work yielded (never
    /// `Defer`), `subject` what the phase works on, as the phase left it. Called at once, in
    /// the same phase, before the next module runs; write the work's result here (a header
    /// from an external lookup, a body transformed on the CPU pool) and return the phase's
    /// verdict for this module, which the phase honours as if the phase method had returned
    /// it; `Defer` again awaits more work (its own deadline), then calls `resumed` again. A
    /// panic here fails the module as configured. The default returns `deferred`.
    fn resumed(&mut self, info: &TxnInfo, subject: Subject<'_>, deferred: Flow) -> Flow {
        let _ = (info, subject);
        deferred
    }

    /// The response was sent (or the transaction was aborted: see `outcome.completed`). Called
    /// after every other phase: when the client left during a fill, after the fill's last
    /// `origin_resp_body`.
    fn resp_done(&mut self, info: &TxnInfo, outcome: &TxnOutcome) {
        let _ = (info, outcome);
    }

    /// The access log line is being written; add fields to it.
    fn log(&mut self, info: &TxnInfo, outcome: &TxnOutcome, fields: &mut LogFields) {
        let _ = (info, outcome, fields);
    }
}

/// What happens to a transaction when a module panics, traps, or misses a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Skip the module for the rest of the transaction and go on.
    #[default]
    Open,
    /// Fail the transaction: the client gets 500 (or the connection is cut mid-body).
    Closed,
}

/// A module: configured once, asked for state on every transaction.
pub trait Module: Send + Sync + 'static {
    /// The module's name, as used in configuration and logs.
    fn name(&self) -> &str;

    /// Called at the start of every transaction; `None` means this module sits it out. A
    /// panic here fails the transaction as configured: open, the module sits it out; closed,
    /// the client gets a 500 and no phase runs (other modules see the error response).
    fn new_txn(&self, info: &TxnInfo) -> Option<Box<dyn Txn>>;

    /// The module's `settings` changed (a configuration reload, or `PUT /modules/<name>`
    /// with other settings). `Ok(true)`: this instance took them in place, and keeps its
    /// state, timers and place in the chain (transactions under way may see the new settings
    /// from their next phase on). `Ok(false)` (the default): build a new instance from them,
    /// which replaces this one for new transactions. `Err`: the settings are invalid; the
    /// change is refused and nothing changes.
    fn reconfigure(&self, settings: &toml::Table) -> Result<bool, String> {
        let _ = settings;
        Ok(false)
    }

    /// Called every [`Module::tick_interval`] on a timer, outside any transaction.
    fn tick(&self, cache: &dyn CacheApi) {
        let _ = cache;
    }

    /// How often [`Module::tick`] runs; `None` (the default) for never.
    fn tick_interval(&self) -> Option<Duration> {
        None
    }

    /// Answers `GET|POST /modules/<name>/<path>` on the admin listener (behind the admin
    /// token). `None` (the default): 404.
    fn admin(&self, method: &http::Method, path: &str, body: &[u8]) -> Option<LocalResponse> {
        let _ = (method, path, body);
        None
    }
}
