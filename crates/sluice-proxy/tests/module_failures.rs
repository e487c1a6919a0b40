//! Module failures end to end: a `Buffer` that overflows and panics in any phase fail the
//! transaction open or closed, as configured for the module that failed, and only that
//! module; the other modules keep their phases, and the proxy lives on.

mod common;

use common::recorder::{seq, take, Journal, Recorder, MISS};
use common::Harness;
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, Module, Txn, TxnInfo};
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::Arc;

// ---- Buffer overflows --------------------------------------------------------------------------

/// Asks to buffer the request (at `req_headers`) or the response (at `client_resp_headers`),
/// at most `max` bytes, and upper-cases what it gets whole.
struct Hoarder {
    max: usize,
    request: bool,
}

struct HoarderTxn {
    max: usize,
    request: bool,
}

impl Txn for HoarderTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { request: true, client_response: true, ..BodyEdits::default() }
    }
    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        if self.request {
            return Flow::Buffer { max: self.max };
        }
        Flow::Continue
    }
    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let upper = chunk.data().to_ascii_uppercase();
        chunk.replace(upper);
        Flow::Continue
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        if !self.request {
            return Flow::Buffer { max: self.max };
        }
        Flow::Continue
    }
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let upper = chunk.data().to_ascii_uppercase();
        chunk.replace(upper);
        Flow::Continue
    }
}

impl Module for Hoarder {
    fn name(&self) -> &str {
        "hoarder"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(HoarderTxn { max: self.max, request: self.request }))
    }
}

fn hoarder(max: usize, request: bool, on_error: FailurePolicy) -> LoadedModule {
    LoadedModule { module: Arc::new(Hoarder { max, request }), on_error }
}

#[tokio::test]
async fn a_response_buffer_overflow_fails_open_and_the_body_goes_on_unchanged() {
    let h = Harness::forward_with(vec![hoarder(100, false, FailurePolicy::Open)]).await;
    h.origin.on("/big", Reply::ok("a".repeat(5000)));
    let reply = h.get("/big").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "a".repeat(5000), "the module sits the rest out: no edit");
    assert_eq!(reply.header("content-length"), "5000", "no module left that may change the body");
    h.origin.on("/small", Reply::ok("abc"));
    assert_eq!(h.get("/small").await.text(), "ABC", "within the limit, the module gets the body whole");
}

#[tokio::test]
async fn a_response_buffer_overflow_fails_closed_with_a_500() {
    let h = Harness::forward_with(vec![hoarder(100, false, FailurePolicy::Closed)]).await;
    h.origin.on("/big", Reply::ok("a".repeat(5000)).chunked());
    assert_eq!(h.get("/big").await.status, 500);
    h.origin.on("/small", Reply::ok("abc"));
    assert_eq!(h.get("/small").await.text(), "ABC", "the proxy keeps serving");
}

#[tokio::test]
async fn a_response_buffer_overflow_fails_only_the_module_that_asked_to_buffer() {
    let journal = Journal::default();
    let modules = vec![hoarder(100, false, FailurePolicy::Open), Recorder::loaded(&journal, FailurePolicy::Closed)];
    let h = Harness::forward_with(modules).await;
    h.origin.on("/big", Reply::ok("a".repeat(5000)).chunked());
    let reply = h.get("/big").await;
    assert_eq!(reply.status, 200, "the recorder, guarding closed, did not fail");
    assert_eq!(reply.text(), "a".repeat(5000));
    assert_eq!(take(&h, &journal).await, seq(&MISS), "the other module keeps its body phase, resp_done and log");
}

#[tokio::test]
async fn a_request_buffer_overflow_fails_only_the_module_that_asked_to_buffer() {
    let journal = Journal::default();
    let modules = vec![hoarder(4, true, FailurePolicy::Open), Recorder::loaded(&journal, FailurePolicy::Closed)];
    let h = Harness::forward_with(modules).await;
    h.origin.on("/upload", Reply::ok("stored"));
    let reply = h.send("POST", "/upload", &[], Some("a body longer than four bytes")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "stored", "the hoarder sits the rest out: no edit of the response either");
    assert_eq!(h.origin.last_request("/upload").unwrap().body, b"a body longer than four bytes");
    let calls = take(&h, &journal).await;
    assert!(calls.contains(&"req_body:end".to_owned()), "the other module still sees the body: {calls:?}");
    assert_eq!(calls[calls.len() - 3..], seq(&["resp_done:TCP_MISS", "log", "drop"]));
}

// ---- panics ------------------------------------------------------------------------------------

/// Panics in the phase it is named after (`new_txn` included; in `client_resp_body`, on the
/// last piece); otherwise continues.
struct Panicky {
    phase: &'static str,
}

struct PanickyTxn {
    phase: &'static str,
}

impl PanickyTxn {
    fn maybe_panic(&self, phase: &str) -> Flow {
        assert_ne!(self.phase, phase, "a module bug in {phase}");
        Flow::Continue
    }
}

impl Txn for PanickyTxn {
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        self.maybe_panic("client_resp_headers")
    }
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if chunk.is_end() {
            return self.maybe_panic("client_resp_body");
        }
        Flow::Continue
    }
}

impl Module for Panicky {
    fn name(&self) -> &str {
        self.phase
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        assert_ne!(self.phase, "new_txn", "a module bug in new_txn");
        Some(Box::new(PanickyTxn { phase: self.phase }))
    }
}

fn panicky(phase: &'static str, on_error: FailurePolicy) -> LoadedModule {
    LoadedModule { module: Arc::new(Panicky { phase }), on_error }
}

#[tokio::test]
async fn a_panic_in_new_txn_fails_open_or_closed_as_configured() {
    let journal = Journal::default();
    let open = Harness::forward_with(vec![
        panicky("new_txn", FailurePolicy::Open),
        Recorder::loaded(&journal, FailurePolicy::Open),
    ])
    .await;
    open.origin.on("/n", Reply::ok("fine"));
    assert_eq!(open.get("/n").await.text(), "fine", "open: the module sits the transaction out");
    assert_eq!(take(&open, &journal).await.first().map(String::as_str), Some("new_txn"));

    let closed = Harness::forward_with(vec![
        panicky("new_txn", FailurePolicy::Closed),
        Recorder::loaded(&journal, FailurePolicy::Open),
    ])
    .await;
    closed.origin.on("/n", Reply::ok("fine"));
    assert_eq!(closed.get("/n").await.status, 500, "closed: the transaction fails");
    assert_eq!(closed.origin.hits("/n"), 0);
    assert_eq!(
        take(&closed, &journal).await,
        seq(&["new_txn", "client_resp_headers:500", "client_resp_body:end", "resp_done:NONE", "log", "drop"]),
        "the other module's state sees the error response and is dropped once"
    );
    assert_eq!(closed.get("/n").await.status, 500, "the proxy keeps serving");
}

#[tokio::test]
async fn a_panic_in_client_resp_headers_fails_open_or_closed() {
    let open = Harness::forward_with(vec![panicky("client_resp_headers", FailurePolicy::Open)]).await;
    open.origin.on("/h", Reply::ok("delivered"));
    assert_eq!(open.get("/h").await.text(), "delivered");
    let closed = Harness::forward_with(vec![panicky("client_resp_headers", FailurePolicy::Closed)]).await;
    closed.origin.on("/h", Reply::ok("delivered"));
    let reply = closed.get("/h").await;
    assert_eq!(reply.status, 500, "closed, before the head went out: a 500");
    assert!(!reply.text().contains("delivered"));
}

#[tokio::test]
async fn a_panic_in_client_resp_body_fails_open_or_cuts_the_connection() {
    let open = Harness::forward_with(vec![panicky("client_resp_body", FailurePolicy::Open)]).await;
    open.origin.on("/b", Reply::ok("delivered"));
    let reply = open.get("/b").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "delivered");
    let closed = Harness::forward_with(vec![panicky("client_resp_body", FailurePolicy::Closed)]).await;
    // In pieces, so that the head and the first pieces are out before the last one fails.
    closed.origin.on("/b", Reply::ok("delivered in pieces").trickle(4));
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", closed.target("/b"));
    let raw = sluice_testkit::client::raw(closed.addr(), request.as_bytes()).await;
    assert!(raw.starts_with("HTTP/1.1 200"), "the head was already out: {raw}");
    assert!(raw.contains("transfer-encoding: chunked"), "{raw}");
    assert!(!raw.ends_with("0\r\n\r\n"), "closed, mid-body: the connection is cut: {raw:?}");
}
