//! Per-transaction state: one HTTP context in one plugin instance, and the mapping of Sluice
//! phases onto Proxy-Wasm callbacks.
//!
//! | Sluice phase | Proxy-Wasm callback |
//! |---|---|
//! | `new_txn` | `proxy_on_context_create(ctx, root)` |
//! | `req_headers` | `proxy_on_request_headers(ctx, headers, end_of_stream)` |
//! | `req_body` (per chunk) | `proxy_on_request_body(ctx, size, end_of_stream)` |
//! | `cache_lookup`, `req_out` | none (the lookup outcome becomes property `sluice.cache_lookup`) |
//! | `client_resp_headers` (or `origin_resp_headers` with `attach = "origin"`) | `proxy_on_response_headers` |
//! | `client_resp_body` (or `origin_resp_body`) | `proxy_on_response_body` |
//! | `resp_done` | `proxy_on_done(ctx)` |
//! | `log` | `proxy_on_log(ctx)` |
//! | state dropped | `proxy_on_done` if not yet called, then `proxy_on_delete(ctx)` |
//!
//! Verdicts: a local response (`proxy_send_local_response`) gives `Flow::Respond` (which the
//! host honours in request phases); `sluice.no_more_callbacks` gives `Flow::Done`; `Pause`
//! from a headers callback with a body to come gives `Flow::Buffer` (the body callback then
//! gets the whole body at once, end of stream set); `Pause` from a body callback holds the
//! data seen so far (the callback is called again with all of it and the next chunk, up to
//! `max_buffer_bytes`) until the plugin continues or the body ends; anything else continues.
//!
//! A fault (trap, deadline, memory limit) discards the instance and fails this transaction,
//! and every other transaction whose context lived in that instance, per the failure
//! policy: open gives `Flow::Done` (and passes body data held for the plugin on unchanged);
//! closed gives a 500 response in request phases, and in response phases unwinds with a
//! [`PluginFailure`] payload, the contract's way to fail the transaction (the host cuts the
//! connection).

use crate::abi::{Action, LogLevel};
use crate::config::Attach;
use crate::host::{BodyBuf, BodyKind, Call};
use crate::module::Core;
use crate::stats::Stats;
use crate::vm::{Callback, Fault};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{request, response, HeaderMap, StatusCode};
use sluice_module::{
    BodyChunk, BodyEdits, CacheApi, FailurePolicy, Flow, LocalResponse, LogFields, LookupOutcome, LookupOverride, Txn,
    TxnInfo, TxnOutcome,
};
use std::net::SocketAddr;
use std::sync::Arc;

/// The payload a transaction unwinds with when a plugin fails it closed in a response phase
/// (`std::panic::resume_unwind`, so no panic message is printed).
#[derive(Debug, Clone)]
pub struct PluginFailure {
    /// The module's name.
    pub module: String,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Display for PluginFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "wasm plugin {:?} failed: {}", self.module, self.reason)
    }
}

/// Where a transaction stands with its plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Callbacks run.
    Active,
    /// The plugin asked for no more callbacks (`Flow::Done`); only done/delete remain.
    Quiet,
    /// The plugin failed this transaction; nothing more runs except the context's deletion
    /// if its instance still lives.
    Failed,
}

/// Whether a failure happened in a request phase (a 500 can still be sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Request,
    Response,
}

/// The state of one transaction with a Proxy-Wasm plugin.
pub(crate) struct WasmTxn {
    core: Arc<Core>,
    slot: usize,
    generation: u64,
    context: u32,
    txn_id: u64,
    client: SocketAddr,
    /// Moved into each call (no reference counting per callback).
    cache: Option<Arc<dyn CacheApi>>,
    state: State,
    done_called: bool,
    deleted: bool,
    /// The request head kept for the response callbacks (read-only there).
    request: Option<request::Parts>,
    lookup: Option<LookupOutcome>,
    /// Body data held back while the plugin pauses, per direction.
    held_request: Option<Vec<u8>>,
    held_response: Option<Vec<u8>>,
}

impl WasmTxn {
    pub(crate) fn new(core: Arc<Core>, slot: usize, generation: u64, context: u32, info: &TxnInfo) -> Self {
        Self {
            core,
            slot,
            generation,
            context,
            txn_id: info.id,
            client: info.client,
            cache: Some(Arc::clone(&info.cache)),
            state: State::Active,
            done_called: false,
            deleted: false,
            request: None,
            lookup: None,
            held_request: None,
            held_response: None,
        }
    }

    fn base_call(&mut self) -> Call {
        Call {
            txn_id: Some(self.txn_id),
            client: Some(self.client),
            cache: self.cache.take(),
            lookup: self.lookup,
            ..Call::default()
        }
    }

    /// Runs `callback` in the transaction's instance. `Err(None)`: the instance is gone (a
    /// fault in another transaction's callback); `Err(Some(fault))`: this callback faulted.
    fn invoke(&mut self, callback: Callback, call: Call) -> (Result<i32, Option<Fault>>, Call) {
        let mut slot = self.core.pool.lock(self.slot);
        if slot.generation != self.generation {
            return (Err(None), call);
        }
        let Some(vm) = slot.vm.as_mut() else { return (Err(None), call) };
        let (result, mut call) = vm.invoke(self.context, callback, call);
        self.cache = call.cache.take();
        match result {
            Ok(value) => (Ok(value), call),
            Err(fault) => {
                slot.crash(&self.core.blueprint, &fault);
                (Err(Some(fault)), call)
            }
        }
    }

    /// Records the failure and returns the verdict the failure policy asks for.
    fn fail(&mut self, side: Side, reason: &str) -> Flow {
        self.state = State::Failed;
        let shared = self.core.shared();
        Stats::bump(&shared.stats.failed_transactions);
        shared.log(LogLevel::Warn, &format!("transaction {} failed: {reason}", self.txn_id));
        match (self.core.config().failure, side) {
            (FailurePolicy::Open, _) => Flow::Done,
            (FailurePolicy::Closed, Side::Request) => {
                Flow::Respond(LocalResponse::text(StatusCode::INTERNAL_SERVER_ERROR, "plugin failure\n"))
            }
            (FailurePolicy::Closed, Side::Response) => std::panic::resume_unwind(Box::new(PluginFailure {
                module: shared.name.clone(),
                reason: reason.into(),
            })),
        }
    }

    fn failure_reason(fault: Option<Fault>) -> String {
        match fault {
            Some(fault) => fault.to_string(),
            None => "the plugin instance holding this transaction was lost".to_string(),
        }
    }

    /// The verdict after a headers or body callback that returned `action`.
    fn verdict(&mut self, action: Action, call: &mut Call, end: bool, headers: bool) -> Flow {
        if let Some(response) = call.local_response.take() {
            return Flow::Respond(response);
        }
        if call.no_more_callbacks {
            self.state = State::Quiet;
            return Flow::Done;
        }
        if headers && action == Action::Pause && !end {
            return Flow::Buffer { max: self.core.config().limits.max_buffer_bytes };
        }
        Flow::Continue
    }

    fn headers_phase<P>(
        &mut self,
        side: Side,
        parts: &mut P,
        take: impl FnOnce(&mut P, &mut Call),
        give_back: impl FnOnce(&mut P, &mut Call),
        callback: Callback,
        end: bool,
    ) -> Flow {
        if self.state != State::Active {
            return Flow::Done;
        }
        let mut call = self.base_call();
        take(parts, &mut call);
        let (result, mut call) = self.invoke(callback, call);
        give_back(parts, &mut call);
        match result {
            Ok(action) => self.verdict(Action::from_guest(action), &mut call, end, true),
            Err(fault) => self.fail(side, &Self::failure_reason(fault)),
        }
    }

    fn response_headers(&mut self, resp: &mut response::Parts) -> Flow {
        let end = response_is_empty(resp);
        let callback = Callback::ResponseHeaders { headers: resp.headers.len() + 1, end };
        let request = self.request.take();
        let mut kept = None;
        let flow = self.headers_phase(
            Side::Response,
            resp,
            |resp, call| {
                call.response = Some(std::mem::replace(resp, placeholder_response()));
                call.request = request;
            },
            |resp, call| {
                if let Some(parts) = call.response.take() {
                    *resp = parts;
                }
                kept = call.request.take();
            },
            callback,
            end,
        );
        self.request = kept;
        flow
    }

    fn body_phase(&mut self, kind: BodyKind, chunk: &mut BodyChunk) -> Flow {
        if self.state != State::Active {
            return Flow::Done;
        }
        let side = if kind == BodyKind::Request { Side::Request } else { Side::Response };
        let held = match kind {
            BodyKind::Request => self.held_request.take(),
            BodyKind::Response => self.held_response.take(),
        };
        let holding = held.is_some();
        let data = match held {
            Some(mut held) => {
                held.extend_from_slice(chunk.data());
                Bytes::from(held)
            }
            None => chunk.data().clone(),
        };
        let end = chunk.is_end();
        let config = self.core.config();
        let resizable = match kind {
            BodyKind::Request => config.edits_request_body,
            BodyKind::Response => config.edits_response_body,
        };
        let callback = match kind {
            BodyKind::Request => Callback::RequestBody { size: data.len(), end },
            BodyKind::Response => Callback::ResponseBody { size: data.len(), end },
        };
        let max_len = config.limits.max_buffer_bytes.max(data.len());
        let mut call = self.base_call();
        call.body = Some(BodyBuf { kind, data: data.clone(), resizable, max_len, changed: false });
        if kind == BodyKind::Response {
            call.request = self.request.take();
        }
        let (result, mut call) = self.invoke(callback, call);
        if kind == BodyKind::Response {
            self.request = call.request.take();
        }
        let action = match result {
            Ok(action) => Action::from_guest(action),
            Err(fault) => {
                if holding {
                    chunk.replace(data);
                }
                return self.fail(side, &Self::failure_reason(fault));
            }
        };
        let (body, changed) = match call.body.take() {
            Some(body) => (body.data, body.changed),
            None => (data, false),
        };
        let pausing = action == Action::Pause && !end && call.local_response.is_none() && !call.no_more_callbacks;
        if pausing {
            let max = self.core.config().limits.max_buffer_bytes;
            if body.len() > max {
                chunk.replace(body);
                return self.fail(side, &format!("the plugin paused on more than {max} body bytes (max_buffer_bytes)"));
            }
            let held = Some(body.to_vec());
            match kind {
                BodyKind::Request => self.held_request = held,
                BodyKind::Response => self.held_response = held,
            }
            chunk.clear();
            return Flow::Continue;
        }
        if holding || changed {
            chunk.replace(body);
        }
        self.verdict(action, &mut call, end, false)
    }

    /// Runs a callback that has no verdict (done, log); a fault fails the transaction
    /// quietly (nothing can be sent any more).
    fn notify(&mut self, callback: Callback) {
        let call = self.base_call();
        let (result, _) = self.invoke(callback, call);
        if let Err(fault) = result {
            self.state = State::Failed;
            let shared = self.core.shared();
            Stats::bump(&shared.stats.failed_transactions);
            shared.log(LogLevel::Warn, &format!("transaction {} failed: {}", self.txn_id, Self::failure_reason(fault)));
        }
    }

    fn attached(&self, attach: Attach) -> bool {
        self.core.config().attach == attach
    }
}

impl Txn for WasmTxn {
    fn edits_body(&self) -> BodyEdits {
        let config = self.core.config();
        BodyEdits {
            request: config.edits_request_body,
            origin_response: config.edits_response_body && config.attach == Attach::Origin,
            client_response: config.edits_response_body && config.attach == Attach::Client,
        }
    }

    fn req_headers(&mut self, _info: &TxnInfo, req: &mut request::Parts) -> Flow {
        let end = request_is_empty(req);
        let callback = Callback::RequestHeaders { headers: req.headers.len() + 4, end };
        let flow = self.headers_phase(
            Side::Request,
            req,
            |req, call| {
                call.request = Some(std::mem::replace(req, placeholder_request()));
                call.request_writable = true;
            },
            |req, call| {
                if let Some(parts) = call.request.take() {
                    *req = parts;
                }
            },
            callback,
            end,
        );
        if self.core.config().request_headers_in_response && matches!(flow, Flow::Continue | Flow::Buffer { .. }) {
            self.request = Some(req.clone());
        }
        flow
    }

    fn req_body(&mut self, _info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.body_phase(BodyKind::Request, chunk)
    }

    fn cache_lookup(&mut self, _info: &TxnInfo, outcome: LookupOutcome, _decision: &mut LookupOverride) -> Flow {
        self.lookup = Some(outcome);
        Flow::Continue
    }

    fn origin_resp_headers(&mut self, _info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        if !self.attached(Attach::Origin) {
            return Flow::Continue;
        }
        self.response_headers(resp)
    }

    fn origin_resp_body(&mut self, _info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if !self.attached(Attach::Origin) {
            return Flow::Continue;
        }
        self.body_phase(BodyKind::Response, chunk)
    }

    fn client_resp_headers(&mut self, _info: &TxnInfo, resp: &mut response::Parts) -> Flow {
        if !self.attached(Attach::Client) {
            return Flow::Continue;
        }
        self.response_headers(resp)
    }

    fn client_resp_body(&mut self, _info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if !self.attached(Attach::Client) {
            return Flow::Continue;
        }
        self.body_phase(BodyKind::Response, chunk)
    }

    fn resp_done(&mut self, _info: &TxnInfo, _outcome: &TxnOutcome) {
        if self.state == State::Active && !self.done_called {
            self.done_called = true;
            self.notify(Callback::Done);
        }
    }

    fn log(&mut self, _info: &TxnInfo, _outcome: &TxnOutcome, _fields: &mut LogFields) {
        if self.state == State::Active {
            self.notify(Callback::Log);
        }
    }
}

impl Drop for WasmTxn {
    /// Ends the context exactly once: `proxy_on_done` (unless already called) and
    /// `proxy_on_delete`, if its instance still lives. A transaction that got here without a
    /// fault resets its slot's run of crashes.
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        self.deleted = true;
        let core = &self.core;
        let mut slot = core.pool.lock(self.slot);
        if slot.generation != self.generation {
            return;
        }
        let Some(vm) = slot.vm.as_mut() else { return };
        let mut fault = None;
        if !self.done_called {
            let call = Call { txn_id: Some(self.txn_id), client: Some(self.client), ..Call::default() };
            if let (Err(err), _) = vm.invoke(self.context, Callback::Done, call) {
                fault = Some(err);
            }
        }
        if fault.is_none() {
            let call = Call { txn_id: Some(self.txn_id), client: Some(self.client), ..Call::default() };
            match vm.invoke(self.context, Callback::Delete, call) {
                (Ok(_), _) => Stats::bump(&core.shared().stats.contexts_deleted),
                (Err(err), _) => fault = Some(err),
            }
        }
        match fault {
            Some(fault) => slot.crash(&core.blueprint, &fault),
            None if self.state != State::Failed => slot.healthy(),
            None => {}
        }
    }
}

/// A transaction a closed-failing module cannot serve (no instance): answers 500.
pub(crate) struct FailedTxn {
    module: String,
}

impl FailedTxn {
    pub(crate) fn new(module: String) -> Self {
        Self { module }
    }
}

impl Txn for FailedTxn {
    fn req_headers(&mut self, _info: &TxnInfo, _req: &mut request::Parts) -> Flow {
        tracing::warn!(plugin = %self.module, "no plugin instance available; failing the transaction closed");
        Flow::Respond(LocalResponse::text(StatusCode::INTERNAL_SERVER_ERROR, "plugin unavailable\n"))
    }
}

fn placeholder_request() -> request::Parts {
    http::Request::new(()).into_parts().0
}

fn placeholder_response() -> response::Parts {
    http::Response::new(()).into_parts().0
}

fn declared_empty(headers: &HeaderMap) -> bool {
    !headers.contains_key(TRANSFER_ENCODING)
        && headers.get(CONTENT_LENGTH).is_none_or(|length| length.as_bytes().iter().all(|b| *b == b'0'))
}

/// A request without body framing, or with `Content-Length: 0`, ends with its head.
fn request_is_empty(req: &request::Parts) -> bool {
    declared_empty(&req.headers)
}

/// A 1xx, 204 or 304 response, or one with `Content-Length: 0`, ends with its head.
fn response_is_empty(resp: &response::Parts) -> bool {
    let status = resp.status;
    status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || (resp.headers.get(CONTENT_LENGTH).is_some_and(|length| length.as_bytes().iter().all(|b| *b == b'0'))
            && !resp.headers.contains_key(TRANSFER_ENCODING))
}
