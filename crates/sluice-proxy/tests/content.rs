//! Content management through the admin API (docs/content.md) and the module-facing
//! `CacheApi`: query, fetch and prefetch (seed 002's RPC fetch), validate now, expiry,
//! delete by key, prefix and tag, pushed content, and reads of whole bodies and ranges.
//! Real sockets on 127.0.0.1, a scripted origin, the harness's injected clock.

mod common;

use common::admin::{admin, enc, json, stored};
use common::{cache_status, Harness};
use sluice_module::{FetchMode, Revalidation};
use sluice_proxy::clock::Clock;
use sluice_proxy::config::Mode;
use sluice_testkit::client;
use sluice_testkit::Reply as OriginReply;
use std::time::{Duration, SystemTime};

fn cacheable(body: &str, max_age: u32) -> OriginReply {
    OriginReply::ok(body.to_owned()).header("cache-control", &format!("max-age={max_age}"))
}

#[tokio::test]
async fn every_content_endpoint_needs_the_token() {
    let h = Harness::forward().await;
    let url = enc(&h.origin.url("/x"));
    for (method, path) in [
        ("GET", format!("/cache?url={url}")),
        ("DELETE", format!("/cache?url={url}")),
        ("PUT", format!("/cache?url={url}")),
        ("GET", format!("/cache/body?url={url}")),
        ("POST", format!("/cache/expire?url={url}")),
        ("POST", format!("/cache/validate?url={url}")),
        ("POST", format!("/fetch?url={url}")),
        ("POST", format!("/prefetch?url={url}")),
    ] {
        let reply = client::send(h.admin(), method, &path, &[], Some("x")).await;
        assert_eq!(reply.status, 401, "{method} {path}: {}", reply.text());
        assert_eq!(reply.header("www-authenticate"), "Bearer");
        let wrong = client::send(h.admin(), method, &path, &[("Authorization", "Bearer nope")], None).await;
        assert_eq!(wrong.status, 401, "{method} {path}");
    }
    assert_eq!(h.origin.hits("/x"), 0);
    let wrong_method = admin(&h, "PATCH", &format!("/cache?url={url}"), &[], None).await;
    assert_eq!(wrong_method.status, 405);
    assert!(wrong_method.header("allow").contains("PUT"));
}

#[tokio::test]
async fn bad_keys_and_parameters_get_a_clear_400() {
    let h = Harness::forward().await;
    for (method, path) in [
        ("GET", "/cache?url=not-a-url"),
        ("GET", "/cache?url=ftp%3A%2F%2Fexample.com%2F"),
        ("GET", "/cache"),
        ("DELETE", "/cache?url=%2Frelative"),
        ("DELETE", "/cache?prefix=example.com"),
        ("PUT", "/cache?url=not-a-url"),
        ("GET", "/cache/body?url=nope"),
        ("POST", "/cache/expire?url=nope"),
        ("POST", "/cache/validate?url=nope"),
        ("POST", "/fetch?url=nope"),
        ("POST", "/prefetch?url=mailto%3Ax%40y"),
    ] {
        let reply = admin(&h, method, path, &[], None).await;
        assert_eq!(reply.status, 400, "{method} {path}: {}", reply.text());
        assert!(!reply.text().trim().is_empty(), "{method} {path} explains itself");
    }
    let url = enc(&h.origin.url("/x"));
    let both = admin(&h, "DELETE", &format!("/cache?url={url}&tag=a"), &[], None).await;
    assert_eq!(both.status, 400);
    assert!(both.text().contains("exactly one"), "{}", both.text());
    let unknown = admin(&h, "GET", &format!("/cache?url={url}&colour=red"), &[], None).await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.text().contains("colour"), "{}", unknown.text());
    let fetch = admin(&h, "POST", "/fetch", &[], Some("")).await;
    assert_eq!(fetch.status, 400);
    assert!(fetch.text().contains("url"), "{}", fetch.text());
}

#[tokio::test]
async fn query_reports_metadata_freshness_variants_tags_and_hits() {
    let h = Harness::forward().await;
    h.origin
        .on("/q", cacheable("hello", 60).header("surrogate-key", "news front").header("content-type", "text/plain"));
    h.get("/q").await;
    h.get("/q").await;
    h.get("/q").await;
    h.advance(10);
    let url = enc(&h.origin.url("/q"));
    let reply = admin(&h, "GET", &format!("/cache?url={url}"), &[], None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), "application/json");
    let body = json(&reply);
    assert_eq!(body["key"], h.origin.url("/q"));
    let v = &body["variants"][0];
    assert_eq!(v["status"], 200);
    assert_eq!(v["size"], 5);
    assert_eq!(v["hits"], 2);
    assert_eq!(v["lifetime_s"], 60);
    assert_eq!(v["age_s"], 10);
    assert_eq!(v["ttl_s"], 50);
    assert_eq!(v["fresh"], true);
    assert_eq!(v["tags"], serde_json::json!(["news", "front"]));
    assert_eq!(v["headers"]["content-type"][0], "text/plain");
    h.advance(51);
    let stale = json(&admin(&h, "GET", &format!("/cache?url={url}"), &[], None).await);
    assert_eq!(stale["variants"][0]["fresh"], false);
    assert_eq!(stale["variants"][0]["ttl_s"], -1);

    h.origin.on("/v", cacheable("gz", 60).header("vary", "accept-encoding"));
    h.get_with("/v", &[("accept-encoding", "gzip")]).await;
    h.get_with("/v", &[("accept-encoding", "br")]).await;
    let vary = json(&admin(&h, "GET", &format!("/cache?url={}", enc(&h.origin.url("/v"))), &[], None).await);
    let values: Vec<&str> =
        vary["variants"].as_array().unwrap().iter().map(|v| v["vary"]["accept-encoding"].as_str().unwrap()).collect();
    assert_eq!(values, ["br", "gzip"]);

    let missing = admin(&h, "GET", &format!("/cache?url={}", enc(&h.origin.url("/none"))), &[], None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(json(&missing)["variants"], serde_json::json!([]));
}

#[tokio::test]
async fn fetch_goes_through_the_cache_and_returns_its_cache_status() {
    let h = Harness::forward().await;
    h.origin.on("/f", cacheable("fetched body", 60).header("content-type", "text/plain"));
    let url = h.origin.url("/f");
    let first = admin(&h, "POST", &format!("/fetch?url={}", enc(&url)), &[], None).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.text(), "fetched body");
    assert_eq!(first.header("content-type"), "text/plain");
    assert!(cache_status(&first).contains("fwd=uri-miss"), "{}", cache_status(&first));
    assert!(cache_status(&first).contains("stored"), "{}", cache_status(&first));
    assert_eq!(first.header("sluice-result"), "TCP_MISS");
    assert_eq!(first.header("cache-control"), "max-age=60", "the origin's own fields");
    // The URL may also be the request body.
    let second = admin(&h, "POST", "/fetch", &[], Some(&url)).await;
    assert_eq!(second.text(), "fetched body");
    assert!(cache_status(&second).contains("hit"), "{}", cache_status(&second));
    assert_eq!(second.header("sluice-result"), "TCP_MEM_HIT");
    // A proxy client gets what the fetch stored.
    let client = h.get("/f").await;
    assert!(cache_status(&client).contains("hit"));
    assert_eq!(h.origin.hits("/f"), 1);
    // An origin error is passed on as the response, with its status.
    h.origin.on("/gone", OriginReply::status(404, "no such page"));
    let gone = admin(&h, "POST", "/fetch", &[], Some(&format!("url={}", enc(&h.origin.url("/gone"))))).await;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.text(), "no such page");
    assert!(cache_status(&gone).contains("fwd-status=404"), "{}", cache_status(&gone));
}

#[tokio::test]
async fn prefetch_stores_the_object_and_answers_without_the_body() {
    let h = Harness::forward().await;
    h.origin.on("/p", cacheable("0123456789", 60));
    let reply = admin(&h, "POST", &format!("/prefetch?url={}", enc(&h.origin.url("/p"))), &[], None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = json(&reply);
    assert_eq!(body["status"], 200);
    assert_eq!(body["size"], 10);
    assert_eq!(body["stored"], true);
    assert_eq!(body["hit"], false);
    assert_eq!(body["result"], "TCP_MISS");
    let client = h.get("/p").await;
    assert_eq!(client.text(), "0123456789");
    assert!(cache_status(&client).contains("hit"));
    assert_eq!(h.origin.hits("/p"), 1);
    let again =
        json(&admin(&h, "POST", &format!("/fetch?prefetch=1&url={}", enc(&h.origin.url("/p"))), &[], None).await);
    assert_eq!(again["hit"], true);
    assert_eq!(h.origin.hits("/p"), 1);
}

#[tokio::test]
async fn a_fetch_collapses_with_a_client_request_in_flight() {
    let h = Harness::forward().await;
    h.origin.on("/slow", cacheable("slow", 60).delay(Duration::from_millis(300)));
    let url = enc(&h.origin.url("/slow"));
    let path = format!("/fetch?url={url}");
    let (client, fetched) = tokio::join!(h.get("/slow"), admin(&h, "POST", &path, &[], None));
    assert_eq!(client.text(), "slow");
    assert_eq!(fetched.text(), "slow");
    assert_eq!(h.origin.hits("/slow"), 1, "one origin request for both");
}

#[tokio::test]
async fn validate_now_sends_a_conditional_request_and_a_304_freshens() {
    let h = Harness::forward().await;
    h.origin.on("/val", cacheable("v1", 100).header("etag", "\"e1\"").validating());
    h.get("/val").await;
    h.advance(40);
    let url = enc(&h.origin.url("/val"));
    let reply = admin(&h, "POST", &format!("/cache/validate?url={url}"), &[], None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = json(&reply);
    assert_eq!(body["outcome"], "not-modified");
    assert_eq!(body["origin_status"], 304);
    assert_eq!(body["variants"][0]["ttl_s"], 100, "freshened: age restarts at 0");
    assert_eq!(h.origin.hits("/val"), 2);
    let sent = h.origin.last_request("/val").unwrap();
    assert_eq!(sent.header("if-none-match"), Some("\"e1\""));
    // A new response replaces the stored one.
    h.origin.on("/val", cacheable("v2", 100).header("etag", "\"e2\"").validating());
    let replaced = json(&admin(&h, "POST", &format!("/cache/validate?url={url}"), &[], None).await);
    assert_eq!(replaced["outcome"], "replaced");
    assert_eq!(replaced["origin_status"], 200);
    let read = admin(&h, "GET", &format!("/cache/body?url={url}"), &[], None).await;
    assert_eq!(read.text(), "v2");
    // Nothing stored: nothing to validate.
    let none = admin(&h, "POST", &format!("/cache/validate?url={}", enc(&h.origin.url("/no"))), &[], None).await;
    assert_eq!(none.status, 404, "{}", none.text());
    assert_eq!(h.origin.hits("/no"), 0);
}

#[tokio::test]
async fn expiry_can_be_set_to_now_a_lifetime_or_a_time() {
    let h = Harness::forward().await;
    h.origin.on("/e", cacheable("e", 60));
    h.get("/e").await;
    let url = enc(&h.origin.url("/e"));
    let now = json(&admin(&h, "POST", &format!("/cache/expire?url={url}"), &[], None).await);
    assert_eq!(now["updated"], 1);
    assert_eq!(now["variants"][0]["fresh"], false);
    h.get("/e").await;
    assert_eq!(h.origin.hits("/e"), 2, "an expired object goes back to the origin");

    let longer = json(&admin(&h, "POST", &format!("/cache/expire?url={url}&ttl=3600"), &[], None).await);
    assert_eq!(longer["variants"][0]["ttl_s"], 3600);
    h.advance(1000);
    assert!(cache_status(&h.get("/e").await).contains("hit"));
    assert_eq!(h.origin.hits("/e"), 2);

    let at = h.clock.now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() + 100;
    let until = json(&admin(&h, "POST", &format!("/cache/expire?url={url}&at={at}"), &[], None).await);
    assert_eq!(until["variants"][0]["ttl_s"], 100);

    let bad = admin(&h, "POST", &format!("/cache/expire?url={url}&ttl=soon"), &[], None).await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("ttl"), "{}", bad.text());
    let missing = admin(&h, "POST", &format!("/cache/expire?url={}", enc(&h.origin.url("/none"))), &[], None).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn delete_by_tag_removes_exactly_the_tagged_objects() {
    let h = Harness::forward().await;
    h.origin.on("/t/a", cacheable("a", 60).header("surrogate-key", "red blue"));
    h.origin.on("/t/b", cacheable("b", 60).header("cache-tag", "green, blue"));
    h.origin.on("/t/c", cacheable("c", 60));
    h.origin.on("/u/d", cacheable("d", 60).header("surrogate-key", "red"));
    for path in ["/t/a", "/t/b", "/t/c", "/u/d"] {
        h.get(path).await;
    }
    let deleted = admin(&h, "DELETE", "/cache?tag=blue", &[], None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(json(&deleted)["removed"], 2);
    assert!(!stored(&h, "/t/a").await && !stored(&h, "/t/b").await);
    assert!(stored(&h, "/t/c").await && stored(&h, "/u/d").await);
    let unknown = admin(&h, "DELETE", "/cache?tag=blue", &[], None).await;
    assert_eq!(unknown.status, 404);
    assert!(json(&unknown)["error"].as_str().unwrap().contains("no stored object has tag"));
    let spaced = admin(&h, "DELETE", "/cache?tag=red+blue", &[], None).await;
    assert_eq!(spaced.status, 400, "{}", spaced.text());

    let prefix = admin(&h, "DELETE", &format!("/cache?prefix={}", enc(&h.origin.url("/u/"))), &[], None).await;
    assert_eq!(json(&prefix)["removed"], 1);
    assert!(!stored(&h, "/u/d").await && stored(&h, "/t/c").await);

    let one = admin(&h, "DELETE", &format!("/cache?url={}", enc(&h.origin.url("/t/c"))), &[], None).await;
    assert_eq!(one.status, 200);
    assert_eq!(json(&one)["key"], h.origin.url("/t/c"));
    let again = admin(&h, "DELETE", &format!("/cache?url={}", enc(&h.origin.url("/t/c"))), &[], None).await;
    assert_eq!(again.status, 404);
    h.get("/t/c").await;
    assert_eq!(h.origin.hits("/t/c"), 2);
    assert_eq!(h.origin.hits("/t/a"), 1);
}

#[tokio::test]
async fn pushed_content_is_served_to_clients_without_an_origin_request() {
    let h = Harness::forward().await;
    let url = h.origin.url("/pushed");
    let push = admin(
        &h,
        "PUT",
        &format!("/cache?url={}", enc(&url)),
        &[("content-type", "text/html"), ("cache-control", "max-age=300"), ("surrogate-key", "campaign")],
        Some("<p>pushed</p>"),
    )
    .await;
    assert_eq!(push.status, 201, "{}", push.text());
    let stored = json(&push);
    assert_eq!(stored["key"], url);
    assert_eq!(stored["size"], 13);
    assert_eq!(stored["fresh"], true);
    assert_eq!(stored["tags"], serde_json::json!(["campaign"]));
    assert!(stored["headers"].get("authorization").is_none(), "request-only fields are not stored");
    assert!(stored["headers"].get("user-agent").is_none());

    let client = h.get("/pushed").await;
    assert_eq!(client.status, 200);
    assert_eq!(client.text(), "<p>pushed</p>");
    assert_eq!(client.header("content-type"), "text/html");
    assert!(cache_status(&client).contains("hit"), "{}", cache_status(&client));
    assert_eq!(h.origin.hits("/pushed"), 0, "no origin request for pushed content");
    let read = admin(&h, "GET", &format!("/cache/body?url={}", enc(&url)), &[], None).await;
    assert_eq!(read.header("cache-control"), "max-age=300", "the stored fields, as pushed");
    assert_eq!(read.header("surrogate-key"), "campaign");

    // A status other than 200, and a lifetime given by `ttl` for a response without one.
    let moved = admin(
        &h,
        "PUT",
        &format!("/cache?url={}&status=301&ttl=60", enc(&h.origin.url("/old"))),
        &[("location", "/new")],
        Some(""),
    )
    .await;
    assert_eq!(moved.status, 201, "{}", moved.text());
    let client = h.get("/old").await;
    assert_eq!(client.status, 301);
    assert_eq!(client.header("location"), "/new");
    assert_eq!(h.origin.hits("/old"), 0);

    for status in ["99", "600", "999", "206", "304"] {
        let bad = admin(&h, "PUT", &format!("/cache?url={}&status={status}", enc(&url)), &[], Some("x")).await;
        assert_eq!(bad.status, 400, "status={status}: {}", bad.text());
    }
}

#[tokio::test]
async fn a_push_is_not_overwritten_by_a_fetch_already_in_flight() {
    let h = Harness::forward().await;
    h.origin.on("/race", cacheable("from the origin", 300).pause_mid_body(Duration::from_millis(500)));
    let url = h.origin.url("/race");
    let path = format!("/cache?url={}", enc(&url));
    let push = async {
        h.eventually("the client's fetch reaches the origin", |h| h.origin.hits("/race") == 1).await;
        admin(&h, "PUT", &path, &[("cache-control", "max-age=300")], Some("pushed")).await
    };
    let (client, push) = tokio::join!(h.get("/race"), push);
    assert_eq!(push.status, 201, "{}", push.text());
    assert_eq!(client.text(), "from the origin", "the fetch's own client gets what it asked for");
    let after = h.get("/race").await;
    assert_eq!(after.text(), "pushed", "{}", cache_status(&after));
    assert_eq!(h.origin.hits("/race"), 1);
}

#[tokio::test]
async fn a_pushed_body_is_streamed_and_bounded_by_the_object_limit() {
    let h = Harness::build(Mode::Forward, |c| c.cache.max_object = sluice_proxy::units::Size(4096)).await;
    let url = enc(&h.origin.url("/s"));
    let chunked = format!(
        "PUT /cache?url={url} HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer test-token\r\n\
         Cache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    );
    let answer = client::raw(h.admin(), chunked.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(h.get("/s").await.text(), "hello world");
    let big = "x".repeat(5000);
    let too_big = admin(&h, "PUT", &format!("/cache?url={url}"), &[], Some(&big)).await;
    assert_eq!(too_big.status, 413, "{}", too_big.text());
    assert_eq!(h.get("/s").await.text(), "hello world", "a refused push leaves the stored object alone");
    assert_eq!(h.origin.hits("/s"), 0);
}

#[tokio::test]
async fn read_returns_the_stored_body_whole_or_a_range() {
    let h = Harness::forward().await;
    let url = enc(&h.origin.url("/r"));
    let push =
        admin(&h, "PUT", &format!("/cache?url={url}&ttl=60"), &[("content-type", "text/plain")], Some("0123456789"))
            .await;
    assert_eq!(push.status, 201);
    let whole = admin(&h, "GET", &format!("/cache/body?url={url}"), &[], None).await;
    assert_eq!(whole.status, 200);
    assert_eq!(whole.text(), "0123456789");
    assert_eq!(whole.header("content-type"), "text/plain");
    assert_eq!(whole.header("sluice-stored-status"), "200");
    let part = admin(&h, "GET", &format!("/cache/body?url={url}&range=2-5"), &[], None).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.text(), "2345");
    assert_eq!(part.header("content-range"), "bytes 2-5/10");
    let suffix = admin(&h, "GET", &format!("/cache/body?url={url}"), &[("range", "bytes=-3")], None).await;
    assert_eq!(suffix.text(), "789");
    let outside = admin(&h, "GET", &format!("/cache/body?url={url}&range=20-"), &[], None).await;
    assert_eq!(outside.status, 416);
    assert_eq!(outside.header("content-range"), "bytes */10");
    let garbled = admin(&h, "GET", &format!("/cache/body?url={url}&range=two-five"), &[], None).await;
    assert_eq!(garbled.status, 400);
    assert!(garbled.text().contains("bad range"), "{}", garbled.text());
    let missing = admin(&h, "GET", &format!("/cache/body?url={}", enc(&h.origin.url("/none"))), &[], None).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn modules_get_the_same_operations_through_cache_api() {
    let h = Harness::forward().await;
    h.origin.on("/m", cacheable("module", 60).header("etag", "\"m\"").validating());
    let cache = std::sync::Arc::clone(&h.proxy.state().content);
    let url = h.origin.url("/m");
    let first = cache.fetch(&url, FetchMode::Body).await.unwrap();
    assert_eq!((first.status.as_u16(), first.result, first.hit), (200, "TCP_MISS", false));
    assert_eq!(first.body, "module");
    assert!(first.cache_status.contains("stored"), "{}", first.cache_status);
    let second = cache.fetch(&url, FetchMode::Prefetch).await.unwrap();
    assert_eq!((second.result, second.hit, second.size, second.body.len()), ("TCP_MEM_HIT", true, 6, 0));
    let validated = cache.validate(&url).await.unwrap();
    assert_eq!(validated.outcome, Revalidation::NotModified);
    assert_eq!(h.origin.hits("/m"), 2);
    let reader = cache.open(&url).unwrap().unwrap().range(1..4).unwrap();
    assert_eq!(reader.read_to_end(), "odu");
    assert!(matches!(cache.fetch("nope", FetchMode::Body).await, Err(sluice_module::CacheError::BadUrl(_))));
}

#[tokio::test]
async fn reverse_routes_keep_tags_for_purging_but_do_not_pass_them_to_clients() {
    let h = Harness::reverse().await;
    h.origin.on("/cdn", cacheable("cdn", 60).header("surrogate-key", "s1 s2").header("cache-tag", "c1"));
    let miss = h.get("/cdn").await;
    let hit = h.get("/cdn").await;
    for reply in [&miss, &hit] {
        assert_eq!(reply.text(), "cdn");
        assert_eq!(reply.header("surrogate-key"), "");
        assert_eq!(reply.header("cache-tag"), "");
    }
    assert!(cache_status(&hit).contains("hit"));
    // The key of a reverse-proxied object is its origin URL.
    let query = json(&admin(&h, "GET", &format!("/cache?url={}", enc(&h.origin.url("/cdn"))), &[], None).await);
    assert_eq!(query["variants"][0]["tags"], serde_json::json!(["s1", "s2", "c1"]));
    assert_eq!(json(&admin(&h, "DELETE", "/cache?tag=c1", &[], None).await)["removed"], 1);
    h.get("/cdn").await;
    assert_eq!(h.origin.hits("/cdn"), 2);

    // A forward proxy passes them on: they are the origin's fields, end to end.
    let f = Harness::forward().await;
    f.origin.on("/fwd", cacheable("fwd", 60).header("surrogate-key", "s1"));
    assert_eq!(f.get("/fwd").await.header("surrogate-key"), "s1");
}

#[tokio::test]
async fn a_failed_validation_keeps_the_stale_object_when_stale_if_error_allows() {
    let h = Harness::forward().await;
    let stored =
        OriginReply::ok("kept").header("cache-control", "max-age=10, stale-if-error=600").header("etag", "\"k\"");
    h.origin.on_seq("/sie", vec![stored, OriginReply::status(503, "down")]);
    h.get("/sie").await;
    h.advance(20);
    let url = enc(&h.origin.url("/sie"));
    let reply = admin(&h, "POST", &format!("/cache/validate?url={url}"), &[], None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = json(&reply);
    assert_eq!(body["outcome"], "failed");
    assert_eq!(body["origin_status"], serde_json::Value::Null);
    assert_eq!(h.origin.hits("/sie"), 2, "the validation reached the origin");
    assert_eq!(admin(&h, "GET", &format!("/cache/body?url={url}"), &[], None).await.text(), "kept");
}
