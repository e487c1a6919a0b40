//! RFC 9111 (and RFC 5861, 9211, 9213) behaviours, end to end through real sockets. Each
//! test is named after the section it checks. Time is moved with the shared manual clock.

mod common;

use common::{cache_status, Harness};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::Reply;

// ---- §3 Storing responses -------------------------------------------------------------

#[tokio::test]
async fn rfc9111_3_unsafe_methods_are_not_stored() {
    let h = Harness::forward().await;
    h.origin.on("/p", Reply::ok("posted").header("Cache-Control", "max-age=60"));
    h.send("POST", "/p", &[], Some("data")).await;
    h.send("POST", "/p", &[], Some("data")).await;
    assert_eq!(h.origin.hits("/p"), 2);
    assert_eq!(h.origin.last_request("/p").unwrap().body, b"data");
}

#[tokio::test]
async fn rfc9111_3_partial_content_is_not_stored() {
    let h = Harness::forward().await;
    h.origin.on(
        "/206",
        Reply::status(206, "part").header("Content-Range", "bytes 0-3/10").header("Cache-Control", "max-age=60"),
    );
    h.get("/206").await;
    h.get("/206").await;
    assert_eq!(h.origin.hits("/206"), 2);
}

#[tokio::test]
async fn rfc9111_3_a_get_whose_body_turns_out_empty_is_served_from_the_cache() {
    let h = Harness::reverse().await;
    h.origin.on("/e", Reply::ok("stored").header("Cache-Control", "max-age=60"));
    // HTTP/1.1: chunked, with only the last chunk.
    let raw = "GET /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n";
    let answer = sluice_testkit::client::raw(h.addr(), raw.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("stored"), "{answer}");
    // HTTP/2: headers without END_STREAM, then an empty DATA frame that ends the stream.
    let tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    for _ in 0..2 {
        let request = http::Request::get("http://x/e").body(()).unwrap();
        let (response, mut stream) = client.send_request(request, false).unwrap();
        stream.send_data(bytes::Bytes::new(), true).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["cache-status"].to_str().unwrap().contains("hit"), "{response:?}");
    }
    assert_eq!(h.origin.hits("/e"), 1, "fetched once, for the first request");

    // A GET with a body is passed on with it, not served from the cache.
    let raw =
        "GET /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nbody\r\n0\r\n\r\n";
    let answer = sluice_testkit::client::raw(h.addr(), raw.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(h.origin.hits("/e"), 2);
    assert_eq!(h.origin.last_request("/e").unwrap().body, b"body");

    // One that does not end its request soon is passed on with its body, and if it never
    // ends it, gets the 408 of a stalled upload: not the origin's fault.
    let h = Harness::build(Mode::Reverse, |c| {
        c.upstream.response_timeout = sluice_proxy::units::Dur(std::time::Duration::from_millis(300))
    })
    .await;
    h.origin.on("/e", Reply::ok("stored").header("Cache-Control", "max-age=60"));
    let raw = "GET /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    let answer = sluice_testkit::client::raw(h.addr(), raw.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert_eq!(h.origin.hits("/e"), 0, "the origin never got a whole request");
}

#[tokio::test]
async fn rfc9111_3_status_without_freshness_information_is_not_stored() {
    let h = Harness::forward().await;
    h.origin.on("/500", Reply::status(500, "boom"));
    let r = h.get("/500").await;
    assert!(cache_status(&r).contains("detail="), "{}", cache_status(&r));
    h.get("/500").await;
    assert_eq!(h.origin.hits("/500"), 2);
}

#[tokio::test]
async fn rfc9111_3_heuristically_cacheable_404_is_stored() {
    let h = Harness::forward().await;
    h.origin.on("/404", Reply::status(404, "gone").date("Last-Modified", -10_000));
    h.get("/404").await;
    let second = h.get("/404").await;
    assert_eq!(second.status, 404);
    assert_eq!(h.origin.hits("/404"), 1);
}

#[tokio::test]
async fn rfc9111_5_2_2_5_response_no_store_is_not_stored() {
    let h = Harness::forward().await;
    h.origin.on("/ns", Reply::ok("x").header("Cache-Control", "no-store, max-age=60"));
    h.get("/ns").await;
    h.get("/ns").await;
    assert_eq!(h.origin.hits("/ns"), 2);
}

#[tokio::test]
async fn rfc9111_5_2_1_5_request_no_store_is_not_stored() {
    let h = Harness::forward().await;
    h.origin.on("/rns", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.get_with("/rns", &[("Cache-Control", "no-store")]).await;
    h.get("/rns").await;
    assert_eq!(h.origin.hits("/rns"), 2);
}

#[tokio::test]
async fn rfc9111_5_2_2_7_private_is_not_stored_by_a_shared_cache() {
    let h = Harness::forward().await;
    h.origin.on("/priv", Reply::ok("mine").header("Cache-Control", "private, max-age=60"));
    h.get("/priv").await;
    h.get("/priv").await;
    assert_eq!(h.origin.hits("/priv"), 2);
}

#[tokio::test]
async fn rfc9111_3_5_authorization_responses_need_public_s_maxage_or_must_revalidate() {
    let h = Harness::forward().await;
    h.origin.on("/auth-plain", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.origin.on("/auth-public", Reply::ok("x").header("Cache-Control", "public, max-age=60"));
    h.origin.on("/auth-smax", Reply::ok("x").header("Cache-Control", "s-maxage=60"));
    h.origin.on("/auth-mr", Reply::ok("x").header("Cache-Control", "max-age=60, must-revalidate"));
    for path in ["/auth-plain", "/auth-public", "/auth-smax", "/auth-mr"] {
        h.get_with(path, &[("Authorization", "Bearer t")]).await;
        h.get_with(path, &[("Authorization", "Bearer t")]).await;
    }
    assert_eq!(h.origin.hits("/auth-plain"), 2);
    assert_eq!(h.origin.hits("/auth-public"), 1);
    assert_eq!(h.origin.hits("/auth-smax"), 1);
    assert_eq!(h.origin.hits("/auth-mr"), 1);
}

#[tokio::test]
async fn rfc9111_5_2_2_3_must_understand_overrides_no_store_for_understood_status() {
    let h = Harness::forward().await;
    h.origin.on("/mu", Reply::ok("x").header("Cache-Control", "max-age=60, no-store, must-understand"));
    h.get("/mu").await;
    h.get("/mu").await;
    assert_eq!(h.origin.hits("/mu"), 1);
}

#[tokio::test]
async fn rfc9111_3_set_cookie_responses_are_passed_by_default() {
    let h = Harness::forward().await;
    h.origin.on("/cookie", Reply::ok("x").header("Cache-Control", "max-age=60").header("Set-Cookie", "s=1"));
    let r = h.get("/cookie").await;
    assert!(cache_status(&r).contains("detail=set-cookie"), "{}", cache_status(&r));
    h.get("/cookie").await;
    assert_eq!(h.origin.hits("/cookie"), 2);
}

// ---- §4.2 Freshness -------------------------------------------------------------------

#[tokio::test]
async fn rfc9111_4_2_1_max_age_bounds_freshness() {
    let h = Harness::forward().await;
    h.origin.on("/ma", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.get("/ma").await;
    h.advance(59);
    h.get("/ma").await;
    assert_eq!(h.origin.hits("/ma"), 1, "fresh at 59 s");
    h.advance(2);
    let stale = h.get("/ma").await;
    assert_eq!(h.origin.hits("/ma"), 2, "stale at 61 s");
    assert!(cache_status(&stale).contains("fwd=stale"), "{}", cache_status(&stale));
}

#[tokio::test]
async fn rfc9111_4_2_1_s_maxage_overrides_max_age_in_a_shared_cache() {
    let h = Harness::forward().await;
    h.origin.on("/sm", Reply::ok("x").header("Cache-Control", "max-age=600, s-maxage=10"));
    h.get("/sm").await;
    h.advance(11);
    h.get("/sm").await;
    assert_eq!(h.origin.hits("/sm"), 2);
}

#[tokio::test]
async fn rfc9111_4_2_1_expires_gives_freshness_and_invalid_expires_means_stale() {
    let h = Harness::forward().await;
    h.origin.on("/exp", Reply::ok("x").date("Expires", 30));
    h.origin.on("/exp0", Reply::ok("x").header("Expires", "0").header("ETag", "\"e\"").validating());
    h.get("/exp").await;
    h.advance(20);
    h.get("/exp").await;
    assert_eq!(h.origin.hits("/exp"), 1);
    h.advance(20);
    h.get("/exp").await;
    assert_eq!(h.origin.hits("/exp"), 2);
    h.get("/exp0").await;
    h.get("/exp0").await;
    assert_eq!(h.origin.hits("/exp0"), 2, "Expires: 0 is already expired");
}

#[tokio::test]
async fn rfc9111_4_2_2_heuristic_freshness_is_a_fraction_of_last_modified_age() {
    let h = Harness::forward().await;
    // Modified 1000 s ago: 10% gives 100 s of heuristic freshness.
    h.origin.on("/heur", Reply::ok("x").date("Last-Modified", -1000));
    h.get("/heur").await;
    h.advance(90);
    h.get("/heur").await;
    assert_eq!(h.origin.hits("/heur"), 1);
    h.advance(20);
    h.get("/heur").await;
    assert_eq!(h.origin.hits("/heur"), 2);
}

#[tokio::test]
async fn rfc9111_4_2_2_a_routes_default_ttl_is_its_heuristic() {
    let h = Harness::build(Mode::Reverse, |c| {
        c.route[0].default_ttl = Some(sluice_proxy::units::Dur(std::time::Duration::from_secs(60)));
    })
    .await;
    h.origin.on("/bare", Reply::ok("no caching fields at all"));
    h.origin.on("/lm", Reply::ok("old").date("Last-Modified", -100_000));
    h.origin.on("/explicit", Reply::ok("x").header("Cache-Control", "max-age=5"));
    h.origin.on("/private", Reply::ok("x").header("Cache-Control", "private"));
    for path in ["/bare", "/lm", "/explicit", "/private"] {
        h.get(path).await;
    }
    h.advance(4);
    for path in ["/bare", "/lm", "/explicit", "/private"] {
        h.get(path).await;
    }
    let hits = |h: &Harness| ["/bare", "/lm", "/explicit", "/private"].map(|p| h.origin.hits(p));
    assert_eq!(hits(&h), [1, 1, 1, 2], "fresh for 60 s, explicit 5 s; private is never stored");
    h.advance(6);
    for path in ["/bare", "/lm", "/explicit"] {
        h.get(path).await;
    }
    assert_eq!(hits(&h), [1, 1, 2, 2], "the explicit lifetime wins");
    h.advance(55);
    for path in ["/bare", "/lm"] {
        h.get(path).await;
    }
    // Without default_ttl, /lm would be fresh for 10% of 100,000 s.
    assert_eq!(hits(&h), [2, 2, 2, 2], "60 s in place of the Last-Modified heuristic");
}

#[tokio::test]
async fn rfc9111_4_2_3_age_counts_upstream_age_and_resident_time() {
    let h = Harness::forward().await;
    h.origin.on("/age", Reply::ok("x").header("Cache-Control", "max-age=60").header("Age", "30"));
    let first = h.get("/age").await;
    assert_eq!(first.header("age"), "30");
    h.advance(10);
    let hit = h.get("/age").await;
    assert_eq!(hit.header("age"), "40");
    h.advance(25);
    h.get("/age").await;
    assert_eq!(h.origin.hits("/age"), 2, "30 s old on arrival, stale 31 s later");
}

// ---- §5.2.1 Request directives ----------------------------------------------------------

#[tokio::test]
async fn rfc9111_5_2_1_1_request_max_age_forces_validation_of_older_responses() {
    let h = Harness::forward().await;
    h.origin.on("/rma", Reply::ok("x").header("Cache-Control", "max-age=600").header("ETag", "\"v\"").validating());
    h.get("/rma").await;
    h.advance(30);
    let r = h.get_with("/rma", &[("Cache-Control", "max-age=10")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(h.origin.hits("/rma"), 2);
    assert_eq!(h.origin.last_request("/rma").unwrap().header("if-none-match"), Some("\"v\""));
}

#[tokio::test]
async fn rfc9111_5_2_1_3_min_fresh_needs_remaining_freshness() {
    let h = Harness::forward().await;
    h.origin.on("/mf", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.get("/mf").await;
    h.advance(50);
    h.get_with("/mf", &[("Cache-Control", "min-fresh=5")]).await;
    assert_eq!(h.origin.hits("/mf"), 1);
    h.get_with("/mf", &[("Cache-Control", "min-fresh=20")]).await;
    assert_eq!(h.origin.hits("/mf"), 2);
}

#[tokio::test]
async fn rfc9111_5_2_1_2_max_stale_allows_stale_unless_must_revalidate() {
    let h = Harness::forward().await;
    h.origin.on("/ms", Reply::ok("x").header("Cache-Control", "max-age=10"));
    h.origin.on("/ms-mr", Reply::ok("x").header("Cache-Control", "max-age=10, must-revalidate"));
    h.get("/ms").await;
    h.get("/ms-mr").await;
    h.advance(30);
    let r = h.get_with("/ms", &[("Cache-Control", "max-stale=60")]).await;
    assert!(cache_status(&r).contains("hit"), "{}", cache_status(&r));
    h.get_with("/ms", &[("Cache-Control", "max-stale")]).await;
    assert_eq!(h.origin.hits("/ms"), 1);
    h.get_with("/ms", &[("Cache-Control", "max-stale=5")]).await;
    assert_eq!(h.origin.hits("/ms"), 2, "20 s stale is more than max-stale=5");
    h.get_with("/ms-mr", &[("Cache-Control", "max-stale=60")]).await;
    assert_eq!(h.origin.hits("/ms-mr"), 2, "must-revalidate forbids serving stale");
}

#[tokio::test]
async fn rfc9111_5_2_1_4_request_no_cache_validates_with_the_origin() {
    let h = Harness::forward().await;
    h.origin.on("/nc", Reply::ok("x").header("Cache-Control", "max-age=600").date("Last-Modified", -500).validating());
    h.get("/nc").await;
    let r = h.get_with("/nc", &[("Cache-Control", "no-cache")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "x");
    assert_eq!(h.origin.hits("/nc"), 2);
    assert!(h.origin.last_request("/nc").unwrap().header("if-modified-since").is_some());
}

#[tokio::test]
async fn rfc9111_5_4_pragma_no_cache_only_without_cache_control() {
    let h = Harness::forward().await;
    h.origin.on("/pr", Reply::ok("x").header("Cache-Control", "max-age=600"));
    h.get("/pr").await;
    h.get_with("/pr", &[("Pragma", "no-cache"), ("Cache-Control", "max-stale=1")]).await;
    assert_eq!(h.origin.hits("/pr"), 1, "Pragma is ignored when Cache-Control is present");
    h.get_with("/pr", &[("Pragma", "no-cache")]).await;
    assert_eq!(h.origin.hits("/pr"), 2);
}

#[tokio::test]
async fn rfc9111_5_2_1_7_only_if_cached_gives_504_on_a_miss_and_the_object_on_a_hit() {
    let h = Harness::forward().await;
    h.origin.on("/oic", Reply::ok("x").header("Cache-Control", "max-age=600"));
    let miss = h.get_with("/oic", &[("Cache-Control", "only-if-cached")]).await;
    assert_eq!(miss.status, 504);
    assert_eq!(h.origin.hits("/oic"), 0);
    h.get("/oic").await;
    let hit = h.get_with("/oic", &[("Cache-Control", "only-if-cached")]).await;
    assert_eq!(hit.status, 200);
}

#[tokio::test]
async fn rfc9111_5_2_2_4_response_no_cache_is_validated_on_every_use() {
    let h = Harness::forward().await;
    h.origin.on(
        "/rnc",
        Reply::ok("x").header("Cache-Control", "no-cache, max-age=600").header("ETag", "\"n\"").validating(),
    );
    h.get("/rnc").await;
    let r = h.get("/rnc").await;
    assert_eq!(r.text(), "x");
    assert_eq!(h.origin.hits("/rnc"), 2);
    assert!(cache_status(&r).contains("fwd-status=304"), "{}", cache_status(&r));
}

// ---- §4.3 Validation -------------------------------------------------------------------

#[tokio::test]
async fn rfc9111_4_3_1_stale_etag_response_is_revalidated_with_if_none_match() {
    let h = Harness::forward().await;
    h.origin
        .on("/etag", Reply::ok("body").header("Cache-Control", "max-age=10").header("ETag", "\"abc\"").validating());
    h.get("/etag").await;
    h.advance(20);
    let r = h.get("/etag").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "body");
    assert_eq!(h.origin.last_request("/etag").unwrap().header("if-none-match"), Some("\"abc\""));
    assert!(cache_status(&r).contains("fwd=stale") && cache_status(&r).contains("fwd-status=304"));
    // The 304 made it fresh again.
    h.get("/etag").await;
    assert_eq!(h.origin.hits("/etag"), 2);
}

#[tokio::test]
async fn rfc9111_4_3_4_a_304_updates_the_stored_header_fields() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/upd",
        vec![
            Reply::ok("body").header("Cache-Control", "max-age=10").header("ETag", "\"u\"").header("X-Version", "1"),
            Reply::ok("body")
                .header("Cache-Control", "max-age=100")
                .header("ETag", "\"u\"")
                .header("X-Version", "2")
                .validating(),
        ],
    );
    h.get("/upd").await;
    h.advance(20);
    let r = h.get("/upd").await;
    assert_eq!(r.header("x-version"), "2");
    assert_eq!(r.text(), "body");
    h.advance(50);
    let hit = h.get("/upd").await;
    assert_eq!(h.origin.hits("/upd"), 2, "the 304's max-age=100 now applies");
    assert_eq!(hit.header("x-version"), "2");
}

#[tokio::test]
async fn rfc9111_4_3_4_a_304_without_validators_confirms_the_response_it_revalidates() {
    // As Python's http.server answers: a response with Last-Modified only, and a 304 with no
    // validator (RFC 9110 §15.4.5 does not ask for Last-Modified in a 304).
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/lm-only",
        vec![Reply::ok("body").date("Date", 0).date("Last-Modified", -100), Reply::status(304, "").date("Date", 0)],
    );
    h.get("/lm-only").await;
    h.advance(20);
    let r = h.get("/lm-only").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "body");
    assert!(r.header("cache-status").contains("fwd-status=304"), "{}", r.header("cache-status"));
    let requests = h.origin.requests("/lm-only");
    assert_eq!(requests.len(), 2, "no second, unconditional fetch");
    assert!(requests[1].header("if-modified-since").is_some());
    h.advance(5);
    h.get("/lm-only").await;
    assert_eq!(h.origin.hits("/lm-only"), 2, "fresh again by the heuristic, from the 304's Date");
}

#[tokio::test]
async fn rfc9111_4_3_4_a_304_that_makes_the_stored_response_unstorable_serves_its_client_once_and_drops_it() {
    // The freshened response is judged as a new one: a 304 bringing a session cookie,
    // `private` or `no-store` must not turn the stored response into one served to everyone.
    let h = Harness::forward().await;
    for (path, cache_control, cookie, detail) in [
        ("/304-cookie", "max-age=600", Some("session=alice"), "set-cookie"),
        ("/304-private", "private, max-age=600", None, "private"),
        ("/304-no-store", "no-store", None, "no-store"),
    ] {
        let mut not_modified = Reply::status(304, "").header("ETag", "\"v\"").header("Cache-Control", cache_control);
        if let Some(cookie) = cookie {
            not_modified = not_modified.header("Set-Cookie", cookie);
        }
        h.origin.on_seq(
            path,
            vec![
                Reply::ok("shared").header("Cache-Control", "max-age=10").header("ETag", "\"v\""),
                not_modified,
                Reply::ok("again").header("Cache-Control", "max-age=600").header("ETag", "\"w\""),
            ],
        );
        h.get(path).await;
        h.advance(20);
        let alice = h.get_with(path, &[("Cookie", "user=alice")]).await;
        assert_eq!(alice.status, 200, "{path}");
        assert_eq!(alice.text(), "shared", "{path}");
        assert_eq!(alice.header("cache-control"), cache_control, "{path}: the client gets the 304's fields");
        assert_eq!(alice.header("set-cookie"), cookie.unwrap_or(""), "{path}");
        let cs = cache_status(&alice);
        assert!(cs.contains("fwd-status=304") && cs.contains(&format!("detail={detail}")), "{path}: {cs}");
        assert!(!cs.contains("ttl="), "{path}: not stored, no ttl: {cs}");
        let bob = h.get(path).await;
        assert_eq!(h.origin.hits(path), 3, "{path}: the stored response was dropped");
        assert_eq!(bob.text(), "again", "{path}");
        assert!(!bob.header("set-cookie").contains("alice"), "{path}");
    }
}

#[tokio::test]
async fn rfc9211_2_2_a_fresh_response_checked_because_the_request_asked_is_fwd_request() {
    let h = Harness::forward().await;
    h.origin.on("/fwd", Reply::ok("x").header("Cache-Control", "max-age=600").header("ETag", "\"f\"").validating());
    h.get("/fwd").await;
    for directive in ["no-cache", "max-age=0", "min-fresh=900"] {
        h.advance(1);
        let r = h.get_with("/fwd", &[("Cache-Control", directive)]).await;
        let cs = cache_status(&r);
        assert!(cs.contains("fwd=request") && cs.contains("fwd-status=304"), "{directive}: {cs}");
    }
    h.advance(700);
    let stale = h.get("/fwd").await;
    assert!(cache_status(&stale).contains("fwd=stale"), "{}", cache_status(&stale));
}

#[tokio::test]
async fn rfc9111_4_3_4_a_304_that_selects_nothing_leads_to_an_unconditional_fetch() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/sel",
        vec![
            Reply::ok("old").header("Cache-Control", "max-age=10").header("ETag", "\"a\""),
            Reply::status(304, "").header("ETag", "\"b\""),
            Reply::ok("new").header("Cache-Control", "max-age=10").header("ETag", "\"b\""),
        ],
    );
    h.get("/sel").await;
    h.advance(20);
    let r = h.get("/sel").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "new");
    let requests = h.origin.requests("/sel");
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].header("if-none-match"), Some("\"a\""));
    assert_eq!(requests[2].header("if-none-match"), None, "the retry is unconditional");
}

#[tokio::test]
async fn rfc9213_2_1_expires_is_ignored_while_cdn_cache_control_governs() {
    let h = Harness::reverse().await;
    h.origin.on("/cdn-exp", Reply::ok("x").header("CDN-Cache-Control", "max-age=100").date("Expires", 10));
    h.get("/cdn-exp").await;
    h.advance(50);
    h.get("/cdn-exp").await;
    assert_eq!(h.origin.hits("/cdn-exp"), 1, "CDN-Cache-Control's max-age=100 governs, not Expires");
}

#[tokio::test]
async fn rfc9111_4_3_2_client_conditionals_are_answered_from_the_cache() {
    let h = Harness::forward().await;
    h.origin.on(
        "/cond",
        Reply::ok("body").header("Cache-Control", "max-age=600").header("ETag", "\"c\"").date("Last-Modified", -100),
    );
    h.get("/cond").await;
    let inm = h.get_with("/cond", &[("If-None-Match", "\"x\", W/\"c\"")]).await;
    assert_eq!(inm.status, 304);
    assert_eq!(inm.header("etag"), "\"c\"");
    assert!(inm.body.is_empty());
    let lm = inm.header("last-modified").to_owned();
    let ims = h.get_with("/cond", &[("If-Modified-Since", &lm)]).await;
    assert_eq!(ims.status, 304);
    let changed = h.get_with("/cond", &[("If-None-Match", "\"other\"")]).await;
    assert_eq!(changed.status, 200);
    assert_eq!(h.origin.hits("/cond"), 1);
}

/// A client's conditional on a response that is not stored is answered from the forwarded
/// response; the 304 keeps every cache's `Cache-Status` entry, the origin side's first.
#[tokio::test]
async fn rfc9111_4_3_2_client_conditionals_on_a_passed_response_keep_every_cache_status_entry() {
    let h = Harness::forward().await;
    h.origin.on(
        "/passed",
        Reply::ok("body")
            .header("Cache-Control", "no-store")
            .header("ETag", "\"p\"")
            .header("Cache-Status", "upstream; hit"),
    );
    let reply = h.get_with("/passed", &[("If-None-Match", "\"p\"")]).await;
    assert_eq!(reply.status, 304);
    let entries: Vec<_> = reply.headers.get_all("cache-status").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0], "upstream; hit");
    assert!(entries[1].contains("fwd="), "{entries:?}");
}

#[tokio::test]
async fn rfc9110_13_1_1_if_match_failure_gives_412_from_the_cache() {
    let h = Harness::forward().await;
    h.origin.on("/im", Reply::ok("body").header("Cache-Control", "max-age=600").header("ETag", "\"m\""));
    h.get("/im").await;
    assert_eq!(h.get_with("/im", &[("If-Match", "\"m\"")]).await.status, 200);
    assert_eq!(h.get_with("/im", &[("If-Match", "\"z\"")]).await.status, 412);
}

// ---- §4.1 Vary ---------------------------------------------------------------------------

#[tokio::test]
async fn rfc9111_4_1_vary_stores_one_variant_per_request_field_value() {
    let h = Harness::forward().await;
    h.origin.on("/v", Reply::ok("variant").header("Cache-Control", "max-age=600").header("Vary", "Accept-Encoding"));
    h.get_with("/v", &[("Accept-Encoding", "gzip")]).await;
    h.get_with("/v", &[("Accept-Encoding", "gzip")]).await;
    assert_eq!(h.origin.hits("/v"), 1);
    let other = h.get_with("/v", &[("Accept-Encoding", "br")]).await;
    assert!(cache_status(&other).contains("fwd=vary-miss"), "{}", cache_status(&other));
    h.get_with("/v", &[("Accept-Encoding", "br")]).await;
    h.get_with("/v", &[("Accept-Encoding", "gzip")]).await;
    assert_eq!(h.origin.hits("/v"), 2, "both variants are stored side by side");
}

#[tokio::test]
async fn rfc9111_4_1_vary_accept_encoding_matches_the_same_codings_in_any_order() {
    let h = Harness::forward().await;
    h.origin.on("/ae", Reply::ok("coded").header("Cache-Control", "max-age=600").header("Vary", "Accept-Encoding"));
    // Three browsers' ways of asking for the same codings (RFC 9110 §12.5.3: order means nothing).
    for accept in ["gzip, deflate, br, zstd", "br,gzip, deflate,zstd", "zstd, BR;q=1.0, gzip, deflate"] {
        let r = h.get_with("/ae", &[("Accept-Encoding", accept)]).await;
        assert_eq!(r.status, 200, "{accept}");
    }
    assert_eq!(h.origin.hits("/ae"), 1, "one variant serves them all");
    // A different preference is a different variant.
    let other = h.get_with("/ae", &[("Accept-Encoding", "gzip;q=0.5, deflate, br, zstd")]).await;
    assert!(cache_status(&other).contains("fwd=vary-miss"), "{}", cache_status(&other));
    assert_eq!(h.origin.hits("/ae"), 2);
    // The origin got each client's own field.
    let sent = h.origin.requests("/ae");
    assert_eq!(sent[0].header("accept-encoding"), Some("gzip, deflate, br, zstd"));
}

#[tokio::test]
async fn rfc9111_4_1_vary_list_syntax_and_star() {
    let h = Harness::forward().await;
    h.origin.on(
        "/vl",
        Reply::ok("x").header("Cache-Control", "max-age=600").header("Vary", "accept-encoding, Accept-Language"),
    );
    h.origin.on("/vs", Reply::ok("x").header("Cache-Control", "max-age=600").header("Vary", "Accept, *"));
    h.get_with("/vl", &[("Accept-Encoding", "gzip"), ("Accept-Language", "en")]).await;
    h.get_with("/vl", &[("Accept-Encoding", "gzip"), ("Accept-Language", "en")]).await;
    assert_eq!(h.origin.hits("/vl"), 1);
    h.get_with("/vl", &[("Accept-Encoding", "gzip"), ("Accept-Language", "fr")]).await;
    assert_eq!(h.origin.hits("/vl"), 2);
    h.get("/vs").await;
    h.get("/vs").await;
    assert_eq!(h.origin.hits("/vs"), 2, "Vary: * never matches");
}

// ---- §4.4 Invalidation -----------------------------------------------------------------

#[tokio::test]
async fn rfc9111_4_4_unsafe_methods_invalidate_the_uri_and_same_origin_locations() {
    let h = Harness::forward().await;
    h.origin.on("/doc", Reply::ok("doc").header("Cache-Control", "max-age=600"));
    h.origin.on("/other", Reply::ok("other").header("Cache-Control", "max-age=600"));
    h.origin.on("/list", Reply::ok("list").header("Cache-Control", "max-age=600"));
    for p in ["/doc", "/other", "/list"] {
        h.get(p).await;
    }
    h.origin.on("/doc?edit", Reply::status(200, "ok"));
    h.origin.on("/doc", Reply::status(204, "").header("Location", "/list").header("Content-Location", "/other"));
    h.send("PUT", "/doc", &[], Some("new")).await;
    h.origin.on("/doc", Reply::ok("doc2").header("Cache-Control", "max-age=600"));
    for p in ["/doc", "/other", "/list"] {
        h.get(p).await;
    }
    assert_eq!(h.origin.hits("/doc"), 3, "GET, PUT, GET again after invalidation");
    assert_eq!(h.origin.hits("/other"), 2, "Content-Location was invalidated");
    assert_eq!(h.origin.hits("/list"), 2, "Location was invalidated");
}

// ---- RFC 5861 -----------------------------------------------------------------------------

#[tokio::test]
async fn rfc5861_3_stale_while_revalidate_serves_stale_and_refreshes_in_background() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/swr",
        vec![
            Reply::ok("old").header("Cache-Control", "max-age=10, stale-while-revalidate=60"),
            Reply::ok("new").header("Cache-Control", "max-age=10, stale-while-revalidate=60"),
        ],
    );
    h.get("/swr").await;
    h.advance(30);
    let stale = h.get("/swr").await;
    assert_eq!(stale.text(), "old", "served stale at once");
    assert!(cache_status(&stale).contains("hit"), "{}", cache_status(&stale));
    h.eventually("the background revalidation", |h| {
        h.origin.hits("/swr") == 2 && h.proxy.state().collapser.in_flight() == 0
    })
    .await;
    let fresh = h.get("/swr").await;
    assert_eq!(fresh.text(), "new");
    h.advance(100);
    h.get("/swr").await;
    assert_eq!(h.origin.hits("/swr"), 3, "beyond the window the cache validates synchronously");
}

#[tokio::test]
async fn rfc5861_3_a_configured_stale_while_revalidate_window_applies_on_reverse_routes() {
    // cache.stale_while_revalidate gives responses without the directive a window of 60 s;
    // a route sets 0 (none); must-revalidate still forbids stale; clients see the origin's
    // Cache-Control unchanged.
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.cache.stale_while_revalidate = sluice_proxy::units::Dur(std::time::Duration::from_secs(60));
        let route = |prefix: &str, own: Option<u64>| RouteConfig {
            path_prefix: prefix.into(),
            origin: Some(format!("http://{origin}")),
            stale_while_revalidate: own.map(|s| sluice_proxy::units::Dur(std::time::Duration::from_secs(s))),
            ..RouteConfig::default()
        };
        c.route = vec![route("/", None), route("/strict/", Some(0))];
    })
    .await;
    let two =
        |cc: &str| vec![Reply::ok("old").header("Cache-Control", cc), Reply::ok("new").header("Cache-Control", cc)];
    h.origin.on_seq("/page", two("max-age=10"));
    h.origin.on_seq("/mr", two("max-age=10, must-revalidate"));
    h.origin.on_seq("/strict/page", two("max-age=10"));
    for path in ["/page", "/mr", "/strict/page"] {
        h.get(path).await;
    }
    h.advance(30);
    let stale = h.get("/page").await;
    assert_eq!(stale.text(), "old", "served stale at once");
    assert!(cache_status(&stale).contains("hit"), "{}", cache_status(&stale));
    assert_eq!(stale.header("cache-control"), "max-age=10", "the origin's field, unchanged");
    h.eventually("the background revalidation", |h| {
        h.origin.hits("/page") == 2 && h.proxy.state().collapser.in_flight() == 0
    })
    .await;
    assert_eq!(h.get("/page").await.text(), "new");
    assert_eq!(h.get("/mr").await.text(), "new", "must-revalidate: validated before answering");
    assert_eq!(h.get("/strict/page").await.text(), "new", "no window on this route");
    h.advance(100);
    h.get("/page").await;
    assert_eq!(h.origin.hits("/page"), 3, "beyond the window the cache validates synchronously");

    // Not for forward-proxied requests: the origins there made no such agreement.
    let forward = Harness::build(Mode::Forward, |c| {
        c.cache.stale_while_revalidate = sluice_proxy::units::Dur(std::time::Duration::from_secs(60))
    })
    .await;
    forward.origin.on_seq("/f", two("max-age=10"));
    forward.get("/f").await;
    forward.advance(30);
    assert_eq!(forward.get("/f").await.text(), "new");
}

#[tokio::test]
async fn rfc5861_4_stale_if_error_serves_stale_when_the_origin_fails() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/sie",
        vec![Reply::ok("good").header("Cache-Control", "max-age=10, stale-if-error=60"), Reply::status(503, "down")],
    );
    h.get("/sie").await;
    h.advance(30);
    let r = h.get("/sie").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "good");
    h.advance(100);
    let late = h.get("/sie").await;
    assert_eq!(late.status, 503, "beyond the window the error is passed on");
}

#[tokio::test]
async fn rfc5861_4_stale_if_error_covers_an_unreachable_origin() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/sie-gone",
        vec![
            Reply::ok("good").header("Cache-Control", "max-age=10, stale-if-error=60"),
            Reply::ok("").close_before_head(),
        ],
    );
    h.get("/sie-gone").await;
    h.advance(30);
    let r = h.get("/sie-gone").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "good");
}

#[tokio::test]
async fn rfc9111_4_3_3_a_server_error_neither_drops_the_stored_response_nor_bypasses_the_cache() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/flaky",
        vec![
            Reply::ok("v1").header("Cache-Control", "max-age=10"),
            Reply::status(503, "down"),
            Reply::ok("v2").header("Cache-Control", "max-age=10"),
        ],
    );
    assert_eq!(h.get("/flaky").await.text(), "v1");
    h.advance(30);
    assert_eq!(h.get("/flaky").await.status, 503, "no stale-if-error: the error is passed on");
    // The origin recovers: the next request goes through the cache as usual (no hit-for-pass
    // after a server error), and what it fetches is stored.
    assert_eq!(h.get("/flaky").await.text(), "v2");
    let hit = h.get("/flaky").await;
    assert_eq!(hit.text(), "v2");
    assert!(cache_status(&hit).contains("hit"), "{}", cache_status(&hit));
    assert_eq!(h.origin.hits("/flaky"), 3);
}

// ---- RFC 9213, RFC 9211 -------------------------------------------------------------------

#[tokio::test]
async fn rfc9213_cdn_cache_control_governs_a_reverse_proxy_only() {
    let reverse = Harness::reverse().await;
    reverse
        .origin
        .on("/cdn", Reply::ok("x").header("Cache-Control", "no-store").header("CDN-Cache-Control", "max-age=60"));
    reverse.get("/cdn").await;
    reverse.get("/cdn").await;
    assert_eq!(reverse.origin.hits("/cdn"), 1);
    let forward = Harness::forward().await;
    forward
        .origin
        .on("/cdn", Reply::ok("x").header("Cache-Control", "no-store").header("CDN-Cache-Control", "max-age=60"));
    forward.get("/cdn").await;
    forward.get("/cdn").await;
    assert_eq!(forward.origin.hits("/cdn"), 2);
}

// ---- Surrogate-Control, Surrogate-Capability (W3C Edge Architecture 1.0) -------------------

#[tokio::test]
async fn surrogate_control_governs_a_reverse_proxy_and_stops_there() {
    let h = Harness::reverse().await;
    h.origin.on(
        "/sc",
        Reply::ok("x")
            .header("Cache-Control", "no-store")
            .header("CDN-Cache-Control", "no-store")
            .date("Expires", -10)
            .header("Surrogate-Control", "max-age=60"),
    );
    let miss = h.get("/sc").await;
    assert!(miss.headers.get("surrogate-control").is_none(), "addressed to surrogates, not clients");
    assert_eq!(miss.header("cache-control"), "no-store", "what clients get is theirs");
    assert_eq!(h.origin.last_request("/sc").unwrap().header("surrogate-capability"), Some("sluice=\"Surrogate/1.0\""));
    h.advance(59);
    assert!(cache_status(&h.get("/sc").await).contains("hit"), "fresh for its max-age, over CC and Expires");
    h.advance(2);
    h.get("/sc").await;
    assert_eq!(h.origin.hits("/sc"), 2, "stale after it");
    // no-store addressed to this surrogate wins over a fresh Cache-Control; directives
    // addressed to another surrogate are not this one's.
    h.origin.on("/ns", Reply::ok("x").header("Cache-Control", "max-age=600").header("Surrogate-Control", "no-store"));
    h.origin.on(
        "/other",
        Reply::ok("x").header("Cache-Control", "max-age=600").header("Surrogate-Control", "no-store;edge-9"),
    );
    for path in ["/ns", "/ns", "/other", "/other"] {
        h.get(path).await;
    }
    assert_eq!((h.origin.hits("/ns"), h.origin.hits("/other")), (2, 1));
}

#[tokio::test]
async fn surrogate_control_max_age_extension_serves_stale_when_the_origin_fails() {
    let h = Harness::reverse().await;
    h.origin.on_seq(
        "/ext",
        vec![Reply::ok("good").header("Surrogate-Control", "max-age=10+60"), Reply::status(503, "down")],
    );
    h.get("/ext").await;
    h.advance(30);
    let stale = h.get("/ext").await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.text(), "good");
    h.advance(60);
    assert_eq!(h.get("/ext").await.status, 503, "past the extension the error is passed on");
}

#[tokio::test]
async fn surrogate_control_is_left_to_the_surrogates_of_a_forward_proxy() {
    let h = Harness::forward().await;
    h.origin.on("/sc", Reply::ok("x").header("Cache-Control", "no-store").header("Surrogate-Control", "max-age=60"));
    let first = h.get("/sc").await;
    h.get("/sc").await;
    assert_eq!(h.origin.hits("/sc"), 2);
    assert_eq!(first.header("surrogate-control"), "max-age=60");
    assert_eq!(h.origin.last_request("/sc").unwrap().header("surrogate-capability"), None);
}

#[tokio::test]
async fn rfc9211_cache_status_reports_hits_misses_ttl_and_storage() {
    let h = Harness::build(Mode::Reverse, |c| c.cache.name = "edge-1".into()).await;
    h.origin.on("/cs", Reply::ok("x").header("Cache-Control", "max-age=60"));
    let miss = h.get("/cs").await;
    assert_eq!(cache_status(&miss), "edge-1; fwd=uri-miss; fwd-status=200; ttl=60; stored");
    h.advance(15);
    let hit = h.get("/cs").await;
    assert_eq!(cache_status(&hit), "edge-1; hit; ttl=45");
}

// ---- RFC 9110 §14 ranges, HEAD -------------------------------------------------------------

#[tokio::test]
async fn rfc9110_14_ranges_are_answered_from_a_complete_stored_object() {
    let h = Harness::forward().await;
    h.origin.on(
        "/range",
        Reply::ok("0123456789").header("Cache-Control", "max-age=600").header("Content-Type", "text/plain"),
    );
    h.get("/range").await;
    let one = h.get_with("/range", &[("Range", "bytes=2-4")]).await;
    assert_eq!(one.status, 206);
    assert_eq!(one.text(), "234");
    assert_eq!(one.header("content-range"), "bytes 2-4/10");
    let suffix = h.get_with("/range", &[("Range", "bytes=-3")]).await;
    assert_eq!(suffix.text(), "789");
    let bad = h.get_with("/range", &[("Range", "bytes=50-")]).await;
    assert_eq!(bad.status, 416);
    assert_eq!(bad.header("content-range"), "bytes */10");
    let multi = h.get_with("/range", &[("Range", "bytes=0-1,8-9")]).await;
    assert_eq!(multi.status, 206);
    assert!(multi.header("content-type").starts_with("multipart/byteranges; boundary="));
    let text = multi.text();
    assert!(text.contains("Content-Range: bytes 0-1/10\r\n\r\n01"), "{text}");
    assert!(text.contains("Content-Range: bytes 8-9/10\r\n\r\n89"), "{text}");
    assert_eq!(h.origin.hits("/range"), 1);
}

#[tokio::test]
async fn rfc9110_14_a_range_miss_fetches_and_stores_the_whole_object() {
    let h = Harness::forward().await;
    h.origin.on("/rmiss", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600"));
    let first = h.get_with("/rmiss", &[("Range", "bytes=2-4")]).await;
    assert_eq!(first.status, 206, "the range streams from the object as it arrives");
    assert_eq!(first.header("content-range"), "bytes 2-4/10");
    assert_eq!(first.text(), "cde");
    assert_eq!(h.origin.last_request("/rmiss").unwrap().header("range"), None);
    let second = h.get_with("/rmiss", &[("Range", "bytes=0-2")]).await;
    assert_eq!(second.status, 206);
    assert_eq!(second.text(), "abc");
    assert_eq!(h.origin.hits("/rmiss"), 1, "the whole object was stored");
}

#[tokio::test]
async fn rfc9110_14_2_ranges_of_an_object_still_arriving_need_its_length() {
    let h = Harness::forward().await;
    h.origin.on("/rmiss-chunked", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600").chunked());
    let unknown = h.get_with("/rmiss-chunked", &[("Range", "bytes=2-4")]).await;
    assert_eq!(unknown.status, 200, "no announced length: the whole body (§14.2 allows it)");
    assert_eq!(unknown.text(), "abcdefghij");
    h.origin.on("/rmiss-416", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600"));
    let beyond = h.get_with("/rmiss-416", &[("Range", "bytes=50-")]).await;
    assert_eq!(beyond.status, 416);
    assert_eq!(beyond.header("content-range"), "bytes */10");
    h.origin.on("/rmiss-multi", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600"));
    let multi = h.get_with("/rmiss-multi", &[("Range", "bytes=0-1,4-5")]).await;
    assert_eq!(multi.status, 200, "several ranges: the whole body");
    assert_eq!(multi.text(), "abcdefghij");
    let hit = h.get_with("/rmiss-416", &[("Range", "bytes=-3")]).await;
    assert_eq!(hit.status, 206, "stored whole");
    assert_eq!(hit.text(), "hij");
}

#[tokio::test]
async fn rfc9110_14_a_range_miss_beyond_the_offset_limit_goes_to_the_origin_as_asked() {
    let h = Harness::build(Mode::Forward, |c| c.cache.range_offset_limit = sluice_proxy::units::Size(4)).await;
    // The origin answers the range itself (a scripted 206: the test origin ignores Range).
    h.origin.on(
        "/far",
        Reply::status(206, "ghi").header("Content-Range", "bytes 6-8/10").header("Cache-Control", "max-age=600"),
    );
    let far = h.get_with("/far", &[("Range", "bytes=6-8")]).await;
    assert_eq!(far.status, 206);
    assert_eq!(far.text(), "ghi");
    assert_eq!(h.origin.last_request("/far").unwrap().header("range"), Some("bytes=6-8"), "forwarded as asked");
    assert!(cache_status(&far).contains("fwd=bypass; fwd-status=206; detail=range-offset"), "{}", cache_status(&far));
    let suffix = h.get_with("/far", &[("Range", "bytes=-3")]).await;
    assert_eq!(suffix.status, 206, "a suffix range reaches back from an end not known yet: forwarded too");
    assert_eq!(h.origin.hits("/far"), 2, "nothing was stored");
    // Within the limit: the whole object is fetched and stored, the range streams from it.
    h.origin.on("/near", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600"));
    let near = h.get_with("/near", &[("Range", "bytes=4-5")]).await;
    assert_eq!(near.status, 206);
    assert_eq!(near.text(), "ef");
    assert_eq!(h.origin.last_request("/near").unwrap().header("range"), None);
    // Once stored, a range anywhere is a hit.
    let hit = h.get_with("/near", &[("Range", "bytes=8-")]).await;
    assert_eq!(hit.text(), "ij");
    assert_eq!(h.origin.hits("/near"), 1);
}

#[tokio::test]
async fn rfc9110_14_a_range_of_a_response_that_is_not_stored_is_cut_from_it() {
    let h = Harness::build(Mode::Forward, |c| c.cache.max_object = sluice_proxy::units::Size(8)).await;
    h.origin.on("/large", Reply::ok("abcdefghij").header("Cache-Control", "max-age=600"));
    h.origin.on("/private", Reply::ok("0123456789").header("Cache-Control", "no-store"));
    let large = h.get_with("/large", &[("Range", "bytes=2-4")]).await;
    assert_eq!(large.status, 206, "too large to store: the range is cut from the pass");
    assert_eq!(large.header("content-range"), "bytes 2-4/10");
    assert_eq!(large.text(), "cde");
    assert_eq!(h.origin.last_request("/large").unwrap().header("range"), None, "the whole was asked for");
    let open_ended = h.get_with("/private", &[("Range", "bytes=0-")]).await;
    assert_eq!(open_ended.status, 206, "a player's first `bytes=0-` learns that ranges work");
    assert_eq!(open_ended.header("content-range"), "bytes 0-9/10");
    assert_eq!(open_ended.text(), "0123456789");
    // A range across many reads of a larger body.
    let body: String = (0..200_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    h.origin.on("/private-large", Reply::ok(body.clone()).header("Cache-Control", "no-store"));
    let middle = h.get_with("/private-large", &[("Range", "bytes=70000-150000")]).await;
    assert_eq!(middle.status, 206);
    assert!(middle.text() == body[70_000..=150_000], "the bytes of the range");
    h.origin.on("/private-2", Reply::ok("0123456789").header("Cache-Control", "no-store"));
    let beyond = h.get_with("/private-2", &[("Range", "bytes=10-")]).await;
    assert_eq!(beyond.status, 416);
    assert_eq!(beyond.header("content-range"), "bytes */10");
}

#[tokio::test]
async fn rfc9110_9_3_2_head_is_answered_from_a_stored_get() {
    let h = Harness::forward().await;
    h.origin.on("/head", Reply::ok("twelve bytes").header("Cache-Control", "max-age=600"));
    h.get("/head").await;
    let head = h.send("HEAD", "/head", &[], None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), "12");
    assert!(head.body.is_empty());
    assert_eq!(h.origin.hits("/head"), 1);
}

// ---- Added: revalidation failures, client refreshes, chained caches ------------------

#[tokio::test]
async fn rfc9111_5_2_2_2_must_revalidate_with_the_origin_down_gives_504() {
    let h = Harness::forward().await;
    for (path, cc) in [
        ("/mr-down", "max-age=10, must-revalidate"),
        ("/pr-down", "max-age=10, proxy-revalidate"),
        ("/sm-down", "s-maxage=10"),
    ] {
        h.origin.on_seq(path, vec![Reply::ok("x").header("Cache-Control", cc), Reply::ok("x").close_before_head()]);
        assert_eq!(h.get(path).await.status, 200);
    }
    h.advance(30);
    for path in ["/mr-down", "/pr-down", "/sm-down"] {
        let reply = h.get(path).await;
        assert_eq!(reply.status, 504, "{path}: a stale response that must be revalidated and cannot be");
        assert!(h.origin.hits(path) >= 2, "{path}: revalidation was attempted");
    }
}

#[tokio::test]
async fn rfc9111_4_2_4_a_disconnected_cache_serves_stale_within_stale_if_unreachable() {
    let h = Harness::forward().await;
    h.origin.on_seq(
        "/gone",
        vec![Reply::ok("good").header("Cache-Control", "max-age=10"), Reply::ok("").close_before_head()],
    );
    h.origin.on_seq("/down", vec![Reply::ok("good").header("Cache-Control", "max-age=10"), Reply::status(503, "down")]);
    h.get("/gone").await;
    h.get("/down").await;
    h.advance(30);
    let stale = h.get("/gone").await;
    assert_eq!(stale.status, 200, "the default window is a day");
    assert_eq!(stale.text(), "good");
    assert!(cache_status(&stale).contains("hit"), "{}", cache_status(&stale));
    assert!(h.origin.hits("/gone") >= 2, "revalidation was attempted");
    let refresh = h.send("GET", "/gone", &[("Cache-Control", "no-cache")], None).await;
    assert_eq!(refresh.status, 504, "a client's no-cache asks for a validated answer");
    let answered = h.get("/down").await;
    assert_eq!(answered.status, 503, "a server error is an answer, passed on (stale-if-error decides otherwise)");
    h.advance(86_400);
    assert_eq!(h.get("/gone").await.status, 504, "beyond the window");
}

#[tokio::test]
async fn rfc9111_4_2_4_stale_if_unreachable_zero_turns_it_off() {
    let h = Harness::build(Mode::Forward, |c| {
        c.cache.stale_if_unreachable = sluice_proxy::units::Dur(std::time::Duration::ZERO)
    })
    .await;
    h.origin.on_seq(
        "/gone",
        vec![Reply::ok("good").header("Cache-Control", "max-age=10"), Reply::ok("").close_before_head()],
    );
    h.get("/gone").await;
    h.advance(11);
    assert_eq!(h.get("/gone").await.status, 504);
}

#[tokio::test]
async fn rfc9111_4_2_4_stale_if_server_error_serves_stale_over_an_origins_5xx_on_reverse_routes() {
    // The accelerator's out-of-band agreement with its origin: a revalidation answered with
    // 500, 502, 503 or 504 serves the stale object, within the stale window, unless a
    // directive asks for a validated answer. Route 1 takes the global setting, route 2 turns
    // it off.
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.cache.stale_if_server_error = true;
        let route = |prefix: &str, own: Option<bool>| RouteConfig {
            path_prefix: prefix.into(),
            origin: Some(format!("http://{origin}")),
            stale_if_server_error: own,
            ..RouteConfig::default()
        };
        c.route = vec![route("/", None), route("/strict/", Some(false))];
    })
    .await;
    let down =
        |status: u16, cc: &str| vec![Reply::ok("good").header("Cache-Control", cc), Reply::status(status, "down")];
    for (path, status) in [("/a", 500), ("/b", 502), ("/c", 503), ("/d", 504)] {
        h.origin.on_seq(path, down(status, "max-age=10"));
    }
    h.origin.on_seq("/e", down(404, "max-age=10"));
    h.origin.on_seq("/mr", down(503, "max-age=10, must-revalidate"));
    h.origin.on_seq("/strict/x", down(503, "max-age=10"));
    for path in ["/a", "/b", "/c", "/d", "/e", "/mr", "/strict/x"] {
        assert_eq!(h.get(path).await.status, 200, "{path}");
    }
    h.advance(30);
    for path in ["/a", "/b", "/c", "/d"] {
        let stale = h.get(path).await;
        assert_eq!((stale.status.as_u16(), stale.text().as_str()), (200, "good"), "{path}");
        assert!(cache_status(&stale).contains("hit"), "{path}: {}", cache_status(&stale));
        assert_eq!(h.origin.hits(path), 2, "{path}: revalidation was attempted");
    }
    assert_eq!(h.get("/e").await.status, 404, "a client error is the origin's answer");
    assert_eq!(h.get("/mr").await.status, 503, "must-revalidate: the error is passed on");
    assert_eq!(h.get("/strict/x").await.status, 503, "turned off on this route");
    let refresh = h.send("GET", "/c", &[("Cache-Control", "no-cache")], None).await;
    assert_eq!(refresh.status, 503, "a client's no-cache asks for a validated answer");
    h.advance(86_400);
    assert_eq!(h.get("/a").await.status, 500, "beyond the stale_if_unreachable window");

    // Never on a forward proxy: there is no agreement with an arbitrary origin.
    let forward = Harness::build(Mode::Forward, |c| c.cache.stale_if_server_error = true).await;
    forward.origin.on_seq("/f", down(503, "max-age=10"));
    forward.get("/f").await;
    forward.advance(30);
    assert_eq!(forward.get("/f").await.status, 503);
}

/// The access log's lines once `n` are there.
async fn log_lines(h: &Harness, path: &std::path::Path, n: usize) -> Vec<String> {
    h.eventually("access log lines", |_| {
        std::fs::read_to_string(path).map(|t| t.lines().count() >= n).unwrap_or(false)
    })
    .await;
    std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn rfc9111_5_2_1_4_client_no_cache_miss_is_logged_as_client_refresh_miss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let log_path = path.clone();
    let h = Harness::build(Mode::Forward, move |c| c.log.access_log = Some(log_path)).await;
    h.origin.on("/refresh", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.origin.on("/pragma", Reply::ok("x").header("Cache-Control", "max-age=60"));
    h.get("/refresh").await;
    h.get("/pragma").await;
    // The client forcing a refresh of what is stored (Squid's TCP_CLIENT_REFRESH_MISS).
    h.get_with("/refresh", &[("Cache-Control", "no-cache")]).await;
    h.get_with("/pragma", &[("Pragma", "no-cache")]).await;
    h.get("/refresh").await;
    let lines = log_lines(&h, &path, 5).await;
    assert!(lines[2].contains(" TCP_CLIENT_REFRESH_MISS/200 "), "{}", lines[2]);
    assert!(lines[3].contains(" TCP_CLIENT_REFRESH_MISS/200 "), "{}", lines[3]);
    assert!(lines[4].contains(" TCP_MEM_HIT/200 "), "{}", lines[4]);
}

#[tokio::test]
async fn access_log_combined_format_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let log_path = path.clone();
    let h = Harness::build(Mode::Forward, move |c| {
        c.log.access_log = Some(log_path);
        c.log.format = sluice_proxy::config::LogFormat::Combined;
    })
    .await;
    h.origin.on("/combined", Reply::ok("12345").header("Cache-Control", "max-age=60"));
    h.get_with("/combined", &[("Referer", "http://ref.example/"), ("User-Agent", "agent/1")]).await;
    h.get("/combined").await;
    let lines = log_lines(&h, &path, 2).await;
    let url = h.origin.url("/combined");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert!(lines[0].contains(&format!("] \"GET {url} HTTP/1.1\" 200 ")), "{}", lines[0]);
    assert!(lines[0].ends_with("\"http://ref.example/\" \"agent/1\" TCP_MISS:HIER_DIRECT"), "{}", lines[0]);
    assert!(lines[1].ends_with("\"-\" \"-\" TCP_MEM_HIT:HIER_NONE"), "{}", lines[1]);
}

/// A reverse Sluice named `front` in front of `back` (a reverse Harness).
async fn front_of(back: &Harness, front: &str) -> sluice_proxy::Running {
    use sluice_proxy::config::{Config, ListenerConfig, RouteConfig};
    let mut config = Config {
        listener: vec![ListenerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            mode: Mode::Reverse,
            ..ListenerConfig::default()
        }],
        route: vec![RouteConfig { origin: Some(format!("http://{}", back.addr())), ..RouteConfig::default() }],
        ..Config::default()
    };
    config.admin.enabled = false;
    config.cache.name = front.into();
    config.validate().unwrap();
    let state = sluice_proxy::State::new(config, std::sync::Arc::new(back.clock.clone()), vec![]).unwrap();
    sluice_proxy::start(state).await.unwrap()
}

#[tokio::test]
async fn chained_sluice_instances_need_distinct_names() {
    let back = Harness::reverse().await;
    back.origin.on("/chain", Reply::ok("chained"));
    let distinct = front_of(&back, "front").await;
    let reply = sluice_testkit::client::get(distinct.listeners()[0], "/chain", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "chained");
    let request = back.origin.last_request("/chain").unwrap();
    let via: Vec<&str> =
        request.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("via")).map(|(_, v)| v.as_str()).collect();
    assert_eq!(via.join(", "), "1.1 front, 1.1 sluice");
    let same = front_of(&back, "sluice").await;
    let reply = sluice_testkit::client::get(same.listeners()[0], "/chain", &[]).await;
    assert_eq!(reply.status, 508, "the same name twice is a loop");
    assert_eq!(back.origin.hits("/chain"), 1);
}

#[test]
fn the_default_cache_name_is_the_host_name() {
    let name = sluice_proxy::config::Config::default().cache.name;
    assert_eq!(name, sluice_proxy::config::host_name());
    assert!(!name.is_empty());
}

#[tokio::test]
async fn rfc9111_3_an_interim_response_is_never_stored_the_final_one_is() {
    let h = Harness::forward().await;
    h.origin.on("/continue", Reply::ok("final").interim(100).header("Cache-Control", "max-age=60"));
    for _ in 0..2 {
        let reply = h.get("/continue").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.text(), "final");
    }
    assert_eq!(h.origin.hits("/continue"), 1, "the stored object is the 200");
}

#[tokio::test]
async fn rfc9111_5_2_2_3_must_understand_with_an_unknown_status_falls_back_to_no_store() {
    let h = Harness::forward().await;
    h.origin
        .on("/mu-unknown", Reply::status(299, "x").header("Cache-Control", "max-age=60, no-store, must-understand"));
    for _ in 0..2 {
        assert_eq!(h.get("/mu-unknown").await.status, 299);
    }
    assert_eq!(h.origin.hits("/mu-unknown"), 2, "a status the cache does not understand is not stored");
}

#[tokio::test]
async fn rfc9111_4_4_a_body_still_arriving_when_its_url_is_purged_is_not_stored() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An origin that sends half of the first body, then waits to be told to finish it; the
    // second request gets the new version at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    let (half_sent, mut half_sent_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (finish, finish_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut finish_rx = Some(finish_rx);
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = vec![0u8; 4096];
            let _ = conn.read(&mut head).await.unwrap();
            let ok = "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 10\r\nConnection: close\r\n\r\n";
            match finish_rx.take() {
                Some(finish_rx) => {
                    conn.write_all(format!("{ok}old-v").as_bytes()).await.unwrap();
                    half_sent.send(()).await.unwrap();
                    finish_rx.await.unwrap();
                    conn.write_all(b"ersio").await.unwrap();
                }
                None => conn.write_all(format!("{ok}new-versio").as_bytes()).await.unwrap(),
            }
        }
    });
    let h = Harness::forward().await;
    let url = format!("http://{origin}/doc");
    let (proxy, first_url) = (h.addr(), url.clone());
    let first = tokio::spawn(async move { sluice_testkit::client::get(proxy, &first_url, &[]).await });
    half_sent_rx.recv().await.unwrap();
    let purge = sluice_testkit::client::send(h.addr(), "PURGE", &url, &[], None).await;
    assert!([200, 404].contains(&purge.status.as_u16()), "{}", purge.status);
    finish.send(()).unwrap();
    assert_eq!(first.await.unwrap().text(), "old-versio", "the client that asked before gets its answer");
    let next = sluice_testkit::client::get(h.addr(), &url, &[]).await;
    assert_eq!(next.text(), "new-versio", "the purged version did not come back with its fill");
}
