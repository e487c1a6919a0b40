//! Limits against HTTP/2 clients that multiply origin work: the global limit on origin
//! connections (`upstream.max_connections`), the limit on each client's requests in progress
//! (`client.max_requests_per_client`), and connections closed for cancelling request after
//! request (rapid reset's "reset after accept" form, `crate::cancels`).

mod common;

use common::Harness;
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::Reply;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// An origin that accepts connections, reads requests and never answers. Each request head
/// that arrives is reported on the channel (with the number of the connection it came on);
/// connections are kept open until the origin is dropped with the runtime.
async fn silent_origin() -> (SocketAddr, mpsc::UnboundedReceiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (heads, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut number = 0;
        while let Ok((mut conn, _)) = listener.accept().await {
            number += 1;
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let _ = heads.send(number);
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn get(authority: &str, path: &str) -> http::Request<()> {
    http::Request::get(format!("http://{authority}{path}")).body(()).unwrap()
}

/// One HTTP/2 client connection with 40 streams to an origin that never answers takes no more
/// origin connections than `upstream.max_connections` (4): one of them an idle pooled
/// connection it closes to take its slot, the requests past the limit `503` after the
/// connect timeout; meanwhile another client's cache hit is served.
/// Routes: `silent.test` to the `silent` origin, everything else to `origin`.
fn silent_beside(silent: SocketAddr, origin: SocketAddr) -> Vec<RouteConfig> {
    vec![
        RouteConfig {
            host: Some("silent.test".into()),
            origin: Some(format!("http://{silent}")),
            ..RouteConfig::default()
        },
        RouteConfig { origin: Some(format!("http://{origin}")), ..RouteConfig::default() },
    ]
}

#[tokio::test]
async fn http2_streams_take_no_more_origin_connections_than_the_limit() {
    const STREAMS: usize = 40;
    const LIMIT: usize = 4;
    let (silent, mut heads) = silent_origin().await;
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.upstream.max_connections = LIMIT;
        c.upstream.connect_timeout.0 = Duration::from_millis(500);
        c.upstream.response_timeout.0 = Duration::from_secs(60);
        c.route = silent_beside(silent, origin);
    })
    .await;
    h.origin.on("/cached", Reply::ok("stored").header("Cache-Control", "max-age=600"));
    let first = h.get("/cached").await;
    assert_eq!((first.status.as_u16(), first.text().as_str()), (200, "stored"));
    assert_eq!(h.origin.connections(), 1, "a pooled connection, idle, holding a slot");

    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut responses = tokio::task::JoinSet::new();
    for i in 0..STREAMS {
        let mut client = client.clone().ready().await.unwrap();
        let (response, _) = client.send_request(get("silent.test", &format!("/hang/{i}")), true).unwrap();
        responses.spawn(async move { response.await.map(|r| r.status().as_u16()) });
    }
    // The limit's worth of requests reach the silent origin, each on a connection of its own.
    let mut connections = std::collections::BTreeSet::new();
    for _ in 0..LIMIT {
        let on = tokio::time::timeout(Duration::from_secs(10), heads.recv()).await.expect("a request").unwrap();
        connections.insert(on);
    }
    assert_eq!(connections.len(), LIMIT, "one request per connection");

    // A cache hit for another client while every origin slot is held.
    let hit = h.get("/cached").await;
    assert_eq!((hit.status.as_u16(), hit.text().as_str()), (200, "stored"));
    assert!(common::cache_status(&hit).contains("hit"), "{}", common::cache_status(&hit));

    // Every other stream waits the connect timeout for a slot, then gets 503.
    for _ in 0..STREAMS - LIMIT {
        let status = tokio::time::timeout(Duration::from_secs(10), responses.join_next())
            .await
            .expect("the streams past the limit are answered")
            .unwrap()
            .unwrap()
            .expect("a response");
        assert_eq!(status, 503);
    }
    assert!(heads.try_recv().is_err(), "no request beyond the limit reached the silent origin");
    let metrics = common::admin::admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains(&format!("sluice_origin_connection_refusals_total {}", STREAMS - LIMIT)), "{metrics}");
    responses.abort_all();
}

/// `client.max_requests_per_client`: a client with that many requests in progress (HTTP/2
/// streams waiting on an origin that never answers) gets `429` for one more, at once, over
/// HTTP/2 and HTTP/1.1 alike, while another client is served; once its requests end (the
/// client resets them), it is served again.
#[tokio::test]
async fn a_client_has_no_more_requests_in_progress_than_its_limit() {
    const LIMIT: usize = 3;
    let (silent, mut heads) = silent_origin().await;
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.client.max_requests_per_client = LIMIT;
        c.upstream.response_timeout.0 = Duration::from_secs(60);
        c.route = silent_beside(silent, origin);
    })
    .await;
    h.origin.on("/page", Reply::ok("page").header("Cache-Control", "no-store"));
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut held = Vec::new();
    for i in 0..LIMIT {
        let mut client = client.clone().ready().await.unwrap();
        let (response, _) = client.send_request(get("silent.test", &format!("/hang/{i}")), true).unwrap();
        tokio::time::timeout(Duration::from_secs(10), heads.recv()).await.expect("at the origin").unwrap();
        held.push(response);
    }

    let mut more = client.clone().ready().await.unwrap();
    let (response, _) = more.send_request(get("origin.test", "/page"), true).unwrap();
    let refused = response.await.expect("an answer");
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    let over_http1 = h.get("/page").await;
    assert_eq!(over_http1.status.as_u16(), 429, "the same client on another connection");
    // Another client (another loopback address) is served.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut other = socket.connect(h.addr()).await.unwrap();
    let request = format!("GET {} HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n", h.target("/page"));
    tokio::io::AsyncWriteExt::write_all(&mut other, request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    other.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("page"), "{answer}");

    // The client gives up its requests; their counts end with their transactions.
    drop(held);
    let served = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut client = client.clone().ready().await.unwrap();
            let (response, _) = client.send_request(get("origin.test", "/page"), true).unwrap();
            match response.await.expect("an answer").status().as_u16() {
                429 => tokio::task::yield_now().await,
                status => return status,
            }
        }
    })
    .await
    .expect("served again once the held requests ended");
    assert_eq!(served, 200);
    let metrics = common::admin::admin(&h, "GET", "/metrics", &[], None).await.text();
    let refusals = metrics
        .lines()
        .find_map(|line| line.strip_prefix("sluice_client_in_flight_refusals_total "))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("the refusals counter");
    assert!(refusals >= 2, "{metrics}");
}

/// A client that opens stream after stream and resets each once the proxy has sent its
/// request to the origin (after the proxy accepted it, which the h2 crate's own rapid-reset
/// limit does not count) gets its connection closed, and the origin sees a bounded number of
/// requests; other clients are still served.
#[tokio::test]
async fn http2_reset_after_accept_is_cut_off() {
    const STREAMS: usize = 1000;
    let (silent, mut heads) = silent_origin().await;
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.route = silent_beside(silent, origin);
    })
    .await;
    // A browser-like client first: requests completed, some cancelled, never cut off.
    h.origin.on("/page", Reply::ok("page").header("Cache-Control", "no-store"));
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (browser, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let browser_connection = tokio::spawn(connection);
    for i in 0..150 {
        let mut browser = browser.clone().ready().await.unwrap();
        if i % 3 == 0 {
            let (response, _) = browser.send_request(get("silent.test", &format!("/nav/{i}")), true).unwrap();
            tokio::time::timeout(Duration::from_secs(10), heads.recv()).await.expect("sent on").unwrap();
            drop(response);
        } else {
            let (response, _) = browser.send_request(get("origin.test", "/page"), true).unwrap();
            assert_eq!(response.await.unwrap().status(), 200);
        }
    }
    assert!(!browser_connection.is_finished(), "50 cancelled of 150: the browser's connection stays open");

    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (attacker, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let mut connection = tokio::spawn(connection);
    let mut reached = 0;
    for i in 0..STREAMS {
        let Ok(mut attacker) = attacker.clone().ready().await else { break };
        let Ok((response, _)) = attacker.send_request(get("silent.test", &format!("/reset/{i}")), true) else {
            break;
        };
        // Reset once the origin has the request: the proxy took the stream.
        tokio::select! {
            seen = heads.recv() => { seen.unwrap(); reached += 1; }
            _ = &mut connection => break,
        }
        drop(response);
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), &mut connection).await;
    assert!(ended.is_ok(), "the proxy closes the connection ({reached} requests reached the origin)");
    while heads.try_recv().is_ok() {
        reached += 1;
    }
    assert!((101..=150).contains(&reached), "{reached} reset requests reached the origin");
    let metrics = common::admin::admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("sluice_client_cancel_closes_total 1"), "{metrics}");
    let mut browser = browser.ready().await.expect("the browser's connection is still open");
    let (response, _) = browser.send_request(get("origin.test", "/page"), true).unwrap();
    assert_eq!(response.await.unwrap().status(), 200);
}

/// A CONNECT through the forward proxy to `origin`: the client's stream and the answer's
/// status line.
async fn connect_through(h: &Harness, origin: SocketAddr) -> (tokio::net::TcpStream, String) {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stream.write_all(format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n").as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1 {
        answer.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn connect_tunnels_hold_origin_connection_slots_while_they_live() {
    let h = Harness::build_with_origin(Mode::Forward, |c, origin| {
        c.access.connect_ports = vec![origin.port()];
        c.upstream.max_connections = 2;
        c.upstream.connect_timeout.0 = Duration::from_secs(2);
    })
    .await;
    let origin = h.origin.addr;
    let (first, status) = connect_through(&h, origin).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let (_second, status) = connect_through(&h, origin).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let (_third, status) = connect_through(&h, origin).await;
    assert!(status.starts_with("HTTP/1.1 503"), "no slot within the connect timeout: {status}");
    // A tunnel that ends gives its slot back: the next CONNECT takes it.
    drop(first);
    let (_fourth, status) = connect_through(&h, origin).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}
