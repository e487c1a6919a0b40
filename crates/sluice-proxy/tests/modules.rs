//! The module contract end to end: every phase fires when documented and the state drops
//! exactly once on every path; ordering and chaining; verdicts (Respond, Done, Buffer,
//! Defer); failure policies; the cache API from a phase.

mod common;

use common::recorder::{miss_through, seq, take, Journal, Recorder, MISS};
use common::Harness;
use http::{HeaderValue, StatusCode};
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, LocalResponse, Module, Txn, TxnInfo};
use sluice_proxy::config::Mode;
use sluice_proxy::LoadedModule;
use sluice_testkit::{client, Reply};
use std::sync::Arc;
use std::time::Duration;

fn loaded(module: impl Module, on_error: FailurePolicy) -> LoadedModule {
    LoadedModule { module: Arc::new(module), on_error }
}

/// A module whose per-transaction state is a fresh `T`.
struct Stateless<T> {
    name: &'static str,
    state: std::marker::PhantomData<fn() -> T>,
}

impl<T: Txn + Default + 'static> Module for Stateless<T> {
    fn name(&self) -> &str {
        self.name
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(T::default()))
    }
}

/// Loads a [`Stateless`] module of state `T`.
fn stateless<T: Txn + Default + 'static>(name: &'static str, on_error: FailurePolicy) -> LoadedModule {
    loaded(Stateless::<T> { name, state: std::marker::PhantomData }, on_error)
}

async fn recorded(mode: Mode) -> (Harness, Journal) {
    let journal = Journal::default();
    let h = Harness::build_with_modules(mode, |_, _| {}, vec![Recorder::loaded(&journal, FailurePolicy::Open)]).await;
    (h, journal)
}

// ---- the hook x path matrix ------------------------------------------------------------------

#[tokio::test]
async fn phases_on_a_miss_then_a_fresh_hit() {
    let (h, journal) = recorded(Mode::Forward).await;
    h.origin.on("/m", Reply::ok("body").header("Cache-Control", "max-age=60"));
    h.get("/m").await;
    assert_eq!(take(&h, &journal).await, seq(&MISS));
    h.get("/m").await;
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Hit",
            "client_resp_headers:200",
            "client_resp_body:end",
            "resp_done:TCP_MEM_HIT",
            "log",
            "drop"
        ])
    );
}

#[tokio::test]
async fn phases_on_a_stale_revalidation_and_a_304_to_the_client() {
    let (h, journal) = recorded(Mode::Forward).await;
    h.origin.on("/s", Reply::ok("body").header("Cache-Control", "max-age=10").header("ETag", "\"e\"").validating());
    h.get("/s").await;
    take(&h, &journal).await;
    h.advance(20);
    h.get("/s").await;
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Stale",
            "resolve",
            "req_out",
            "origin_resp_headers:304",
            "client_resp_headers:200",
            "client_resp_body:end",
            "resp_done:TCP_REFRESH_UNMODIFIED",
            "log",
            "drop"
        ])
    );
    let reply = h.get_with("/s", &[("If-None-Match", "\"e\"")]).await;
    assert_eq!(reply.status, 304);
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Hit",
            "client_resp_headers:304",
            "resp_done:TCP_IMS_HIT",
            "log",
            "drop"
        ])
    );
}

/// Tags the stored response in `origin_resp_headers` with who fetched it: `client` or
/// `background`.
#[derive(Default)]
struct OriginTaggerTxn;

impl Txn for OriginTaggerTxn {
    fn origin_resp_headers(&mut self, info: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        let by = if info.background { "background" } else { "client" };
        resp.headers.insert("x-fetched-by", HeaderValue::from_static(by));
        Flow::Continue
    }
}

#[tokio::test]
async fn phases_on_a_stale_while_revalidate_hit_and_its_background_revalidation() {
    let journal = Journal::default();
    let modules = vec![
        Recorder::loaded(&journal, FailurePolicy::Open),
        stateless::<OriginTaggerTxn>("origin-tagger", FailurePolicy::Open),
    ];
    let h = Harness::forward_with(modules).await;
    let cc = "max-age=10, stale-while-revalidate=60";
    h.origin.on("/swr", Reply::ok("v1").header("Cache-Control", cc));
    assert_eq!(h.get("/swr").await.header("x-fetched-by"), "client");
    take(&h, &journal).await;
    h.origin.on("/swr", Reply::ok("v2").header("Cache-Control", cc));
    h.advance(20);
    let stale = h.get("/swr").await;
    assert_eq!((stale.text(), stale.header("x-fetched-by")), ("v1".to_owned(), "client"));
    h.eventually("the client's and the background transaction to end", |_| journal.drops() == 2).await;
    let txns = journal.take_by_txn();
    assert_eq!(
        txns,
        [
            seq(&[
                "new_txn",
                "req_headers",
                "cache_lookup:Stale",
                "client_resp_headers:200",
                "client_resp_body:end",
                "resp_done:TCP_STALE_HIT",
                "log",
                "drop"
            ]),
            seq(&[
                "new_txn:background",
                "resolve",
                "req_out",
                "origin_resp_headers:200",
                "origin_resp_body:end",
                "resp_done:TCP_REFRESH_MODIFIED",
                "log",
                "drop"
            ]),
        ]
    );
    let hit = h.get("/swr").await;
    assert_eq!(hit.text(), "v2", "the revalidation stored the new response");
    assert_eq!(hit.header("x-fetched-by"), "background", "with the modules' origin_resp_headers edit");
    assert_eq!(h.origin.hits("/swr"), 2);
}

#[tokio::test]
async fn a_client_that_leaves_during_a_fill_gets_resp_done_and_log_after_the_fill() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (h, journal) = recorded(Mode::Forward).await;
    // An origin that sends half the body, then the rest when told to.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            conn.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let reply = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nCache-Control: max-age=60\r\n\r\nhello";
        conn.write_all(reply.as_bytes()).await.unwrap();
        released.await.unwrap();
        conn.write_all(b"world").await.unwrap();
        conn
    });
    let url = format!("http://{origin}/fill");
    let mut client = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    client.write_all(format!("GET {url} HTTP/1.1\r\nHost: {origin}\r\n\r\n").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"hello") {
        let mut buf = [0u8; 1024];
        let n = client.read(&mut buf).await.unwrap();
        assert!(n > 0, "the proxy closed early");
        got.extend_from_slice(&buf[..n]);
    }
    drop(client);
    h.eventually("the client's transaction to end", |h| {
        h.proxy.state().metrics.aborted.load(std::sync::atomic::Ordering::Relaxed) == 1
    })
    .await;
    assert!(!journal.entries().iter().any(|c| c.starts_with("resp_done")), "resp_done waits for the fill");
    release.send(()).unwrap();
    assert_eq!(
        take(&h, &journal).await,
        miss_through("origin_resp_body:end", &["resp_done:TCP_MISS:aborted", "log", "drop"])
    );
    let _conn = server.await.unwrap();
    let hit = sluice_testkit::client::get(h.addr(), &url, &[]).await;
    assert_eq!(hit.text(), "helloworld", "the fill went on and was stored");
}

#[tokio::test]
async fn phases_on_head_and_on_a_bodyless_204() {
    let (h, journal) = recorded(Mode::Forward).await;
    h.origin.on("/head", Reply::ok("body").header("Cache-Control", "max-age=60"));
    h.origin.on("/204", Reply::status(204, ""));
    h.get("/head").await;
    take(&h, &journal).await;
    h.send("HEAD", "/head", &[], None).await;
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Hit",
            "client_resp_headers:200",
            "resp_done:TCP_MEM_HIT",
            "log",
            "drop"
        ])
    );
    h.get("/204").await;
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Miss",
            "resolve",
            "req_out",
            "origin_resp_headers:204",
            "client_resp_headers:204",
            "resp_done:TCP_MISS",
            "log",
            "drop"
        ])
    );
}

#[tokio::test]
async fn phases_on_a_request_with_a_body() {
    let (h, journal) = recorded(Mode::Forward).await;
    h.origin.on("/post", Reply::ok("done"));
    let reply = h.send("POST", "/post", &[], Some("a request body")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(h.origin.last_request("/post").unwrap().body, b"a request body");
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "resolve",
            "req_out",
            "req_body:end",
            "origin_resp_headers:200",
            "client_resp_headers:200",
            "origin_resp_body:end",
            "client_resp_body:end",
            "resp_done:TCP_MISS",
            "log",
            "drop"
        ])
    );
    // Without a body, no req_body call.
    h.send("POST", "/post", &[], None).await;
    assert!(!take(&h, &journal).await.iter().any(|p| p.starts_with("req_body")));
}

#[tokio::test]
async fn phases_on_an_origin_error_and_on_connect() {
    let (h, journal) = {
        let journal = Journal::default();
        let module = Recorder::loaded(&journal, FailurePolicy::Open);
        let h = Harness::build_with_modules(
            Mode::Forward,
            |c, origin| c.access.connect_ports = vec![origin.port()],
            vec![module],
        )
        .await;
        (h, journal)
    };
    h.origin.on("/err", Reply::ok("").close_before_head());
    assert_eq!(h.get("/err").await.status, 502);
    assert_eq!(
        take(&h, &journal).await,
        seq(&[
            "new_txn",
            "req_headers",
            "cache_lookup:Miss",
            "resolve",
            "req_out",
            "client_resp_headers:502",
            "client_resp_body:end",
            "resp_done:TCP_MISS",
            "log",
            "drop"
        ])
    );
    h.origin.on("/tunnel", Reply::ok("t"));
    let proxy = format!("http://{}", h.addr());
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10", "-p", "-x", &proxy, &h.origin.url("/tunnel")])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "t");
    assert_eq!(take(&h, &journal).await, seq(&["new_txn", "req_headers", "resp_done:TCP_TUNNEL", "log", "drop"]));
}

// ---- ordering and chaining -------------------------------------------------------------------

struct Tagger {
    tag: &'static str,
}

struct TaggerTxn {
    tag: &'static str,
}

fn append(headers: &mut http::HeaderMap, name: &'static str, tag: &str) {
    let value = match headers.get(name).and_then(|v| v.to_str().ok()) {
        Some(prior) => format!("{prior},{tag}"),
        None => tag.to_owned(),
    };
    headers.insert(name, HeaderValue::from_str(&value).unwrap());
}

impl Txn for TaggerTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { client_response: true, ..BodyEdits::default() }
    }
    fn req_headers(&mut self, _: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        append(&mut req.headers, "x-chain", self.tag);
        Flow::Continue
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        append(&mut resp.headers, "x-chain", self.tag);
        Flow::Continue
    }
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if chunk.is_end() {
            chunk.append(format!("[{}]", self.tag).as_bytes());
        }
        Flow::Continue
    }
}

impl Module for Tagger {
    fn name(&self) -> &str {
        self.tag
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(TaggerTxn { tag: self.tag }))
    }
}

#[tokio::test]
async fn three_modules_run_in_order_and_body_phases_chain() {
    let modules = ["a", "b", "c"].map(|tag| loaded(Tagger { tag }, FailurePolicy::Open)).to_vec();
    let h = Harness::forward_with(modules).await;
    h.origin.on("/chain", Reply::ok("body").header("Cache-Control", "max-age=60"));
    let miss = h.get("/chain").await;
    assert_eq!(h.origin.last_request("/chain").unwrap().header("x-chain"), Some("a,b,c"));
    assert_eq!(miss.header("x-chain"), "a,b,c");
    assert_eq!(miss.text(), "body[a][b][c]");
    assert_eq!(miss.header("content-length"), "", "a body modules may change is sent chunked");
    let hit = h.get("/chain").await;
    assert_eq!(hit.text(), "body[a][b][c]", "client body phases run on hits too");
    assert_eq!(h.origin.hits("/chain"), 1, "and the stored body is the origin's");
    // RFC 9110 §8.6: a HEAD's Content-Length is the GET's, which the modules may change.
    let head = h.send("HEAD", "/chain", &[], None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("x-chain"), "a,b,c");
    assert_eq!(head.header("content-length"), "", "the stored length is not what a GET gets now");
    h.origin.on("/chain-miss", Reply::ok("body"));
    let head = h.send("HEAD", "/chain-miss", &[], None).await;
    assert_eq!(head.header("content-length"), "", "on a miss either");
}

// ---- verdicts ----------------------------------------------------------------------------------

struct Scripted {
    name: &'static str,
    on_req_headers: fn(&mut http::request::Parts) -> Flow,
}

struct ScriptedTxn {
    on_req_headers: fn(&mut http::request::Parts) -> Flow,
}

impl Txn for ScriptedTxn {
    fn req_headers(&mut self, _: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        (self.on_req_headers)(req)
    }
}

impl Module for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(ScriptedTxn { on_req_headers: self.on_req_headers }))
    }
}

#[tokio::test]
async fn a_module_can_answer_locally() {
    let module =
        Scripted { name: "deny", on_req_headers: |_| Flow::Respond(LocalResponse::text(StatusCode::FORBIDDEN, "no")) };
    let h = Harness::forward_with(vec![loaded(module, FailurePolicy::Open)]).await;
    let reply = h.get("/x").await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "no");
    assert_eq!(h.origin.hits("/x"), 0);
}

#[tokio::test]
async fn panics_fail_open_or_closed_and_the_proxy_lives_on() {
    let panicky = || Scripted { name: "panicky", on_req_headers: |_| panic!("module bug") };
    let open = Harness::forward_with(vec![loaded(panicky(), FailurePolicy::Open)]).await;
    open.origin.on("/p", Reply::ok("fine"));
    assert_eq!(open.get("/p").await.text(), "fine");
    let closed = Harness::forward_with(vec![loaded(panicky(), FailurePolicy::Closed)]).await;
    closed.origin.on("/p", Reply::ok("fine"));
    assert_eq!(closed.get("/p").await.status, 500);
    assert_eq!(closed.get("/p").await.status, 500, "the proxy keeps serving");
    assert_eq!(closed.origin.hits("/p"), 0);
}

#[tokio::test]
async fn deferred_work_is_awaited_and_its_deadline_enforced() {
    let slow_header = Scripted {
        name: "defer",
        on_req_headers: |_| Flow::Defer {
            work: Box::pin(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Flow::Continue
            }),
            deadline: Duration::from_secs(5),
        },
    };
    let h = Harness::forward_with(vec![loaded(slow_header, FailurePolicy::Closed)]).await;
    h.origin.on("/d", Reply::ok("done"));
    assert_eq!(h.get("/d").await.text(), "done");

    let never = || Scripted {
        name: "never",
        on_req_headers: |_| Flow::Defer {
            work: Box::pin(futures_util::future::pending()),
            deadline: Duration::from_millis(50),
        },
    };
    let open = Harness::forward_with(vec![loaded(never(), FailurePolicy::Open)]).await;
    open.origin.on("/d", Reply::ok("went on"));
    assert_eq!(open.get("/d").await.text(), "went on");
    let closed = Harness::forward_with(vec![loaded(never(), FailurePolicy::Closed)]).await;
    assert_eq!(closed.get("/d").await.status, 500);
}

#[tokio::test]
async fn a_client_that_leaves_during_defer_cancels_it_and_drops_the_state_once() {
    let journal = Journal::default();
    struct Waiter {
        journal: Journal,
    }
    struct WaiterTxn {
        journal: Journal,
    }
    impl Txn for WaiterTxn {
        fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
            Flow::Defer { work: Box::pin(futures_util::future::pending()), deadline: Duration::from_secs(60) }
        }
    }
    impl Drop for WaiterTxn {
        fn drop(&mut self) {
            self.journal.note(0, "drop");
        }
    }
    impl Module for Waiter {
        fn name(&self) -> &str {
            "waiter"
        }
        fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
            Some(Box::new(WaiterTxn { journal: self.journal.clone() }))
        }
    }
    let module = loaded(Waiter { journal: journal.clone() }, FailurePolicy::Open);
    let h = Harness::forward_with(vec![module]).await;
    {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
        let request = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url("/w"));
        stream.write_all(request.as_bytes()).await.unwrap();
        h.eventually("the request to be in the proxy", |h| {
            h.proxy.state().metrics.client_connections.load(std::sync::atomic::Ordering::Relaxed) == 1
        })
        .await;
    }
    h.eventually("the abandoned transaction's state to drop", |_| !journal.entries().is_empty()).await;
    assert_eq!(journal.entries(), seq(&["drop"]));
    assert_eq!(h.origin.hits("/w"), 0);
}

#[derive(Default)]
struct UppercaseTxn;

impl Txn for UppercaseTxn {
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        Flow::Buffer { max: 1 << 20 }
    }
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        assert!(chunk.is_end(), "a buffered body arrives whole");
        let upper = chunk.data().to_ascii_uppercase();
        chunk.replace(upper);
        Flow::Continue
    }
}

#[tokio::test]
async fn buffer_hands_the_whole_body_and_the_host_fixes_content_length() {
    let h = Harness::forward_with(vec![stateless::<UppercaseTxn>("uppercase", FailurePolicy::Closed)]).await;
    h.origin.on("/buf", Reply::ok("a".repeat(5000)).chunked());
    let reply = h.get("/buf").await;
    assert_eq!(reply.text(), "A".repeat(5000));
    assert_eq!(reply.header("content-length"), "5000");
}

#[derive(Default)]
struct SneakyTxn;

impl Txn for SneakyTxn {
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        chunk.replace("changed without saying so");
        Flow::Continue
    }
}

#[tokio::test]
async fn a_module_that_only_reads_bodies_keeps_content_length() {
    let (h, journal) = recorded(Mode::Forward).await;
    h.origin.on("/len", Reply::ok("four").header("Cache-Control", "max-age=60"));
    let miss = h.get("/len").await;
    take(&h, &journal).await;
    let hit = h.get("/len").await;
    take(&h, &journal).await;
    for reply in [miss, hit] {
        assert_eq!(reply.text(), "four");
        assert_eq!(reply.header("content-length"), "4", "observed bodies keep their length");
    }
}

#[derive(Default)]
struct ShoutTxn;

impl Txn for ShoutTxn {
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let upper = chunk.data().to_ascii_uppercase();
        chunk.replace(upper);
        Flow::Continue
    }
}

#[tokio::test]
async fn an_undeclared_same_length_body_change_keeps_content_length() {
    let h = Harness::forward_with(vec![stateless::<ShoutTxn>("shout", FailurePolicy::Closed)]).await;
    h.origin.on("/shout", Reply::ok("four").header("Cache-Control", "max-age=60"));
    let reply = h.get("/shout").await;
    assert_eq!(reply.text(), "FOUR");
    assert_eq!(reply.header("content-length"), "4");
}

#[tokio::test]
async fn an_undeclared_body_change_cuts_the_response_instead_of_corrupting_it() {
    let h = Harness::forward_with(vec![stateless::<SneakyTxn>("sneaky", FailurePolicy::Open)]).await;
    h.origin.on("/s", Reply::ok("four").header("Cache-Control", "max-age=60"));
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", h.target("/s"));
    let raw = sluice_testkit::client::raw(h.addr(), request.as_bytes()).await;
    assert!(raw.contains("content-length: 4"), "{raw}");
    assert!(!raw.contains("changed without saying so"), "{raw}");
}

#[tokio::test]
async fn a_range_request_gets_the_whole_body_when_a_module_may_change_it() {
    let h = Harness::forward_with(vec![loaded(Tagger { tag: "a" }, FailurePolicy::Open)]).await;
    h.origin.on("/range", Reply::ok("0123456789").header("Cache-Control", "max-age=60"));
    h.get("/range").await;
    let hit = h.get_with("/range", &[("Range", "bytes=0-3")]).await;
    assert_eq!(hit.status, 200, "no 206 whose Content-Range the edit would break");
    assert_eq!(hit.text(), "0123456789[a]");
    assert_eq!(hit.header("content-range"), "");
    // Not stored (hit-for-pass next time): the origin is not asked for a range either.
    h.origin.on("/pass", Reply::ok("whole").header("Cache-Control", "no-store"));
    h.get("/pass").await;
    let pass = h.get_with("/pass", &[("Range", "bytes=0-1")]).await;
    assert_eq!(pass.text(), "whole[a]");
    assert_eq!(h.origin.last_request("/pass").unwrap().header("range"), None);

    let reader = Harness::forward_with(vec![stateless::<ShoutTxn>("shout", FailurePolicy::Open)]).await;
    reader.origin.on("/range", Reply::ok("0123456789").header("Cache-Control", "max-age=60"));
    reader.get("/range").await;
    let partial = reader.get_with("/range", &[("Range", "bytes=0-3")]).await;
    assert_eq!(partial.status, 206, "a module that does not declare edits keeps ranges");
    assert_eq!(partial.text(), "0123");
    assert_eq!(partial.header("content-range"), "bytes 0-3/10");
}

// ---- content management from a phase -------------------------------------------------------------

#[derive(Default)]
struct PurgerTxn;

impl Txn for PurgerTxn {
    fn req_headers(&mut self, info: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        if req.headers.contains_key("x-purge") {
            let removed = info.cache.delete(&req.uri.to_string()).unwrap_or(0);
            return Flow::Respond(LocalResponse::text(StatusCode::OK, format!("removed {removed}")));
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn the_cache_api_is_reachable_from_a_phase() {
    let h = Harness::forward_with(vec![stateless::<PurgerTxn>("purger", FailurePolicy::Open)]).await;
    h.origin.on("/c", Reply::ok("x").header("Cache-Control", "max-age=600"));
    h.get("/c").await;
    let info = h.proxy.state().content.query(&h.origin.url("/c")).unwrap();
    assert_eq!(info.len(), 1);
    assert!(info[0].is_fresh());
    assert_eq!(h.get_with("/c", &[("X-Purge", "1")]).await.text(), "removed 1");
    h.get("/c").await;
    assert_eq!(h.origin.hits("/c"), 2);
}

#[tokio::test]
async fn builtin_modules_are_configured_by_name() {
    let add = sluice_modules::build("add-headers", &toml::from_str("headers = { X-Test = \"yes\" }").unwrap()).unwrap();
    let h = Harness::forward_with(vec![LoadedModule { module: add, on_error: FailurePolicy::Open }]).await;
    h.origin.on("/b", Reply::ok("x"));
    assert_eq!(h.get("/b").await.header("x-test"), "yes");
    let copy = sluice_modules::build("body-copy", &toml::Table::new()).unwrap();
    let h = Harness::forward_with(vec![LoadedModule { module: copy, on_error: FailurePolicy::Open }]).await;
    h.origin.on("/b", Reply::ok("copied").header("Cache-Control", "max-age=60"));
    assert_eq!(h.get("/b").await.text(), "copied");
    assert_eq!(h.get("/b").await.text(), "copied");
}

// ---- before-store body editing ---------------------------------------------------------------

#[derive(Default)]
struct AdBlankerTxn;

impl Txn for AdBlankerTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { origin_response: true, ..BodyEdits::default() }
    }
    fn origin_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let text = String::from_utf8_lossy(chunk.data()).replace("<ad>", "");
        chunk.replace(text);
        if chunk.is_end() {
            chunk.append(b"<!-- cleaned -->");
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn origin_body_edits_are_what_gets_stored() {
    let h = Harness::forward_with(vec![stateless::<AdBlankerTxn>("ad-blanker", FailurePolicy::Closed)]).await;
    h.origin.on("/page", Reply::ok("a<ad>b<ad>c").header("Cache-Control", "max-age=60"));
    let miss = h.get("/page").await;
    assert_eq!(miss.text(), "abc<!-- cleaned -->");
    assert_eq!(miss.header("content-length"), "", "the length changes, so the miss streams chunked");
    let hit = h.get("/page").await;
    assert_eq!(hit.text(), "abc<!-- cleaned -->");
    assert_eq!(hit.header("content-length"), "19", "the stored object has its true length");
    assert_eq!(h.origin.hits("/page"), 1);
    h.origin.on("/pass", Reply::ok("x<ad>y"));
    assert_eq!(h.get("/pass").await.text(), "xy<!-- cleaned -->", "pass-through responses are edited too");
}

/// Reads the stored body in `origin_resp_body` without declaring an edit.
#[derive(Default)]
struct OriginReaderTxn {
    seen: Vec<u8>,
}

impl Txn for OriginReaderTxn {
    fn origin_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.seen.extend_from_slice(chunk.data());
        Flow::Continue
    }
}

impl Drop for OriginReaderTxn {
    fn drop(&mut self) {
        if !self.seen.is_empty() {
            ORIGIN_READ.lock().unwrap().push(String::from_utf8_lossy(&self.seen).into_owned());
        }
    }
}

/// What [`OriginReaderTxn`] states saw, one entry per transaction that saw a body.
static ORIGIN_READ: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

#[tokio::test]
async fn a_module_that_only_reads_origin_bodies_sees_them_and_keeps_content_length() {
    let h = Harness::forward_with(vec![stateless::<OriginReaderTxn>("origin-reader", FailurePolicy::Closed)]).await;
    h.origin.on("/read", Reply::ok("stored as is").header("Cache-Control", "max-age=60"));
    let miss = h.get("/read").await;
    assert_eq!(miss.text(), "stored as is");
    assert_eq!(miss.header("content-length"), "12", "an undeclared reader keeps the origin's length");
    h.eventually("the miss's state to drop", |_| !ORIGIN_READ.lock().unwrap().is_empty()).await;
    assert_eq!(*ORIGIN_READ.lock().unwrap(), ["stored as is"], "origin_resp_body ran on the miss");
    let hit = h.get("/read").await;
    assert_eq!(hit.header("content-length"), "12");
    assert_eq!(h.origin.hits("/read"), 1, "and the body was stored");
}

// ---- timers and admin endpoints ----------------------------------------------------------------

struct Ticker {
    ticks: Arc<std::sync::atomic::AtomicU64>,
}

impl Module for Ticker {
    fn name(&self) -> &str {
        "ticker"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        None
    }
    fn tick_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(10))
    }
    fn tick(&self, _: &dyn sluice_module::CacheApi) {
        self.ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn admin(&self, method: &http::Method, path: &str, _: &[u8]) -> Option<LocalResponse> {
        let ticks = self.ticks.load(std::sync::atomic::Ordering::Relaxed);
        (path == "/ticks").then(|| LocalResponse::text(StatusCode::OK, format!("{method} {ticks}")))
    }
}

#[tokio::test]
async fn modules_get_timers_and_an_admin_endpoint() {
    let ticks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let module = loaded(Ticker { ticks: Arc::clone(&ticks) }, FailurePolicy::Open);
    let h = Harness::forward_with(vec![module]).await;
    h.eventually("three ticks", |_| ticks.load(std::sync::atomic::Ordering::Relaxed) >= 3).await;
    let token = [("Authorization", "Bearer test-token")];
    let reply = client::get(h.admin(), "/modules/ticker/ticks", &token).await;
    assert_eq!(reply.status, 200);
    assert!(reply.text().starts_with("GET "), "{}", reply.text());
    assert_eq!(client::get(h.admin(), "/modules/ticker/ticks", &[]).await.status, 401);
    assert_eq!(client::get(h.admin(), "/modules/ticker/other", &token).await.status, 404);
    assert_eq!(client::get(h.admin(), "/modules/nobody/x", &token).await.status, 404);
    // A module that sits every transaction out costs nothing per request.
    h.origin.on("/t", Reply::ok("x"));
    assert_eq!(h.get("/t").await.text(), "x");
}
