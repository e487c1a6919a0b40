//! Module verdicts end to end, in the phases the contract lists them for: `Done` ends a
//! module's part in a transaction, `Respond` and `Defer` in request phases, the cache
//! lookup's overrides; body phases chain through three modules; log fields reach the access
//! log.

mod common;

use common::recorder::{miss_through, seq, take, Journal, Recorder};
use common::Harness;
use http::StatusCode;
use sluice_module::{
    BodyChunk, BodyEdits, FailurePolicy, Flow, LocalResponse, LookupOutcome, LookupOverride, Module, Txn, TxnInfo,
};
use sluice_proxy::config::Mode;
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::Arc;
use std::time::Duration;

/// A proxy with one recorder that answers `verdict()` in `phase`.
async fn scripted(phase: &'static str, verdict: fn() -> Flow) -> (Harness, Journal) {
    let journal = Journal::default();
    let h = Harness::forward_with(vec![Recorder::scripted(&journal, phase, verdict)]).await;
    (h, journal)
}

fn refuse() -> Flow {
    Flow::Respond(LocalResponse::text(StatusCode::FORBIDDEN, "refused\n"))
}

// ---- Done ----------------------------------------------------------------------------------------

#[tokio::test]
async fn done_stops_every_later_callback_of_that_module_resp_done_and_log_included() {
    let (h, journal) = scripted("client_resp_headers", || Flow::Done).await;
    h.origin.on("/done", Reply::ok("body"));
    assert_eq!(h.get("/done").await.text(), "body");
    assert_eq!(take(&h, &journal).await, miss_through("client_resp_headers:200", &["drop"]));
    let (h, journal) = scripted("req_headers", || Flow::Done).await;
    h.origin.on("/done", Reply::ok("body"));
    assert_eq!(h.get("/done").await.text(), "body");
    assert_eq!(take(&h, &journal).await, seq(&["new_txn", "req_headers", "drop"]));
}

// ---- Respond and Defer in request phases ---------------------------------------------------------

#[tokio::test]
async fn respond_from_cache_lookup_answers_without_the_origin() {
    let (h, journal) = scripted("cache_lookup", refuse).await;
    h.origin.on("/r", Reply::ok("origin"));
    let reply = h.get("/r").await;
    assert_eq!((reply.status.as_u16(), reply.text()), (403, "refused\n".to_owned()));
    assert_eq!(h.origin.hits("/r"), 0);
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Miss",
            "client_resp_headers:403",
            "client_resp_body:end",
            "resp_done:NONE",
            "log",
            "drop"
        ])
    );
}

#[tokio::test]
async fn respond_from_client_resp_headers_replaces_the_response_before_it_is_sent() {
    let (h, journal) = scripted("client_resp_headers", refuse).await;
    h.origin.on("/r", Reply::ok("the origin's body").header("cache-control", "max-age=60"));
    let reply = h.get("/r").await;
    assert_eq!((reply.status.as_u16(), reply.text()), (403, "refused\n".to_owned()), "head and body replaced");
    let calls = take(&h, &journal).await;
    assert!(calls.contains(&"client_resp_headers:200".to_owned()), "{calls:?}");
    assert!(!calls.iter().any(|c| c.starts_with("client_resp_body")), "no body phase on the answer: {calls:?}");
    assert_eq!(h.origin.hits("/r"), 1);
    assert_eq!(h.get("/r").await.status, 403, "the stored response is answered for again (a hit)");
    assert_eq!(h.origin.hits("/r"), 1, "it was stored: the answer was this client's only");
}

#[tokio::test]
async fn respond_from_req_out_answers_without_the_origin() {
    let (h, journal) = scripted("req_out", refuse).await;
    h.origin.on("/r", Reply::ok("origin"));
    assert_eq!(h.get("/r").await.status, 403);
    assert_eq!(h.send("POST", "/r", &[], Some("data")).await.status, 403, "on pass-through too");
    assert_eq!(h.origin.hits("/r"), 0);
    let calls = journal.take();
    assert_eq!(calls.iter().filter(|c| *c == "req_out").count(), 2, "{calls:?}");
    assert!(calls.windows(2).all(|w| w[0] != "req_out" || w[1] == "client_resp_headers:403"), "{calls:?}");
}

#[tokio::test]
async fn defer_from_cache_lookup_applies_the_verdict_its_work_yields() {
    let (h, _journal) = scripted("cache_lookup", || Flow::Defer {
        work: Box::pin(async {
            tokio::task::yield_now().await;
            Flow::Respond(LocalResponse::text(StatusCode::UNAVAILABLE_FOR_LEGAL_REASONS, "deferred\n"))
        }),
        deadline: Duration::from_secs(5),
    })
    .await;
    h.origin.on("/d", Reply::ok("origin"));
    let reply = h.get("/d").await;
    assert_eq!((reply.status.as_u16(), reply.text()), (451, "deferred\n".to_owned()));
    assert_eq!(h.origin.hits("/d"), 0);
}

#[tokio::test]
async fn defer_from_req_out_is_awaited_before_the_request_goes_out() {
    let (h, journal) = scripted("req_out", || Flow::Defer {
        work: Box::pin(async {
            tokio::task::yield_now().await;
            Flow::Continue
        }),
        deadline: Duration::from_secs(5),
    })
    .await;
    h.origin.on("/d", Reply::ok("origin"));
    assert_eq!(h.get("/d").await.text(), "origin");
    let calls = take(&h, &journal).await;
    assert_eq!(calls[4..6], seq(&["req_out", "origin_resp_headers:200"]));

    let (h, _journal) = scripted("req_out", || Flow::Defer {
        work: Box::pin(futures_util::future::pending()),
        deadline: Duration::from_millis(20),
    })
    .await;
    h.origin.on("/d", Reply::ok("origin"));
    assert_eq!(h.get("/d").await.text(), "origin", "past the deadline, an open module is skipped");
}

// ---- cache lookup overrides ----------------------------------------------------------------------

/// Forces a miss on every hit.
#[derive(Default)]
struct ForceMissTxn;

impl Txn for ForceMissTxn {
    fn cache_lookup(&mut self, _: &TxnInfo, outcome: LookupOutcome, decision: &mut LookupOverride) -> Flow {
        if outcome == LookupOutcome::Hit {
            *decision = LookupOverride::ForceMiss;
        }
        Flow::Continue
    }
}

struct Stateless<T>(std::marker::PhantomData<fn() -> T>);

impl<T: Txn + Default + 'static> Module for Stateless<T> {
    fn name(&self) -> &str {
        std::any::type_name::<T>()
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(T::default()))
    }
}

fn stateless<T: Txn + Default + 'static>() -> LoadedModule {
    LoadedModule { module: Arc::new(Stateless::<T>(std::marker::PhantomData)), on_error: FailurePolicy::Closed }
}

#[tokio::test]
async fn force_miss_fetches_and_stores_a_fresh_response() {
    let h = Harness::forward_with(vec![stateless::<ForceMissTxn>()]).await;
    h.origin.on("/f", Reply::ok("v1").header("Cache-Control", "max-age=600"));
    assert_eq!(h.get("/f").await.text(), "v1");
    h.origin.on("/f", Reply::ok("v2").header("Cache-Control", "max-age=600"));
    assert_eq!(h.get("/f").await.text(), "v2", "a fresh hit, forced to miss");
    assert_eq!(h.origin.hits("/f"), 2);
    let (_, _, stored) = h.proxy.state().content.read(&h.origin.url("/f")).unwrap().unwrap();
    assert_eq!(&stored[..], b"v2", "and what it fetched was stored");
}

// ---- body phases chain through three modules -----------------------------------------------------

/// Appends `[tag]` to the end of the origin response body (declared) and of the request
/// body (declared), and notes what it saw of each, whole.
struct Appender {
    tag: &'static str,
    journal: Journal,
}

struct AppenderTxn {
    tag: &'static str,
    journal: Journal,
    origin: Vec<u8>,
    request: Vec<u8>,
}

impl Txn for AppenderTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { request: true, origin_response: true, client_response: false }
    }
    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.request.extend_from_slice(chunk.data());
        if chunk.is_end() {
            self.journal.note(0, format!("{} req_body saw {}", self.tag, String::from_utf8_lossy(&self.request)));
            chunk.append(format!("[{}]", self.tag).as_bytes());
        }
        Flow::Continue
    }
    fn origin_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.origin.extend_from_slice(chunk.data());
        if chunk.is_end() {
            self.journal
                .note(0, format!("{} origin_resp_body saw {}", self.tag, String::from_utf8_lossy(&self.origin)));
            chunk.append(format!("[{}]", self.tag).as_bytes());
        }
        Flow::Continue
    }
}

impl Module for Appender {
    fn name(&self) -> &str {
        self.tag
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        let journal = self.journal.clone();
        Some(Box::new(AppenderTxn { tag: self.tag, journal, origin: Vec::new(), request: Vec::new() }))
    }
}

async fn appenders() -> (Harness, Journal) {
    let journal = Journal::default();
    let modules = ["a", "b", "c"]
        .map(|tag| LoadedModule {
            module: Arc::new(Appender { tag, journal: journal.clone() }),
            on_error: FailurePolicy::Closed,
        })
        .to_vec();
    (Harness::forward_with(modules).await, journal)
}

#[tokio::test]
async fn origin_resp_body_chains_through_three_modules_and_the_last_output_is_stored() {
    let (h, journal) = appenders().await;
    h.origin.on("/chain", Reply::ok("body").header("Cache-Control", "max-age=60"));
    assert_eq!(h.get("/chain").await.text(), "body[a][b][c]");
    h.eventually("the three modules to see the end", |_| journal.entries().len() == 3).await;
    assert_eq!(
        journal.take(),
        seq(&["a origin_resp_body saw body", "b origin_resp_body saw body[a]", "c origin_resp_body saw body[a][b]"])
    );
    let hit = h.get("/chain").await;
    assert_eq!(hit.text(), "body[a][b][c]", "the stored object is the last module's output");
    assert_eq!(hit.header("content-length"), "13");
    assert_eq!(h.origin.hits("/chain"), 1);
}

#[tokio::test]
async fn req_body_chains_through_three_modules() {
    let (h, journal) = appenders().await;
    h.origin.on("/upload", Reply::ok("ok"));
    assert_eq!(h.send("POST", "/upload", &[], Some("data")).await.text(), "ok[a][b][c]");
    assert_eq!(h.origin.last_request("/upload").unwrap().body, b"data[a][b][c]");
    let calls = journal.take();
    assert_eq!(calls[..3], seq(&["a req_body saw data", "b req_body saw data[a]", "c req_body saw data[a][b]"]));
}

// ---- log fields ----------------------------------------------------------------------------------

#[tokio::test]
async fn a_modules_log_fields_appear_in_the_access_log_line() {
    let log = common::LogFile::new();
    let log_path = log.path.clone();
    let journal = Journal::default();
    let h = Harness::build_with_modules(
        Mode::Forward,
        move |c, _| c.log.access_log = Some(log_path),
        vec![Recorder::loaded(&journal, FailurePolicy::Open)],
    )
    .await;
    h.origin.on("/logged", Reply::ok("x"));
    h.get("/logged").await;
    let line = log.lines(&h, 1).await.remove(0);
    assert!(line.contains(&h.origin.url("/logged")), "{line}");
    assert!(line.ends_with("recorder=1"), "the recorder's field ends the line: {line}");
}

#[tokio::test]
async fn a_local_answer_before_routing_is_logged_under_its_absolute_url() {
    let log = common::LogFile::new();
    let log_path = log.path.clone();
    let journal = Journal::default();
    let h = Harness::build_with_modules(
        Mode::Reverse,
        move |c, _| c.log.access_log = Some(log_path),
        vec![Recorder::scripted(&journal, "req_headers", refuse)],
    )
    .await;
    let reply = h.get_with("/denied?q=1", &[("host", "www.example.com")]).await;
    assert_eq!(reply.status, 403);
    let line = log.lines(&h, 1).await.remove(0);
    assert!(line.contains(" GET http://www.example.com/denied?q=1 "), "as Squid logs accelerated requests: {line}");
}
