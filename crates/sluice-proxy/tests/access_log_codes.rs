//! Result codes in the access log as Squid writes them: a refresh the client forced, a
//! client's conditional on a stale response the origin confirmed, transfers that did not
//! complete (`_ABORTED`), and requests refused before any transaction (`NONE/400`,
//! `NONE/431`: malformed, smuggling, oversized heads).

mod common;

use common::{Harness, LogFile};
use sluice_proxy::config::{LogFormat, Mode};
use sluice_testkit::client;
use sluice_testkit::Reply;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn logged(format: LogFormat) -> (Harness, LogFile) {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| {
        c.log.access_log = Some(log_path);
        c.log.format = format;
    })
    .await;
    (h, log)
}

/// The result field (`CODE/status`) of a Squid-format line.
fn result(line: &str) -> &str {
    line.split_whitespace().nth(3).unwrap_or("")
}

#[tokio::test]
async fn no_cache_is_a_client_refresh_miss_only_for_a_stored_response() {
    let (h, log) = logged(LogFormat::Squid).await;
    h.origin.on("/r", Reply::ok("x").header("Cache-Control", "max-age=60").header("ETag", "\"r\"").validating());
    h.origin.on("/new", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.origin.on("/none", Reply::ok("x").header("Cache-Control", "max-age=60"));
    // Nothing stored: a miss, whatever the client asked.
    h.get_with("/none", &[("Cache-Control", "no-cache")]).await;
    h.get("/r").await;
    h.get("/new").await;
    // Stored: the client forced the refresh. The origin confirmed one (304: nothing fetched
    // again) and sent the other anew.
    h.get_with("/r", &[("Cache-Control", "no-cache")]).await;
    h.get_with("/new", &[("Pragma", "no-cache")]).await;
    let lines = log.lines(&h, 5).await;
    let codes: Vec<&str> = lines.iter().map(|l| result(l)).collect();
    assert_eq!(
        codes,
        ["TCP_MISS/200", "TCP_MISS/200", "TCP_MISS/200", "TCP_REFRESH_UNMODIFIED/200", "TCP_CLIENT_REFRESH_MISS/200"]
    );
}

#[tokio::test]
async fn stale_refreshes_are_refresh_codes_and_ims_hit_is_for_fresh_responses() {
    let (h, log) = logged(LogFormat::Squid).await;
    h.origin.on("/s", Reply::ok("body").header("Cache-Control", "max-age=10").header("ETag", "\"e\"").validating());
    h.get("/s").await;
    h.advance(20);
    // Stale; the client's conditional, the origin asked and confirming it.
    let reply = h.get_with("/s", &[("If-None-Match", "\"e\"")]).await;
    assert_eq!(reply.status, 304);
    // Fresh again: the client's conditional answered without the origin.
    let reply = h.get_with("/s", &[("If-None-Match", "\"e\"")]).await;
    assert_eq!(reply.status, 304);
    let lines = log.lines(&h, 3).await;
    assert_eq!(result(&lines[0]), "TCP_MISS/200");
    assert_eq!(result(&lines[1]), "TCP_REFRESH_UNMODIFIED/304", "{}", lines[1]);
    assert!(lines[1].contains(" HIER_DIRECT/"), "{}", lines[1]);
    assert_eq!(result(&lines[2]), "TCP_IMS_HIT/304", "{}", lines[2]);
    assert!(lines[2].contains(" HIER_NONE/-"), "{}", lines[2]);
    assert_eq!(h.origin.hits("/s"), 2);
}

#[tokio::test]
async fn a_transfer_the_client_cut_short_is_logged_aborted() {
    let (h, log) = logged(LogFormat::Squid).await;
    h.origin.on("/big", Reply::ok(vec![b'x'; 32 << 20]).header("Cache-Control", "no-store"));
    h.origin.on("/small", Reply::ok("x").header("Cache-Control", "no-store"));
    let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let target = h.target("/big");
    conn.write_all(format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await.unwrap().unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    drop(conn);
    let line = log.lines(&h, 1).await.remove(0);
    assert_eq!(result(&line), "TCP_MISS_ABORTED/200", "{line}");
    // A complete one carries no marker.
    h.get("/small").await;
    let lines = log.lines(&h, 2).await;
    assert_eq!(result(&lines[1]), "TCP_MISS/200", "{}", lines[1]);
}

#[tokio::test]
async fn a_client_leaving_before_the_origin_answered_is_logged_as_its_miss_aborted() {
    let (h, log) = logged(LogFormat::Squid).await;
    h.origin.on("/slow-pass", Reply::ok("x").header("Cache-Control", "no-store").delay(Duration::from_secs(3)));
    h.origin.on("/slow-miss", Reply::ok("x").header("Cache-Control", "max-age=60").delay(Duration::from_secs(3)));
    for path in ["/slow-pass", "/slow-miss"] {
        let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
        let target = h.target(path);
        let request = if path == "/slow-pass" {
            format!("POST {target} HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
        } else {
            format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n")
        };
        conn.write_all(request.as_bytes()).await.unwrap();
        h.eventually("the request reaches the origin", |h| h.origin.hits(path) == 1).await;
        drop(conn);
    }
    let lines = log.lines(&h, 2).await;
    for line in &lines {
        assert_eq!(result(line), "TCP_MISS_ABORTED/000", "{line}");
    }
}

/// Sends `request` on a new connection; returns what the proxy answered before closing./// Sends `request` on a new connection; returns what the proxy answered before closing.
async fn raw(h: &Harness, request: &[u8]) -> String {
    let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn refused_request_heads_are_logged_as_squid_does() {
    let (h, log) = logged(LogFormat::Squid).await;
    let target = h.target("/x");
    // Request smuggling: Content-Length with Transfer-Encoding (the framing guard).
    let smuggled = format!(
        "POST {target} HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\n\r\n"
    );
    let answer = raw(&h, smuggled.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let answered = answer.len().to_string();
    // A malformed head (hyper's parser).
    let answer = raw(&h, b"GET /x HTTP/1.1\r\nHost a\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // An oversized head.
    let big = format!("GET {target} HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n", "b".repeat(1 << 20));
    let answer = raw(&h, big.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    // A request line longer than a head may be (the framing guard's stand-in, answered by
    // the service the way hyper answers).
    let long = format!("GET {target}?{} HTTP/1.1\r\nHost: a\r\n\r\n", "q".repeat(1 << 20));
    let answer = raw(&h, long.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
    let answered_414 = answer.len().to_string();
    // Logged as each connection ends (hyper's refusals) or as the answer goes (the 414).
    let mut lines = log.lines(&h, 4).await;
    let code = |line: &String| line.split_whitespace().nth(3).unwrap_or("").to_owned();
    lines.sort_by_key(code);
    // The size logged is that of the answer.
    assert_eq!(lines[0].split_whitespace().nth(4), Some(answered.as_str()), "{}", lines[0]);
    assert_eq!(lines[2].split_whitespace().nth(4), Some(answered_414.as_str()), "{}", lines[2]);
    for (line, code, url) in [
        (&lines[0], "NONE/400", "error:invalid-request"),
        (&lines[1], "NONE/400", "error:invalid-request"),
        (&lines[2], "NONE/414", "error:request-too-large"),
        (&lines[3], "NONE/431", "error:request-too-large"),
    ] {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 10, "{line}");
        assert_eq!(fields[2], "127.0.0.1", "{line}");
        assert_eq!(fields[3], code, "{line}");
        assert!(fields[4].parse::<u64>().unwrap() > 0, "{line}");
        assert_eq!(fields[5], "NONE", "{line}");
        assert_eq!(fields[6], url, "{line}");
        assert_eq!(&fields[7..], ["-", "HIER_NONE/-", "-"], "{line}");
    }
    let metrics = client::get(h.admin(), "/metrics", &[]).await.text();
    assert!(metrics.contains("sluice_requests_total{result=\"NONE\"} 4"), "{metrics}");
}

#[tokio::test]
async fn refused_request_heads_in_combined_and_json() {
    let (h, log) = logged(LogFormat::Combined).await;
    let answer = raw(&h, b"GET /x HTTP/1.1\r\nHost a\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let line = log.lines(&h, 1).await.remove(0);
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(line.contains("\"NONE error:invalid-request HTTP/1.1\" 400 "), "{line}");
    assert!(line.ends_with(" NONE:HIER_NONE"), "{line}");

    let (h, log) = logged(LogFormat::Json).await;
    let answer = raw(&h, b"GET /x HTTP/1.1\r\nHost a\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let line = log.lines(&h, 1).await.remove(0);
    let json: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(json["client"], "127.0.0.1");
    assert_eq!(json["result"], "NONE");
    assert_eq!(json["status"], 400);
    assert_eq!(json["method"], "NONE");
    assert_eq!(json["url"], "error:invalid-request");
}
