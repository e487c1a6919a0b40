//! Suspended objects (docs/store.md, "Suspended objects"): an object with validators evicted
//! from a full memory tier keeps its metadata; a conditional client gets a 304, from the
//! entry while it is fresh and after one conditional origin request once it is stale; an
//! unconditional one gets a full fetch; PURGE removes the entry.
//! Real sockets on 127.0.0.1, a scripted origin that answers 304, the harness clock.

mod common;

use common::admin::{admin, enc, json};
use common::{cache_status, Harness};
use sluice_module::{Flow, LookupOutcome, LookupOverride, Module, Txn, TxnInfo};
use sluice_proxy::config::Mode;
use sluice_proxy::outcome::ResultCode;
use sluice_proxy::units::Size;
use sluice_proxy::LoadedModule;
use sluice_testkit::client;
use sluice_testkit::Reply as OriginReply;
use std::sync::{Arc, Mutex};

const BODY: usize = 20 * 1024;

/// A forward proxy with a 64 KiB memory tier (three 20 KiB objects fit) and no disk.
async fn proxy(suspend: bool) -> Harness {
    proxy_with(suspend, Vec::new()).await
}

/// [`proxy`] with these modules.
async fn proxy_with(suspend: bool, modules: Vec<LoadedModule>) -> Harness {
    Harness::build_with_modules(
        Mode::Forward,
        |c, _| {
            c.cache.memory = Size(64 * 1024);
            c.cache.suspend = suspend;
            c.cache.suspend_max_entries = 100;
        },
        modules,
    )
    .await
}

/// A module that forces revalidation at `cache_lookup` and records what it was shown.
struct Revalidator(Arc<Mutex<Vec<LookupOutcome>>>);

impl Module for Revalidator {
    fn name(&self) -> &str {
        "revalidator"
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(Revalidator(Arc::clone(&self.0))))
    }
}

impl Txn for Revalidator {
    fn cache_lookup(&mut self, _: &TxnInfo, outcome: LookupOutcome, decision: &mut LookupOverride) -> Flow {
        self.0.lock().unwrap().push(outcome);
        *decision = LookupOverride::ForceRevalidate;
        Flow::Continue
    }
}

fn with_etag(path: &str) -> OriginReply {
    OriginReply::ok(vec![b'a' + path.len() as u8; BODY])
        .header("cache-control", "max-age=600")
        .header("etag", "\"v1\"")
        .validating()
}

/// Stores `paths` in order, then enough other objects to evict them all.
async fn store_then_evict(h: &Harness, paths: &[&str]) {
    for path in paths {
        assert_eq!(h.get(path).await.status, 200);
    }
    for i in 0..4 {
        let filler = format!("/filler{i}");
        h.origin.on(&filler, OriginReply::ok(vec![b'f'; BODY]).header("cache-control", "max-age=600"));
        assert_eq!(h.get(&filler).await.status, 200);
    }
}

/// The admin listing of `path`: status and the variants' states.
async fn states(h: &Harness, path: &str) -> (u16, Vec<String>) {
    let reply = admin(h, "GET", &format!("/cache?url={}", enc(&h.origin.url(path))), &[], None).await;
    let body = json(&reply);
    let states = body["variants"].as_array().unwrap().iter().map(|v| v["state"].as_str().unwrap().to_owned()).collect();
    (reply.status.as_u16(), states)
}

#[tokio::test]
async fn a_conditional_client_gets_a_304_from_a_fresh_suspended_object_without_the_origin() {
    let h = proxy(true).await;
    h.origin.on("/a", with_etag("/a"));
    h.origin.on("/lm", with_etag("/lm").header("last-modified", "Mon, 02 Nov 2026 10:00:00 GMT"));
    store_then_evict(&h, &["/a", "/lm"]).await;
    assert_eq!(states(&h, "/a").await.1, vec!["suspended".to_owned()]);
    h.advance(100);

    let reply = h.get_with("/a", &[("If-None-Match", "\"x\", \"v1\"")]).await;
    assert_eq!(reply.status, 304);
    assert!(reply.body.is_empty());
    assert_eq!(reply.header("etag"), "\"v1\"");
    assert_eq!(reply.header("age"), "100");
    let cs = cache_status(&reply);
    assert!(cs.contains("hit") && cs.contains("detail=suspended") && !cs.contains("fwd="), "{cs}");
    let reply = h.get_with("/lm", &[("If-Modified-Since", "Mon, 02 Nov 2026 10:00:00 GMT")]).await;
    assert_eq!(reply.status, 304);
    assert_eq!((h.origin.hits("/a"), h.origin.hits("/lm")), (1, 1), "the origin was not asked");
    assert_eq!(h.proxy.state().metrics.results.get(ResultCode::ImsHit), 2);
    assert_eq!(h.proxy.state().metrics.suspended_hits.load(std::sync::atomic::Ordering::Relaxed), 2);
    let metrics = client::send(h.admin(), "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("\nsluice_cache_suspended_hits_total 2\n"), "{metrics}");

    // A client that insists on validation still gets it from the origin.
    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\""), ("Cache-Control", "max-age=0")]).await;
    assert_eq!(reply.status, 304);
    assert_eq!(h.origin.hits("/a"), 2);
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), Some("\"v1\""));
    // So does one whose validator does not match (a full fetch).
    let reply = h.get_with("/lm", &[("If-None-Match", "\"other\"")]).await;
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, BODY));
    assert_eq!(h.origin.hits("/lm"), 2);
}

#[tokio::test]
async fn a_module_sees_a_fresh_suspended_answer_as_a_hit_and_can_force_revalidation() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module =
        LoadedModule { module: Arc::new(Revalidator(Arc::clone(&seen))), on_error: sluice_module::FailurePolicy::Open };
    let h = proxy_with(true, vec![module]).await;
    h.origin.on("/a", with_etag("/a"));
    store_then_evict(&h, &["/a"]).await;
    seen.lock().unwrap().clear();
    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\"")]).await;
    assert_eq!(reply.status, 304);
    assert_eq!(*seen.lock().unwrap(), vec![LookupOutcome::Hit]);
    assert_eq!(h.origin.hits("/a"), 2, "revalidated with the origin, as the module asked");
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), Some("\"v1\""));
}

#[tokio::test]
async fn a_conditional_client_revalidates_a_stale_suspended_object_with_one_conditional_request() {
    let h = proxy(true).await;
    h.origin.on("/a", with_etag("/a"));
    store_then_evict(&h, &["/a"]).await;
    assert_eq!(states(&h, "/a").await, (200, vec!["suspended".to_owned()]));
    let stats = h.proxy.state().store.stats();
    assert_eq!((stats.suspended, stats.suspensions), (1, 1));
    assert!(stats.bytes <= stats.capacity);
    h.advance(601);

    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\"")]).await;
    assert_eq!(reply.status, 304);
    assert!(reply.body.is_empty());
    assert_eq!(reply.header("etag"), "\"v1\"");
    let cs = cache_status(&reply);
    assert!(cs.contains("fwd=stale") && cs.contains("fwd-status=304") && cs.contains("detail=suspended"), "{cs}");
    assert_eq!(h.origin.hits("/a"), 2, "exactly one more origin request");
    let sent = h.origin.last_request("/a").unwrap();
    assert_eq!(sent.header("if-none-match"), Some("\"v1\""), "the stored validator was sent");
    assert_eq!(h.proxy.state().metrics.results.get(ResultCode::RefreshUnmodified), 1);
    assert_eq!(states(&h, "/a").await.1, vec!["suspended".to_owned()], "still without a body");

    let metrics = client::send(h.admin(), "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("\nsluice_cache_suspended_objects 1\n"), "{metrics}");
    assert!(metrics.contains("\nsluice_cache_suspensions_total 1\n"), "{metrics}");
    assert!(metrics.contains("\nsluice_cache_suspended_revalidations_total 1\n"), "{metrics}");
    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    assert_eq!(stats["cache"]["suspended"], 1);
}

#[tokio::test]
async fn an_unconditional_client_gets_a_full_fetch_and_the_history_carries_over() {
    let h = proxy(true).await;
    h.origin.on("/a", with_etag("/a"));
    assert_eq!(h.get("/a").await.status, 200);
    for _ in 0..3 {
        assert!(cache_status(&h.get("/a").await).contains("hit"));
    }
    store_then_evict(&h, &[]).await;
    assert_eq!(states(&h, "/a").await.1, vec!["suspended".to_owned()]);

    let reply = h.get("/a").await;
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, BODY));
    assert_eq!(h.origin.hits("/a"), 2);
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), None, "no wasted conditional");
    let listing = json(&admin(&h, "GET", &format!("/cache?url={}", enc(&h.origin.url("/a"))), &[], None).await);
    assert_eq!(listing["variants"][0]["state"], "memory");
    assert!(listing["variants"][0]["hits"].as_u64().unwrap() >= 4, "{listing}");

    // A conditional client whose validator does not match gets the full body too.
    store_then_evict(&h, &[]).await;
    let reply = h.get_with("/a", &[("If-None-Match", "\"other\"")]).await;
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, BODY));
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), None);
    assert_eq!(h.proxy.state().metrics.suspended_revalidations.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_changed_object_is_stored_when_the_origin_answers_200() {
    let h = proxy(true).await;
    h.origin.on("/a", with_etag("/a"));
    store_then_evict(&h, &["/a"]).await;
    h.advance(601);
    h.origin.on(
        "/a",
        OriginReply::ok(vec![b'n'; BODY]).header("cache-control", "max-age=600").header("etag", "\"v2\"").validating(),
    );
    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\"")]).await;
    assert_eq!((reply.status.as_u16(), reply.header("etag")), (200, "\"v2\""));
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), Some("\"v1\""));
    assert_eq!(h.proxy.state().metrics.results.get(ResultCode::RefreshModified), 1);
    assert_eq!(states(&h, "/a").await.1, vec!["memory".to_owned()]);
    assert!(cache_status(&h.get("/a").await).contains("hit"));
}

#[tokio::test]
async fn purge_removes_a_suspended_entry_and_objects_without_validators_are_just_evicted() {
    let h = proxy(true).await;
    h.origin.on("/a", with_etag("/a"));
    h.origin.on("/plain", OriginReply::ok(vec![b'p'; BODY]).header("cache-control", "max-age=600"));
    store_then_evict(&h, &["/a", "/plain"]).await;
    assert_eq!(states(&h, "/plain").await.0, 404, "no validators: nothing kept");
    assert_eq!(states(&h, "/a").await.1, vec!["suspended".to_owned()]);
    assert_eq!(h.send("PURGE", "/a", &[], None).await.status, 200);
    assert_eq!(states(&h, "/a").await.0, 404);
    assert_eq!(h.proxy.state().store.stats().suspended, 0);
    // With nothing suspended, a conditional client is simply a miss.
    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\"")]).await;
    assert_eq!(reply.status, 304, "answered from the fresh full response");
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), None);
}

#[tokio::test]
async fn with_suspend_off_evicted_objects_leave_nothing() {
    let h = proxy(false).await;
    h.origin.on("/a", with_etag("/a"));
    store_then_evict(&h, &["/a"]).await;
    assert_eq!(states(&h, "/a").await.0, 404);
    let reply = h.get_with("/a", &[("If-None-Match", "\"v1\"")]).await;
    assert_eq!(reply.status, 304);
    assert_eq!(h.origin.last_request("/a").unwrap().header("if-none-match"), None, "a full fetch");
}
