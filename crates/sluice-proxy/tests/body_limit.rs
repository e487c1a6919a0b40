//! `client.max_body_size` and a route's `max_body_size` (docs/config.md): a request body
//! announced larger than allowed gets `413` before anything reaches the origin; one without
//! an announced length gets it as soon as it passes the limit, and the origin never gets a
//! complete request. HTTP/1.1 (also with `Expect: 100-continue`, from curl) and HTTP/2.
//! Real sockets on 127.0.0.1, a scripted origin that counts complete requests only.

mod common;

use bytes::Bytes;
use common::{curl, Harness};
use http::StatusCode;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use sluice_proxy::config::{Config, Mode, RouteConfig};
use sluice_proxy::units::Size;
use sluice_testkit::{client, Reply};
use std::convert::Infallible;
use tokio::net::TcpStream;

/// A forward proxy that accepts request bodies of at most 16 bytes.
async fn limited() -> Harness {
    let h = Harness::build(Mode::Forward, |c| c.client.max_body_size = Size(16)).await;
    h.origin.on("/up", Reply::ok("taken"));
    h
}

type Frames = StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

fn frames(pieces: &[&'static str]) -> Frames {
    let frames: Vec<Result<Frame<Bytes>, Infallible>> =
        pieces.iter().map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes())))).collect();
    StreamBody::new(futures_util::stream::iter(frames))
}

/// POSTs `pieces` to `url` through the proxy with no announced length: chunked over
/// HTTP/1.1, DATA frames without `content-length` over HTTP/2 (prior knowledge).
async fn post_unannounced(h: &Harness, url: &str, pieces: &[&'static str], h2: bool) -> client::Reply {
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(h.addr()).await.unwrap());
    let authority = url.split('/').nth(2).unwrap().to_owned();
    let request = http::Request::post(url).header("host", &authority).body(frames(pieces)).unwrap();
    let response = if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(request).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(request).await.unwrap()
    };
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    client::Reply { status: parts.status, headers: parts.headers, body }
}

#[tokio::test]
async fn an_announced_body_over_the_limit_gets_413_and_the_origin_is_not_asked() {
    let h = limited().await;
    let url = h.origin.url("/up");
    let reply = client::send(h.addr(), "POST", &url, &[], Some("seventeen bytes!!")).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text());
    assert!(reply.text().contains("17 bytes is larger than the 16 bytes allowed"), "{}", reply.text());
    assert_eq!(reply.header("connection"), "close", "the unread body is not waited for");
    assert_eq!(h.origin.hits("/up"), 0);

    let reply = client::send(h.addr(), "POST", &url, &[], Some("sixteen bytes!!!")).await;
    assert_eq!(reply.status, 200, "at the limit is allowed");
    assert_eq!(h.origin.last_request("/up").unwrap().body, b"sixteen bytes!!!");

    // curl announcing a larger body with `Expect: 100-continue` gets the 413 instead of the
    // go-ahead, over HTTP/1.1; and the same over HTTP/2.
    let body = "x".repeat(5000);
    let proxy = format!("http://{}", h.addr());
    let out =
        curl(&["-x", &proxy, "-H", "Expect: 100-continue", "--data-binary", &body, "-w", "%{http_code}", &url]).await;
    assert!(out.ends_with("413"), "{out}");
    let out =
        curl(&["-x", &proxy, "--http2-prior-knowledge", "--data-binary", &body, "-w", "%{http_code}", &url]).await;
    assert!(out.ends_with("413"), "{out}");
    assert_eq!(h.origin.hits("/up"), 1, "only the request at the limit reached the origin");
}

#[tokio::test]
async fn an_unannounced_body_fails_with_413_once_it_passes_the_limit() {
    let h = limited().await;
    let url = h.origin.url("/up");
    for h2 in [false, true] {
        let reply = post_unannounced(&h, &url, &["0123456789", "abcdef", "g"], h2).await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "h2 {h2}: {}", reply.text());
        assert_eq!(h.origin.hits("/up"), 0, "h2 {h2}: the origin never got a complete request");
    }
    let reply = post_unannounced(&h, &url, &["0123456789", "abcdef"], false).await;
    assert_eq!(reply.status, 200);
    assert_eq!(h.origin.last_request("/up").unwrap().body, b"0123456789abcdef");
    let reply = post_unannounced(&h, &url, &["0123456789", "abcdef"], true).await;
    assert_eq!(reply.status, 200);
    assert_eq!(h.origin.hits("/up"), 2);
}

#[tokio::test]
async fn a_route_sets_its_own_limit_or_none() {
    let h = Harness::build_with_origin(Mode::Reverse, |c: &mut Config, origin| {
        c.client.max_body_size = Size(16);
        let route = |prefix: &str, limit: Option<u64>| RouteConfig {
            path_prefix: prefix.into(),
            origin: Some(format!("http://{origin}")),
            max_body_size: limit.map(Size),
            ..RouteConfig::default()
        };
        c.route = vec![route("/", None), route("/upload/", Some(1024)), route("/bulk/", Some(0))];
    })
    .await;
    for path in ["/small", "/upload/file", "/bulk/file"] {
        h.origin.on(path, Reply::ok("taken"));
    }
    let post = |path: &'static str, len: usize| {
        let body = "b".repeat(len);
        let addr = h.addr();
        async move { client::send(addr, "POST", path, &[], Some(&body)).await.status }
    };
    assert_eq!(post("/small", 17).await, StatusCode::PAYLOAD_TOO_LARGE, "the global limit");
    assert_eq!(post("/upload/file", 1024).await, 200, "the route's larger limit");
    assert_eq!(post("/upload/file", 1025).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(post("/bulk/file", 100_000).await, 200, "0: no limit on this route");
    assert_eq!(h.origin.last_request("/bulk/file").unwrap().body.len(), 100_000);
}

#[tokio::test]
async fn there_is_no_limit_by_default() {
    let h = Harness::forward().await;
    h.origin.on("/up", Reply::ok("taken"));
    let body = "z".repeat(3 << 20);
    let reply = client::send(h.addr(), "POST", &h.origin.url("/up"), &[], Some(&body)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(h.origin.last_request("/up").unwrap().body.len(), 3 << 20);
}
