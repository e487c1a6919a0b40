//! Operations as users meet them: real curl through the forward proxy and CONNECT tunnels,
//! HTTP/2 (h2c and TLS), pipelining, collapsing, PURGE, the admin API, the access log,
//! Max-Forwards, and graceful shutdown.

mod common;

use common::{curl, Harness, LogFile};
use sluice_proxy::config::{Mode, TlsConfig};
use sluice_proxy::units::Dur;
use sluice_testkit::client;
use sluice_testkit::Reply;
use std::time::Duration;

#[tokio::test]
async fn curl_through_the_forward_proxy() {
    let h = Harness::forward().await;
    h.origin.on("/curl", Reply::ok("via curl").header("Cache-Control", "max-age=60"));
    let proxy = format!("http://{}", h.addr());
    assert_eq!(curl(&["-x", &proxy, &h.origin.url("/curl")]).await, "via curl");
    let headers = curl(&["-x", &proxy, "-D", "-", "-o", "/dev/null", &h.origin.url("/curl")]).await;
    assert!(headers.contains("cache-status: sluice; hit"), "{headers}");
    assert_eq!(h.origin.hits("/curl"), 1);
}

#[tokio::test]
async fn curl_through_a_connect_tunnel() {
    let h = Harness::build_with_origin(Mode::Forward, |c, origin| c.access.connect_ports = vec![origin.port()]).await;
    h.origin.on("/tunnel", Reply::ok("through the tunnel"));
    let proxy = format!("http://{}", h.addr());
    let body = curl(&["-p", "-x", &proxy, &h.origin.url("/tunnel")]).await;
    assert_eq!(body, "through the tunnel");
    assert_eq!(h.origin.hits("/tunnel"), 1);
}

#[tokio::test]
async fn h2c_prior_knowledge_is_served() {
    let h = Harness::reverse().await;
    h.origin.on("/h2", Reply::ok("over h2").header("Cache-Control", "max-age=60"));
    let url = format!("http://{}/h2", h.addr());
    let out = curl(&["--http2-prior-knowledge", "-w", " %{http_version}", &url]).await;
    assert_eq!(out, "over h2 2");
}

/// A reverse proxy whose listener serves TLS with a new self-signed certificate for
/// `localhost`; the certificate, and the directory holding its files (kept while it lives).
async fn tls_reverse_proxy() -> (Harness, rcgen::CertifiedKey<rcgen::KeyPair>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let pem = dir.path().join("key.pem");
    std::fs::write(&cert, key.cert.pem()).unwrap();
    std::fs::write(&pem, key.signing_key.serialize_pem()).unwrap();
    let tls = TlsConfig::single(cert, pem);
    let h = Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(tls)).await;
    (h, key, dir)
}

#[tokio::test]
async fn tls_listener_negotiates_h2_with_alpn() {
    let (h, _key, _dir) = tls_reverse_proxy().await;
    h.origin.on("/tls", Reply::ok("secure").header("Cache-Control", "max-age=60"));
    let url = format!("https://localhost:{}/tls", h.addr().port());
    let resolve = format!("localhost:{}:127.0.0.1", h.addr().port());
    let out = curl(&["-k", "--resolve", &resolve, "--http2", "-w", " %{http_version}", &url]).await;
    assert_eq!(out, "secure 2");
    let out = curl(&["-k", "--resolve", &resolve, "--http1.1", "-w", " %{http_version}", &url]).await;
    assert_eq!(out, "secure 1.1");
    let forwarded = h.origin.last_request("/tls").unwrap();
    assert_eq!(forwarded.header("x-forwarded-proto"), Some("https"));
}

#[tokio::test]
async fn h2c_off_refuses_http2_with_prior_knowledge() {
    let h = Harness::build(Mode::Reverse, |c| c.listener[0].h2c = false).await;
    h.origin.on("/h1", Reply::ok("over h1").header("Cache-Control", "max-age=60"));
    let url = format!("http://{}/h1", h.addr());
    let out = curl(&["--http2-prior-knowledge", "-w", " %{http_version}", &url]).await;
    assert!(!out.contains("over h1"), "no HTTP/2 on this listener: {out:?}");
    assert_eq!(curl(&["-w", " %{http_version}", &url]).await, "over h1 1.1");
}

/// Speaks TLS to `addr` offering ALPN `protocol`, writes `bytes`, and returns what comes back
/// before the server closes (or 5 s pass).
async fn over_tls(addr: std::net::SocketAddr, cert: &rcgen::Certificate, protocol: &[u8], bytes: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![protocol.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer)).await;
    answer
}

#[tokio::test]
async fn rfc9113_3_3_tls_connections_speak_the_protocol_alpn_chose() {
    let (h, key, _dir) = tls_reverse_proxy().await;
    // h2 negotiated, then HTTP/1: not the connection preface (RFC 9113 §3.4), closed unanswered.
    let http1 = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    assert_eq!(String::from_utf8_lossy(&over_tls(h.addr(), &key.cert, b"h2", http1).await), "");
    // http/1.1 negotiated, then the HTTP/2 preface: refused as HTTP/1.
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let answer = over_tls(h.addr(), &key.cert, b"http/1.1", preface).await;
    assert!(answer.starts_with(b"HTTP/1.1 400"), "{}", String::from_utf8_lossy(&answer));
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let h = Harness::forward().await;
    h.origin.on("/one", Reply::ok("first").header("Cache-Control", "max-age=60"));
    h.origin.on("/two", Reply::ok("second"));
    let raw = format!(
        "GET {} HTTP/1.1\r\nHost: a\r\n\r\nGET {} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        h.origin.url("/one"),
        h.origin.url("/two")
    );
    let answer = client::raw(h.addr(), raw.as_bytes()).await;
    let first = answer.find("first").expect("first response");
    let second = answer.find("second").expect("second response");
    assert!(first < second, "{answer}");
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2);
}

#[tokio::test]
async fn concurrent_misses_collapse_onto_one_origin_fetch() {
    let h = Harness::forward().await;
    h.origin.on(
        "/popular",
        Reply::ok("x".repeat(100_000)).header("Cache-Control", "max-age=60").delay(Duration::from_millis(300)),
    );
    let target = h.target("/popular");
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (addr, target) = (h.addr(), target.clone());
            tokio::spawn(async move { client::get(addr, &target, &[]).await })
        })
        .collect();
    for task in tasks {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), 100_000);
    }
    assert_eq!(h.origin.hits("/popular"), 1);
    let collapsed = h.proxy.state().metrics.collapsed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(collapsed >= 1, "at least one request waited on the leader's fetch");
}

#[tokio::test]
async fn concurrent_misses_for_other_variants_collapse_onto_one_fetch_per_variant() {
    let h = Harness::forward().await;
    h.origin.on(
        "/localised",
        Reply::ok("page")
            .header("Cache-Control", "max-age=60")
            .header("Vary", "Accept-Language")
            .delay(Duration::from_millis(300)),
    );
    let target = h.target("/localised");
    let tasks: Vec<_> = ["en", "fr", "en", "fr", "de", "fr", "en", "de"]
        .into_iter()
        .map(|language| {
            let (addr, target) = (h.addr(), target.clone());
            tokio::spawn(async move { client::get(addr, &target, &[("Accept-Language", language)]).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().text(), "page");
    }
    let mut asked: Vec<String> =
        h.origin.requests("/localised").iter().map(|r| r.header("accept-language").unwrap_or("").to_owned()).collect();
    asked.sort();
    assert_eq!(asked, ["de", "en", "fr"], "one fetch per variant, the first response's variant included");
}

#[tokio::test]
async fn requests_for_ranges_of_an_object_being_fetched_get_their_ranges() {
    let h = Harness::forward().await;
    let body: String = (0..200_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    h.origin
        .on("/ranged", Reply::ok(body.clone()).header("Cache-Control", "max-age=60").delay(Duration::from_millis(300)));
    let target = h.target("/ranged");
    let ranges = [(0, 9), (65_530, 65_545), (123_456, 199_999), (199_999, 199_999), (7, 150_000)];
    let tasks: Vec<_> = ranges
        .iter()
        .map(|&(first, last)| {
            let (addr, target) = (h.addr(), target.clone());
            let range = format!("bytes={first}-{last}");
            tokio::spawn(async move { client::get(addr, &target, &[("Range", range.as_str())]).await })
        })
        .collect();
    for (task, (first, last)) in tasks.into_iter().zip(ranges) {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, 206, "bytes={first}-{last}");
        assert_eq!(reply.header("content-range"), format!("bytes {first}-{last}/200000"));
        assert_eq!(reply.text(), &body[first..=last]);
    }
    assert_eq!(h.origin.hits("/ranged"), 1, "one fetch of the whole object served every range");
}

#[tokio::test]
async fn a_collapsed_request_stops_waiting_and_fetches_itself() {
    let h = Harness::build(Mode::Forward, |c| c.cache.collapse_wait = Dur(Duration::from_millis(50))).await;
    h.origin.on("/glacial", Reply::ok("slow").header("Cache-Control", "max-age=60").delay(Duration::from_millis(600)));
    let target = h.target("/glacial");
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let (addr, target) = (h.addr(), target.clone());
            tokio::spawn(async move { client::get(addr, &target, &[]).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().text(), "slow");
    }
    assert_eq!(h.origin.hits("/glacial"), 3, "waiters gave up after collapse_wait and fetched on their own");
}

#[tokio::test]
async fn purge_removes_stored_variants_and_is_acl_restricted() {
    let h = Harness::forward().await;
    h.origin.on("/purge-me", Reply::ok("x").header("Cache-Control", "max-age=600"));
    h.get("/purge-me").await;
    assert_eq!(h.send("PURGE", "/purge-me", &[], None).await.status, 200);
    assert_eq!(h.send("PURGE", "/purge-me", &[], None).await.status, 404);
    h.get("/purge-me").await;
    assert_eq!(h.origin.hits("/purge-me"), 2);

    let log = LogFile::new();
    let log_path = log.path.clone();
    let locked = Harness::build(Mode::Forward, move |c| {
        c.access.purge_allow = vec!["10.0.0.0/8".parse().unwrap()];
        c.log.access_log = Some(log_path);
    })
    .await;
    assert_eq!(locked.send("PURGE", "/x", &[], None).await.status, 403);
    // A refusal by the ACL, logged and counted as such.
    let line = log.lines(&locked, 1).await.remove(0);
    assert!(line.contains(" TCP_DENIED/403 ") && line.contains(" PURGE "), "{line}");
    let metrics = client::get(locked.admin(), "/metrics", &[]).await.text();
    assert!(metrics.contains("sluice_requests_total{result=\"TCP_DENIED\"} 1"), "{metrics}");
}

#[tokio::test]
async fn admin_api_serves_metrics_and_requires_a_token_for_the_rest() {
    let h = Harness::forward().await;
    h.origin.on("/m", Reply::ok("x").header("Cache-Control", "max-age=600"));
    h.get("/m").await;
    h.get("/m").await;
    let admin = h.admin();
    let metrics = client::get(admin, "/metrics", &[]).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.text().contains("sluice_requests_total{result=\"TCP_MEM_HIT\"} 1"), "{}", metrics.text());
    assert!(metrics.text().contains("sluice_requests_total{result=\"TCP_MISS\"} 1"));
    // How long each took, a histogram per result code.
    let text = metrics.text();
    assert!(text.contains("# TYPE sluice_request_duration_seconds histogram"), "{text}");
    assert!(text.contains("sluice_request_duration_seconds_count{result=\"TCP_MEM_HIT\"} 1"), "{text}");
    assert!(text.contains("sluice_request_duration_seconds_bucket{result=\"TCP_MISS\",le=\"+Inf\"} 1"), "{text}");
    assert!(text.contains("sluice_origin_response_seconds_count 1\n"), "one origin response, for the miss: {text}");
    assert_eq!(client::get(admin, "/stats", &[]).await.status, 401);
    assert_eq!(client::get(admin, "/stats", &[("Authorization", "Bearer wrong")]).await.status, 401);
    assert_eq!(client::get(admin, "/stats", &[("Authorization", "Basic test-token")]).await.status, 401);
    assert_eq!(client::get(admin, "/stats", &[("Authorization", "Bearertest-token")]).await.status, 401);
    // Auth schemes are case-insensitive (RFC 9110 §11.1).
    for scheme in ["bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} test-token");
        assert_eq!(client::get(admin, "/stats", &[("Authorization", &auth)]).await.status, 200, "{auth}");
    }
    let stats = client::get(admin, "/stats", &[("Authorization", "Bearer test-token")]).await;
    let json: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert_eq!(json["hits"], 1);
    assert_eq!(json["cache"]["objects"], 1);
    let url = h.origin.url("/m");
    let delete =
        client::send(admin, "DELETE", &format!("/cache?url={url}"), &[("Authorization", "Bearer test-token")], None)
            .await;
    assert_eq!(delete.status, 200, "{}", delete.text());
    let bad =
        client::send(admin, "DELETE", "/cache?url=not-a-url", &[("Authorization", "Bearer test-token")], None).await;
    assert_eq!(bad.status, 400);
    h.get("/m").await;
    assert_eq!(h.origin.hits("/m"), 2);
}

#[tokio::test]
async fn access_log_is_written_in_squid_native_format() {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| c.log.access_log = Some(log_path)).await;
    h.origin
        .on("/logged", Reply::ok("12345").header("Content-Type", "text/plain").header("Cache-Control", "max-age=60"));
    h.get("/logged").await;
    h.get("/logged").await;
    let lines = log.lines(&h, 2).await;
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let url = h.origin.url("/logged");
    for (line, code, hier) in
        [(lines[0], "TCP_MISS/200", "HIER_DIRECT/127.0.0.1"), (lines[1], "TCP_MEM_HIT/200", "HIER_NONE/-")]
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 10, "{line}");
        assert!(fields[0].len() > 4 && fields[0].as_bytes()[fields[0].len() - 4] == b'.', "seconds.millis: {line}");
        assert_eq!(fields[2], "127.0.0.1");
        assert_eq!(fields[3], code);
        assert!(fields[4].parse::<u64>().unwrap() > 5, "bytes include the head: {line}");
        assert_eq!(fields[5], "GET");
        assert_eq!(fields[6], url);
        assert_eq!(fields[7], "-");
        assert_eq!(fields[8], hier);
        assert_eq!(fields[9], "text/plain");
    }
}

#[tokio::test]
async fn access_log_in_json_has_one_object_per_transaction() {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| {
        c.log.access_log = Some(log_path);
        c.log.format = sluice_proxy::config::LogFormat::Json;
    })
    .await;
    h.origin.on("/j", Reply::ok("12345").header("Content-Type", "text/plain").header("Cache-Control", "max-age=60"));
    h.get("/j").await;
    h.get_with("/j", &[("User-Agent", "tester \"quoted\"")]).await;
    let lines: Vec<serde_json::Value> =
        log.lines(&h, 2).await.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((lines[0]["result"].as_str(), lines[1]["result"].as_str()), (Some("TCP_MISS"), Some("TCP_MEM_HIT")));
    assert_eq!(lines[0]["url"], h.origin.url("/j"));
    assert_eq!(lines[0]["peer"], "127.0.0.1");
    assert_eq!(lines[1]["peer"], serde_json::Value::Null);
    assert_eq!(lines[1]["user_agent"], "tester \"quoted\"", "kept as sent, escaped by JSON");
    assert_eq!(lines[1]["content_type"], "text/plain");
}

#[tokio::test]
async fn calamaris_a_squid_log_analyser_reads_the_access_log() {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| c.log.access_log = Some(log_path)).await;
    h.origin.on(
        "/a",
        Reply::ok("aaaa").header("Content-Type", "text/plain; charset=utf-8").header("Cache-Control", "max-age=60"),
    );
    h.origin.on("/b", Reply::ok("b").header("Cache-Control", "no-store"));
    for path in ["/a", "/a", "/a", "/b"] {
        h.get(path).await;
    }
    h.send("POST", "/b", &[], Some("x")).await;
    h.origin.on("/broken", Reply::ok("").garbage());
    h.get("/broken").await;
    log.lines(&h, 6).await;
    let out = std::process::Command::new("calamaris")
        .arg("-a")
        .stdin(std::fs::File::open(&log.path).unwrap())
        .output()
        .expect("calamaris (scripts/install-deps.sh)");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    // Its summary lines end with the figure: "lines parsed:  lines  6".
    let figure = |label: &str| {
        let line = report.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label}\n{report}"));
        line.split_whitespace().last().unwrap().to_owned()
    };
    assert_eq!(figure("lines parsed:"), "6", "{report}");
    assert_eq!(figure("invalid lines:"), "0", "{report}");
    assert_eq!(figure("Total amount cached:"), "2", "the two memory hits: {report}");
    assert!(report.lines().any(|l| l.trim_start().starts_with("TCP_MEM_HIT")), "{report}");
    assert!(report.lines().any(|l| l.trim_start().starts_with("POST")), "{report}");
}

#[tokio::test]
async fn max_forwards_zero_is_answered_by_the_proxy() {
    let h = Harness::forward().await;
    let trace = h.send("TRACE", "/t", &[("Max-Forwards", "0"), ("Cookie", "secret")], None).await;
    assert_eq!(trace.status, 200);
    assert_eq!(trace.header("content-type"), "message/http");
    assert!(trace.text().starts_with("TRACE "), "{}", trace.text());
    assert!(!trace.text().contains("secret"));
    let options = h.send("OPTIONS", "/t", &[("Max-Forwards", "0")], None).await;
    assert!(options.header("allow").contains("GET"));
    h.origin.on("/t", Reply::ok(""));
    h.send("OPTIONS", "/t", &[("Max-Forwards", "3")], None).await;
    assert_eq!(h.origin.last_request("/t").unwrap().header("max-forwards"), Some("2"));
}

#[tokio::test]
async fn rfc9112_3_2_4_options_for_a_server_goes_to_the_origin_as_asterisk() {
    let h = Harness::forward().await;
    h.origin.on("*", Reply::ok(""));
    h.origin.on("/", Reply::ok(""));
    let origin = h.origin.addr;
    // Pipelined, in one write: the forms must stay matched to their requests.
    let requests = format!(
        "OPTIONS http://{origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n\
         OPTIONS http://{origin}/ HTTP/1.1\r\nHost: {origin}\r\n\r\n\
         GET http://{origin}/ HTTP/1.1\r\nHost: {origin}\r\n\r\n\
         OPTIONS http://{origin} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"
    );
    let answers = client::raw(h.addr(), requests.as_bytes()).await;
    assert_eq!(answers.matches("HTTP/1.1 200").count(), 4, "{answers}");
    let asterisk = h.origin.requests("*");
    assert_eq!(asterisk.len(), 2, "the server-wide OPTIONS requests");
    assert!(asterisk.iter().all(|r| r.method == "OPTIONS"));
    let root: Vec<_> = h.origin.requests("/").into_iter().map(|r| r.method).collect();
    assert_eq!(root, ["OPTIONS", "GET"], "a target with a path keeps it");
}

#[tokio::test]
async fn rfc9112_3_2_4_options_asterisk_on_a_reverse_listener_goes_to_the_hosts_root_route_as_asterisk() {
    let h = Harness::build_with_origins(Mode::Reverse, 1, |c, origins| {
        c.route[0].host = Some("www.example".into());
        let other = sluice_proxy::config::RouteConfig {
            origin: Some(format!("http://{}/app", origins[1])),
            ..Default::default()
        };
        c.route.push(other);
    })
    .await;
    for origin in [&h.origin, &h.others[0]] {
        origin.on("*", Reply::ok("").header("Allow", "GET, HEAD, OPTIONS"));
    }
    let requests = "OPTIONS * HTTP/1.1\r\nHost: www.example\r\n\r\n\
                    OPTIONS * HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n";
    let answers = client::raw(h.addr(), requests.as_bytes()).await;
    assert_eq!(answers.matches("HTTP/1.1 200").count(), 2, "{answers}");
    assert!(answers.contains("allow: GET, HEAD, OPTIONS"), "the origin's answer: {answers}");
    for origin in [&h.origin, &h.others[0]] {
        let asked = origin.requests("*");
        assert_eq!(asked.len(), 1, "each host's route asks its origin once, as `OPTIONS *`");
        assert_eq!(asked[0].method, "OPTIONS");
    }
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() {
    let h = Harness::forward().await;
    h.origin.on("/draining", Reply::ok("finished").delay(Duration::from_millis(300)));
    let addr = h.addr();
    let target = h.target("/draining");
    let in_flight = tokio::spawn(async move { client::get(addr, &target, &[]).await });
    h.eventually("the request to reach the origin", |h| h.origin.hits("/draining") == 1).await;
    let Harness { proxy, origin, .. } = h;
    proxy.shutdown().await;
    let reply = in_flight.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "finished");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "no longer accepting");
    drop(origin);
}

#[tokio::test]
async fn upstream_connections_are_pooled_and_limited_per_host() {
    let h = Harness::build(Mode::Forward, |c| c.upstream.max_connections_per_host = 1).await;
    h.origin.on("/limited", Reply::ok("x").delay(Duration::from_millis(50)));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (addr, target) = (h.addr(), h.target("/limited"));
            tokio::spawn(async move { client::get(addr, &target, &[]).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().text(), "x");
    }
    assert_eq!(h.origin.hits("/limited"), 4);
    assert_eq!(h.origin.connections(), 1, "one connection, reused from the pool, never more than the limit");
}

#[tokio::test]
async fn uncacheable_urls_are_passed_straight_through_for_a_while() {
    let h = Harness::forward().await;
    h.origin.on("/nostore", Reply::ok("fresh every time").header("Cache-Control", "no-store"));
    let first = h.get("/nostore").await;
    assert!(first.header("cache-status").contains("detail=no-store"), "{}", first.header("cache-status"));
    let second = h.get("/nostore").await;
    assert!(second.header("cache-status").contains("fwd=bypass"), "{}", second.header("cache-status"));
    assert!(second.header("cache-status").contains("hit-for-pass"));
    assert_eq!(h.origin.hits("/nostore"), 2);
    // After the hit-for-pass window the cache looks again, and learns the URL is cacheable now.
    h.origin.on("/nostore", Reply::ok("cacheable now").header("Cache-Control", "max-age=600"));
    h.advance(121);
    h.get("/nostore").await;
    assert_eq!(h.get("/nostore").await.text(), "cacheable now");
    assert_eq!(h.origin.hits("/nostore"), 3);
}

/// A tunnel through a proxy with an access log, a GET sent through it and its answer read:
/// the proxy, the log, the client stream and the bytes the client got through the tunnel.
async fn tunnel_with_one_exchange(idle: Duration) -> (Harness, LogFile, tokio::net::TcpStream, usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build_with_origin(Mode::Forward, move |c, origin| {
        c.log.access_log = Some(log_path);
        c.access.connect_ports = vec![origin.port()];
        c.client.tunnel_idle_timeout = Dur(idle);
    })
    .await;
    h.origin.on("/tunnelled", Reply::ok("through the tunnel"));
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let connect = format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n", h.origin.addr);
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("\r\n\r\n"), "the answer to CONNECT: {answer}");
    stream.write_all(b"GET /tunnelled HTTP/1.1\r\nHost: o\r\n\r\n").await.unwrap();
    let mut seen = Vec::new();
    while !seen.ends_with(b"through the tunnel") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    (h, log, stream, seen.len())
}

/// The bytes field of a Squid access log line.
fn logged_bytes(line: &str) -> u64 {
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_tunnel_closed_for_idleness_logs_and_counts_the_bytes_it_copied() {
    use tokio::io::AsyncReadExt;
    let (h, log, mut stream, through) = tunnel_with_one_exchange(Duration::from_millis(200)).await;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.expect("closed by the idle timeout");
    assert!(rest.is_empty());
    let line = log.lines(&h, 1).await.remove(0);
    assert!(line.contains(" TCP_TUNNEL/200 ") && line.contains(" CONNECT "), "{line}");
    // The bytes through the tunnel, plus the head of the 200.
    let bytes = logged_bytes(&line);
    assert!(bytes >= through as u64 && bytes < through as u64 + 100, "{through} through: {line}");
    let body_bytes = h.proxy.state().metrics.client_body_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(body_bytes, through as u64, "sluice_client_body_bytes_total counts them");
}

#[tokio::test]
async fn a_tunnel_that_ends_in_an_error_logs_the_bytes_it_copied() {
    let (h, log, stream, through) = tunnel_with_one_exchange(Duration::from_secs(60)).await;
    // The client resets the connection: the copy ends in an error, not a close.
    stream.set_zero_linger().unwrap();
    drop(stream);
    let line = log.lines(&h, 1).await.remove(0);
    // Cut short by the client, as Squid logs it.
    assert!(line.contains(" TCP_TUNNEL_ABORTED/200 "), "{line}");
    let bytes = logged_bytes(&line);
    assert!(bytes >= through as u64 && bytes < through as u64 + 100, "{through} through: {line}");
}

#[tokio::test]
async fn combined_log_escapes_quotes_in_the_request_line_and_headers() {
    let log = LogFile::new();
    let log_path = log.path.clone();
    let h = Harness::build(Mode::Forward, move |c| {
        c.log.access_log = Some(log_path);
        c.log.format = sluice_proxy::config::LogFormat::Combined;
    })
    .await;
    h.origin.on("/a\"b", Reply::ok("quoted"));
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: a\r\nReferer: http://r/\"x\"\r\nUser-Agent: ua \"q\" \\o/\r\nConnection: close\r\n\r\n",
        h.origin.url("/a\"b")
    );
    let reply = client::raw(h.addr(), request.as_bytes()).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let line = log.lines(&h, 1).await.remove(0);
    let url = h.origin.url("/a\\\"b");
    assert!(line.contains(&format!(" \"GET {url} HTTP/1.1\" 200 ")), "{line}");
    assert!(line.contains(r#" "http://r/\"x\"" "ua \"q\" \\o/" TCP_MISS:HIER_DIRECT"#), "{line}");
}
