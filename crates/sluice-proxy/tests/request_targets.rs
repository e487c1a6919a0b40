//! What a request target and its `Host` may be, and the one form the proxy reads them in
//! before routing, limiting, keying and forwarding: target forms (RFC 9112 §3.2), `Host`
//! syntax and precedence (RFC 9110 §7.2, RFC 9112 §3.2.2, RFC 9113 §8.3.1), path
//! normalisation (RFC 3986 §6.2.2), `X-Forwarded-Proto` from clients, and collapsed requests
//! sharing their leader's origin failure.

mod common;

use common::Harness;
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::{client, Reply};
use std::time::Duration;

fn route(toml: &str) -> RouteConfig {
    toml::from_str(toml).expect("route")
}

/// A reverse proxy with one route to the origin that preserves `Host`, plus `more` route keys.
async fn preserving(more: &str) -> Harness {
    let more = more.to_owned();
    Harness::build_with_origin(Mode::Reverse, move |c, origin| {
        c.route = vec![route(&format!("{more}origin = \"http://{origin}\"\npreserve_host = true\n"))];
    })
    .await
}

fn status_of(raw: &str) -> &str {
    raw.split(' ').nth(1).unwrap_or("")
}

#[tokio::test]
async fn rfc9112_3_2_target_forms_the_method_does_not_take_are_400() {
    let h = Harness::build(Mode::Both, |_| {}).await;
    let target = h.origin.addr;
    for request in [
        format!("GET {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        format!("CONNECT http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        format!("CONNECT {}:+{} HTTP/1.1\r\nHost: {target}\r\n\r\n", target.ip(), target.port()),
        format!("GET * HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        format!("GET http://{}:x{}/ HTTP/1.1\r\nHost: a\r\n\r\n", target.ip(), target.port()),
    ] {
        let reply = client::raw(h.addr(), request.as_bytes()).await;
        assert_eq!(status_of(&reply), "400", "{request:?} got {reply}");
    }
    assert_eq!(h.origin.connections(), 0, "none reached the origin");
    let options = client::raw(h.addr(), b"OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n\r\n").await;
    assert_eq!(status_of(&options), "200", "* is OPTIONS' own: {options}");
}

#[tokio::test]
async fn rfc9110_7_2_a_host_that_is_not_host_and_port_is_400() {
    let h = Harness::build(Mode::Reverse, |c| {
        c.route =
            vec![route(&format!("host = \"a.test\"\norigin = \"http://{}\"\npreserve_host = true\n", "127.0.0.1:9"))];
    })
    .await;
    for host in ["a.test:@evil.test", "a.test:abc", "a.test:-1", "a test"] {
        let request = format!("GET /x HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let reply = client::raw(h.addr(), request.as_bytes()).await;
        assert_eq!(status_of(&reply), "400", "Host: {host} got {reply}");
    }
}

#[tokio::test]
async fn rfc9112_3_2_a_request_without_host_or_with_two_is_400_whatever_its_target() {
    let h = Harness::forward().await;
    h.origin.on("/h", Reply::ok("x"));
    let url = h.origin.url("/h");
    for (request, why) in [
        (format!("GET {url} HTTP/1.1\r\nConnection: close\r\n\r\n"), "no Host"),
        (format!("GET {url} HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n"), "two Hosts"),
        (format!("GET {url} HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), "two Hosts in HTTP/1.0"),
    ] {
        let reply = client::raw(h.addr(), request.as_bytes()).await;
        assert_eq!(status_of(&reply), "400", "{why}: {reply}");
    }
    assert_eq!(h.origin.hits("/h"), 0);
    let without_host_in_1_0 = client::raw(h.addr(), format!("GET {url} HTTP/1.0\r\n\r\n").as_bytes()).await;
    assert_eq!(status_of(&without_host_in_1_0), "200", "HTTP/1.0 needs no Host");
}

#[tokio::test]
async fn a_port_out_of_range_or_zero_is_400_not_the_default_port() {
    // `http://127.0.0.1:99999/` once reached port 80 (`Uri::port_u16` is `None` for it).
    let h = Harness::build(Mode::Both, |_| {}).await;
    let ip = h.origin.addr.ip();
    for request in [
        format!("GET http://{ip}:99999/echo HTTP/1.1\r\nHost: a\r\n\r\n"),
        format!("GET http://{ip}:65536/echo HTTP/1.1\r\nHost: a\r\n\r\n"),
        format!("GET http://{ip}:0/echo HTTP/1.1\r\nHost: a\r\n\r\n"),
        "GET http://[::1]:99999/echo HTTP/1.1\r\nHost: a\r\n\r\n".to_owned(),
        format!("CONNECT {ip}:70000 HTTP/1.1\r\nHost: {ip}:70000\r\n\r\n"),
        format!("CONNECT {ip}:0 HTTP/1.1\r\nHost: {ip}:0\r\n\r\n"),
        format!("GET /echo HTTP/1.1\r\nHost: {ip}:99999\r\n\r\n"),
        format!("GET /echo HTTP/1.1\r\nHost: {ip}:0\r\n\r\n"),
    ] {
        let reply = client::raw(h.addr(), request.as_bytes()).await;
        assert_eq!(status_of(&reply), "400", "{request:?} got {reply}");
    }
    assert_eq!(h.origin.connections(), 0, "none reached the origin");
    let within = format!("GET http://{}/echo HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.addr);
    let reply = client::raw(h.addr(), within.as_bytes()).await;
    assert_ne!(status_of(&reply), "400", "a port in range is forwarded: {reply}");
}

#[tokio::test]
async fn rfc9112_3_2_1_an_absolute_target_with_an_empty_path_and_a_query_goes_on_with_path_slash() {
    let h = Harness::forward().await;
    h.origin.on("/?q=1", Reply::ok("root with a query"));
    let target = h.origin.url("/").trim_end_matches('/').to_owned() + "?q=1";
    let reply =
        client::raw(h.addr(), format!("GET {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes())
            .await;
    assert_eq!(status_of(&reply), "200", "{reply}");
    assert!(reply.ends_with("root with a query"), "{reply}");
    assert_eq!(h.origin.hits("/?q=1"), 1);
}

#[tokio::test]
async fn rfc9112_3_2_2_an_absolute_targets_host_replaces_the_field_on_a_preserving_route() {
    let h = preserving("host = \"a.test\"\n").await;
    h.origin.on("/x", Reply::ok("for a.test").header("Cache-Control", "max-age=60"));
    let reply =
        client::raw(h.addr(), b"GET http://a.test/x HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status_of(&reply), "200", "{reply}");
    assert_eq!(h.origin.last_request("/x").unwrap().header("host"), Some("a.test"));
}

#[tokio::test]
async fn rfc9113_8_3_1_an_http2_host_naming_another_authority_is_malformed() {
    let h = preserving("host = \"a.test\"\n").await;
    h.origin.on("/x", Reply::ok("x"));
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let send = |client: &mut h2::client::SendRequest<bytes::Bytes>, host: &str| {
        let request = http::Request::get("http://a.test/x").header("host", host).body(()).unwrap();
        client.send_request(request, true).unwrap().0
    };
    let mismatch = send(&mut client, "evil.test").await.unwrap();
    assert_eq!(mismatch.status(), 400);
    let same = send(&mut client, "A.test").await.unwrap();
    assert_eq!(same.status(), 200, "the same authority in another case is fine");
    assert_eq!(h.origin.hits("/x"), 1);
}

#[tokio::test]
async fn a_preserved_host_is_part_of_the_cache_key() {
    let h = preserving("").await;
    h.origin.on("/page", Reply::ok("page").header("Cache-Control", "max-age=60"));
    for host in ["a.test", "b.test", "a.test"] {
        let reply = h.get_with("/page", &[("host", host)]).await;
        assert_eq!(reply.status, 200);
    }
    let hosts: Vec<_> = h.origin.requests("/page").iter().map(|r| r.header("host").unwrap_or("").to_owned()).collect();
    assert_eq!(hosts, ["a.test", "b.test"], "each virtual host fetched once, a.test's second request a hit");
}

#[tokio::test]
async fn a_clients_own_x_forwarded_proto_is_replaced_unless_a_trusted_balancer_sent_it() {
    let h = Harness::reverse().await;
    h.origin.on("/p", Reply::ok("p"));
    h.get_with("/p", &[("x-forwarded-proto", "https")]).await;
    assert_eq!(h.origin.last_request("/p").unwrap().header("x-forwarded-proto"), Some("http"));

    let trusted =
        Harness::build(Mode::Reverse, |c| c.access.forwarded_for_from = vec!["127.0.0.0/8".parse().unwrap()]).await;
    trusted.origin.on("/p", Reply::ok("p"));
    trusted.get_with("/p", &[("x-forwarded-proto", "https")]).await;
    assert_eq!(trusted.origin.last_request("/p").unwrap().header("x-forwarded-proto"), Some("https"));
}

#[tokio::test]
async fn rfc3986_6_2_2_dot_segments_and_encoded_letters_do_not_escape_a_route() {
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.route = vec![
            route(&format!("origin = \"http://{origin}\"\n")),
            route(&format!(
                "path_prefix = \"/private/\"\norigin = \"http://{origin}\"\ncache = false\n\
                 request_headers = {{ set = {{ x-route = \"private\" }} }}\n"
            )),
        ];
    })
    .await;
    h.origin.on("/private/x", Reply::ok("secret").header("Cache-Control", "max-age=60"));
    for path in ["/pub/../private/x", "/./private/x", "/pub/%2e%2e/private/x", "/%70rivate/x", "/private/x"] {
        let reply = h.get(path).await;
        assert_eq!(reply.text(), "secret", "{path}");
    }
    let requests = h.origin.requests("/private/x");
    assert_eq!(requests.len(), 5, "the private route's cache = false held for every spelling");
    assert!(requests.iter().all(|r| r.header("x-route") == Some("private")), "and its header rule");
}

#[tokio::test]
async fn rate_limits_see_the_normal_path() {
    let h = Harness::build(Mode::Reverse, |c| {
        c.rate_limit = vec![toml::from_str("name = \"api\"\nrate = \"1/m\"\npath_prefix = \"/api/\"\n").unwrap()];
    })
    .await;
    h.origin.on("/api/v", Reply::ok("v"));
    assert_eq!(h.get("/api/v").await.status, 200);
    for path in ["/x/../api/v", "/./api/v", "/%61pi/v"] {
        assert_eq!(h.get(path).await.status, 429, "{path}");
    }
}

#[tokio::test]
async fn collapsed_requests_share_their_leaders_origin_failure_instead_of_each_retrying() {
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.route = vec![route(&format!("origin = \"http://{origin}\"\nresponse_timeout = \"1s\"\n"))];
    })
    .await;
    h.origin.on("/slow", Reply::ok("late").header("Cache-Control", "max-age=60").delay(Duration::from_secs(30)));
    let requests = (0..8).map(|_| h.get("/slow"));
    let replies = futures_util::future::join_all(requests).await;
    assert!(replies.iter().all(|r| r.status == 504), "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    assert_eq!(h.origin.hits("/slow"), 1, "one request met the failing origin for all");
}

#[tokio::test]
async fn the_admin_api_does_not_answer_through_the_forward_proxy() {
    let h = Harness::forward().await;
    let admin = h.admin();
    let direct = client::get(admin, &format!("http://{admin}/metrics"), &[]).await;
    assert_eq!(direct.status, 200);
    let through = client::get(h.addr(), &format!("http://{admin}/metrics"), &[]).await;
    assert_eq!(through.status, 403, "{}", through.text());
    assert!(through.text().contains("does not answer requests forwarded by this proxy"));
}

#[tokio::test]
async fn the_admin_api_is_not_reached_through_the_forward_proxy_without_via() {
    // Without `Via` the admin listener cannot tell a forwarded request: the proxy refuses to
    // connect to its own admin listener, whatever name the target gives it.
    let h = Harness::build(Mode::Forward, |c| {
        c.headers.via = false;
        c.access.connect_ports = (1..=u16::MAX).collect();
    })
    .await;
    let admin = h.admin();
    assert_eq!(client::get(admin, &format!("http://{admin}/healthz"), &[]).await.status, 200);
    for target in [
        format!("http://{admin}/metrics"),
        format!("http://localhost:{}/metrics", admin.port()),
        format!("http://127.0.0.1:{}/healthz", admin.port()),
    ] {
        let through = client::get(h.addr(), &target, &[("Authorization", "Bearer test-token")]).await;
        assert_eq!(through.status, 403, "{target}: {}", through.text());
        assert!(through.text().contains("does not answer requests forwarded by this proxy"), "{}", through.text());
    }
    let connect = format!("CONNECT {admin} HTTP/1.1\r\nHost: {admin}\r\n\r\n");
    let reply = client::raw(h.addr(), connect.as_bytes()).await;
    assert_eq!(status_of(&reply), "403", "a tunnel to the admin listener: {reply}");
    // Other origins on the same host are still reached.
    h.origin.on("/fine", Reply::ok("fine"));
    assert_eq!(h.get("/fine").await.status, 200);
}
