//! The origin side: Sluice's own HTTP/1.1 client (RFC 9112) against the scriptable origin:
//! connection reuse, idle connections closed after `upstream.idle_timeout` or by their
//! origin, every body framing, interim responses, and request bodies with a length or
//! chunked (a malformed one is the client's error: 400).

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
    let metrics = &h.proxy.state().metrics;
    assert_eq!(metrics.origin_errors.load(std::sync::atomic::Ordering::Relaxed), 0, "not the origin's failure");
}

#[tokio::test]
async fn bodiless_posts_carry_a_zero_length() {
    let h = Harness::reverse().await;
    h.origin.on("/empty", Reply::ok("ok"));
    assert_eq!(client::send(h.addr(), "POST", "/empty", &[], None).await.text(), "ok");
    assert_eq!(h.origin.last_request("/empty").unwrap().header("content-length"), Some("0"));
}

#[tokio::test]
async fn upstream_connect_timeout_gives_504() {
    // A listener whose accept queue is full and never drained: Linux drops further SYNs, so a
    // connect to it neither succeeds nor fails until the client gives up.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let blackhole = socket.listen(0).unwrap();
    let addr = blackhole.local_addr().unwrap();
    let mut fillers = Vec::new();
    loop {
        match tokio::time::timeout(std::time::Duration::from_millis(200), tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => fillers.push(stream),
            Ok(Err(e)) => panic!("connect: {e}"),
            Err(_) => break,
        }
        assert!(fillers.len() < 64, "the accept queue never filled");
    }
    let h = Harness::build_with_origin(sluice_proxy::config::Mode::Reverse, move |c, _| {
        c.route[0].origin = Some(format!("http://{addr}"));
        c.upstream.connect_timeout = sluice_proxy::units::Dur(std::time::Duration::from_millis(200));
    })
    .await;
    let reply = h.get("/blackhole").await;
    assert_eq!(reply.status, 504, "{}", reply.text());
    drop(blackhole);
}

#[tokio::test]
async fn upstream_read_timeout_fails_a_stalled_body_and_does_not_store_it() {
    // An origin that sends a head and 3 of 10 body bytes, then nothing, connection open.
    let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = origin.local_addr().unwrap();
    let accepts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&accepts);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = origin.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nCache-Control: max-age=60\r\n\r\nabc")
                .await;
            held.push(stream);
        }
    });
    let h = Harness::build_with_origin(sluice_proxy::config::Mode::Reverse, move |c, _| {
        c.route[0].origin = Some(format!("http://{addr}"));
        c.upstream.read_timeout = sluice_proxy::units::Dur(std::time::Duration::from_millis(200));
    })
    .await;
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stream.write_all(b"GET /stall HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // The proxy ends the response (closing the connection) once the origin has been silent
    // for read_timeout; the deadline only bounds a failing test.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled body must be failed");
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.ends_with("abc"), "only what arrived: {seen}");
    // Not stored: the next request goes to the origin again.
    let mut again = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    again.write_all(b"GET /stall HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let _ = again.read(&mut buf).await;
    assert_eq!(accepts.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn upstream_max_idle_per_host_bounds_the_pooled_connections() {
    let h = Harness::build(sluice_proxy::config::Mode::Reverse, |c| c.upstream.max_idle_per_host = 1).await;
    // Distinct paths: requests for one URL would collapse onto one fetch.
    for path in ["/s1", "/s2", "/s3", "/s4", "/s5"] {
        h.origin
            .on(path, Reply::ok("x").header("Cache-Control", "no-store").delay(std::time::Duration::from_millis(100)));
    }
    // Three at once: three connections; one of them is kept idle afterwards.
    let (a, b, c) = tokio::join!(h.get("/s1"), h.get("/s2"), h.get("/s3"));
    assert_eq!((a.status.as_u16(), b.status.as_u16(), c.status.as_u16()), (200, 200, 200));
    assert_eq!(h.origin.connections(), 3);
    // Two at once again: the kept one and one new.
    let (a, b) = tokio::join!(h.get("/s4"), h.get("/s5"));
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200));
    assert_eq!(h.origin.connections(), 4, "only one connection was kept idle");
}

#[tokio::test]
async fn upstream_idle_connections_are_closed_after_the_idle_timeout() {
    let h = Harness::build(sluice_proxy::config::Mode::Reverse, |c| {
        c.upstream.idle_timeout = sluice_proxy::units::Dur(std::time::Duration::from_millis(300));
    })
    .await;
    h.origin.on("/p", Reply::ok("pass").header("Cache-Control", "no-store"));
    assert_eq!(h.get("/p").await.text(), "pass");
    assert_eq!(h.origin.connections(), 1);
    // The pooled connection stays open until it has been idle for the timeout; then the
    // proxy closes it, and the origin reads the end of the stream.
    tokio::time::timeout(std::time::Duration::from_secs(10), h.origin.connections_ended(1))
        .await
        .expect("the idle pooled connection was closed by the proxy");
    assert_eq!(h.get("/p").await.text(), "pass");
    assert_eq!(h.origin.connections(), 2, "the next request opened a new connection");
}
