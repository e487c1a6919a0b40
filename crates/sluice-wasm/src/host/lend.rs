//! What one callback may see and change, lent to it by the transaction for the duration of
//! the call, without moving or copying anything.
//!
//! The transaction builds a [`Lend`] on its stack (borrowing its heads, the body and its own
//! facts) and [`crate::vm::PluginVm::invoke`] puts it in reach of the host functions through
//! a [`Lending`] guard: [`Call`] then holds a raw pointer to it, and host functions reach it
//! with [`Call::lend`]. The guard takes the pointer back when it is dropped, on every way out
//! of the call (return, trap, deadline, a panicking host function unwinding).
//!
//! This is the crate's only `unsafe` code (the workspace denies it elsewhere). Soundness
//! rests on three rules kept in this file:
//! - the pointer is only set by [`Lending::new`], from a `&mut Lend` the guard keeps
//!   borrowed for its whole life, and cleared by its `Drop`; so it never outlives the data
//!   and nothing else touches the lend while it is set;
//! - [`Call::lend`] hands it out through `&mut Call`, so host functions (which reach the
//!   call through the store's `&mut HostState`) never hold two references to it at once;
//! - the borrowed parts are private and only given out as reborrows, so a host function
//!   cannot store a shorter-lived reference into the lend that the transaction would later
//!   read.

use super::{BodyBuf, BodyKind, HostState};
use crate::callout::{CallResponse, Callout};
use crate::headermap::Head;
use crate::kept::{KeptRequest, KeptResponse};
use http::{request, response};
use sluice_module::{CacheApi, LocalResponse, LookupOutcome};
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::Arc;
use wasmtime::Store;

/// The transaction a callback runs for.
pub(crate) struct TxnFacts {
    pub id: u64,
    pub client: SocketAddr,
    pub cache: Arc<dyn CacheApi>,
    /// Access log fields added by `sluice.log_field`, handed to the log phase.
    pub log_fields: parking_lot::Mutex<Vec<(String, String)>>,
}

/// The request head as a callback sees it: the live head (writable, request phases) or the
/// copy kept for later callbacks (read-only).
pub(crate) enum RequestHead<'a> {
    Live(&'a mut request::Parts),
    Kept(&'a KeptRequest),
}

/// The response head as a callback sees it: the live head (writable, response headers
/// callback) or the copy kept for the later callbacks (read-only).
pub(crate) enum ResponseHead<'a> {
    Live(&'a mut response::Parts),
    Kept(&'a KeptResponse),
}

/// Everything one HTTP-context callback may touch, borrowed from the transaction; what it
/// asks for besides its return value is left in [`Lend::local_response`] and
/// [`Lend::no_more_callbacks`].
pub(crate) struct Lend<'a> {
    txn: &'a TxnFacts,
    lookup: Option<LookupOutcome>,
    request: Option<RequestHead<'a>>,
    response: Option<ResponseHead<'a>>,
    body: Option<&'a mut BodyBuf>,
    /// The answer to the call, in `proxy_on_http_call_response`, `proxy_on_grpc_receive` or
    /// `proxy_on_grpc_close`.
    call_response: Option<&'a mut CallResponse>,
    /// The callback may ask for a call (a headers callback: the transaction can wait).
    calls_allowed: bool,
    /// What the callback asked for that is rare: a local response, a call. Boxed
    /// together, which keeps the lend small and its drop a single check.
    pub asked: Option<Box<Asked>>,
    /// Set by the `sluice.no_more_callbacks` foreign function.
    pub no_more_callbacks: bool,
}

/// See [`Lend::asked`].
#[derive(Default)]
pub(crate) struct Asked {
    /// Set by `proxy_send_local_response`.
    pub local_response: Option<LocalResponse>,
    /// Set by `proxy_http_call` and `proxy_grpc_call`: the calls to make, all at once, before
    /// the transaction goes on (at most [`MAX_CALLS`]).
    pub callouts: Vec<Callout>,
}

/// The most calls one callback may ask for (Envoy sets no limit; the Rust SDK's
/// `http_parallel_call` example makes two).
pub(crate) const MAX_CALLS: usize = 16;

impl<'a> Lend<'a> {
    /// A lend of the transaction's facts only (no heads, no body).
    pub(crate) fn new(txn: &'a TxnFacts, lookup: Option<LookupOutcome>) -> Self {
        Self {
            txn,
            lookup,
            request: None,
            response: None,
            body: None,
            call_response: None,
            calls_allowed: false,
            asked: None,
            no_more_callbacks: false,
        }
    }

    pub(crate) fn with_request(mut self, head: Option<RequestHead<'a>>) -> Self {
        self.request = head;
        self
    }

    pub(crate) fn with_response(mut self, head: Option<ResponseHead<'a>>) -> Self {
        self.response = head;
        self
    }

    pub(crate) fn with_body(mut self, body: &'a mut BodyBuf) -> Self {
        self.body = Some(body);
        self
    }

    /// Lets the callback ask for a call (`proxy_http_call`, `proxy_grpc_call`).
    pub(crate) fn allowing_calls(mut self) -> Self {
        self.calls_allowed = true;
        self
    }

    /// The answer to the call the transaction waited for.
    pub(crate) fn with_call_response(mut self, response: &'a mut CallResponse) -> Self {
        self.call_response = Some(response);
        self
    }

    /// Whether the callback may ask for a call now: it runs where the transaction can
    /// wait, and has asked for fewer than [`MAX_CALLS`].
    pub(crate) fn may_call(&self) -> bool {
        self.calls_allowed && self.asked.as_ref().is_none_or(|asked| asked.callouts.len() < MAX_CALLS)
    }

    /// Where the callback's rare requests go (made on first use).
    pub(crate) fn asked(&mut self) -> &mut Asked {
        self.asked.get_or_insert_with(Box::default)
    }

    /// The HTTP call's response head as a header map (read-only; absent when the call failed).
    pub(crate) fn call_response_map(&mut self) -> Option<Head<'_>> {
        self.call_response.as_deref_mut()?.head.as_mut().map(Head::Response)
    }

    /// The HTTP call's response body (`grpc` false), or the gRPC call's answer (`grpc` true).
    pub(crate) fn call_response_body(&self, grpc: bool) -> Option<bytes::Bytes> {
        let response = self.call_response.as_deref().filter(|response| response.grpc.is_some() == grpc)?;
        Some(response.body.clone())
    }

    /// How the gRPC call being answered ended.
    pub(crate) fn grpc_status(&self) -> Option<&crate::grpc::GrpcStatus> {
        self.call_response.as_deref()?.grpc.as_ref()
    }

    pub(crate) fn txn(&self) -> &TxnFacts {
        self.txn
    }

    pub(crate) fn lookup(&self) -> Option<LookupOutcome> {
        self.lookup
    }

    /// The request head as read by properties.
    pub(crate) fn request(&self) -> Option<RequestView<'_>> {
        match self.request.as_ref()? {
            RequestHead::Live(parts) => Some(RequestView::Live(parts)),
            RequestHead::Kept(kept) => Some(RequestView::Kept(kept)),
        }
    }

    /// The response status, if the response head is there.
    pub(crate) fn response_status(&self) -> Option<http::StatusCode> {
        match self.response.as_ref()? {
            ResponseHead::Live(parts) => Some(parts.status),
            ResponseHead::Kept(kept) => Some(kept.status),
        }
    }

    /// The request head as a header map: `None` when absent, or when `write` and it is not
    /// writable here.
    pub(crate) fn request_map(&mut self, write: bool) -> Option<Head<'_>> {
        match self.request.as_mut()? {
            RequestHead::Live(parts) => Some(Head::Request(parts)),
            RequestHead::Kept(_) if write => None,
            RequestHead::Kept(kept) => Some(Head::KeptRequest(kept)),
        }
    }

    /// The response head as a header map, like [`Lend::request_map`].
    pub(crate) fn response_map(&mut self, write: bool) -> Option<Head<'_>> {
        match self.response.as_mut()? {
            ResponseHead::Live(parts) => Some(Head::Response(parts)),
            ResponseHead::Kept(_) if write => None,
            ResponseHead::Kept(kept) => Some(Head::KeptResponse(kept)),
        }
    }

    /// The body of kind `kind`, if this is its body callback.
    pub(crate) fn body(&mut self, kind: BodyKind) -> Option<&mut BodyBuf> {
        self.body.as_deref_mut().filter(|body| body.kind == kind)
    }
}

/// A request head to read from, live or kept.
#[derive(Clone, Copy)]
pub(crate) enum RequestView<'a> {
    Live(&'a request::Parts),
    Kept(&'a KeptRequest),
}

impl<'a> RequestView<'a> {
    pub(crate) fn method(self) -> &'a http::Method {
        match self {
            RequestView::Live(parts) => &parts.method,
            RequestView::Kept(kept) => &kept.method,
        }
    }

    pub(crate) fn uri(self) -> &'a http::Uri {
        match self {
            RequestView::Live(parts) => &parts.uri,
            RequestView::Kept(kept) => &kept.uri,
        }
    }

    pub(crate) fn version(self) -> http::Version {
        match self {
            RequestView::Live(parts) => parts.version,
            RequestView::Kept(kept) => kept.version,
        }
    }

    /// The first value of header `name`.
    pub(crate) fn header(self, name: &http::HeaderName) -> Option<&'a [u8]> {
        match self {
            RequestView::Live(parts) => parts.headers.get(name).map(http::HeaderValue::as_bytes),
            RequestView::Kept(kept) => kept.headers.get(name),
        }
    }
}

/// The per-instance slot through which host functions reach the running callback's
/// [`Lend`]; empty between callbacks (and during start-up and ticks).
#[derive(Default)]
pub(crate) struct Call {
    /// The context the callback runs for (the root context for start-up and ticks).
    pub context_id: u32,
    /// The callback ends the context (`proxy_on_done`, `proxy_on_log`, `proxy_on_delete`):
    /// the response is under way or sent, so it cannot be answered locally any more.
    pub ending: bool,
    /// Set only by a live [`Lending`] (see the module docs).
    lent: Option<NonNull<Lend<'static>>>,
}

// SAFETY: `lent` is only set while a `Lending` guard on the same thread exclusively borrows
// the lend (and the store holding this `Call`), so the pointer is never used from another
// thread; between callbacks it is `None`. The store must be `Send` to sit in the pool.
#[allow(unsafe_code)]
unsafe impl Send for Call {}

impl Call {
    /// The running callback's lend; `None` outside an HTTP-context callback.
    #[allow(unsafe_code)]
    pub(crate) fn lend(&mut self) -> Option<&mut Lend<'_>> {
        // SAFETY: a set pointer comes from a `&mut Lend` that the live `Lending` guard keeps
        // exclusively borrowed (see the module docs); handing it out through `&mut self`
        // ties the reference to this exclusive borrow of the call, so it cannot outlive the
        // guard nor alias another. Shortening `'static` to the borrow is sound because a
        // `Lend`'s borrowed parts cannot be replaced from outside this file.
        self.lent.map(|lent| unsafe { &mut *lent.as_ptr().cast::<Lend<'_>>() })
    }

    /// Whether a lend is in reach (tests).
    #[cfg(test)]
    pub(crate) fn is_lent(&self) -> bool {
        self.lent.is_some()
    }
}

/// Keeps a [`Lend`] in reach of the host functions of one store while it lives; takes it
/// back when dropped (on every exit path, unwinding included).
pub(crate) struct Lending<'s> {
    store: &'s mut Store<HostState>,
    _lend: PhantomData<&'s mut Lend<'s>>,
}

impl<'s> Lending<'s> {
    /// Lends `lend` (if any) to the host functions of `store` until the guard is dropped.
    pub(crate) fn new(store: &'s mut Store<HostState>, lend: Option<&'s mut Lend<'_>>) -> Self {
        store.data_mut().call.lent = lend.map(|lend| NonNull::from(lend).cast::<Lend<'static>>());
        Self { store, _lend: PhantomData }
    }

    /// The store, to call into the plugin.
    pub(crate) fn store(&mut self) -> &mut Store<HostState> {
        self.store
    }
}

impl Drop for Lending<'_> {
    fn drop(&mut self) {
        self.store.data_mut().call.lent = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::LogLevel;
    use crate::shared::{HostEnv, Shared};
    use bytes::Bytes;
    use sluice_module::EmptyCache;

    fn store() -> Store<HostState> {
        let shared = Shared::new("t", 1, Bytes::new(), Bytes::new(), LogLevel::Info, &HostEnv::default());
        Store::new(crate::engine::engine().unwrap(), HostState::new(Arc::new(shared), 1 << 20))
    }

    fn facts() -> TxnFacts {
        TxnFacts {
            id: 7,
            client: SocketAddr::from(([192, 0, 2, 1], 1)),
            cache: Arc::new(EmptyCache),
            log_fields: Default::default(),
        }
    }

    #[test]
    fn a_lend_is_in_reach_only_while_its_guard_lives() {
        let mut store = store();
        let facts = facts();
        let (mut req, ()) = http::Request::get("/a").header("x-a", "1").body(()).unwrap().into_parts();
        let mut lend = Lend::new(&facts, None).with_request(Some(RequestHead::Live(&mut req)));
        {
            let mut lending = Lending::new(&mut store, Some(&mut lend));
            let call = &mut lending.store().data_mut().call;
            let lend = call.lend().expect("lent");
            assert_eq!(lend.txn().id, 7);
            let mut head = lend.request_map(true).expect("the live request is writable");
            head.replace(b"x-a", b"2").unwrap();
        }
        assert!(!store.data().call.is_lent());
        assert!(store.data_mut().call.lend().is_none());
        assert_eq!(req.headers["x-a"], "2");
    }

    #[test]
    fn a_panic_during_the_call_takes_the_lend_back() {
        let mut store = store();
        let facts = facts();
        let (mut req, ()) = http::Request::get("/a").header("x-a", "1").body(()).unwrap().into_parts();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut lend = Lend::new(&facts, None).with_request(Some(RequestHead::Live(&mut req)));
            let mut lending = Lending::new(&mut store, Some(&mut lend));
            assert!(lending.store().data().call.is_lent());
            panic!("a host function panicked");
        }));
        assert!(unwound.is_err());
        assert!(store.data_mut().call.lend().is_none(), "no dangling lend after unwinding");
        assert_eq!(req.headers["x-a"], "1", "the head is intact");
    }

    #[test]
    fn kept_heads_are_read_only() {
        let facts = facts();
        let (req, ()) = http::Request::get("/a").header("x-a", "1").body(()).unwrap().into_parts();
        let mut kept = KeptRequest::new(Default::default());
        kept.keep(&req);
        let mut lend = Lend::new(&facts, None).with_request(Some(RequestHead::Kept(&kept)));
        assert!(lend.request_map(true).is_none());
        assert_eq!(lend.request_map(false).unwrap().get(b"x-a").as_deref(), Some(&b"1"[..]));
        assert_eq!(lend.request().unwrap().uri(), "/a");
        assert!(lend.response_map(false).is_none() && lend.body(BodyKind::Request).is_none());
    }
}
