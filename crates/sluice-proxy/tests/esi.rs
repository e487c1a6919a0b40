//! ESI (docs/esi.md): templates assembled on the way to the client, each include fetched
//! through the cache with its own freshness. Real sockets on 127.0.0.1, the harness clock.

mod common;

use common::Harness;
use sluice_proxy::config::Mode;
use sluice_testkit::client::Reply as ClientReply;
use sluice_testkit::Reply;

const ESI: (&str, &str) = ("Surrogate-Control", "content=\"ESI/1.0\"");

/// A reverse proxy whose only route has `esi = true` (and `esi_hosts = ["localhost"]`).
async fn esi_proxy() -> Harness {
    Harness::build(Mode::Reverse, |c| {
        c.route[0].esi = true;
        c.route[0].esi_hosts = vec!["localhost".into()];
    })
    .await
}

/// A template reply with `max-age`.
fn template(body: &str, max_age: u32) -> Reply {
    Reply::ok(body.to_owned()).header(ESI.0, ESI.1).header("Cache-Control", &format!("max-age={max_age}"))
}

/// A fragment reply with `max-age`.
fn fragment(body: &str, max_age: u32) -> Reply {
    Reply::ok(body.to_owned()).header("Cache-Control", &format!("max-age={max_age}"))
}

/// The value of a counter in `/metrics`.
async fn metric(h: &Harness, name: &str) -> u64 {
    let text = sluice_testkit::client::get(h.admin(), "/metrics", &[]).await.text();
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' ')).expect(name);
    line[name.len() + 1..].trim().parse::<f64>().unwrap() as u64
}

fn assert_assembled_framing(reply: &ClientReply) {
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), "", "assembled length is unknown");
    assert_eq!(reply.header("transfer-encoding"), "chunked");
    assert_eq!(reply.header("etag"), "");
    assert_eq!(reply.header("accept-ranges"), "");
    assert_eq!(reply.header("surrogate-control"), "");
}

#[tokio::test]
async fn a_page_with_a_relative_and_an_absolute_include() {
    let h = esi_proxy().await;
    let port = h.addr().port();
    h.origin.on(
        "/shop/page",
        template(
            &format!(
                "<h1>page</h1><esi:include src=\"nav\"/>|<esi:include src=\"http://127.0.0.1:{port}/cart?id=1&amp;x=2\"/>|end"
            ),
            60,
        )
        .header("ETag", "\"t1\"")
        .header("X-Page", "kept"),
    );
    h.origin.on("/shop/nav", fragment("<nav/>", 60));
    h.origin.on("/cart?id=1&x=2", fragment("<cart/>", 60));
    let reply = h.get("/shop/page").await;
    assert_eq!(reply.text(), "<h1>page</h1><nav/>|<cart/>|end");
    assert_assembled_framing(&reply);
    assert_eq!(reply.header("x-page"), "kept", "other fields are kept");
    assert_eq!(h.origin.hits("/shop/nav"), 1);
    assert_eq!(h.origin.hits("/cart?id=1&x=2"), 1);
    // A hit is assembled too, from stored fragments.
    let again = h.get("/shop/page").await;
    assert_eq!(again.text(), "<h1>page</h1><nav/>|<cart/>|end");
    assert!(common::cache_status(&again).contains("hit"), "{}", common::cache_status(&again));
    assert_eq!(h.origin.hits("/shop/page") + h.origin.hits("/shop/nav") + h.origin.hits("/cart?id=1&x=2"), 3);
    assert_eq!(metric(&h, "sluice_esi_pages_total").await, 2);
    assert_eq!(metric(&h, "sluice_esi_includes_total").await, 4);
    assert_eq!(metric(&h, "sluice_esi_include_errors_total").await, 0);
}

#[tokio::test]
async fn a_fragment_that_expires_is_refetched_alone() {
    let h = esi_proxy().await;
    h.origin.on("/page", template("[<esi:include src=\"/clock\"/>]", 60));
    h.origin.on_seq("/clock", vec![fragment("one", 5), fragment("two", 5)]);
    assert_eq!(h.get("/page").await.text(), "[one]");
    assert_eq!((h.origin.hits("/page"), h.origin.hits("/clock")), (1, 1));

    h.advance(3);
    assert_eq!(h.get("/page").await.text(), "[one]");
    assert_eq!((h.origin.hits("/page"), h.origin.hits("/clock")), (1, 1), "within 5 s: no origin request");

    h.advance(10);
    assert_eq!(h.get("/page").await.text(), "[two]", "the new fragment is assembled into the cached page");
    assert_eq!((h.origin.hits("/page"), h.origin.hits("/clock")), (1, 2), "only the fragment is refetched");
}

#[tokio::test]
async fn alt_and_onerror_continue_on_failed_fragments() {
    let h = esi_proxy().await;
    h.origin.on(
        "/page",
        template(
            concat!(
                "a<esi:include src=\"/missing\" alt=\"/alt\"/>",
                "b<esi:include src=\"/broken\" onerror=\"continue\"/>",
                "c<esi:include src=\"/missing\"/>d"
            ),
            60,
        ),
    );
    h.origin.on("/alt", fragment("ALT", 60));
    h.origin.on("/broken", Reply::status(500, "oops"));
    // "/missing" has no script: the origin answers 404.
    let reply = h.get("/page").await;
    assert_eq!(reply.text(), "aALTbcd");
    assert_assembled_framing(&reply);
    assert_eq!(metric(&h, "sluice_esi_include_errors_total").await, 2, "onerror=continue and the bare include");
}

#[tokio::test]
async fn remove_comment_and_esi_comment_blocks() {
    let h = esi_proxy().await;
    h.origin.on(
        "/page",
        template(
            concat!(
                "<esi:remove><a href=\"/fallback\">no ESI</a></esi:remove>",
                "<!--esi <p>only with ESI: <esi:include src=\"/f\"/></p> -->",
                "<esi:comment text=\"for editors\"/><!-- html comment kept -->"
            ),
            60,
        ),
    );
    h.origin.on("/f", fragment("F", 60));
    assert_eq!(h.get("/page").await.text(), " <p>only with ESI: F</p> <!-- html comment kept -->");
}

#[tokio::test]
async fn nested_includes_stop_at_the_depth_limit() {
    let h = esi_proxy().await;
    h.origin.on("/page", template("0(<esi:include src=\"/n1\"/>)", 60));
    for level in 1..=4 {
        h.origin.on(&format!("/n{level}"), template(&format!("{level}(<esi:include src=\"/n{}\"/>)", level + 1), 60));
    }
    let reply = h.get("/page").await;
    assert_eq!(reply.text(), "0(1(2(3())))", "the include inside the level-3 fragment is not followed");
    assert_eq!(h.origin.hits("/n3"), 1);
    assert_eq!(h.origin.hits("/n4"), 0);
    assert_eq!(metric(&h, "sluice_esi_include_errors_total").await, 1);
    assert_eq!(metric(&h, "sluice_esi_pages_total").await, 1, "nested fragments are not pages");
}

#[tokio::test]
async fn a_non_esi_response_on_an_esi_route_is_untouched() {
    let h = esi_proxy().await;
    let body = "<esi:include src=\"/f\"/> raw";
    h.origin.on("/plain", fragment(body, 60).header("ETag", "\"p\""));
    let reply = h.get("/plain").await;
    assert_eq!(reply.text(), body);
    assert_eq!(reply.header("content-length"), body.len().to_string());
    assert_eq!(reply.header("etag"), "\"p\"");
    assert_eq!(h.origin.hits("/f"), 0);
    // Ranges still apply to it.
    let part = h.get_with("/plain", &[("Range", "bytes=0-3")]).await;
    assert_eq!((part.status.as_u16(), part.text().as_str()), (206, "<esi"));
}

#[tokio::test]
async fn a_route_without_esi_leaves_templates_alone() {
    let h = Harness::reverse().await;
    let body = "<esi:include src=\"/f\"/>";
    h.origin.on("/page", template(body, 60));
    let reply = h.get("/page").await;
    assert_eq!(reply.text(), body);
    assert_eq!(reply.header("content-length"), body.len().to_string());
    assert_eq!(h.origin.hits("/f"), 0);
}

#[tokio::test]
async fn includes_to_other_hosts_are_refused_unless_allowed() {
    let h = esi_proxy().await;
    let port = h.addr().port();
    let origin_port = h.origin.addr.port();
    h.origin.on(
        "/page",
        template(
            &format!(
                concat!(
                    "[<esi:include src=\"http://evil.example:{}/steal\"/>]",
                    "[<esi:include src=\"http://localhost:{}/allowed\"/>]",
                    "[<esi:include src=\"file:///etc/passwd\"/>]"
                ),
                origin_port, port
            ),
            60,
        ),
    );
    h.origin.on("/steal", fragment("STOLEN", 60));
    h.origin.on("/allowed", fragment("OK", 60));
    let reply = h.get_with("/page", &[("Cookie", "session=1")]).await;
    assert_eq!(reply.text(), "[][OK][]");
    assert_eq!(h.origin.hits("/steal"), 0);
    let allowed = h.origin.last_request("/allowed").unwrap();
    assert_eq!(allowed.header("cookie"), None, "credentials stay with the page's host");
    assert_eq!(metric(&h, "sluice_esi_include_errors_total").await, 2);
}

#[tokio::test]
async fn a_template_trickling_in_tiny_chunks_assembles() {
    let h = esi_proxy().await;
    let doc = concat!(
        "<p>start</p><esi:include src=\"/a\" alt=\"/b\"/><esi:remove>x</esi:remove>",
        "<!--esi <esi:include src=\"/b\"/> --><esi:comment text=\"c\"/>end"
    );
    h.origin.on("/page", template(doc, 60).trickle(3));
    h.origin.on("/a", fragment("A", 60).trickle(1));
    h.origin.on("/b", fragment("B", 60));
    let reply = h.get("/page").await;
    assert_eq!(reply.text(), "<p>start</p>A B end");
    assert_assembled_framing(&reply);
}

#[tokio::test]
async fn head_and_range_requests() {
    let h = esi_proxy().await;
    h.origin.on("/page", template("<esi:include src=\"/f\"/>!", 60).header("ETag", "\"t\""));
    h.origin.on("/f", fragment("fragment", 60));
    // A range or a validator of the template does not apply to the assembled page.
    for extra in [("Range", "bytes=0-3"), ("If-None-Match", "\"t\"")] {
        let reply = h.get_with("/page", &[extra]).await;
        assert_eq!(reply.text(), "fragment!", "{extra:?}");
        assert_assembled_framing(&reply);
    }
    let includes = metric(&h, "sluice_esi_includes_total").await;
    let head = h.send("HEAD", "/page", &[], None).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!((head.header("content-length"), head.header("etag"), head.header("surrogate-control")), ("", "", ""));
    assert_eq!(metric(&h, "sluice_esi_includes_total").await, includes, "HEAD assembles nothing");
    assert_eq!(h.origin.hits("/page"), 1);
}

#[tokio::test]
async fn esi_needs_the_cache() {
    let mut config = sluice_proxy::config::Config::default();
    config.cache.enabled = false;
    config.route.push(sluice_proxy::config::RouteConfig {
        origin: Some("http://127.0.0.1:1".into()),
        esi: true,
        ..sluice_proxy::config::RouteConfig::default()
    });
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("esi"), "{err}");
}

/// Reads a response body frame by frame until it contains `want` (or ends); returns what
/// was read.
async fn read_until<B>(body: &mut B, seen: &mut Vec<u8>, want: &str)
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    use http_body_util::BodyExt;
    while !String::from_utf8_lossy(seen).contains(want) {
        let Some(frame) = body.frame().await else { return };
        if let Ok(data) = frame.unwrap().into_data() {
            seen.extend_from_slice(&data);
        }
    }
}

#[tokio::test]
async fn text_streams_before_a_slow_include_and_includes_are_fetched_concurrently() {
    let h = esi_proxy().await;
    h.origin.on("/page", template("<p>start</p>[<esi:include src=\"/slow\"/>][<esi:include src=\"/fast\"/>]end", 60));
    h.origin.on("/slow", fragment("SLOW", 60).delay(std::time::Duration::from_secs(3)));
    h.origin.on("/fast", fragment("FAST", 60));
    let started = std::time::Instant::now();
    let stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let request = http::Request::get("/page")
        .header("host", h.addr().to_string())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut body = sender.send_request(request).await.unwrap().into_body();
    let mut seen = Vec::new();
    read_until(&mut body, &mut seen, "<p>start</p>[").await;
    assert!(!String::from_utf8_lossy(&seen).contains("SLOW"), "the text before the include is not held back");
    // The second include is fetched while the first is still waiting for its origin.
    h.eventually("the second include's fetch", |h| h.origin.hits("/fast") == 1).await;
    assert!(started.elapsed() < std::time::Duration::from_millis(2500), "fetched after the slow one");
    read_until(&mut body, &mut seen, "end").await;
    assert_eq!(String::from_utf8_lossy(&seen), "<p>start</p>[SLOW][FAST]end", "document order");
}

#[tokio::test]
async fn an_uncacheable_template_is_assembled_on_every_pass() {
    let h = esi_proxy().await;
    h.origin.on(
        "/private",
        Reply::ok("hello <esi:include src=\"/name\"/>").header(ESI.0, ESI.1).header("Cache-Control", "no-store"),
    );
    h.origin.on_seq("/name", vec![fragment("ann", 0), fragment("bob", 0)]);
    let first = h.get("/private").await;
    assert_eq!(first.text(), "hello ann");
    assert_assembled_framing(&first);
    // Now a hit-for-pass URL: the client's Range is not forwarded, the whole page comes back.
    let second = h.get_with("/private", &[("Range", "bytes=0-2")]).await;
    assert_eq!(second.text(), "hello bob");
    assert_assembled_framing(&second);
    assert!(common::cache_status(&second).contains("fwd=bypass"), "{}", common::cache_status(&second));
    assert_eq!(h.origin.last_request("/private").unwrap().header("range"), None);
    assert_eq!(h.origin.hits("/private"), 2);
}

#[tokio::test]
async fn a_nested_templates_includes_keep_the_credentials_dropped_for_its_host() {
    let h = esi_proxy().await;
    let port = h.addr().port();
    // The page (the proxy's own host) includes a template on another allowed host, which
    // includes a fragment of its own host: the page's cookie must reach neither.
    h.origin.on("/page", template(&format!("[<esi:include src=\"http://localhost:{port}/inner\"/>]"), 60));
    h.origin.on("/inner", template("(<esi:include src=\"/echo\"/>)", 60));
    h.origin.on("/echo", fragment("E", 60));
    let reply = h.get_with("/page", &[("Cookie", "session=SECRET"), ("Authorization", "Bearer T")]).await;
    assert_eq!(reply.text(), "[(E)]");
    for path in ["/inner", "/echo"] {
        let seen = h.origin.last_request(path).unwrap();
        assert_eq!((seen.header("cookie"), seen.header("authorization")), (None, None), "{path}");
    }
}

#[tokio::test]
async fn past_the_include_limit_the_later_includes_fail_the_same_ones_every_time() {
    let h = esi_proxy().await;
    let includes: String = (0..70).map(|i| format!("<esi:include src=\"/f{i}\"/>")).collect();
    h.origin.on("/many", template(&includes, 60));
    for i in 0..70 {
        h.origin.on(&format!("/f{i}"), fragment(&format!("[{i}]"), 60));
    }
    let expected: String = (0..64).map(|i| format!("[{i}]")).collect();
    for _ in 0..3 {
        assert_eq!(h.get("/many").await.text(), expected, "the first 64 in document order");
    }
    assert_eq!(h.origin.hits("/f64"), 0);
}
