//! Module failures end to end: a `Buffer` that overflows fails the transaction open or
//! closed, as configured for the module that failed, and only that module; the other modules
//! keep their phases, and the proxy lives on.

mod common;

use common::recorder::{Journal, Recorder};
use common::Harness;
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, Module, Txn, TxnInfo};
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::Arc;

fn seq(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Takes the journal once the transaction has ended (its state dropped).
async fn take(h: &Harness, journal: &Journal) -> Vec<String> {
    h.eventually("the transaction state to drop", |_| journal.entries().last().is_some_and(|l| l == "drop")).await;
    journal.take()
}

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
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Miss",
            "resolve",
            "req_out",
            "origin_resp_headers:200",
            "client_resp_headers:200",
            "client_resp_body:end",
            "resp_done:TCP_MISS",
            "log",
            "drop"
        ]),
        "the other module keeps its body phase, resp_done and log"
    );
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
