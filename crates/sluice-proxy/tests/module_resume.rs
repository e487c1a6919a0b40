//! `Txn::resumed`: a module whose `Flow::Defer` is done gets the phase's subject back (the
//! head, the whole buffered body, the lookup decision) and writes its work's result into it
//! before the next module runs; deferring again from there is awaited in turn, panicking
//! there fails the module as configured. Also: a body phase called once with a whole
//! buffered body may defer.

mod common;

use bytes::Bytes;
use common::Harness;
use http::HeaderValue;
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, Module, Subject, Txn, TxnInfo};
use sluice_proxy::config::Mode;
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What deferred work produced, kept between the `Defer` and `resumed`.
type Result = Arc<Mutex<Option<Bytes>>>;

/// Defers on a CPU-pool job computing `f(input)` and keeps its result in `result`.
fn defer_on_pool(info: &TxnInfo, input: Bytes, result: &Result, f: fn(&[u8]) -> Vec<u8>) -> Flow {
    let job = info.cpu.spawn(move || f(&input)).expect("the pool has room");
    let result = Arc::clone(result);
    Flow::Defer {
        work: Box::pin(async move {
            *result.lock().unwrap() = Some(Bytes::from(job.await.expect("the job ran")));
            Flow::Continue
        }),
        deadline: Duration::from_secs(30),
    }
}

fn shout(data: &[u8]) -> Vec<u8> {
    let mut loud = data.to_ascii_uppercase();
    loud.push(b'!');
    loud
}

fn module(module: impl Module, on_error: FailurePolicy) -> LoadedModule {
    LoadedModule { module: Arc::new(module), on_error }
}

/// Buffers every request body and every response to a client, transforms the body on the CPU
/// pool (upper case, one byte longer), and writes the result into the body when resumed (and
/// a new `Content-Type` into the response head).
struct Shout;

struct ShoutTxn {
    result: Result,
}

impl Module for Shout {
    fn name(&self) -> &str {
        "shout"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(ShoutTxn { result: Result::default() }))
    }
}

impl Txn for ShoutTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { client_response: true, request: true, ..BodyEdits::default() }
    }
    fn req_headers(&mut self, _: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        if req.method == http::Method::POST {
            Flow::Buffer { max: 1 << 20 }
        } else {
            Flow::Continue
        }
    }
    fn req_body(&mut self, info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        defer_on_pool(info, chunk.data().clone(), &self.result, shout)
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        Flow::Buffer { max: 1 << 20 }
    }
    fn client_resp_body(&mut self, info: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        defer_on_pool(info, chunk.data().clone(), &self.result, shout)
    }
    fn resumed(&mut self, _: &TxnInfo, subject: Subject<'_>, deferred: Flow) -> Flow {
        let result = self.result.lock().unwrap().take().expect("the work's result");
        match subject {
            Subject::RequestBody(body) => body.replace(result),
            Subject::ResponseBody { head, body } => {
                body.replace(result);
                // The head is not sent yet: it changes with the body.
                head.headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/x-shouted"));
            }
            other => panic!("resumed with {other:?}, not a body"),
        }
        deferred
    }
}

#[tokio::test]
async fn a_buffered_response_body_transformed_on_the_cpu_pool_reaches_the_client_on_a_miss_and_a_hit() {
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, vec![module(Shout, FailurePolicy::Closed)]).await;
    let page = Reply::ok("origin body").header("cache-control", "max-age=60").header("content-type", "text/plain");
    h.origin.on("/page", page);
    for round in ["miss", "hit"] {
        let reply = h.get("/page").await;
        assert_eq!(reply.status, 200, "{round}");
        assert_eq!(reply.text(), "ORIGIN BODY!", "{round}");
        assert_eq!(reply.header("content-length"), "12", "{round}: the host frames the new length");
        assert_eq!(reply.header("content-type"), "text/x-shouted", "{round}: the head changed with the body");
    }
    assert_eq!(h.origin.hits("/page"), 1, "the second was a hit, transformed per client");
}

#[tokio::test]
async fn a_buffered_request_body_transformed_on_the_cpu_pool_reaches_the_origin() {
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, vec![module(Shout, FailurePolicy::Closed)]).await;
    h.origin.on("/upload", Reply::ok("stored"));
    let reply = h.send("POST", "/upload", &[], Some("quiet words")).await;
    assert_eq!(reply.status, 200);
    let seen = h.origin.last_request("/upload").expect("the origin got the request");
    assert_eq!(seen.body, b"QUIET WORDS!");
    assert_eq!(seen.header("content-length"), Some("12"));
}

/// Looks a value up asynchronously in both header phases and writes it into the head when
/// resumed: `x-looked-up` on the request, `x-resumed` on the response.
struct Lookup;

struct LookupTxn {
    result: Result,
}

impl Module for Lookup {
    fn name(&self) -> &str {
        "lookup"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(LookupTxn { result: Result::default() }))
    }
}

impl Txn for LookupTxn {
    fn req_headers(&mut self, info: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        defer_on_pool(info, Bytes::copy_from_slice(req.uri.path().as_bytes()), &self.result, |path| {
            [b"found:", path].concat()
        })
    }
    fn client_resp_headers(&mut self, info: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        defer_on_pool(info, Bytes::copy_from_slice(resp.status.as_str().as_bytes()), &self.result, <[u8]>::to_vec)
    }
    fn resumed(&mut self, _: &TxnInfo, subject: Subject<'_>, deferred: Flow) -> Flow {
        let value = HeaderValue::from_maybe_shared(self.result.lock().unwrap().take().unwrap()).unwrap();
        match subject {
            Subject::Request(req) => req.headers.insert("x-looked-up", value),
            Subject::Response(resp) => resp.headers.insert("x-resumed", value),
            other => panic!("resumed with {other:?}"),
        };
        deferred
    }
}

/// Notes whether the request it sees at `req_headers` carries `x-looked-up` (in the response,
/// as `x-witness`): the module after a resumed one sees the resumed module's edit.
struct Witness;

struct WitnessTxn {
    saw: bool,
}

impl Module for Witness {
    fn name(&self) -> &str {
        "witness"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(WitnessTxn { saw: false }))
    }
}

impl Txn for WitnessTxn {
    fn req_headers(&mut self, _: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        self.saw = req.headers.contains_key("x-looked-up");
        Flow::Continue
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        resp.headers.insert("x-witness", HeaderValue::from_static(if self.saw { "saw" } else { "missed" }));
        Flow::Continue
    }
}

#[tokio::test]
async fn deferred_work_is_written_into_the_heads_when_resumed_before_the_next_module_runs() {
    let modules = vec![module(Lookup, FailurePolicy::Closed), module(Witness, FailurePolicy::Closed)];
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, modules).await;
    h.origin.on("/item", Reply::ok("item"));
    let reply = h.get("/item").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-resumed"), "200", "the response head, resumed");
    assert_eq!(reply.header("x-witness"), "saw", "the next module saw the resumed edit");
    let seen = h.origin.last_request("/item").expect("the origin got the request");
    assert_eq!(seen.header("x-looked-up"), Some("found:/item"), "the request head, resumed");
}

/// Defers at `req_headers`, then defers twice more from `resumed`, counting the steps into
/// the request's `x-steps`.
struct Steps;

struct StepsTxn {
    steps: u32,
}

impl Module for Steps {
    fn name(&self) -> &str {
        "steps"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(StepsTxn { steps: 0 }))
    }
}

fn next_step() -> Flow {
    Flow::Defer { work: Box::pin(async { Flow::Continue }), deadline: Duration::from_secs(30) }
}

impl Txn for StepsTxn {
    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        next_step()
    }
    fn resumed(&mut self, _: &TxnInfo, subject: Subject<'_>, deferred: Flow) -> Flow {
        self.steps += 1;
        if self.steps < 3 {
            return next_step();
        }
        let Subject::Request(req) = subject else { panic!("resumed with {subject:?}") };
        req.headers.insert("x-steps", HeaderValue::from(self.steps));
        deferred
    }
}

#[tokio::test]
async fn a_deferral_from_resumed_is_awaited_and_resumed_in_turn() {
    let modules = vec![module(Steps, FailurePolicy::Closed), module(Lookup, FailurePolicy::Closed)];
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, modules).await;
    h.origin.on("/s", Reply::ok("s"));
    assert_eq!(h.get("/s").await.status, 200);
    let seen = h.origin.last_request("/s").expect("the origin got the request");
    assert_eq!(seen.header("x-steps"), Some("3"), "three rounds of work, one module");
    assert_eq!(seen.header("x-looked-up"), Some("found:/s"), "the next module ran after them");
}

/// Defers at `req_headers`, then panics when resumed.
struct Panicky;

struct PanickyTxn;

impl Module for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(PanickyTxn))
    }
}

impl Txn for PanickyTxn {
    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        next_step()
    }
    fn resumed(&mut self, _: &TxnInfo, _: Subject<'_>, _: Flow) -> Flow {
        panic!("the module panics when resumed");
    }
}

#[tokio::test]
async fn panicking_when_resumed_fails_the_module_as_configured() {
    let closed = vec![module(Panicky, FailurePolicy::Closed)];
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, closed).await;
    h.origin.on("/x", Reply::ok("x"));
    assert_eq!(h.get("/x").await.status, 500, "closed");
    assert_eq!(h.origin.hits("/x"), 0, "closed: the origin is not asked");

    let open = vec![module(Panicky, FailurePolicy::Open), module(Witness, FailurePolicy::Closed)];
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, open).await;
    h.origin.on("/x", Reply::ok("x"));
    let reply = h.get("/x").await;
    assert_eq!(reply.status, 200, "open");
    assert_eq!(reply.text(), "x");
    assert_eq!(reply.header("x-witness"), "missed", "the modules after it ran");
}

/// Buffers the response, then defers on its whole body with work that never ends; notes when
/// the work starts, when it is dropped, and when the state is dropped.
struct Stall {
    notes: Notes,
}

type Notes = Arc<Mutex<Vec<&'static str>>>;

struct StallTxn {
    notes: Notes,
}

/// Notes "work dropped" when the deferred work is dropped (cancelled).
struct NoteOnDrop(Notes);

impl Drop for NoteOnDrop {
    fn drop(&mut self) {
        self.0.lock().unwrap().push("work dropped");
    }
}

impl Module for Stall {
    fn name(&self) -> &str {
        "stall"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(StallTxn { notes: Arc::clone(&self.notes) }))
    }
}

impl Txn for StallTxn {
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        Flow::Buffer { max: 1 << 20 }
    }
    fn client_resp_body(&mut self, _: &TxnInfo, _: &mut BodyChunk) -> Flow {
        let guard = NoteOnDrop(Arc::clone(&self.notes));
        Flow::Defer {
            work: Box::pin(async move {
                guard.0.lock().unwrap().push("work started");
                futures_util::future::pending::<()>().await;
                drop(guard);
                Flow::Continue
            }),
            deadline: Duration::from_secs(60),
        }
    }
}

impl Drop for StallTxn {
    fn drop(&mut self) {
        self.notes.lock().unwrap().push("state dropped");
    }
}

#[tokio::test]
async fn a_client_that_leaves_during_a_body_defer_cancels_the_work_and_drops_the_state_once() {
    use tokio::io::AsyncWriteExt;
    let notes = Notes::default();
    let stall = module(Stall { notes: Arc::clone(&notes) }, FailurePolicy::Closed);
    let h = Harness::build_with_modules(Mode::Reverse, |_, _| {}, vec![stall]).await;
    h.origin.on("/slow", Reply::ok("body"));
    let mut client = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    client.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    h.eventually("the body phase to defer", |_| notes.lock().unwrap().contains(&"work started")).await;
    drop(client);
    h.eventually("the state to drop", |_| notes.lock().unwrap().contains(&"state dropped")).await;
    let notes = notes.lock().unwrap().clone();
    assert_eq!(notes, ["work started", "work dropped", "state dropped"], "each once, the work first");
}
