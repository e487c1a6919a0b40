//! The host frames what it stores and sends (docs/modules.md, "Framing is the host's"): a
//! change of method or status it could not frame a body for fails the transaction, and a
//! module's answer or failure in a body phase ends the message cleanly: a local answer while
//! the request body streams abandons the request, a body a module failed open on part-way is
//! not stored. Real sockets on 127.0.0.1, a scripted origin. (Framing fields written by
//! untrusted modules: sluice-modules' `wasm_framing.rs`, sluice-extproc's `extproc.rs`.)

mod common;

use common::{cache_status, Harness};
use http::{Method, StatusCode};
use sluice_module::{BodyChunk, FailurePolicy, Flow, LocalResponse, Module, Txn, TxnInfo};
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::Arc;

/// What the module does, phase by phase.
#[derive(Clone, Copy, Default)]
struct Script {
    req_headers: Option<fn(&mut http::request::Parts)>,
    origin_resp_headers: Option<fn(&mut http::response::Parts)>,
    client_resp_headers: Option<fn(&mut http::response::Parts)>,
    req_body: Option<fn(&mut BodyChunk) -> Flow>,
    origin_resp_body: Option<fn(&mut BodyChunk) -> Flow>,
}

struct Scripted(Script);

impl Txn for Scripted {
    fn req_headers(&mut self, _: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        self.0.req_headers.inspect(|edit| edit(req));
        Flow::Continue
    }
    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.0.req_body.map_or(Flow::Continue, |run| run(chunk))
    }
    fn origin_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        self.0.origin_resp_headers.inspect(|edit| edit(resp));
        Flow::Continue
    }
    fn origin_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.0.origin_resp_body.map_or(Flow::Continue, |run| run(chunk))
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        self.0.client_resp_headers.inspect(|edit| edit(resp));
        Flow::Continue
    }
}

impl Module for Script {
    fn name(&self) -> &str {
        "scripted"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(Scripted(*self)))
    }
}

async fn proxy(script: Script, on_error: FailurePolicy) -> Harness {
    Harness::forward_with(vec![LoadedModule { module: Arc::new(script), on_error }]).await
}

#[tokio::test]
async fn a_method_changed_to_head_or_a_status_without_a_body_fails_the_transaction() {
    fn to_head(req: &mut http::request::Parts) {
        req.method = Method::HEAD;
    }
    let h = proxy(Script { req_headers: Some(to_head), ..Script::default() }, FailurePolicy::Open).await;
    h.origin.on("/m", Reply::ok("a body the client asked for"));
    assert_eq!(h.get("/m").await.status, 500, "the answer could not be framed for the GET sent");
    assert_eq!(h.origin.hits("/m"), 0);
    assert_eq!(h.send("HEAD", "/m", &[], None).await.status, 200, "a HEAD stays a HEAD");

    fn to_no_content(resp: &mut http::response::Parts) {
        resp.status = StatusCode::NO_CONTENT;
    }
    let h = proxy(Script { origin_resp_headers: Some(to_no_content), ..Script::default() }, FailurePolicy::Open).await;
    h.origin.on("/n", Reply::ok("a body a 204 cannot carry").header("cache-control", "max-age=60"));
    assert_eq!(h.get("/n").await.status, 500);
    assert_eq!(h.get("/n").await.status, 500, "nothing was stored");
    assert_eq!(h.origin.hits("/n"), 2);
}

#[tokio::test]
async fn a_local_answer_while_the_request_body_streams_abandons_the_request() {
    fn refuse(_: &mut BodyChunk) -> Flow {
        Flow::Respond(LocalResponse::text(StatusCode::FORBIDDEN, "not this upload\n"))
    }
    let h = proxy(Script { req_body: Some(refuse), ..Script::default() }, FailurePolicy::Closed).await;
    h.origin.on("/up", Reply::ok("stored upload"));
    let reply = h.send("POST", "/up", &[], Some("forbidden content")).await;
    assert_eq!((reply.status.as_u16(), reply.text()), (403, "not this upload\n".to_owned()));
    assert!(
        h.origin.requests("/up").iter().all(|r| r.body.len() < "forbidden content".len()),
        "the origin never saw the whole request"
    );
}

#[tokio::test]
async fn a_body_a_module_failed_open_on_part_way_reaches_the_client_but_is_not_stored() {
    fn shout_then_fail(chunk: &mut BodyChunk) -> Flow {
        assert!(!chunk.is_end(), "a module bug on the last piece");
        let upper = chunk.data().to_ascii_uppercase();
        chunk.replace(upper);
        Flow::Continue
    }
    let h = proxy(Script { origin_resp_body: Some(shout_then_fail), ..Script::default() }, FailurePolicy::Open).await;
    h.origin.on("/f", Reply::ok("first piece, second piece").header("cache-control", "max-age=60").trickle(12));
    let reply = h.get("/f").await;
    assert_eq!(reply.status, 200);
    let text = reply.text();
    assert!(text.eq_ignore_ascii_case("first piece, second piece"), "whole, edited up to the failure: {text}");
    let again = h.get("/f").await;
    assert!(!cache_status(&again).contains("hit"), "{}", cache_status(&again));
    assert_eq!(h.origin.hits("/f"), 2, "the part-edited body was not stored");
}
