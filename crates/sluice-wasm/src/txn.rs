//! Per-transaction state: one HTTP context in one plugin instance, and the mapping of Sluice
//! phases onto Proxy-Wasm callbacks.
//!
//! | Sluice phase | Proxy-Wasm callback |
//! |---|---|
//! | the first callback | `proxy_on_context_create(ctx, root)` first |
//! | `req_headers` | `proxy_on_request_headers(ctx, headers, end_of_stream)` |
//! | `req_body` (per chunk) | `proxy_on_request_body(ctx, size, end_of_stream)` |
//! | `cache_lookup`, `req_out` | none (the lookup outcome becomes property `sluice.cache_lookup`) |
//! | `client_resp_headers` (or `origin_resp_headers` with `attach = "origin"`) | `proxy_on_response_headers` |
//! | `client_resp_body` (or `origin_resp_body`) | `proxy_on_response_body` |
//! | `resp_done` | none (`proxy_on_done` comes with `log`, which follows at once) |
//! | `log` | `proxy_on_done(ctx)`, `proxy_on_log(ctx)`, `proxy_on_delete(ctx)` |
//! | state dropped, `log` not called | `proxy_on_done(ctx)`, `proxy_on_delete(ctx)` |
//! | `resumed` after an HTTP call a headers callback asked for | `proxy_on_http_call_response(ctx, token, headers, body_size, 0)` |
//! | `resumed` after a gRPC call: it succeeded | `proxy_on_grpc_receive(ctx, token, size)` |
//! | `resumed` after a gRPC call: it failed | `proxy_on_grpc_close(ctx, token, status)` |
//!
//! The context is created by its first callback, in one call with it if that is the request
//! headers callback; `proxy_on_done`, `proxy_on_log` and `proxy_on_delete` are one call too
//! (`crate::joined`).
//!
//! Calls (`proxy_http_call`, `proxy_grpc_call`, from a headers callback or the callback with
//! a call's answer) give one `Flow::Defer` on all of them, made at once; the answers go to
//! the plugin in the order the calls were asked for when the host resumes the phase, with
//! the phase's head live again (`crate::callout`).
//!
//! Verdicts: a local response (`proxy_send_local_response`) gives `Flow::Respond` (which the
//! host honours in request phases and in `client_resp_headers`, where it replaces the
//! response); `sluice.no_more_callbacks` gives `Flow::Done`; `Pause`
//! from a headers callback with a body to come gives `Flow::Buffer` (where the host honours
//! it, `req_headers` and `client_resp_headers`, the body callback then gets the whole body at
//! once, end of stream set; from `origin_resp_headers` the host ignores it and the body comes
//! per chunk); `Pause` from a body callback holds the
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
use crate::callout::{CallResponse, Callout};
use crate::config::Attach;
use crate::host::{Asked, BodyBuf, BodyKind, Lend, RequestHead, ResponseHead, TxnFacts};
use crate::kept::{HeaderList, KeptRequest, KeptResponse};
use crate::pool::Core;
use crate::stats::Stats;
use crate::vm::{Callback, Fault, PluginVm};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{request, response, HeaderMap, Method, StatusCode, Version};
use sluice_module::{
    BodyChunk, BodyEdits, FailurePolicy, Flow, LocalResponse, LogFields, LookupOutcome, LookupOverride, Subject, Txn,
    TxnInfo, TxnOutcome,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// The payload a transaction unwinds with when a plugin fails it closed in a response phase,
/// or at all in a response body callback (`std::panic::resume_unwind`, so no panic message
/// is printed).
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

/// What a callback asked for besides its return value.
struct Signals {
    /// A local response, a call (`proxy_send_local_response`, `proxy_http_call`, `proxy_grpc_call`).
    rare: Option<Box<Asked>>,
    /// `sluice.no_more_callbacks`.
    no_more_callbacks: bool,
}

impl Signals {
    /// Takes what the callback left in `lend`.
    fn take(lend: &mut Lend<'_>) -> Self {
        Self { rare: lend.asked.take(), no_more_callbacks: lend.no_more_callbacks }
    }
}

/// Where a call's response goes when the call is done: its token, and the slot the
/// deferred work fills.
type PendingCall = (u32, Arc<parking_lot::Mutex<Option<CallResponse>>>);

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
    /// Lent to every callback.
    facts: TxnFacts,
    state: State,
    /// `proxy_on_context_create` was called: by the first callback ([`Self::run`]).
    created: Cell<bool>,
    deleted: bool,
    /// The request head kept for later callbacks (read-only there), once it is.
    request: KeptRequest,
    /// The response head kept for the later callbacks: response body, done, log, delete
    /// (read-only there), once it is.
    response: KeptResponse,
    lookup: Option<LookupOutcome>,
    /// The request is a HEAD (its response has no body).
    head_request: bool,
    /// Body data held back while the plugin pauses, per direction.
    held_request: Option<Vec<u8>>,
    held_response: Option<Vec<u8>>,
    /// The calls the transaction waits for (`proxy_http_call`, `proxy_grpc_call` from a
    /// headers callback or the answer to a call), in the order they were asked for.
    calls: Vec<PendingCall>,
}

impl WasmTxn {
    pub(crate) fn new(
        core: Arc<Core>,
        slot: usize,
        generation: u64,
        context: u32,
        info: &TxnInfo,
        request: HeaderList,
        response: HeaderList,
    ) -> Self {
        Self {
            core,
            slot,
            generation,
            context,
            facts: TxnFacts {
                id: info.id,
                client: info.client,
                cache: Arc::clone(&info.cache),
                log_fields: Default::default(),
            },
            state: State::Active,
            created: Cell::new(false),
            deleted: false,
            request: KeptRequest::new(request),
            response: KeptResponse::new(response),
            lookup: None,
            head_request: false,
            held_request: None,
            held_response: None,
            calls: Vec::new(),
        }
    }

    /// What every callback of this transaction sees: its facts and the lookup outcome.
    fn lend(&self) -> Lend<'_> {
        Lend::new(&self.facts, self.lookup)
    }

    /// The kept request head, lent read-only.
    fn kept_request(&self) -> Option<RequestHead<'_>> {
        self.request.kept().map(RequestHead::Kept)
    }

    /// The kept response head, lent read-only.
    fn kept_response(&self) -> Option<ResponseHead<'_>> {
        self.response.kept().map(ResponseHead::Kept)
    }

    /// Runs `callback` in the transaction's instance with `lend` in reach of the host
    /// functions (for the call only: whatever happens, the lent heads and body stay with the
    /// caller). `Err(None)` when the instance is gone (a fault in another transaction's
    /// callback), `Err(Some(fault))` when this callback faulted (the instance is discarded).
    ///
    /// The first callback creates the context first: joined with it into one call
    /// ([`Callback::Begin`]) if it is the request head, else a call of its own.
    fn run(&self, callback: Callback, lend: &mut Lend<'_>) -> Result<i32, Option<Fault>> {
        let mut slot = self.core.pool.lock(self.slot);
        if slot.generation != self.generation {
            return Err(None);
        }
        let Some(vm) = slot.vm.as_mut() else { return Err(None) };
        self.invoke(vm, callback, lend).map_err(|fault| {
            slot.crash(&self.core, self.slot, &fault);
            Some(fault)
        })
    }

    /// Calls `callback` in `vm`, the context's instance; the context's first callback
    /// creates it first ([`Self::create`]).
    fn invoke(&self, vm: &mut PluginVm, callback: Callback, lend: &mut Lend<'_>) -> Result<i32, Fault> {
        let callback = match self.created.get() {
            true => callback,
            false => self.create(vm, callback, lend)?,
        };
        vm.invoke(self.context, callback, Some(lend))
    }

    /// Creates the context before its first callback, `callback`: returns the call to make
    /// then, [`Callback::Begin`] for the request head (which creates it too), else `callback`
    /// after a call of `proxy_on_context_create` here.
    fn create(&self, vm: &mut PluginVm, callback: Callback, lend: &mut Lend<'_>) -> Result<Callback, Fault> {
        self.created.set(true);
        match callback {
            Callback::RequestHeaders { headers, end } => Ok(Callback::Begin { headers, end }),
            callback => vm.invoke(self.context, Callback::Create, Some(lend)).map(|_| callback),
        }
    }

    /// Records the failure and returns the verdict the failure policy asks for.
    fn fail(&mut self, side: Side, reason: &str) -> Flow {
        self.note_failure(reason);
        match (self.core.config().failure, side) {
            (FailurePolicy::Open, _) => Flow::Done,
            (FailurePolicy::Closed, Side::Request) => {
                Flow::Respond(LocalResponse::text(StatusCode::INTERNAL_SERVER_ERROR, "plugin failure\n"))
            }
            (FailurePolicy::Closed, Side::Response) => std::panic::resume_unwind(Box::new(PluginFailure {
                module: self.core.shared().name.clone(),
                reason: reason.into(),
            })),
        }
    }

    /// [`Self::fail`] in a body callback. On the response side the failure unwinds to the
    /// host's module chain whatever the policy: the chain applies it (open: the plugin sits
    /// out the rest, the body goes on) and so knows that the body went on part edited, which
    /// a fill then does not store (`attach = "origin"`).
    fn fail_in_body(&mut self, side: Side, reason: &str) -> Flow {
        if side == Side::Response {
            self.note_failure(reason);
            std::panic::resume_unwind(Box::new(PluginFailure {
                module: self.core.shared().name.clone(),
                reason: reason.into(),
            }));
        }
        self.fail(side, reason)
    }

    fn note_failure(&mut self, reason: &str) {
        self.state = State::Failed;
        let shared = self.core.shared();
        Stats::bump(&shared.stats.failed_transactions);
        shared.log(LogLevel::Warn, &format!("transaction {} failed: {reason}", self.facts.id));
    }

    fn failure_reason(fault: Option<Fault>) -> String {
        match fault {
            Some(fault) => fault.to_string(),
            None => "the plugin instance holding this transaction was lost".to_string(),
        }
    }

    /// The verdict after a headers or body callback that returned `action`. A call it
    /// asked for is made before the transaction goes on, whatever the action (a pause waits
    /// for it; `proxy_on_http_call_response` decides what comes next).
    fn verdict(&mut self, action: Action, signals: Signals, end: bool, headers: bool) -> Flow {
        if let Some(rare) = signals.rare {
            return self.rare_verdict(*rare, signals.no_more_callbacks);
        }
        if signals.no_more_callbacks {
            self.state = State::Quiet;
            return Flow::Done;
        }
        if headers && action == Action::Pause && !end {
            return Flow::Buffer { max: self.core.config().limits.max_buffer_bytes };
        }
        Flow::Continue
    }

    fn request_headers(&mut self, req: &mut request::Parts) -> Flow {
        if self.state != State::Active {
            return Flow::Done;
        }
        self.head_request = req.method == Method::HEAD;
        let end = request_is_empty(req);
        let callback = Callback::RequestHeaders { headers: req.headers.len() + 4, end };
        let mut lend = self.lend().with_request(Some(RequestHead::Live(req))).allowing_calls();
        let result = self.run(callback, &mut lend);
        let signals = Signals::take(&mut lend);
        match result {
            Ok(action) => self.verdict(Action::from_guest(action), signals, end, true),
            Err(fault) => self.fail(Side::Request, &Self::failure_reason(fault)),
        }
    }

    fn response_headers(&mut self, resp: &mut response::Parts) -> Flow {
        if self.state != State::Active {
            return Flow::Done;
        }
        let end = response_is_empty(resp, self.head_request);
        let callback = Callback::ResponseHeaders { headers: resp.headers.len() + 1, end };
        let mut lend = self
            .lend()
            .with_request(self.kept_request())
            .with_response(Some(ResponseHead::Live(resp)))
            .allowing_calls();
        let result = self.run(callback, &mut lend);
        let signals = Signals::take(&mut lend);
        let flow = match result {
            Ok(action) => self.verdict(Action::from_guest(action), signals, end, true),
            Err(fault) => self.fail(Side::Response, &Self::failure_reason(fault)),
        };
        // Kept for every later callback (the body callbacks, done, log, delete) unless this
        // one failed the transaction.
        if self.core.keeps_response() && self.state != State::Failed {
            self.response.keep(resp);
        }
        flow
    }

    /// [`Self::verdict`] when the callback answered locally or asked for a call.
    #[cold]
    fn rare_verdict(&mut self, rare: Asked, no_more_callbacks: bool) -> Flow {
        if let Some(response) = rare.local_response {
            return Flow::Respond(response);
        }
        if no_more_callbacks {
            self.state = State::Quiet;
            return Flow::Done;
        }
        self.defer_calls(rare.callouts)
    }

    /// Waits for `callouts`, made all at once (`Flow::Defer`); `resumed` then hands their
    /// responses to the plugin. `Continue` when there are none.
    fn defer_calls(&mut self, callouts: Vec<Callout>) -> Flow {
        if callouts.is_empty() {
            return Flow::Continue;
        }
        let max_body = self.core.config().limits.max_buffer_bytes;
        // Each call times itself out first (the plugin's timeout, then the answer Envoy makes
        // up); the host's deadline is a backstop.
        let deadline = callouts.iter().map(Callout::timeout).max().unwrap_or_default() + Duration::from_secs(1);
        let mut work = Vec::with_capacity(callouts.len());
        for callout in callouts {
            let slot = Arc::new(parking_lot::Mutex::new(None));
            self.calls.push((callout.token, Arc::clone(&slot)));
            let client = self.core.shared().call_clients.for_call(&callout);
            work.push(async move {
                let response = callout.perform(client, max_body).await;
                *slot.lock() = Some(response);
            });
        }
        Flow::Defer {
            work: Box::pin(async move {
                futures_util::future::join_all(work).await;
                Flow::Continue
            }),
            deadline,
        }
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
        // What passes on if the plugin fails while data is held for it.
        let unchanged = holding.then(|| data.clone());
        let end = chunk.is_end();
        let config = self.core.config();
        let resizable = match kind {
            BodyKind::Request => config.edits_request_body,
            BodyKind::Response => config.edits_response_body,
        };
        let max_len = config.limits.max_buffer_bytes.max(data.len());
        let callback = match kind {
            BodyKind::Request => Callback::RequestBody { size: data.len(), end },
            BodyKind::Response => Callback::ResponseBody { size: data.len(), end },
        };
        let mut body = BodyBuf { kind, data, resizable, max_len, changed: false };
        let response = match kind {
            BodyKind::Response => self.kept_response(),
            BodyKind::Request => None,
        };
        let mut lend = self.lend().with_request(self.kept_request()).with_response(response).with_body(&mut body);
        let result = self.run(callback, &mut lend);
        let signals = Signals::take(&mut lend);
        let action = match result {
            Ok(action) => Action::from_guest(action),
            Err(fault) => {
                if let Some(unchanged) = unchanged {
                    chunk.replace(unchanged);
                }
                return self.fail_in_body(side, &Self::failure_reason(fault));
            }
        };
        let BodyBuf { data: body, changed, .. } = body;
        // No call from a body callback (not allowed there): `rare` is a local response.
        let pausing = action == Action::Pause && !end && signals.rare.is_none() && !signals.no_more_callbacks;
        if pausing {
            let max = self.core.config().limits.max_buffer_bytes;
            if body.len() > max {
                chunk.replace(body);
                return self.fail_in_body(
                    side,
                    &format!("the plugin paused on more than {max} body bytes (max_buffer_bytes)"),
                );
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
        self.verdict(action, signals, end, false)
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
        let flow = self.request_headers(req);
        // Kept for every later callback unless this one failed the transaction.
        if self.core.keeps_request() && self.state != State::Failed {
            self.request.keep(req);
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

    /// The calls the transaction waited for are done: each answer goes to the plugin, in the
    /// order the calls were asked for (`proxy_on_http_call_response`, or
    /// `proxy_on_grpc_receive`, `proxy_on_grpc_close`), with the phase's head live again.
    /// The transaction then goes on whether or not the plugin resumed the stream, unless a
    /// callback answered locally or asked for no more callbacks (the answers not given yet
    /// are then dropped), or the callbacks asked for more calls (made all at once).
    fn resumed(&mut self, _info: &TxnInfo, mut subject: Subject<'_>, deferred: Flow) -> Flow {
        if self.calls.is_empty() {
            return deferred;
        }
        let mut more = Vec::new();
        for (token, slot) in std::mem::take(&mut self.calls) {
            if self.state != State::Active {
                return deferred;
            }
            let mut response = slot.lock().take().unwrap_or_default();
            let callback = response.callback(token);
            let (result, signals, side) = match &mut subject {
                Subject::Request(req) => {
                    let mut lend = self
                        .lend()
                        .with_request(Some(RequestHead::Live(req)))
                        .with_call_response(&mut response)
                        .allowing_calls();
                    let result = self.run(callback, &mut lend);
                    let signals = Signals::take(&mut lend);
                    // The kept copy follows what the plugin made of the head.
                    if self.request.kept().is_some() {
                        self.request.keep(req);
                    }
                    (result, signals, Side::Request)
                }
                Subject::Response(resp) => {
                    let mut lend = self
                        .lend()
                        .with_request(self.kept_request())
                        .with_response(Some(ResponseHead::Live(resp)))
                        .with_call_response(&mut response)
                        .allowing_calls();
                    let result = self.run(callback, &mut lend);
                    let signals = Signals::take(&mut lend);
                    if self.response.kept().is_some() {
                        self.response.keep(resp);
                    }
                    (result, signals, Side::Response)
                }
                // Calls are made from headers callbacks only.
                _ => return deferred,
            };
            if let Err(fault) = result {
                return self.fail(side, &Self::failure_reason(fault));
            }
            if let Some(rare) = signals.rare {
                if let Some(response) = rare.local_response {
                    return Flow::Respond(response);
                }
                more.extend(rare.callouts);
            }
            if signals.no_more_callbacks {
                self.state = State::Quiet;
                return Flow::Done;
            }
        }
        self.defer_calls(more)
    }

    /// Nothing yet: `proxy_on_done` runs from `log`, which follows at once, in one call with
    /// `proxy_on_log` and `proxy_on_delete` (`joined.rs`); or, should `log` not come, when the
    /// state is dropped.
    fn resp_done(&mut self, _info: &TxnInfo, _outcome: &TxnOutcome) {}

    /// `proxy_on_done`, `proxy_on_log` and `proxy_on_delete` in one call (the context ends
    /// here), then the fields the plugin added with `sluice.log_field` (in these callbacks or
    /// any before).
    fn log(&mut self, _info: &TxnInfo, _outcome: &TxnOutcome, fields: &mut LogFields) {
        if self.state == State::Active {
            if let Some(fault) = self.end(&[Callback::End]) {
                self.note_failure(&fault.to_string());
            }
        }
        // The transaction is not in a callback: no host function holds the lock.
        fields.fields.append(self.facts.log_fields.get_mut());
    }
}

impl WasmTxn {
    /// Ends the context with `callbacks` (the last of which is or includes `proxy_on_delete`),
    /// exactly once, if its instance still lives, under one lock of its slot; then gives the
    /// kept heads' storage back to the instance. A fault crashes the slot (and is returned);
    /// an end without one resets the slot's run of crashes, unless the transaction failed.
    fn end(&mut self, callbacks: &[Callback]) -> Option<Fault> {
        if self.deleted {
            return None;
        }
        self.deleted = true;
        let core = &self.core;
        let mut slot = core.pool.lock(self.slot);
        if slot.generation != self.generation {
            return None;
        }
        let vm = slot.vm.as_mut()?;
        let mut lend = Lend::new(&self.facts, self.lookup)
            .with_request(self.request.kept().map(RequestHead::Kept))
            .with_response(self.response.kept().map(ResponseHead::Kept));
        // A context no callback reached is created too, to end as every other.
        let mut result = Ok(0);
        for &callback in callbacks {
            result = result.and_then(|_| self.invoke(vm, callback, &mut lend));
        }
        drop(lend);
        let fault = result.err();
        if fault.is_none() {
            // `recycle` takes only storage there is (heads kept: `Core::keeps_request`, ...).
            vm.recycle(&mut self.request.headers);
            vm.recycle(&mut self.response.headers);
            Stats::bump(&core.shared().stats.contexts_deleted);
        }
        match &fault {
            Some(fault) => slot.crash(core, self.slot, fault),
            None if self.state != State::Failed => slot.healthy(),
            None => {}
        }
        fault
    }
}

impl Drop for WasmTxn {
    /// Ends the context if `log` did not: `proxy_on_done` and `proxy_on_delete` (the
    /// callbacks after a failure or a "no more callbacks" skip `log`).
    fn drop(&mut self) {
        self.end(&[Callback::Done, Callback::Delete]);
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

fn zero_length(headers: &HeaderMap) -> Option<bool> {
    headers.get(CONTENT_LENGTH).map(|length| length.as_bytes().iter().all(|b| *b == b'0'))
}

/// Whether the request ends with its head (the contract does not say, so it is read from the
/// framing): no `Transfer-Encoding` and `Content-Length: 0`, or no length at all in
/// HTTP/1 (where a body needs framing) or, in HTTP/2 and 3, for methods that rarely carry a
/// body (anything but POST, PUT, PATCH).
fn request_is_empty(req: &request::Parts) -> bool {
    let (chunked, length) = request_framing(&req.headers);
    if chunked {
        return false;
    }
    match length {
        Some(length) => length.as_bytes().iter().all(|b| *b == b'0'),
        None => req.version < Version::HTTP_2 || !matches!(req.method, Method::POST | Method::PUT | Method::PATCH),
    }
}

/// Whether `headers` has `Transfer-Encoding`, and its first `Content-Length` value. A
/// request has few headers, so one pass over them costs less than two lookups (each hashes
/// the name and probes); a long map is looked up.
fn request_framing(headers: &HeaderMap) -> (bool, Option<&http::HeaderValue>) {
    const SCAN_UP_TO: usize = 8;
    if headers.len() > SCAN_UP_TO {
        return (headers.contains_key(TRANSFER_ENCODING), headers.get(CONTENT_LENGTH));
    }
    let (mut chunked, mut length) = (false, None);
    for (name, value) in headers {
        if *name == TRANSFER_ENCODING {
            chunked = true;
        } else if *name == CONTENT_LENGTH && length.is_none() {
            length = Some(value);
        }
    }
    (chunked, length)
}

/// Whether the response ends with its head: an answer to HEAD, a 1xx, 204 or 304, or one
/// with `Content-Length: 0`.
fn response_is_empty(resp: &response::Parts, head_request: bool) -> bool {
    let status = resp.status;
    head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || (zero_length(&resp.headers) == Some(true) && !resp.headers.contains_key(TRANSFER_ENCODING))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, version: Version, headers: &[(&str, &str)]) -> request::Parts {
        let mut builder = http::Request::builder().method(method).version(version).uri("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn request_end_of_stream_follows_the_framing() {
        assert!(request_is_empty(&req("GET", Version::HTTP_11, &[])));
        assert!(request_is_empty(&req("POST", Version::HTTP_11, &[("content-length", "0")])));
        assert!(!request_is_empty(&req("POST", Version::HTTP_11, &[("content-length", "3")])));
        assert!(!request_is_empty(&req("POST", Version::HTTP_11, &[("transfer-encoding", "chunked")])));
        assert!(request_is_empty(&req("POST", Version::HTTP_11, &[])));
        assert!(!request_is_empty(&req("POST", Version::HTTP_2, &[])));
        assert!(request_is_empty(&req("GET", Version::HTTP_2, &[])));
        // Past the scanning limit the same answers come from lookups.
        let many: Vec<(String, &str)> = (0..9).map(|n| (format!("x-{n}"), "v")).collect();
        let mut long: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert!(request_is_empty(&req("POST", Version::HTTP_11, &long)));
        long.push(("content-length", "0"));
        long.push(("content-length", "5"));
        assert!(request_is_empty(&req("POST", Version::HTTP_11, &long)), "the first value counts");
        long.push(("transfer-encoding", "chunked"));
        assert!(!request_is_empty(&req("POST", Version::HTTP_11, &long)));
        let short = [("content-length", "0"), ("content-length", "5")];
        assert!(request_is_empty(&req("POST", Version::HTTP_11, &short)), "the first value counts");
    }

    #[test]
    fn response_end_of_stream_follows_status_method_and_length() {
        let resp = |status: u16, headers: &[(&str, &str)]| {
            let mut builder = http::Response::builder().status(status);
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            builder.body(()).unwrap().into_parts().0
        };
        assert!(response_is_empty(&resp(204, &[]), false));
        assert!(response_is_empty(&resp(304, &[("content-length", "10")]), false));
        assert!(response_is_empty(&resp(200, &[("content-length", "10")]), true));
        assert!(response_is_empty(&resp(200, &[("content-length", "0")]), false));
        assert!(!response_is_empty(&resp(200, &[("content-length", "10")]), false));
        assert!(!response_is_empty(&resp(200, &[]), false));
    }
}
