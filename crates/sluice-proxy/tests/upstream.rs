//! The origin side: Sluice's own HTTP/1.1 client (RFC 9112) against the scriptable origin:
//! connection reuse, origins closing idle connections, every body framing, interim
//! responses, and request bodies with a length or chunked (a malformed one is the client's
//! error: 400).

mod common;

use common::{cache_status, Harness};
use sluice_testkit::{client, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `request` as written on a new connection and reads the answer until the proxy
/// closes it (the request says `Connection: close`).
async fn exchange_raw(h: &Harness, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

fn body_of(n: usize) -> String {
    (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect()
}

#[tokio::test]
async fn rfc9112_9_3_persistent_connections_are_reused() {
    let h = Harness::reverse().await;
    h.origin.on("/p", Reply::ok("pass").header("Cache-Control", "no-store"));
    for _ in 0..5 {
        assert_eq!(h.get("/p").await.text(), "pass");
    }
    assert_eq!(h.origin.hits("/p"), 5);
    assert_eq!(h.origin.connections(), 1, "one pooled connection carried every request");
}

#[tokio::test]
async fn rfc9112_9_6_an_origin_closing_idle_connections_costs_no_request() {
    let h = Harness::reverse().await;
    h.origin.on("/c", Reply::ok("fresh each time").header("Cache-Control", "no-store").close_after());
    for _ in 0..4 {
        let reply = h.get("/c").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.text(), "fresh each time");
    }
    assert_eq!(h.origin.hits("/c"), 4);
    assert_eq!(h.origin.connections(), 4);
}

#[tokio::test]
async fn rfc9112_6_3_a_close_delimited_body_is_delivered_whole_and_stored() {
    let h = Harness::reverse().await;
    let body = body_of(100_000);
    h.origin.on("/u", Reply::ok(body.clone()).header("Cache-Control", "max-age=60").until_close());
    assert_eq!(h.get("/u").await.text(), body);
    let again = h.get("/u").await;
    assert_eq!(again.text(), body);
    assert!(cache_status(&again).contains("hit"), "{}", cache_status(&again));
    assert_eq!(h.origin.hits("/u"), 1);
}

#[tokio::test]
async fn rfc9112_6_3_close_delimited_connections_are_not_reused() {
    let h = Harness::reverse().await;
    h.origin.on("/u", Reply::ok("until close").header("Cache-Control", "no-store").until_close());
    for _ in 0..3 {
        assert_eq!(h.get("/u").await.text(), "until close");
    }
    assert_eq!(h.origin.connections(), 3);
}

#[tokio::test]
async fn rfc9112_7_1_chunked_bodies_are_decoded_stored_and_the_connection_reused() {
    let h = Harness::reverse().await;
    let body = body_of(50_000);
    h.origin.on("/chunked", Reply::ok(body.clone()).header("Cache-Control", "max-age=60").chunked());
    h.origin.on("/next", Reply::ok("next").header("Cache-Control", "no-store"));
    let first = h.get("/chunked").await;
    assert_eq!(first.text(), body);
    let hit = h.get("/chunked").await;
    assert_eq!(hit.text(), body);
    assert_eq!(hit.header("content-length"), "50000", "the stored object has a length");
    assert_eq!(h.get("/next").await.text(), "next");
    assert_eq!(h.origin.connections(), 1);
}

#[tokio::test]
async fn rfc9110_15_2_interim_responses_are_skipped() {
    let h = Harness::reverse().await;
    h.origin.on("/hints", Reply::ok("final").interim(103).header("Cache-Control", "no-store"));
    let reply = h.get("/hints").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "final");
}

#[tokio::test]
async fn rfc9110_9_3_2_head_responses_leave_the_connection_reusable() {
    let h = Harness::reverse().await;
    h.origin.on("/h", Reply::ok("twelve bytes").header("Cache-Control", "no-store"));
    // The first answer marks /h hit-for-pass, so the HEAD goes to the origin as a HEAD.
    assert_eq!(h.get("/h").await.text(), "twelve bytes");
    let head = h.send("HEAD", "/h", &[], None).await;
    assert_eq!(h.origin.last_request("/h").unwrap().method, "HEAD");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), "12");
    assert!(head.body.is_empty());
    assert_eq!(h.get("/h").await.text(), "twelve bytes");
    assert_eq!(h.origin.connections(), 1);
}

#[tokio::test]
async fn request_bodies_with_a_length_are_forwarded() {
    let h = Harness::reverse().await;
    h.origin.on("/post", Reply::ok("got it"));
    let reply = h.send("POST", "/post", &[("content-type", "text/plain")], Some("hello origin")).await;
    assert_eq!(reply.text(), "got it");
    let request = h.origin.last_request("/post").unwrap();
    assert_eq!(request.body, b"hello origin");
    assert_eq!(request.header("content-length"), Some("12"));
}

#[tokio::test]
async fn chunked_request_bodies_are_forwarded_chunked() {
    let h = Harness::reverse().await;
    h.origin.on("/upload", Reply::ok("uploaded"));
    let answer = exchange_raw(
        &h,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("uploaded"), "{answer}");
    let request = h.origin.last_request("/upload").unwrap();
    assert_eq!(request.body, b"hello world");
    assert_eq!(request.header("transfer-encoding"), Some("chunked"));
}

#[tokio::test]
async fn rfc9112_7_1_a_malformed_chunked_request_body_is_the_clients_error() {
    let h = Harness::reverse().await;
    h.origin.on("/upload", Reply::ok("uploaded"));
    let answer = exchange_raw(
        &h,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          zz\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let metrics = &h.proxy.state.metrics;
    assert_eq!(metrics.origin_errors.load(std::sync::atomic::Ordering::Relaxed), 0, "not the origin's failure");
}

#[tokio::test]
async fn bodiless_posts_carry_a_zero_length() {
    let h = Harness::reverse().await;
    h.origin.on("/empty", Reply::ok("ok"));
    assert_eq!(client::send(h.addr(), "POST", "/empty", &[], None).await.text(), "ok");
    assert_eq!(h.origin.last_request("/empty").unwrap().header("content-length"), Some("0"));
}
