//! Expiry processing (docs/store.md "Expiry processing"): the sweep removes stale objects
//! nobody asks for and keeps busy ones for revalidation; `POST /cache/sweep` runs one now.
//! Real sockets on 127.0.0.1, a scripted origin, the harness's injected clock.

mod common;

use common::admin::{admin, json, stored};
use common::{cache_status, Harness};
use sluice_proxy::config::Mode;
use sluice_testkit::client;
use sluice_testkit::Reply as OriginReply;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// A forward proxy whose sweep keeps stale objects 60 s and needs 1 hit per hour; the
/// periodic sweep runs every `interval` (0: only on request).
async fn proxy(interval: Duration) -> Harness {
    Harness::build(Mode::Forward, |c| {
        c.cache.sweep_interval.0 = interval;
        c.cache.sweep_grace.0 = Duration::from_secs(60);
        c.cache.sweep_min_hits_per_hour = 1.0;
    })
    .await
}

fn cacheable(body: &str) -> OriginReply {
    OriginReply::ok(body.to_owned()).header("cache-control", "max-age=10").header("etag", "\"v1\"").validating()
}

#[tokio::test]
async fn sweep_removes_stale_idle_objects_and_keeps_busy_ones_for_revalidation() {
    let h = proxy(Duration::ZERO).await;
    for path in ["/idle1", "/idle2", "/busy"] {
        h.origin.on(path, cacheable(path));
        assert_eq!(h.get(path).await.status, 200);
    }
    for _ in 0..3 {
        assert!(cache_status(&h.get("/busy").await).contains("hit"));
    }

    // Stale, but within the 60 s grace: nothing goes.
    h.advance(60);
    let report = json(&admin(&h, "POST", "/cache/sweep", &[], None).await);
    assert_eq!((report["examined"].as_u64(), report["removed"].as_u64()), (Some(3), Some(0)), "{report}");
    assert_eq!(report["kept_grace"], 3);

    // Past expiry + grace: the idle ones go, the busy one stays.
    h.advance(20);
    let reply = admin(&h, "POST", "/cache/sweep", &[], None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), "application/json");
    let report = json(&reply);
    assert_eq!(report["removed"], 2, "{report}");
    assert_eq!(report["kept_busy"], 1, "{report}");
    assert!(report["removed_bytes"].as_u64().unwrap_or(0) > 0);
    assert!(!stored(&h, "/idle1").await && !stored(&h, "/idle2").await);
    assert!(stored(&h, "/busy").await);
    assert_eq!(h.proxy.state().store.stats().objects, 1);

    // The busy one is revalidated by its next request; an idle one is fetched anew.
    let busy = h.get("/busy").await;
    assert!(cache_status(&busy).contains("fwd=stale") && cache_status(&busy).contains("fwd-status=304"));
    assert_eq!(h.origin.hits("/busy"), 2);
    let idle = h.get("/idle1").await;
    assert!(cache_status(&idle).contains("fwd=uri-miss"), "{}", cache_status(&idle));
    assert_eq!(h.origin.hits("/idle1"), 2);

    // Counted in /metrics and /stats.
    let metrics = client::send(h.admin(), "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("\nsluice_sweep_runs_total 2\n"), "{metrics}");
    assert!(metrics.contains("\nsluice_sweep_removed_total 2\n"), "{metrics}");
    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    assert_eq!((stats["sweep"]["runs"].as_u64(), stats["sweep"]["removed"].as_u64()), (Some(2), Some(2)));
}

#[tokio::test]
async fn the_sweep_endpoint_needs_the_token_and_a_post() {
    let h = proxy(Duration::ZERO).await;
    let reply = client::send(h.admin(), "POST", "/cache/sweep", &[], None).await;
    assert_eq!(reply.status, 401);
    let wrong = client::send(h.admin(), "POST", "/cache/sweep", &[("Authorization", "Bearer nope")], None).await;
    assert_eq!(wrong.status, 401);
    let get = admin(&h, "GET", "/cache/sweep", &[], None).await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), "POST");
    assert_eq!(h.proxy.state().metrics.sweep_runs.load(Relaxed), 0);
}

#[tokio::test]
async fn stale_serving_windows_outlast_the_grace() {
    let h = proxy(Duration::ZERO).await;
    h.origin.on("/swr", OriginReply::ok("x").header("cache-control", "max-age=10, stale-while-revalidate=300"));
    h.origin.on("/sie", OriginReply::ok("x").header("cache-control", "max-age=10, stale-if-error=600"));
    h.get("/swr").await;
    h.get("/sie").await;
    h.advance(10 + 300);
    assert_eq!(json(&admin(&h, "POST", "/cache/sweep", &[], None).await)["removed"], 0);
    h.advance(1);
    assert_eq!(json(&admin(&h, "POST", "/cache/sweep", &[], None).await)["removed"], 1);
    assert!(!stored(&h, "/swr").await && stored(&h, "/sie").await);
    h.advance(300);
    assert_eq!(json(&admin(&h, "POST", "/cache/sweep", &[], None).await)["removed"], 1);
    assert!(!stored(&h, "/sie").await);
}

#[tokio::test]
async fn the_periodic_sweep_runs_on_its_interval() {
    let h = proxy(Duration::from_millis(20)).await;
    h.origin.on("/old", OriginReply::ok("x").header("cache-control", "max-age=10"));
    h.get("/old").await;
    h.advance(10 + 61);
    h.eventually("the periodic sweep to remove /old", |h| h.proxy.state().metrics.sweep_removed.load(Relaxed) == 1)
        .await;
    assert!(!stored(&h, "/old").await);
    assert!(h.proxy.state().metrics.sweep_runs.load(Relaxed) >= 1);
}

#[tokio::test]
async fn the_sweep_deletes_stale_idle_disk_objects_and_keeps_busy_ones() {
    use common::disk::{disk, object_files, on_disk, proxy as disk_proxy, restart};
    let dir = tempfile::tempdir().unwrap();
    let h = disk_proxy(dir.path(), |c| {
        c.cache.sweep_interval.0 = Duration::ZERO;
        c.cache.sweep_grace.0 = Duration::from_secs(60);
        c.cache.sweep_min_hits_per_hour = 1.0;
    })
    .await;
    for path in ["/idle", "/busy"] {
        h.origin.on(path, cacheable(path));
        assert_eq!(h.get(path).await.status, 200);
    }
    on_disk(&h, 2).await;
    // After a restart both are on disk only; /busy is asked for again (a disk hit, then
    // memory hits of its promoted copy: both count).
    let h = restart(h).await;
    for _ in 0..3 {
        assert!(cache_status(&h.get("/busy").await).contains("hit"));
    }

    h.advance(10 + 61);
    let report = json(&admin(&h, "POST", "/cache/sweep", &[], None).await);
    assert_eq!(report["disk"]["examined"], 2, "{report}");
    assert_eq!(report["disk"]["removed"], 1, "{report}");
    assert_eq!(report["disk"]["kept_busy"], 1, "{report}");
    assert!(report["disk"]["removed_bytes"].as_u64().unwrap() >= 4096, "{report}");
    assert_eq!(disk(&h).objects, 1, "the index forgot it at once");
    h.eventually("the idle file to be deleted", |h| {
        h.proxy.state().store.pending_disk_jobs() == 0 && object_files(dir.path()).len() == 1
    })
    .await;
    assert!(!stored(&h, "/idle").await && stored(&h, "/busy").await);
    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    assert_eq!(stats["sweep"]["disk_removed"], 1, "{stats}");
    assert_eq!(stats["disk"]["swept"], 1, "{stats}");
    let metrics = client::send(h.admin(), "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("\nsluice_sweep_disk_removed_total 1\n"), "{metrics}");

    // The busy one is revalidated by its next request; the idle one is gone for good.
    let busy = h.get("/busy").await;
    assert!(cache_status(&busy).contains("fwd-status=304"), "{}", cache_status(&busy));
    let h = restart(h).await;
    assert_eq!(disk(&h).objects, 1, "only the busy one is recovered");
    let idle = h.get("/idle").await;
    assert!(cache_status(&idle).contains("fwd=uri-miss"), "{}", cache_status(&idle));
}
