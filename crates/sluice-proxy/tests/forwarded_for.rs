//! `access.forwarded_for_from` (`crate::forwarded`): behind a trusted HTTP load balancer,
//! each request's `X-Forwarded-For` names its client, for the access rules and the log,
//! request by request on one connection; from anyone else the header names nobody. RFC 7239
//! `Forwarded`, read (`access.forwarded_for_header`) and written (`headers.forwarded`).

mod common;

use common::{Harness, LogFile};
use sluice_proxy::config::{ForwardedForHeader, Mode};
use sluice_testkit::{client, Reply};

/// A reverse proxy that allows only 198.51.100.0/24, believing `X-Forwarded-For` from
/// `trusted` peers (the test client is 127.0.0.1), logging to `log`.
async fn behind_balancer(trusted: &[&str], log: std::path::PathBuf) -> Harness {
    let trusted: Vec<_> = trusted.iter().map(|n| n.parse().unwrap()).collect();
    let h = Harness::build(Mode::Reverse, move |c| {
        c.access.allow = vec!["198.51.100.0/24".parse().unwrap()];
        c.access.forwarded_for_from = trusted;
        c.log.access_log = Some(log);
    })
    .await;
    h.origin.on("/p", Reply::ok("origin").header("Cache-Control", "no-store"));
    h
}

fn request(xff: &str) -> String {
    format!("GET /p HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: {xff}\r\n\r\n")
}

#[tokio::test]
async fn a_trusted_balancer_names_each_requests_client() {
    let log = LogFile::new();
    let h = behind_balancer(&["127.0.0.0/8"], log.path.clone()).await;
    // One connection, as a balancer reuses it for one client after another.
    let requests = [request("198.51.100.9"), request("203.0.113.5"), request("203.0.113.5, 198.51.100.10")].concat()
        + "GET /p HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    let answers = client::raw(h.addr(), requests.as_bytes()).await;
    let statuses: Vec<&str> = answers.match_indices("HTTP/1.1 ").map(|(i, _)| &answers[i + 9..i + 12]).collect();
    assert_eq!(
        statuses,
        ["200", "403", "200", "403"],
        "allowed, not allowed, the last hop counts, no header: {answers}"
    );

    let forwarded = h.origin.requests("/p");
    assert_eq!(forwarded.len(), 2);
    assert_eq!(forwarded[0].header("x-forwarded-for"), Some("198.51.100.9, 127.0.0.1"), "the balancer appended");
    let lines = log.lines(&h, 4).await;
    let clients: Vec<&str> = lines.iter().map(|l| l.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(clients, ["198.51.100.9", "203.0.113.5", "198.51.100.10", "127.0.0.1"]);
}

#[tokio::test]
async fn from_anyone_else_the_header_names_nobody() {
    let log = LogFile::new();
    let h = behind_balancer(&[], log.path.clone()).await;
    let closing = "GET /p HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 198.51.100.9\r\nConnection: close\r\n\r\n";
    let answer = client::raw(h.addr(), closing.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "the peer, 127.0.0.1, is checked: {answer}");
    assert_eq!(h.origin.hits("/p"), 0);
}

#[tokio::test]
async fn a_balancer_may_name_the_client_in_rfc7239_forwarded_instead() {
    let log = LogFile::new();
    let path = log.path.clone();
    let h = Harness::build(Mode::Reverse, move |c| {
        c.access.allow = vec!["198.51.100.0/24".parse().unwrap()];
        c.access.forwarded_for_from = vec!["127.0.0.0/8".parse().unwrap()];
        c.access.forwarded_for_header = ForwardedForHeader::Forwarded;
        c.log.access_log = Some(path);
    })
    .await;
    h.origin.on("/p", Reply::ok("origin").header("Cache-Control", "no-store"));
    let forwarded = |value: &str| format!("GET /p HTTP/1.1\r\nHost: a\r\nForwarded: {value}\r\n\r\n");
    let requests = [
        forwarded("for=\"198.51.100.9:4711\";proto=https"),
        forwarded("for=198.51.100.10, for=_hidden"),
        // X-Forwarded-For is not the header read now.
        request("198.51.100.11"),
    ]
    .concat()
        + "GET /p HTTP/1.1\r\nHost: a\r\nForwarded: for=203.0.113.5, for=127.0.0.9\r\nConnection: close\r\n\r\n";
    let answers = client::raw(h.addr(), requests.as_bytes()).await;
    let statuses: Vec<&str> = answers.match_indices("HTTP/1.1 ").map(|(i, _)| &answers[i + 9..i + 12]).collect();
    assert_eq!(statuses, ["200", "403", "403", "403"], "{answers}");
    let lines = log.lines(&h, 4).await;
    let clients: Vec<&str> = lines.iter().map(|l| l.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(clients, ["198.51.100.9", "127.0.0.1", "127.0.0.1", "203.0.113.5"], "an obfuscated node names nobody");
}

#[tokio::test]
async fn headers_forwarded_appends_an_rfc7239_element_for_the_origin() {
    let h = Harness::build(Mode::Reverse, |c| c.headers.forwarded = true).await;
    h.origin.on("/p", Reply::ok("origin").header("Cache-Control", "no-store"));
    let reply = client::send(h.addr(), "GET", "/p", &[("host", "www.example:8080")], None).await;
    assert_eq!(reply.status, 200);
    let sent = h.origin.last_request("/p").unwrap();
    assert_eq!(sent.header("forwarded"), Some("for=127.0.0.1;host=\"www.example:8080\";proto=http"));
    assert_eq!(sent.header("x-forwarded-for"), Some("127.0.0.1"), "X-Forwarded-For is still added");

    let reply =
        client::send(h.addr(), "GET", "/p", &[("host", "a"), ("forwarded", "for=192.0.2.1;proto=https")], None).await;
    assert_eq!(reply.status, 200);
    let sent = h.origin.last_request("/p").unwrap();
    assert_eq!(sent.header("forwarded"), Some("for=192.0.2.1;proto=https, for=127.0.0.1;host=a;proto=http"));

    // Over HTTP/2 the host comes from `:authority`.
    let url = format!("http://{}/p", h.addr());
    let out = common::curl(&["--http2-prior-knowledge", &url]).await;
    assert_eq!(out, "origin");
    let host = h.addr().to_string();
    let expected = format!("for=127.0.0.1;host=\"{host}\";proto=http");
    assert_eq!(h.origin.last_request("/p").unwrap().header("forwarded"), Some(expected.as_str()));

    let plain = Harness::reverse().await;
    plain.origin.on("/p", Reply::ok("origin"));
    plain.get("/p").await;
    assert_eq!(plain.origin.last_request("/p").unwrap().header("forwarded"), None, "off by default");
}
