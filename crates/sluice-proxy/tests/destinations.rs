//! The forward proxy's destination ACL (`access.deny_destinations`, `allow_destinations`):
//! forward requests and CONNECT tunnels to loopback are refused by default, by address and by
//! a name that resolves to it; allowed when configured; reverse routes are not subject to it.
//! Real sockets on 127.0.0.1 (the harness's origin), real clients.

mod common;

use common::{curl, Harness, LogFile};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::{client, Reply};
use tokio::io::AsyncWriteExt;

const REFUSED: &str = "its addresses are denied by access.deny_destinations";

/// A forward proxy with the default destination ACL (the harness allows loopback for its
/// other tests), logging to `log`.
async fn denying(mode: Mode, log: &LogFile, tweak: impl FnOnce(&mut sluice_proxy::config::Config)) -> Harness {
    let log_path = log.path.clone();
    Harness::build(mode, move |c| {
        c.access.allow_destinations = Vec::new();
        c.access.connect_ports = (1..=u16::MAX).collect();
        c.log.access_log = Some(log_path);
        tweak(c);
    })
    .await
}

/// Sends `CONNECT authority` on a new connection to the proxy; returns the response's head
/// and body (a refusal has a `Content-Length`).
async fn connect(h: &Harness, authority: &str) -> String {
    let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    common::raw::read_response(&mut conn).await
}

#[tokio::test]
async fn forward_requests_to_loopback_are_refused_by_address_and_by_name() {
    let log = LogFile::new();
    let h = denying(Mode::Forward, &log, |_| {}).await;
    h.origin.on("/secret", Reply::ok("secret"));
    let port = h.origin.addr.port();
    let targets = [
        format!("http://127.0.0.1:{port}/secret"),
        format!("http://localhost:{port}/secret"),
        format!("http://[::ffff:127.0.0.1]:{port}/secret"),
    ];
    for target in &targets {
        let reply = client::get(h.addr(), target, &[]).await;
        assert_eq!(reply.status, 403, "{target}: {}", reply.text());
        assert!(reply.text().contains(REFUSED), "{target}: {}", reply.text());
    }
    assert_eq!(h.origin.hits("/secret"), 0, "nothing reached the origin");
    logged_denied(&h, &log, &targets).await;
}

/// The access log's lines, one per request in `targets` order, each `TCP_DENIED/403` for it.
async fn logged_denied(h: &Harness, log: &LogFile, targets: &[String]) {
    let lines = log.lines(h, targets.len()).await;
    for (line, target) in lines.iter().zip(targets) {
        assert!(line.contains(" TCP_DENIED/403 ") && line.contains(target.as_str()), "{line}");
    }
}

#[tokio::test]
async fn connect_tunnels_to_loopback_are_refused_by_address_and_by_name() {
    let log = LogFile::new();
    let h = denying(Mode::Forward, &log, |_| {}).await;
    let port = h.origin.addr.port();
    let authorities = [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")];
    for authority in &authorities {
        let reply = connect(&h, authority).await;
        assert!(reply.starts_with("HTTP/1.1 403 "), "{authority}: {reply}");
        assert!(reply.contains(REFUSED), "{authority}: {reply}");
    }
    logged_denied(&h, &log, &authorities).await;
}

#[tokio::test]
async fn allowed_destinations_are_exceptions_to_the_denied_ones() {
    let log = LogFile::new();
    // Only 127.0.0.1 itself: `localhost` is reached at it (its `::1` is still denied).
    let h = denying(Mode::Forward, &log, |c| c.access.allow_destinations = vec!["127.0.0.1/32".parse().unwrap()]).await;
    h.origin.on("/fine", Reply::ok("fine"));
    let port = h.origin.addr.port();
    for target in [format!("http://127.0.0.1:{port}/fine"), format!("http://localhost:{port}/fine")] {
        let reply = client::get(h.addr(), &target, &[]).await;
        assert_eq!((reply.status.as_u16(), reply.text().as_str()), (200, "fine"), "{target}");
    }
    let proxy = format!("http://{}", h.addr());
    for url in [format!("http://127.0.0.1:{port}/fine"), format!("http://localhost:{port}/fine")] {
        assert_eq!(curl(&["-p", "-x", &proxy, &url]).await, "fine", "CONNECT for {url}");
    }
    let reply = connect(&h, &format!("127.0.0.2:{port}")).await;
    assert!(reply.starts_with("HTTP/1.1 403 ") && reply.contains(REFUSED), "{reply}");
}

#[tokio::test]
async fn nothing_denied_reaches_loopback() {
    let log = LogFile::new();
    let h = denying(Mode::Forward, &log, |c| c.access.deny_destinations = Vec::new()).await;
    h.origin.on("/open", Reply::ok("open"));
    let reply = client::get(h.addr(), &format!("http://localhost:{}/open", h.origin.addr.port()), &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[tokio::test]
async fn reverse_routes_reach_their_loopback_origins_and_lend_forward_requests_no_connection() {
    let log = LogFile::new();
    let h = denying(Mode::Both, &log, |c| {
        let origin = c.route.first().and_then(|r| r.origin.clone());
        c.route = vec![RouteConfig { host: Some("site".into()), origin, ..RouteConfig::default() }];
    })
    .await;
    h.origin.on("/page", Reply::ok("page"));
    let routed = client::get(h.addr(), "/page", &[("Host", "site")]).await;
    assert_eq!((routed.status.as_u16(), routed.text().as_str()), (200, "page"));
    // The route's connection to the origin is pooled now; a forward request to the same
    // origin does not get it.
    let forwarded = client::get(h.addr(), &h.origin.url("/page"), &[]).await;
    assert_eq!(forwarded.status, 403, "{}", forwarded.text());
    assert_eq!(h.origin.hits("/page"), 1);
    let routed = client::get(h.addr(), "/page", &[("Host", "site")]).await;
    assert_eq!(routed.status, 200, "the route still reaches it");

    let h = denying(Mode::Reverse, &log, |_| {}).await;
    h.origin.on("/r", Reply::ok("reverse"));
    assert_eq!(h.get("/r").await.text(), "reverse");
}
