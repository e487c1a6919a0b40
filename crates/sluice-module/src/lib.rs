//! The Sluice module contract.
//!
//! A module adds behaviour to a running proxy without touching its core. The proxy calls a
//! module once per transaction ([`Module::new_txn`]); the module returns its per-transaction
//! state, a [`Txn`], or `None` to sit the transaction out. The proxy then calls the state's
//! phase methods in the order of the phase chart (`docs/modules.md`) and drops it exactly
//! once when the transaction ends, also when it is aborted.
//!
//! ```text
//! req_headers ─► cache_lookup ─┬─ hit ───────────────────────────────────────┐
//!                              └─ miss/stale ─► req_out ─► origin_resp_headers ┤
//!                                                                             ▼
//!                                                 client_resp_headers ─► resp_done ─► log ─► drop
//! ```
//!
//! Every phase returns a [`Flow`] verdict. Phases default to `Flow::Continue`, so a module
//! implements only the ones it needs.

use http::{request, response, HeaderMap, StatusCode};
use std::net::SocketAddr;

/// What the proxy tells a module about the transaction on every call.
#[derive(Debug, Clone)]
pub struct TxnInfo {
    /// Unique (per process) transaction id.
    pub id: u64,
    /// The client's address.
    pub client: SocketAddr,
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
#[derive(Debug)]
pub enum Flow {
    /// Go on with the transaction.
    Continue,
    /// Go on, and call this module no more for this transaction (its state is dropped at the
    /// end of the transaction as usual).
    Done,
    /// Answer the client with this response instead (request phases only; elsewhere it is
    /// treated as `Continue` and logged).
    Respond(LocalResponse),
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
    /// The request is not served from the cache (method, `no-store`, ...).
    Uncacheable,
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

/// How a transaction ended, for [`Txn::resp_done`] and [`Txn::log`].
#[derive(Debug, Clone)]
pub struct TxnOutcome {
    /// Status sent to the client.
    pub status: StatusCode,
    /// Body bytes sent to the client.
    pub body_bytes: u64,
    /// The Squid result code, e.g. `TCP_HIT`, `TCP_MISS`.
    pub result: &'static str,
    /// False when the client went away or the body failed mid-way.
    pub completed: bool,
}

/// Extra fields a module adds to the access log line (`name=value`, appended in order).
#[derive(Debug, Default)]
pub struct LogFields {
    pub fields: Vec<(String, String)>,
}

/// Per-transaction state and phase callbacks of one module.
///
/// Methods are called in phase order, never concurrently, from the transaction's task.
/// A method that is not overridden continues. The state is dropped exactly once.
pub trait Txn: Send {
    /// The client's request head has been parsed and passed the proxy's checks. Edit it
    /// (URL, headers) or answer locally with [`Flow::Respond`].
    fn req_headers(&mut self, info: &TxnInfo, req: &mut request::Parts) -> Flow {
        let _ = (info, req);
        Flow::Continue
    }

    /// The cache was consulted. Inspect the outcome; override it through `decision`.
    fn cache_lookup(&mut self, info: &TxnInfo, outcome: LookupOutcome, decision: &mut LookupOverride) -> Flow {
        let _ = (info, outcome, decision);
        Flow::Continue
    }

    /// The request is about to go to the origin (after hop-by-hop removal and `Via`).
    fn req_out(&mut self, info: &TxnInfo, req: &mut request::Parts) -> Flow {
        let _ = (info, req);
        Flow::Continue
    }

    /// The origin's response head arrived; changes here are what gets stored.
    fn origin_resp_headers(&mut self, info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        let _ = (info, resp);
        Flow::Continue
    }

    /// The response head about to go to this client (hits included).
    fn client_resp_headers(&mut self, info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        let _ = (info, resp);
        Flow::Continue
    }

    /// The response was sent (or the transaction was aborted: see `outcome.completed`).
    fn resp_done(&mut self, info: &TxnInfo, outcome: &TxnOutcome) {
        let _ = (info, outcome);
    }

    /// The access log line is being written; add fields to it.
    fn log(&mut self, info: &TxnInfo, outcome: &TxnOutcome, fields: &mut LogFields) {
        let _ = (info, outcome, fields);
    }
}

/// A module: configured once, asked for state on every transaction.
pub trait Module: Send + Sync + 'static {
    /// The module's name, as used in configuration and logs.
    fn name(&self) -> &str;

    /// Called at the start of every transaction; `None` means this module sits it out.
    fn new_txn(&self, info: &TxnInfo) -> Option<Box<dyn Txn>>;
}
