//! The modules' `req_body` phase (docs/modules.md, "Request bodies"): a request body is seen
//! chunk by chunk as it streams to the origin, or whole when a module asked to buffer it at
//! `req_headers`; edits are framed for the origin (chunked when a module declared it may
//! change the body, `Content-Length` when buffered); undeclared length changes, closed
//! failures and over-limit buffers fail the request without reaching the client's data.
//! Real sockets on 127.0.0.1, a scripted origin that records what it received.

mod common;

use bytes::Bytes;
use common::Harness;
use http::StatusCode;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use sluice_module::{BodyChunk, BodyEdits, FailurePolicy, Flow, LocalResponse, Module, Txn, TxnInfo};
use sluice_proxy::config::Mode;
use sluice_proxy::LoadedModule;
use sluice_testkit::{client, Reply};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::net::TcpStream;

/// What a test module does with request bodies.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Upper-cases each chunk, declaring `BodyEdits::request`.
    Upper,
    /// Appends `!` to the last chunk without declaring it.
    UndeclaredAppend,
    /// Asks for the whole body (at most `max` bytes) at `req_headers`; answers 403 when it
    /// contains `forbidden`, otherwise replaces it with its length in decimal.
    Buffer { max: usize },
    /// Panics on the first chunk.
    Panic,
}

type Seen = Arc<Mutex<Vec<(Vec<u8>, bool)>>>;

struct BodyModule {
    behaviour: Behaviour,
    seen: Seen,
}

struct BodyTxn {
    behaviour: Behaviour,
    seen: Seen,
}

impl Module for BodyModule {
    fn name(&self) -> &str {
        "body-module"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(BodyTxn { behaviour: self.behaviour, seen: Arc::clone(&self.seen) }))
    }
}

impl Txn for BodyTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { request: matches!(self.behaviour, Behaviour::Upper), ..BodyEdits::default() }
    }

    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        match self.behaviour {
            Behaviour::Buffer { max } => Flow::Buffer { max },
            _ => Flow::Continue,
        }
    }

    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        self.seen.lock().unwrap().push((chunk.data().to_vec(), chunk.is_end()));
        match self.behaviour {
            Behaviour::Upper => {
                let upper = chunk.data().to_ascii_uppercase();
                chunk.replace(upper);
            }
            Behaviour::UndeclaredAppend if chunk.is_end() => chunk.append(b"!"),
            Behaviour::UndeclaredAppend => {}
            Behaviour::Buffer { .. } => {
                if chunk.data().windows(9).any(|w| w == b"forbidden") {
                    return Flow::Respond(LocalResponse::text(StatusCode::FORBIDDEN, "no\n"));
                }
                let length = chunk.data().len().to_string();
                chunk.replace(length);
            }
            Behaviour::Panic => panic!("req_body panics"),
        }
        Flow::Continue
    }
}

async fn proxy(behaviour: Behaviour, on_error: FailurePolicy) -> (Harness, Seen) {
    let seen: Seen = Arc::default();
    let module = LoadedModule { module: Arc::new(BodyModule { behaviour, seen: Arc::clone(&seen) }), on_error };
    let h = Harness::build_with_modules(Mode::Forward, |_, _| {}, vec![module]).await;
    h.origin.on("/up", Reply::ok("stored"));
    (h, seen)
}

/// POSTs `pieces` to `path` as a chunked body (no `Content-Length`), one frame each.
async fn post_chunked(h: &Harness, path: &str, pieces: &[&'static str]) -> client::Reply {
    let stream = TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let frames: Vec<Result<Frame<Bytes>, Infallible>> =
        pieces.iter().map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes())))).collect();
    let body = StreamBody::new(futures_util::stream::iter(frames));
    let url = h.origin.url(path);
    let request = http::Request::post(&url).header("host", h.origin.addr.to_string()).body(body).unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    client::Reply { status: parts.status, headers: parts.headers, body }
}

fn received(h: &Harness, path: &str) -> (Vec<u8>, Option<String>, Option<String>) {
    let request = h.origin.last_request(path).expect("the origin got the request");
    let length = request.header("content-length").map(str::to_owned);
    let coding = request.header("transfer-encoding").map(str::to_owned);
    (request.body, length, coding)
}

#[tokio::test]
async fn a_declared_edit_streams_chunk_by_chunk_and_goes_out_chunked() {
    let (h, seen) = proxy(Behaviour::Upper, FailurePolicy::Closed).await;
    let reply = post_chunked(&h, "/up", &["hello ", "streaming ", "world"]).await;
    assert_eq!(reply.status, 200);
    let (body, length, coding) = received(&h, "/up");
    assert_eq!(body, b"HELLO STREAMING WORLD");
    assert_eq!((length, coding.as_deref()), (None, Some("chunked")), "the edited body's length is not known ahead");
    let seen = seen.lock().unwrap().clone();
    let all: Vec<u8> = seen.iter().flat_map(|(data, _)| data.clone()).collect();
    assert_eq!(all, b"hello streaming world");
    assert_eq!(seen.iter().filter(|(_, end)| *end).count(), 1, "exactly one last call: {seen:?}");
    assert!(seen.last().unwrap().1, "the last call is the end");

    // With a Content-Length, the undeclared-length path is not taken either: still chunked.
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some("abc")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(received(&h, "/up").0, b"ABC");
}

#[tokio::test]
async fn a_body_no_module_edits_keeps_its_length_and_an_undeclared_change_fails_the_request() {
    let (h, seen) = proxy(Behaviour::UndeclaredAppend, FailurePolicy::Open).await;
    // Seen without a change until the end: the origin must not get more than announced.
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some("12345")).await;
    assert_eq!(reply.status, 500, "{}", reply.text());
    assert!(reply.text().contains("without declaring"), "{}", reply.text());
    assert_eq!(*seen.lock().unwrap(), vec![(b"12345".to_vec(), true)]);

    let (h, _) = proxy(Behaviour::Panic, FailurePolicy::Open).await;
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some("12345")).await;
    assert_eq!(reply.status, 200, "failed open: the body goes on unchanged");
    let (body, length, _) = received(&h, "/up");
    assert_eq!((body, length.as_deref()), (b"12345".to_vec(), Some("5")));

    let (h, _) = proxy(Behaviour::Panic, FailurePolicy::Closed).await;
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some("12345")).await;
    assert_eq!(reply.status, 500, "failed closed");
    assert!(reply.text().contains("body-module"), "{}", reply.text());
}

#[tokio::test]
async fn a_buffering_module_sees_the_whole_body_once_before_it_is_sent() {
    let (h, seen) = proxy(Behaviour::Buffer { max: 1024 }, FailurePolicy::Closed).await;
    let reply = post_chunked(&h, "/up", &["one ", "two ", "three"]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(*seen.lock().unwrap(), vec![(b"one two three".to_vec(), true)]);
    let (body, length, coding) = received(&h, "/up");
    assert_eq!((body, length.as_deref(), coding), (b"13".to_vec(), Some("2"), None), "re-framed with its new length");

    // Deciding on the body: a local answer, and the origin is not asked.
    let before = h.origin.hits("/up");
    let reply = post_chunked(&h, "/up", &["this is ", "forbidden"]).await;
    assert_eq!(reply.status, 403);
    assert_eq!(h.origin.hits("/up"), before);
}

#[tokio::test]
async fn a_body_over_the_buffer_limit_fails_the_buffering_module() {
    let big = "x".repeat(100);
    let (h, seen) = proxy(Behaviour::Buffer { max: 10 }, FailurePolicy::Closed).await;
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some(&big)).await;
    assert_eq!(reply.status, 500);
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(h.origin.hits("/up"), 0);

    // Failed open: the module is skipped and the whole body, read part first, goes on.
    let (h, seen) = proxy(Behaviour::Buffer { max: 10 }, FailurePolicy::Open).await;
    let reply = post_chunked(&h, "/up", &["0123456789", "abcdef", "ghij"]).await;
    assert_eq!(reply.status, 200);
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(received(&h, "/up").0, b"0123456789abcdefghij");
}
