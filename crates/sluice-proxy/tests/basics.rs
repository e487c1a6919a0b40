//! Forward and reverse proxying basics: misses, hits, headers added, hop-by-hop removed.

mod common;

use common::{cache_status, Harness};
use sluice_proxy::config::Mode;
use sluice_testkit::Reply;

#[tokio::test]
async fn forward_proxy_fetches_then_serves_from_cache() {
    let h = Harness::forward().await;
    h.origin.on("/a", Reply::ok("hello").header("Cache-Control", "max-age=60"));
    let first = h.get("/a").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "hello");
    assert!(cache_status(&first).contains("fwd=uri-miss"), "{}", cache_status(&first));
    assert!(cache_status(&first).contains("stored"));
    let second = h.get("/a").await;
    assert_eq!(second.text(), "hello");
    assert!(cache_status(&second).starts_with("sluice; hit"), "{}", cache_status(&second));
    assert_eq!(h.origin.hits("/a"), 1);
}

#[tokio::test]
async fn reverse_proxy_maps_paths_to_the_origin() {
    let h = Harness::reverse().await;
    h.origin.on("/r?x=1", Reply::ok("rev").header("Cache-Control", "max-age=60"));
    let reply = h.get("/r?x=1").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "rev");
    let seen = h.origin.last_request("/r?x=1").unwrap();
    assert_eq!(seen.header("host"), Some(h.origin.addr.to_string().as_str()));
}

#[tokio::test]
async fn via_and_x_forwarded_for_are_added_and_hop_by_hop_fields_removed() {
    let h = Harness::forward().await;
    h.origin.on("/h", Reply::ok("x").header("Keep-Alive", "timeout=5").header("X-Origin", "1"));
    let reply =
        h.get_with("/h", &[("Connection", "X-Secret"), ("X-Secret", "s"), ("Proxy-Authorization", "Basic x")]).await;
    let seen = h.origin.last_request("/h").unwrap();
    assert_eq!(seen.header("via"), Some("1.1 sluice"));
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-secret"), None, "a field named by Connection is hop-by-hop");
    assert_eq!(seen.header("proxy-authorization"), None);
    assert_eq!(reply.header("via"), "1.1 sluice");
    assert_eq!(reply.header("keep-alive"), "");
    assert_eq!(reply.header("x-origin"), "1");
}

#[tokio::test]
async fn x_forwarded_for_extends_a_prior_value_and_x_forwarded_proto_is_the_proxys() {
    let h = Harness::forward().await;
    h.origin.on("/xff", Reply::ok("x"));
    h.get_with("/xff", &[("X-Forwarded-For", "192.0.2.7"), ("X-Forwarded-Proto", "https")]).await;
    let seen = h.origin.last_request("/xff").unwrap();
    assert_eq!(seen.header("x-forwarded-for"), Some("192.0.2.7, 127.0.0.1"));
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"), "a client's own is replaced (request_targets.rs)");
    h.get("/xff").await;
    let seen = h.origin.last_request("/xff").unwrap();
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
}

#[tokio::test]
async fn one_listener_serves_both_roles() {
    let h = Harness::build(sluice_proxy::config::Mode::Both, |c| c.route[0].host = Some("site.example".into())).await;
    h.origin.on("/both", Reply::ok("either way").header("Cache-Control", "max-age=60"));
    let reverse = sluice_testkit::client::get(h.addr(), "/both", &[("Host", "site.example")]).await;
    assert_eq!(reverse.text(), "either way");
    let forward = sluice_testkit::client::get(h.addr(), &h.origin.url("/both"), &[]).await;
    assert_eq!(forward.text(), "either way");
    let unknown = sluice_testkit::client::get(h.addr(), "/both", &[("Host", "other.example")]).await;
    assert_eq!(unknown.status, 404, "an origin-form request for another host matches no route");
}

#[tokio::test]
async fn headers_via_false_adds_no_via_either_way() {
    let h = Harness::build(Mode::Forward, |c| c.headers.via = false).await;
    h.origin.on("/novia", Reply::ok("x"));
    let reply = h.get("/novia").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("via"), "");
    assert_eq!(h.origin.last_request("/novia").unwrap().header("via"), None);
}

#[tokio::test]
async fn headers_x_forwarded_for_false_adds_neither_forwarded_field() {
    let h = Harness::build(Mode::Forward, |c| c.headers.x_forwarded_for = false).await;
    h.origin.on("/noxff", Reply::ok("x"));
    assert_eq!(h.get("/noxff").await.status, 200);
    let seen = h.origin.last_request("/noxff").unwrap();
    assert_eq!(seen.header("x-forwarded-for"), None);
    assert_eq!(seen.header("x-forwarded-proto"), None);
    assert_eq!(seen.header("via"), Some("1.1 sluice"));
}

#[tokio::test]
async fn headers_cache_status_false_adds_no_cache_status() {
    let h = Harness::build(Mode::Forward, |c| c.headers.cache_status = false).await;
    h.origin.on("/nocs", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.origin.on("/nocs-pass", Reply::ok("x").header("Cache-Control", "no-store"));
    for path in ["/nocs", "/nocs", "/nocs-pass"] {
        let reply = h.get(path).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("cache-status"), "", "{path}");
    }
    assert_eq!(h.origin.hits("/nocs"), 1, "the second was a hit");
}

/// An origin that answers every request in HTTP/1.0 and closes: `ok`, with `cache_control`.
async fn http10_origin(cache_control: &'static str) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer =
                    format!("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nCache-Control: {cache_control}\r\n\r\nok");
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn rfc9110_6_2_responses_from_an_http10_origin_go_out_in_the_proxys_own_version() {
    let h = Harness::forward().await;
    let (passed, stored) = (http10_origin("no-store").await, http10_origin("max-age=60").await);
    // Three requests on one keep-alive connection: a response the cache passes on, a POST,
    // and a response it stores.
    let requests = format!(
        "GET http://{passed}/a HTTP/1.1\r\nHost: {passed}\r\n\r\n\
         POST http://{passed}/b HTTP/1.1\r\nHost: {passed}\r\nContent-Length: 1\r\n\r\nx\
         GET http://{stored}/c HTTP/1.1\r\nHost: {stored}\r\n\r\n"
    );
    let answer = sluice_testkit::client::raw(h.addr(), requests.as_bytes()).await;
    assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 3, "{answer}");
    assert!(!answer.contains("HTTP/1.0"), "{answer}");
}
