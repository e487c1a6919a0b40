//! HTTP/1.1 pipelining towards origins (RFC 9112 §9.3.2, `upstream.pipeline`): requests
//! queued together go out in one write on one connection, responses are matched to their
//! requests in order, unanswered requests are retried, and only safe, bodiless requests are
//! pipelined.

mod common;

use common::Harness;
use sluice_proxy::config::Mode;
use sluice_testkit::{client, Reply};
use std::sync::atomic::Ordering::Relaxed;

/// A reverse proxy pipelining up to 8 requests on a single origin connection.
async fn pipelining_proxy() -> Harness {
    Harness::build(Mode::Reverse, |c| {
        c.upstream.pipeline = 8;
        c.upstream.max_connections_per_host = 1;
    })
    .await
}

fn body(i: usize) -> String {
    format!("response {i};").repeat(i * 500 + 1)
}

/// Sends GETs for `paths` at once, each from its own client connection.
async fn get_all(h: &Harness, paths: &[String]) -> Vec<client::Reply> {
    let tasks: Vec<_> = paths
        .iter()
        .map(|path| {
            let (addr, target) = (h.addr(), h.target(path));
            tokio::spawn(async move { client::get(addr, &target, &[]).await })
        })
        .collect();
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(task.await.expect("client task"));
    }
    replies
}

#[tokio::test]
async fn rfc9112_9_3_2_pipelined_responses_are_matched_to_their_requests_in_order() {
    let h = pipelining_proxy().await;
    let paths: Vec<String> = (0..8).map(|i| format!("/p/{i}")).collect();
    for (i, path) in paths.iter().enumerate() {
        h.origin.on(path, Reply::ok(body(i)).header("Cache-Control", "no-store"));
    }
    for (i, reply) in get_all(&h, &paths).await.into_iter().enumerate() {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.text(), body(i), "the response to /p/{i} is its own");
    }
    assert_eq!(h.origin.connections(), 1, "all eight on one connection");
    let metrics = &h.proxy.state().metrics;
    assert_eq!(metrics.origin_pipelined.load(Relaxed), 8);
    let writes = metrics.origin_pipeline_writes.load(Relaxed);
    assert!(writes < 8, "requests queued together went out in one write ({writes} writes for 8)");
    // The connection stays usable once the pipeline has drained.
    assert_eq!(h.get("/p/3").await.text(), body(3));
    assert_eq!(h.origin.connections(), 1);
}

#[tokio::test]
async fn rfc9112_9_3_2_requests_behind_a_response_that_closes_are_retried() {
    let h = pipelining_proxy().await;
    // Every response closes its connection: whatever was queued behind it goes unanswered
    // and is sent again on a connection of its own.
    h.origin.on("/last", Reply::ok("closing now").header("Cache-Control", "no-store").close_after());
    let paths = vec!["/last".to_owned(); 6];
    for reply in get_all(&h, &paths).await {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.text(), "closing now");
    }
    assert_eq!(h.origin.hits("/last"), 6, "each request answered once");
    assert_eq!(h.origin.connections(), 6);
    let metrics = &h.proxy.state().metrics;
    assert_eq!(metrics.origin_errors.load(Relaxed), 0, "a retried request is no origin failure");
    assert_eq!(metrics.origin_pipelined.load(Relaxed), 6);
}

#[tokio::test]
async fn rfc9112_9_3_2_only_bodiless_gets_and_heads_are_pipelined() {
    let h = pipelining_proxy().await;
    h.origin.on("/form", Reply::ok("posted").header("Cache-Control", "no-store"));
    let posted = h.send("POST", "/form", &[("Content-Type", "text/plain")], Some("a=1")).await;
    assert_eq!(posted.text(), "posted");
    let deleted = h.send("DELETE", "/form", &[], None).await;
    assert_eq!(deleted.status, 200);
    let metrics = &h.proxy.state().metrics;
    assert_eq!(metrics.origin_pipelined.load(Relaxed), 0);
    assert_eq!(h.get("/form").await.text(), "posted");
    assert_eq!(h.send("HEAD", "/form", &[], None).await.status, 200);
    assert_eq!(metrics.origin_pipelined.load(Relaxed), 2);
    assert_eq!(h.origin.hits("/form"), 4);
}

#[tokio::test]
async fn pipelining_is_off_by_default() {
    let h = Harness::reverse().await;
    h.origin.on("/p", Reply::ok("one at a time").header("Cache-Control", "no-store"));
    assert_eq!(h.get("/p").await.text(), "one at a time");
    assert_eq!(h.proxy.state().metrics.origin_pipelined.load(Relaxed), 0);
}
