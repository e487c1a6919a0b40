//! Bad input gets a clear status and the proxy keeps going (malformed requests, oversized
//! heads, smuggling attempts, broken and slow origins, truncated bodies), and the safe
//! defaults hold (client ACL, CONNECT ports, loops).

mod common;

use common::{Harness, LogFile};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::client;
use sluice_testkit::Reply;
use std::time::Duration;

#[tokio::test]
async fn malformed_request_line_gets_400_and_the_proxy_keeps_serving() {
    let h = Harness::forward().await;
    let answer = client::raw(h.addr(), b"THIS IS NOT HTTP\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    h.origin.on("/after", Reply::ok("still here"));
    assert_eq!(h.get("/after").await.text(), "still here");
}

#[tokio::test]
async fn oversized_request_head_gets_431() {
    let h = Harness::build(Mode::Forward, |c| c.client.max_header_bytes = sluice_proxy::units::Size(16 * 1024)).await;
    let big = "x".repeat(40 * 1024);
    let request = format!("GET {} HTTP/1.1\r\nHost: a\r\nX-Big: {big}\r\n\r\n", h.origin.url("/big"));
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{}", &answer[..answer.len().min(200)]);
}

#[tokio::test]
async fn rfc9112_3_a_request_line_longer_than_a_head_may_be_gets_414() {
    let h = Harness::build(Mode::Forward, |c| c.client.max_header_bytes = sluice_proxy::units::Size(16 * 1024)).await;
    h.origin.on("/ok", Reply::ok("ok"));
    let ok = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url("/ok"));
    let long = format!("GET {}?{} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url("/ok"), "q".repeat(40 * 1024));
    // After a request served on the same connection, in order; then the connection closes.
    let answer = client::raw(h.addr(), format!("{ok}{long}{ok}").as_bytes()).await;
    assert_eq!(responses(&answer), 2, "{}", &answer[..answer.len().min(400)]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..answer.len().min(200)]);
    let second = &answer[answer.rfind("HTTP/1.1 ").unwrap()..];
    assert!(second.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{second}");
    assert!(second.to_ascii_lowercase().contains("connection: close"), "{second}");
    assert_eq!(h.origin.hits("/ok"), 1, "only the first request reached the origin");
    // A long target within the limit is served.
    let within = format!("/ok?{}", "q".repeat(8 * 1024));
    h.origin.on(&within, Reply::ok("long"));
    let answer =
        client::raw(h.addr(), format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url(&within)).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("long"), "{}", &answer[..answer.len().min(200)]);
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_rejected_and_the_connection_closed() {
    let h = Harness::forward().await;
    h.origin.on("/smuggle", Reply::ok("x"));
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n",
        h.origin.url("/smuggle")
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "nothing after the rejected request is served: {answer}");
    assert_eq!(h.origin.hits("/smuggle"), 0);
}

#[tokio::test]
async fn conflicting_content_lengths_are_rejected() {
    let h = Harness::forward().await;
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        h.origin.url("/cl")
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

#[tokio::test]
async fn http11_request_without_host_is_rejected() {
    let h = Harness::reverse().await;
    let answer = client::raw(h.addr(), b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

#[tokio::test]
async fn rfc9110_4_2_4_userinfo_in_the_target_is_refused_and_kept_out_of_the_log() {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| c.log.access_log = Some(log_path)).await;
    h.origin.on("/u", Reply::ok("reached"));
    let origin = h.origin.addr;
    let requests = [
        format!("GET http://user:secret@{origin}/u HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"),
        format!("CONNECT user:secret@{origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n"),
    ];
    for request in &requests {
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("userinfo"), "{answer}");
    }
    assert_eq!(h.origin.hits("/u"), 0);
    let logged = log.lines(&h, 2).await.join("\n");
    assert!(!logged.contains("secret") && logged.contains(&format!("http://{origin}/u")), "{logged}");
}

#[tokio::test]
async fn origin_speaking_garbage_gives_502() {
    let h = Harness::forward().await;
    h.origin.on("/garbage", Reply::ok("").garbage());
    assert_eq!(h.get("/garbage").await.status, 502);
}

#[tokio::test]
async fn origin_closing_without_answer_gives_502() {
    let h = Harness::forward().await;
    h.origin.on("/close", Reply::ok("").close_before_head());
    assert_eq!(h.get("/close").await.status, 502);
}

#[tokio::test]
async fn unreachable_origin_gives_502() {
    let h = Harness::forward().await;
    // A port nothing listens on: bind one, note it, and close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let reply = client::get(h.addr(), &format!("http://127.0.0.1:{port}/x"), &[]).await;
    assert_eq!(reply.status, 502);
    assert!(reply.text().contains(&format!("cannot connect to 127.0.0.1:{port}")), "a forward proxy's client is told");
    // A reverse proxy's client is not told where its origin is, nor what failed there.
    let reverse = Harness::build(Mode::Reverse, |c| c.route[0].origin = Some(format!("http://127.0.0.1:{port}"))).await;
    let reply = reverse.get("/x").await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.text(), "502 Bad Gateway: the origin gave no usable answer\n");
}

#[tokio::test]
async fn slow_origin_gives_504() {
    let h = Harness::build(Mode::Forward, |c| {
        c.upstream.response_timeout = sluice_proxy::units::Dur(Duration::from_millis(200))
    })
    .await;
    h.origin.on("/slow", Reply::ok("late").delay(Duration::from_secs(3)));
    assert_eq!(h.get("/slow").await.status, 504);
}

/// The timers of both deadlines are reused request after request on a connection (the
/// response timeout on the origin connection, the transaction deadline on the client's:
/// `deadline.rs`). A request on a kept-alive connection whose earlier requests finished in
/// time must still get its own deadline, with each timeout alone short in turn.
#[tokio::test]
async fn a_slow_origin_gives_504_after_fast_requests_on_the_same_connections() {
    let (short, long) = (Duration::from_millis(300), Duration::from_secs(60));
    for (response_timeout, transaction_timeout) in [(short, long), (long, short)] {
        let h = Harness::build(Mode::Forward, |c| {
            c.upstream.response_timeout = sluice_proxy::units::Dur(response_timeout);
            c.client.transaction_timeout = sluice_proxy::units::Dur(transaction_timeout);
        })
        .await;
        h.origin.on("/fast", Reply::ok("fast").header("cache-control", "no-store"));
        h.origin.on("/slow", Reply::ok("late").header("cache-control", "no-store").delay(Duration::from_secs(5)));
        // One curl, one connection to the proxy (`num_connects` 0 after the first).
        let out = tokio::process::Command::new("curl")
            .args(["-s", "--max-time", "20", "-x", &format!("http://{}", h.addr())])
            .args(["-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null", &h.origin.url("/fast")])
            .args(["-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null", &h.origin.url("/fast")])
            .args(["-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null", &h.origin.url("/slow")])
            .output()
            .await
            .expect("curl is installed (scripts/install-deps.sh)");
        let lines = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(lines, "200 1\n200 0\n504 0\n", "response timeout {response_timeout:?}");
        assert_eq!(h.origin.hits("/slow"), 1);
        assert_eq!(h.origin.connections(), 1, "the fast requests went over one origin connection");
    }
}

#[tokio::test]
async fn truncated_origin_body_is_never_stored() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/trunc",
        vec![
            Reply::ok("0123456789").header("Cache-Control", "max-age=600").truncate_after(4),
            Reply::ok("0123456789").header("Cache-Control", "max-age=600"),
        ],
    );
    let stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(h.origin.url("/trunc"))
        .header("host", "a")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    let body = http_body_util::BodyExt::collect(response.into_body()).await;
    assert!(body.is_err(), "the client sees the truncation as an error, not a short body");
    let second = h.get("/trunc").await;
    assert_eq!(second.text(), "0123456789");
    assert_eq!(h.origin.hits("/trunc"), 2, "the truncated response was not served from cache");
}

#[tokio::test]
async fn a_truncated_origin_body_reaches_the_client_up_to_where_it_was_cut() {
    // Every byte the origin sent goes on before the connection is cut: a client resuming
    // with a range (`curl -C -`) starts where it really stopped. The last piece and the
    // origin's close arrive together, the case where the cut could overtake the piece.
    let h = Harness::forward().await;
    for round in 0..10 {
        let path = format!("/cut-{round}");
        h.origin
            .on(&path, Reply::ok("x".repeat(200_000)).header("Cache-Control", "max-age=600").truncate_after(150_000));
        let request = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url(&path));
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        let (head, body) = answer.split_once("\r\n\r\n").expect("a response head");
        assert!(head.starts_with("HTTP/1.1 200") && head.contains("content-length: 200000"), "{head}");
        assert_eq!(body.len(), 150_000, "round {round}: every byte the origin sent");
    }
}

#[tokio::test]
async fn rfc9112_6_1_a_request_body_with_a_transfer_coding_other_than_chunked_gets_501() {
    let h = Harness::forward().await;
    h.origin.on("/coded", Reply::ok("x"));
    let target = h.origin.url("/coded");
    for codings in ["gzip, chunked", "Deflate ,chunked", "gzip\r\nTransfer-Encoding: chunked"] {
        let request =
            format!("POST {target} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {codings}\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 501"), "{codings}: {answer}");
    }
    assert_eq!(h.origin.hits("/coded"), 0, "no body reached the origin without its coding");
    let chunked = format!("POST {target} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert!(client::raw(h.addr(), chunked.as_bytes()).await.starts_with("HTTP/1.1 200"));
    assert_eq!(h.origin.last_request("/coded").unwrap().body, b"abc");
}

#[tokio::test]
async fn statuses_without_a_registered_phrase_keep_the_origins_and_600_is_a_502() {
    let h = Harness::forward().await;
    let status_line = |answer: String| answer.lines().next().unwrap_or("").to_owned();
    let get = |path: &str| format!("GET {} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", h.origin.url(path));
    h.origin.on("/299-passed", Reply::status(299, "custom").header("Cache-Control", "no-store"));
    let passed = client::raw(h.addr(), get("/299-passed").as_bytes()).await;
    assert_eq!(status_line(passed), "HTTP/1.1 299 X", "the origin's own phrase (the test origin's is X)");
    // A stored response keeps no phrase: it gets its status class's.
    h.origin.on("/299-stored", Reply::status(299, "custom").header("Cache-Control", "max-age=60"));
    for _ in 0..2 {
        let stored = client::raw(h.addr(), get("/299-stored").as_bytes()).await;
        assert_eq!(status_line(stored), "HTTP/1.1 299 Successful");
    }
    assert_eq!(h.origin.hits("/299-stored"), 1);
    h.origin.on("/600", Reply::status(600, "x"));
    let refused = client::raw(h.addr(), get("/600").as_bytes()).await;
    assert!(refused.starts_with("HTTP/1.1 502"), "RFC 9110 §15: 100 to 599: {refused}");
}

#[tokio::test]
async fn clients_outside_the_acl_are_refused() {
    let h = Harness::build(Mode::Forward, |c| c.access.allow = vec!["10.0.0.0/8".parse().unwrap()]).await;
    h.origin.on("/acl", Reply::ok("x"));
    let reply = h.get("/acl").await;
    assert_eq!(reply.status, 403);
    assert_eq!(h.origin.hits("/acl"), 0);
}

#[tokio::test]
async fn connect_to_a_port_not_allowed_is_refused() {
    let h = Harness::forward().await;
    let request = format!("CONNECT {} HTTP/1.1\r\nHost: x\r\n\r\n", h.origin.addr);
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}

#[tokio::test]
async fn rfc9110_9_3_6_a_connect_with_content_is_400() {
    let h = Harness::build_with_origin(Mode::Forward, |c, origin| c.access.connect_ports = vec![origin.port()]).await;
    for framing in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
        let request = format!("CONNECT {} HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\nhello", h.origin.addr);
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{framing}: {answer}");
    }
    assert_eq!(h.origin.connections(), 0, "no tunnel opened");
}

#[tokio::test]
async fn forwarding_loops_are_detected_by_via() {
    let h = Harness::forward().await;
    let reply = h.get_with("/loop", &[("Via", "1.1 other, 1.1 sluice")]).await;
    assert_eq!(reply.status, 508);
    assert_eq!(h.origin.hits("/loop"), 0);
}

#[tokio::test]
async fn origin_form_request_to_a_forward_proxy_is_a_clear_400() {
    let h = Harness::forward().await;
    let answer =
        client::raw(h.addr(), b"GET /just-a-path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("absolute URI"), "{answer}");
}

#[tokio::test]
async fn reverse_proxy_without_matching_route_gives_404() {
    let h = Harness::build(Mode::Reverse, |c| c.route[0].host = Some("only.example".into())).await;
    let reply = client::get(h.addr(), "/x", &[("Host", "other.example")]).await;
    assert_eq!(reply.status, 404);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed_after_the_header_read_timeout() {
    let h = Harness::build(Mode::Forward, |c| {
        c.client.header_read_timeout = sluice_proxy::units::Dur(Duration::from_millis(300))
    })
    .await;
    h.origin.on("/idle", Reply::ok("x"));
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url("/idle"));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the server closes; the deadline only bounds a failing test.
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    assert!(closed, "an idle keep-alive connection must be closed by the proxy");
}

#[tokio::test]
async fn an_http2_client_that_stalls_its_stream_is_closed_though_it_keeps_pinging() {
    let h = Harness::build(Mode::Reverse, |c| {
        c.client.header_read_timeout = sluice_proxy::units::Dur(Duration::from_millis(200))
    })
    .await;
    h.origin.on("/big", Reply::ok("x".repeat(256 << 10)).header("cache-control", "max-age=60"));
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    // A stream window of nothing: the proxy can send the head, never a byte of the body.
    let (client, mut connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .expect("HTTP/2 handshake");
    let mut pings = connection.ping_pong().expect("the connection's ping-pong handle");
    let mut connection = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get(format!("http://{}/big", h.addr())).body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.expect("the response head");
    assert_eq!(response.status(), 200);
    // The client answers nothing but keeps pinging, as a keep-alive would; each PING is
    // answered. The deadline only bounds a failing test.
    let mut every = tokio::time::interval(Duration::from_millis(20));
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            tokio::select! {
                _ = &mut connection => return true,
                _ = every.tick() => {
                    if pings.ping(h2::Ping::opaque()).await.is_err() {
                        return true;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(closed, "a connection whose only traffic is PINGs is idle, whatever streams it holds");
    drop(response);
}

#[tokio::test]
async fn a_response_whose_origin_goes_quiet_is_not_the_clients_idleness() {
    let h = Harness::build(Mode::Reverse, |c| {
        c.client.header_read_timeout = sluice_proxy::units::Dur(Duration::from_millis(200))
    })
    .await;
    // Quiet for longer than the idle timer and its grace period together.
    let body = "s".repeat(2000);
    h.origin.on("/stream", Reply::ok(body.clone()).pause_mid_body(Duration::from_millis(1200)));
    let reply = h.get("/stream").await;
    assert_eq!((reply.status.as_u16(), reply.text().len()), (200, body.len()), "HTTP/1.1: the whole body");

    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get(format!("http://{}/stream", h.addr())).body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let mut received = response.await.expect("the response head").into_body();
    let mut len = 0;
    while let Some(data) = received.data().await {
        let data = data.expect("the body, uncut");
        len += data.len();
        let _ = received.flow_control().release_capacity(data.len());
    }
    assert_eq!(len, body.len(), "HTTP/2: the whole body");
    assert_eq!(h.origin.hits("/stream"), 2);
}

/// Counts the responses in a raw answer.
fn responses(answer: &str) -> usize {
    answer.matches("HTTP/1.1 ").count()
}

#[tokio::test]
async fn transfer_encoding_then_content_length_is_rejected_too() {
    let h = Harness::forward().await;
    h.origin.on("/smuggle", Reply::ok("x"));
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET {} HTTP/1.1\r\nHost: a\r\n\r\n",
        h.origin.url("/smuggle"),
        h.origin.url("/smuggle")
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    assert_eq!(responses(&answer), 1, "{answer}");
    assert_eq!(h.origin.hits("/smuggle"), 0);
}

#[tokio::test]
async fn transfer_encoding_not_ending_in_chunked_is_rejected() {
    let h = Harness::forward().await;
    for te in ["gzip", "chunked, gzip"] {
        let request =
            format!("POST {} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\nabcd", h.origin.url("/te"));
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{te}: {answer}");
        assert_eq!(responses(&answer), 1, "{answer}");
    }
    assert_eq!(h.origin.hits("/te"), 0);
}

#[tokio::test]
async fn transfer_encoding_in_http10_is_rejected() {
    let h = Harness::forward().await;
    let request =
        format!("POST {} HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", h.origin.url("/te10"));
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(h.origin.hits("/te10"), 0);
}

#[tokio::test]
async fn pipelined_valid_requests_are_served_in_order() {
    let h = Harness::forward().await;
    h.origin.on("/p1", Reply::ok("first"));
    h.origin.on("/p2", Reply::ok("second"));
    h.origin.on("/p3", Reply::ok("third"));
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: a\r\n\r\nPOST {} HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET {} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        h.origin.url("/p1"),
        h.origin.url("/p2"),
        h.origin.url("/p3")
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert_eq!(responses(&answer), 3, "{answer}");
    let at = |s: &str| answer.find(s).unwrap_or_else(|| panic!("{s} missing: {answer}"));
    assert!(at("first") < at("second") && at("second") < at("third"), "{answer}");
    assert_eq!(h.origin.last_request("/p2").unwrap().body, b"abc");
}

#[tokio::test]
async fn a_smuggling_attempt_after_valid_pipelined_requests_is_cut_off_there() {
    let h = Harness::forward().await;
    h.origin.on("/ok", Reply::ok("fine"));
    h.origin.on("/chunked", Reply::ok("chunked"));
    h.origin.on("/smuggle", Reply::ok("x"));
    // A chunked body with extensions and trailers: the smuggling attempt is found right
    // after its last line, not inside it.
    let request = format!(
        "GET {ok} HTTP/1.1\r\nHost: a\r\n\r\n\
         POST {chunked} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
         4;a=b\r\nwxyz\r\n0;last=1\r\nX-Trailer: t\r\n\r\n\
         POST {smuggle} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
         GET {smuggle} HTTP/1.1\r\nHost: a\r\n\r\n",
        ok = h.origin.url("/ok"),
        chunked = h.origin.url("/chunked"),
        smuggle = h.origin.url("/smuggle"),
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert_eq!(responses(&answer), 3, "{answer}");
    assert!(answer.contains("fine"), "{answer}");
    let last = answer.rfind("HTTP/1.1 ").unwrap();
    assert!(answer[last..].starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(h.origin.hits("/ok"), 1);
    assert_eq!(h.origin.hits("/chunked"), 1);
    assert_eq!(h.origin.hits("/smuggle"), 0);
}

#[tokio::test]
async fn bytes_sent_after_a_refused_connect_are_not_read_as_requests() {
    // A client may send its tunnel's first bytes with the CONNECT; with no tunnel they are
    // no request, whatever they look like (a plain one, or a smuggling attempt): the
    // refusal ends the connection.
    let h = Harness::forward().await;
    h.origin.on("/early", Reply::ok("x"));
    let smuggle = format!(
        "POST {} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        h.origin.url("/early")
    );
    let plain = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", h.origin.url("/early"));
    for early in [smuggle, plain] {
        let request = format!("CONNECT {} HTTP/1.1\r\nHost: x\r\n\r\n{early}", h.origin.addr);
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403") && answer.contains("connection: close"), "{answer}");
        assert_eq!(responses(&answer), 1, "{answer}");
    }
    assert_eq!(h.origin.hits("/early"), 0);
}

#[tokio::test]
async fn an_upgrade_header_does_not_switch_the_framing_checks_off() {
    // The proxy never answers 101, so the connection stays HTTP/1.1.
    let h = Harness::forward().await;
    h.origin.on("/ws", Reply::ok("no websocket here"));
    h.origin.on("/smuggle", Reply::ok("x"));
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nPOST {} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        h.origin.url("/ws"),
        h.origin.url("/smuggle")
    );
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(responses(&answer), 2, "{answer}");
    assert!(answer[answer.rfind("HTTP/1.1 ").unwrap()..].starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(h.origin.hits("/smuggle"), 0);
}

#[tokio::test]
async fn a_transaction_slower_than_its_limit_gets_504() {
    let h = Harness::build(Mode::Forward, |c| {
        c.client.transaction_timeout = sluice_proxy::units::Dur(Duration::from_millis(200))
    })
    .await;
    h.origin.on("/crawl", Reply::ok("late").delay(Duration::from_secs(3)));
    let reply = h.get("/crawl").await;
    assert_eq!(reply.status, 504);
    assert!(reply.text().contains("transaction took longer"), "{}", reply.text());
}

/// Reads from `stream` until the server closes it (true) or 5 s pass (false: the deadline only
/// bounds a failing test); what was read is appended to `seen`.
async fn closed_by_server(stream: &mut tokio::net::TcpStream, seen: &mut Vec<u8>) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .unwrap_or(false)
}

/// A short `client.header_read_timeout`, with h2c prior knowledge on or off.
async fn short_header_timeout(h2c: bool) -> Harness {
    Harness::build(Mode::Forward, move |c| {
        c.client.header_read_timeout = sluice_proxy::units::Dur(Duration::from_millis(200));
        c.listener[0].h2c = h2c;
    })
    .await
}

#[tokio::test]
async fn header_read_timeout_closes_a_first_request_head_that_never_completes() {
    use tokio::io::AsyncWriteExt;
    for h2c in [true, false] {
        let h = short_header_timeout(h2c).await;
        // Nothing; a method; a head without its final blank line; the start of the h2 preface.
        for sent in ["", "GET", "GET / HTTP/1.1\r\nHost: a\r\n", "PRI * HTTP/2.0\r\n"] {
            let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
            stream.write_all(sent.as_bytes()).await.unwrap();
            let mut seen = Vec::new();
            let closed = closed_by_server(&mut stream, &mut seen).await;
            assert!(closed, "h2c {h2c}: a connection that sent {sent:?} must be closed after the header timeout");
            assert!(seen.is_empty(), "no response: {:?}", String::from_utf8_lossy(&seen));
        }
    }
}

#[tokio::test]
async fn header_read_timeout_applies_to_a_later_incomplete_head_too() {
    use tokio::io::AsyncWriteExt;
    let h = short_header_timeout(true).await;
    h.origin.on("/first", Reply::ok("x"));
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let request = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n", h.origin.url("/first"));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    assert!(closed_by_server(&mut stream, &mut seen).await);
    let seen = String::from_utf8_lossy(&seen);
    assert_eq!(seen.matches("HTTP/1.1 ").count(), 1, "{seen}");
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
}

#[tokio::test]
async fn idle_http2_connections_are_closed_with_goaway() {
    use tokio::io::AsyncWriteExt;
    let h = short_header_timeout(true).await;
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    // The preface and an empty SETTINGS frame, then nothing.
    stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
    let mut seen = Vec::new();
    assert!(closed_by_server(&mut stream, &mut seen).await, "an idle h2c connection must be closed");
    // Frame types in what the server sent: a GOAWAY (7) among them.
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= seen.len() {
        let len = (usize::from(seen[at]) << 16) | (usize::from(seen[at + 1]) << 8) | usize::from(seen[at + 2]);
        types.push(seen[at + 3]);
        at += 9 + len;
    }
    assert!(types.contains(&7), "frame types {types:?}");
}

#[tokio::test]
async fn idle_connect_tunnels_are_closed_after_tunnel_idle_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = Harness::build_with_origin(Mode::Forward, |c, origin| {
        c.access.connect_ports = vec![origin.port()];
        c.client.tunnel_idle_timeout = sluice_proxy::units::Dur(Duration::from_millis(200));
    })
    .await;
    h.origin.on("/tunnelled", Reply::ok("through"));
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let connect = format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n", h.origin.addr);
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    // The tunnel works, then stays silent.
    stream.write_all(b"GET /tunnelled HTTP/1.1\r\nHost: o\r\n\r\n").await.unwrap();
    let mut seen = Vec::new();
    assert!(closed_by_server(&mut stream, &mut seen).await, "an idle tunnel must be closed");
    assert!(String::from_utf8_lossy(&seen).ends_with("through"), "{}", String::from_utf8_lossy(&seen));
}

#[tokio::test]
async fn many_small_header_fields_are_accepted_up_to_max_header_fields() {
    let request = |n: usize| {
        let fields: String = (0..n).map(|i| format!("X-F{i}: v\r\n")).collect();
        format!("OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n{fields}Connection: close\r\n\r\n")
    };
    // Fields of about 10 bytes: far below max_header_bytes. 95 in all are within the
    // default 100, 200 are not; a raised limit takes them, a lowered one refuses fewer.
    let h = Harness::forward().await;
    let answer = client::raw(h.addr(), request(92).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = client::raw(h.addr(), request(200).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let h = Harness::build(Mode::Forward, |c| c.client.max_header_fields = 256).await;
    let answer = client::raw(h.addr(), request(200).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let h = Harness::build(Mode::Forward, |c| c.client.max_header_fields = 50).await;
    let answer = client::raw(h.addr(), request(92).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
}

#[tokio::test]
async fn max_header_bytes_below_8kib_is_refused_by_the_configuration_check() {
    let mut config = sluice_proxy::config::Config::default();
    config.client.max_header_bytes = sluice_proxy::units::Size(4096);
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("client.max_header_bytes must be at least 8KiB"), "{err}");
}

#[tokio::test]
async fn rfc9112_6_1_chunked_applied_twice_is_rejected() {
    let h = Harness::forward().await;
    h.origin.on("/twice", Reply::ok("x"));
    for te in ["chunked, chunked", "chunked\r\nTransfer-Encoding: chunked"] {
        let request =
            format!("POST {} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n", h.origin.url("/twice"));
        let answer = client::raw(h.addr(), request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{te:?}: {answer}");
    }
    assert_eq!(h.origin.hits("/twice"), 0);
}

#[tokio::test]
async fn rfc9112_6_3_origin_content_length_with_chunked_is_removed() {
    let h = Harness::forward().await;
    let body = "a body longer than five bytes";
    h.origin.on("/both", Reply::ok(body).chunked().header("Content-Length", "5").header("Cache-Control", "max-age=60"));
    let reply = h.get("/both").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), body);
    let stored = h.get("/both").await;
    assert_eq!(stored.text(), body);
    assert_eq!(h.origin.hits("/both"), 1);
    assert_ne!(stored.header("content-length"), "5");
}

#[tokio::test]
async fn rfc9112_6_1_unsupported_transfer_coding_from_the_origin_is_a_502_never_stored() {
    let h = Harness::forward().await;
    h.origin.on("/gzip", Reply::ok(&b"\x1f\x8bnot really gzip"[..]).header("Transfer-Encoding", "gzip").until_close());
    h.origin.on("/gzip-chunked", Reply::ok("x").chunked().header("Transfer-Encoding", "gzip"));
    for path in ["/gzip", "/gzip-chunked"] {
        let reply = h.get(path).await;
        assert_eq!(reply.status, 502, "{path}");
        assert!(reply.text().contains("unsupported transfer coding"), "{path}: {}", reply.text());
        assert_eq!(h.get(path).await.status, 502);
        assert_eq!(h.origin.hits(path), 2, "{path}: never stored");
    }
}

#[tokio::test]
async fn rfc9110_7_6_2_options_asterisk_with_max_forwards_0_is_answered_by_the_forward_proxy() {
    let h = Harness::forward().await;
    let answer =
        client::raw(h.addr(), b"OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("allow:"), "{answer}");
}

#[tokio::test]
async fn http2_request_headers_larger_than_max_header_bytes_get_431() {
    let h = Harness::build(Mode::Reverse, |c| c.client.max_header_bytes = sluice_proxy::units::Size(16 * 1024)).await;
    h.origin.on("/h2-big", Reply::ok("x"));
    let url = format!("http://{}/h2-big", h.addr());
    let status = |header: String| {
        let url = url.clone();
        async move {
            let out = tokio::process::Command::new("curl")
                .args(["-s", "--max-time", "10", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}"])
                .args(["-H", &header, &url])
                .output()
                .await
                .expect("curl is installed (scripts/install-deps.sh)");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    assert_eq!(status(format!("X-Big: {}", "b".repeat(20 * 1024))).await, "431");
    assert_eq!(status("X-Small: s".into()).await, "200");
    assert_eq!(h.origin.hits("/h2-big"), 1);
}

/// A route's own `response_timeout` (and the check of the route timeouts): an API route
/// that must answer fast gives 504 where the default route, on the same origin and the
/// same pooled connections, waits.
#[tokio::test]
async fn a_routes_own_response_timeout_replaces_the_global_one() {
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        let route = |prefix: &str, timeout: Option<Duration>| RouteConfig {
            path_prefix: prefix.into(),
            origin: Some(format!("http://{origin}")),
            response_timeout: timeout.map(sluice_proxy::units::Dur),
            ..RouteConfig::default()
        };
        c.route = vec![route("/", None), route("/api/", Some(Duration::from_millis(200)))];
    })
    .await;
    let late = Reply::ok("late").header("Cache-Control", "no-store").delay(Duration::from_millis(700));
    h.origin.on("/api/slow", late.clone());
    h.origin.on("/page/slow", late);
    assert_eq!(h.get("/api/slow").await.status, 504, "the route's 200 ms");
    let page = h.get("/page/slow").await;
    assert_eq!((page.status.as_u16(), page.text().as_str()), (200, "late"), "the global 30 s");

    let check = common::check_route;
    assert!(check("origin = \"http://10.0.0.5\"\nread_timeout = \"2m\"\nconnect_timeout = \"1s\"").is_ok());
    let zero = check("origin = \"http://10.0.0.5\"\nresponse_timeout = \"0s\"").unwrap_err();
    assert!(zero.contains("response_timeout must be more than 0"), "{zero}");
    let files = check("files = { root = \"/tmp\" }\nread_timeout = \"1s\"").unwrap_err();
    assert!(files.contains("serves files: read_timeout does not apply"), "{files}");
}

/// HTTP/2 rapid reset (CVE-2023-44487): a client that opens streams and resets each at once,
/// thousands in a row, is sent `GOAWAY` with `ENHANCE_YOUR_CALM` and cut off before the
/// origin has seen a request for each stream; the proxy serves other clients meanwhile.
#[tokio::test]
async fn http2_rapid_reset_is_cut_off() {
    const STREAMS: usize = 5000;
    let h = Harness::reverse().await;
    h.origin.on("/slow", Reply::ok("late").delay(Duration::from_secs(5)));
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (mut attacker, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let connection = tokio::spawn(connection);
    let mut sent = 0;
    for _ in 0..STREAMS {
        let request = http::Request::get(format!("http://{}/slow", h.addr())).body(()).unwrap();
        // Dropping the response future resets the stream (RST_STREAM, CANCEL).
        match attacker.send_request(request, true) {
            Ok((response, _)) => drop(response),
            Err(_) => break,
        }
        sent += 1;
        if sent % 500 == 0 {
            tokio::task::yield_now().await; // let the connection write what is queued
        }
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), connection)
        .await
        .expect("the proxy ends the connection")
        .unwrap()
        .expect_err("with an error: the proxy's GOAWAY");
    assert!(ended.is_go_away() && ended.is_remote(), "{ended:?}");
    assert_eq!(ended.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM), "{ended:?}");
    let reached = h.origin.hits("/slow");
    assert!(reached < sent / 2, "{reached} of {sent} reset streams reached the origin");
    h.origin.on("/after", Reply::ok("still here"));
    assert_eq!(h.get("/after").await.text(), "still here");
}

/// HTTP/2 CONTINUATION flood (CVE-2024-27316 and its kin): a request head that never ends,
/// sent as CONTINUATION frame after CONTINUATION frame, is not collected: the proxy sends
/// `GOAWAY` and closes the connection after a few frames, and serves other clients meanwhile.
#[tokio::test]
async fn http2_continuation_flood_is_cut_off() {
    use tokio::io::AsyncWriteExt;
    const FRAMES: usize = 1000;
    let h = Harness::reverse().await;
    let frame = |kind: u8, flags: u8, payload: &[u8]| {
        let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 1]; // stream 1
        frame.extend_from_slice(payload);
        frame
    };
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let mut opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // An empty SETTINGS, then HEADERS without END_HEADERS: GET, http, / (static table
    // entries 2, 6, 4).
    opening.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    opening.extend(frame(0x1, 0x0, &[0x82, 0x86, 0x84]));
    stream.write_all(&opening).await.unwrap();
    // Each CONTINUATION: 16,380 bytes of one-letter fields "a: b" (literal, new name).
    let junk: Vec<u8> = [0x00, 0x01, b'a', 0x01, b'b'].repeat(16_380 / 5);
    let continuation = frame(0x9, 0x0, &junk);
    let writing = async {
        let mut sent = 0;
        while sent < FRAMES && stream.write_all(&continuation).await.is_ok() {
            sent += 1;
        }
        sent // fewer than FRAMES: a write failed, the proxy having closed the connection
    };
    let sent = tokio::time::timeout(Duration::from_secs(10), writing)
        .await
        .expect("the proxy reads on or closes the connection, never just stops reading");
    let mut seen = Vec::new();
    assert!(closed_by_server(&mut stream, &mut seen).await, "the connection is closed ({sent} frames sent)");
    // The server's frames: its SETTINGS, then a GOAWAY (type 7) whose error code (after the
    // last stream id) is ENHANCE_YOUR_CALM (0xb).
    let mut goaway = None;
    let mut rest = &seen[..];
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let payload = &rest[9..(9 + len).min(rest.len())];
        if rest[3] == 0x7 && payload.len() >= 8 {
            goaway = Some(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
        }
        rest = &rest[9 + payload.len()..];
    }
    assert_eq!(goaway, Some(0xb), "GOAWAY with ENHANCE_YOUR_CALM, after {sent} frames");
    h.origin.on("/after", Reply::ok("still here"));
    assert_eq!(h.get("/after").await.text(), "still here");
}

#[tokio::test]
async fn a_refused_head_with_more_still_coming_gets_its_431_not_a_reset() {
    // 2,000 fields (beyond any limit) and 256 KiB more behind them, in one write: the proxy
    // answers 431, shuts its side and reads what follows before it closes (RFC 9112 §9.6;
    // the guard's own test, `framing.rs`, checks the reading).
    let h = Harness::forward().await;
    let fields: String = (0..2000).map(|i| format!("X-F{i}: v\r\n")).collect();
    let request = format!("OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n{fields}\r\n{}", "x".repeat(256 << 10));
    let answer = client::raw(h.addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{}", &answer[..answer.len().min(200)]);
}

#[tokio::test]
async fn a_chunked_body_that_outgrows_the_object_limit_streams_whole_to_every_reader_and_is_not_stored() {
    // Without a Content-Length the size shows only as the body arrives: past
    // cache.max_object the fill stops keeping it (its memory bounded by a window ahead of
    // the slowest reader, `Fill::stop_keeping`), and the URL is passed by for a while.
    let h = Harness::build(Mode::Forward, |c| c.cache.max_object = sluice_proxy::units::Size(64 << 10)).await;
    let body: String = (0..3_000_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    h.origin.on("/big", Reply::ok(body.clone()).header("Cache-Control", "max-age=600").chunked());
    let (first, second) = tokio::join!(h.get("/big"), h.get("/big"));
    for reply in [&first, &second] {
        assert_eq!(reply.status, 200);
        assert!(reply.text() == body, "{} bytes of {}", reply.text().len(), body.len());
    }
    let again = h.get("/big").await;
    assert!(again.text() == body);
    assert!(again.header("cache-status").contains("hit-for-pass"), "{}", again.header("cache-status"));
    assert_eq!(h.proxy.state().store.stats().objects, 0, "nothing stored");
}

#[tokio::test]
async fn responses_being_stored_hold_no_more_than_filling_memory_together() {
    // Past cache.filling_memory a fill stops storing and streams in a bounded window, as a
    // response too large to store does: a client that asks for many large objects and
    // reads none cannot make the proxy hold them all.
    let h = Harness::build(Mode::Forward, |c| c.cache.filling_memory = sluice_proxy::units::Size(64 << 10)).await;
    let body: String = (0..3_000_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    h.origin.on("/big", Reply::ok(body.clone()).header("Cache-Control", "max-age=600"));
    h.origin.on("/small", Reply::ok("fits").header("Cache-Control", "max-age=600"));
    let (first, second) = tokio::join!(h.get("/big"), h.get("/big"));
    for reply in [&first, &second] {
        assert_eq!(reply.status, 200);
        assert!(reply.text() == body, "{} bytes of {}", reply.text().len(), body.len());
    }
    let metrics = h.proxy.state().metrics.fills_over_budget.load(std::sync::atomic::Ordering::Relaxed);
    assert!(metrics >= 1, "counted");
    assert_eq!(h.proxy.state().store.fill_budget().held(), 0, "given back");
    h.get("/small").await;
    assert!(h.get("/small").await.header("cache-status").contains("hit"), "smaller ones are stored");
    assert!(h.get("/big").await.text() == body);
    assert!(h.origin.hits("/big") >= 2, "the large one was not stored");
}

#[tokio::test]
async fn a_client_that_stalls_its_upload_gets_408_and_the_origin_is_not_blamed() {
    use std::sync::atomic::Ordering::Relaxed;
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.route = vec![RouteConfig {
            origin: Some(format!("http://{origin}")),
            response_timeout: Some(sluice_proxy::units::Dur(Duration::from_millis(300))),
            ..RouteConfig::default()
        }];
    })
    .await;
    h.origin.on("/upload", Reply::ok("stored"));
    // 10 of 1,000 announced bytes, then nothing: the origin waits for the rest, as it should.
    let answer =
        client::raw(h.addr(), b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n0123456789").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    assert_eq!(h.proxy.state().metrics.origin_errors.load(Relaxed), 0, "not the origin's failure");
    let whole = h.send("POST", "/upload", &[], Some("all of it")).await;
    assert_eq!(whole.text(), "stored");
}

/// An echo server on 127.0.0.1: every connection gets back what it sends.
async fn echo_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.into_split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn rfc9110_9_3_6_a_tunnel_is_blind_to_what_looks_like_http_in_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = echo_server().await;
    let h = Harness::build(Mode::Forward, |c| c.access.connect_ports = vec![echo.port()]).await;
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    // Early data right behind the CONNECT: a head with ambiguous framing, which the framing
    // guard refuses in a request stream, then bytes that are not HTTP.
    let smuggled = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nMORE\x00\xff";
    let mut sent = format!("CONNECT {echo} HTTP/1.1\r\nHost: {echo}\r\n\r\n").into_bytes();
    sent.extend_from_slice(smuggled);
    stream.write_all(&sent).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
    // More of the same after the 200, in a later write.
    stream.write_all(b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\nEND").await.unwrap();
    let mut expected = smuggled.to_vec();
    expected.extend_from_slice(b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\nEND");
    while seen.len() - head_end < expected.len() {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the tunnel lost bytes: {:?}", String::from_utf8_lossy(&seen[head_end..]));
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(&seen[head_end..], &expected[..], "every byte through, unchanged");
}
