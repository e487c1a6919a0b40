//! The disk tier under the proxy (`[cache.disk]`): write-through, disk hits (promoted and
//! streamed), restart, corruption, purge, revalidation, ranges and HEAD, truncated bodies.
//! Real sockets on 127.0.0.1, a temporary directory for the tier, the harness clock.

mod common;

use common::disk::*;
use common::{cache_status, Harness};
use sluice_proxy::config::Config;
use sluice_proxy::outcome::ResultCode;
use sluice_proxy::units::Size;
use sluice_proxy::State;
use sluice_testkit::Reply;
use std::sync::Arc;

#[tokio::test]
async fn restart_keeps_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/a", Reply::ok("kept across restarts").header("cache-control", FRESH));
    let first = h.get("/a").await;
    assert_eq!(first.text(), "kept across restarts");
    on_disk(&h, 1).await;

    let h = restart(h).await;
    assert_eq!(disk(&h).objects, 1, "recovered at start");
    let reply = h.get("/a").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "kept across restarts");
    assert!(cache_status(&reply).contains("hit"), "{}", cache_status(&reply));
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/a"), 1, "zero origin requests after the restart");
    disk_hits(&h, 1).await;
    // Promoted: the next hit is from memory.
    let again = h.get("/a").await;
    assert_eq!(again.text(), "kept across restarts");
    assert!(!cache_status(&again).contains("detail=disk"), "{}", cache_status(&again));
    h.eventually("a memory hit", |h| h.proxy.state().metrics.results.get(ResultCode::MemHit) == 1).await;
    assert_eq!(h.origin.hits("/a"), 1);
    assert_eq!(h.proxy.state().store.counters().promotions.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[tokio::test]
async fn memory_evicted_object_is_served_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| c.cache.memory = Size(64 << 10)).await;
    let body = |c: char| c.to_string().repeat(30_000);
    for (path, c) in [("/a", 'a'), ("/b", 'b'), ("/c", 'c')] {
        h.origin.on(path, Reply::ok(body(c)).header("cache-control", FRESH));
        assert_eq!(h.get(path).await.text(), body(c));
    }
    on_disk(&h, 3).await;
    assert!(h.proxy.state().store.stats().objects < 3, "the memory tier evicted something");
    assert!(h.proxy.state().store.stats().evictions >= 1);
    let reply = h.get("/a").await;
    assert_eq!(reply.text(), body('a'));
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/a"), 1);
    disk_hits(&h, 1).await;
}

#[tokio::test]
async fn a_corrupt_disk_file_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on_seq(
        "/c",
        vec![
            Reply::ok("original body bytes").header("cache-control", FRESH),
            Reply::ok("the origin's new body").header("cache-control", FRESH),
        ],
    );
    assert_eq!(h.get("/c").await.text(), "original body bytes");
    on_disk(&h, 1).await;
    let h = {
        let Harness { origin, others, proxy, clock, mode } = h;
        let config = proxy.state().config.clone();
        proxy.shutdown().await;
        // Flip one byte of the body (the body ends the file) while no process has it open.
        let files = object_files(dir.path());
        assert_eq!(files.len(), 1);
        let mut bytes = std::fs::read(&files[0]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x20;
        std::fs::write(&files[0], &bytes).unwrap();
        let proxy = sluice_proxy::start(new_state(config, &clock).await).await.expect("start");
        Harness { origin, others, proxy, clock, mode }
    };
    assert_eq!(disk(&h).objects, 1, "a body is only checked at its first serve");
    let reply = h.get("/c").await;
    assert_eq!(reply.text(), "the origin's new body");
    assert!(!cache_status(&reply).contains("hit"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/c"), 2, "the origin was asked");
    assert_eq!(disk(&h).corrupt_at_read, 1);
    assert!(object_files(dir.path()).iter().all(|f| std::fs::read(f).unwrap().ends_with(b"the origin's new body")));
}

#[tokio::test]
async fn purge_removes_the_disk_copy_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/p", Reply::ok("purge me").header("cache-control", FRESH));
    h.get("/p").await;
    on_disk(&h, 1).await;
    assert_eq!(h.send("PURGE", "/p", &[], None).await.status, 200);
    assert_eq!(disk(&h).objects, 0, "gone from the disk index at once");
    h.eventually("the file deleted", |_| object_files(dir.path()).is_empty()).await;
    let h = restart(h).await;
    assert_eq!(disk(&h).objects, 0, "nothing recovered");
    let reply = h.get("/p").await;
    assert_eq!(reply.text(), "purge me");
    assert!(!cache_status(&reply).contains("hit"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/p"), 2);
}

#[tokio::test]
async fn unsafe_methods_invalidate_the_disk_copy() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| c.cache.memory = Size(64 << 10)).await;
    h.origin.on("/u", Reply::ok("before the post").header("cache-control", FRESH));
    h.origin.on("/u2", Reply::ok("x".repeat(60_000)).header("cache-control", FRESH));
    h.get("/u").await;
    on_disk(&h, 1).await;
    h.origin.on("/u", Reply::ok("posted"));
    assert_eq!(h.send("POST", "/u", &[], Some("data")).await.status, 200);
    assert_eq!(disk(&h).objects, 0);
    h.origin.on("/u", Reply::ok("after the post").header("cache-control", FRESH));
    assert_eq!(h.get("/u").await.text(), "after the post");
}

#[tokio::test]
async fn a_stale_disk_object_is_revalidated_and_the_disk_copy_freshened() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on(
        "/v",
        Reply::ok("validated body").header("cache-control", "max-age=60").header("etag", "\"e1\"").validating(),
    );
    h.get("/v").await;
    on_disk(&h, 1).await;
    let h = restart(h).await;
    h.advance(120);
    let reply = h.get("/v").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "validated body");
    let cs = cache_status(&reply);
    assert!(cs.contains("fwd=stale") && cs.contains("fwd-status=304"), "{cs}");
    assert_eq!(h.origin.hits("/v"), 2);
    let validation = h.origin.last_request("/v").expect("a request");
    assert_eq!(validation.header("if-none-match"), Some("\"e1\""));
    // The 304 rewrote the disk copy with the new metadata (files are immutable).
    h.eventually("the freshened copy on disk", |h| {
        disk(h).insertions == 1 && h.proxy.state().store.pending_disk_jobs() == 0
    })
    .await;
    let h = restart(h).await;
    let reply = h.get("/v").await;
    assert_eq!(reply.text(), "validated body");
    assert!(cache_status(&reply).contains("hit"), "fresh from disk: {}", cache_status(&reply));
    assert_eq!(h.origin.hits("/v"), 2, "no request: the freshened metadata survived the restart");
}

fn digits(n: usize) -> String {
    (0..n).map(|i| char::from(b'0' + (i % 10) as u8)).collect()
}

/// Range and HEAD on disk hits, for a promoted object (`streamed = false`) and one streamed
/// from its file.
async fn range_and_head(streamed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), move |c| {
        if streamed {
            c.cache.disk.promote_max = Size(0);
        }
    })
    .await;
    let body = digits(100_000);
    h.origin.on("/r", Reply::ok(body.clone()).header("cache-control", FRESH));
    h.get("/r").await;
    on_disk(&h, 1).await;
    let h = restart(h).await;

    let part = h.get_with("/r", &[("range", "bytes=10-19")]).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.text(), body[10..20]);
    assert_eq!(part.header("content-range"), "bytes 10-19/100000");
    assert!(cache_status(&part).contains("detail=disk"), "{}", cache_status(&part));

    let head = h.send("HEAD", "/r", &[], None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), "100000");
    assert!(head.body.is_empty());

    let full = h.get("/r").await;
    assert_eq!(full.text(), body);
    assert_eq!(full.header("content-length"), "100000");
    let unsatisfiable = h.get_with("/r", &[("range", "bytes=200000-")]).await;
    assert_eq!(unsatisfiable.status, 416);
    assert_eq!(h.origin.hits("/r"), 1);
    let state = h.proxy.state();
    let counters = state.store.counters();
    let promotions = counters.promotions.load(std::sync::atomic::Ordering::Relaxed);
    if streamed {
        assert_eq!(promotions, 0);
        // Every request was answered from the file: 206, HEAD, 200 and 416.
        disk_hits(&h, 4).await;
    } else {
        assert_eq!(promotions, 1);
    }
}

#[tokio::test]
async fn range_and_head_on_a_promoted_disk_hit() {
    range_and_head(false).await;
}

#[tokio::test]
async fn range_and_head_on_a_streamed_disk_hit() {
    range_and_head(true).await;
}

#[tokio::test]
async fn a_truncated_origin_body_is_stored_in_neither_tier() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/t", Reply::ok("x".repeat(10_000)).header("cache-control", FRESH).truncate_after(1_000));
    let cut = h.get("/t").await;
    assert!(cut.body.len() < 10_000);
    let state = h.proxy.state();
    let counters = state.store.counters();
    assert_eq!(h.proxy.state().store.stats().objects, 0, "not in memory");
    assert_eq!(counters.disk_writes.load(std::sync::atomic::Ordering::Relaxed), 0, "never written to disk");
    h.origin.on("/t", Reply::ok("whole").header("cache-control", FRESH));
    assert_eq!(h.get("/t").await.text(), "whole");
    assert_eq!(h.origin.hits("/t"), 2);
    on_disk(&h, 1).await;
    assert!(object_files(dir.path()).iter().all(|f| std::fs::read(f).unwrap().ends_with(b"whole")));
}

#[tokio::test]
async fn disk_metrics_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/m", Reply::ok("measured").header("cache-control", FRESH));
    h.get("/m").await;
    on_disk(&h, 1).await;
    let metrics = sluice_testkit::client::get(h.admin(), "/metrics", &[]).await.text();
    assert!(metrics.contains("sluice_disk_objects 1"), "{metrics}");
    assert!(metrics.contains("sluice_disk_insertions_total 1"), "{metrics}");
    let stats = sluice_testkit::client::get(h.admin(), "/stats", &[("authorization", "Bearer test-token")]).await;
    let json: serde_json::Value = serde_json::from_slice(&stats.body).expect("json");
    assert_eq!(json["disk"]["objects"], 1, "{json}");
    assert!(json["disk"]["bytes"].as_u64().unwrap() >= 4096);
}

#[tokio::test]
async fn an_unusable_directory_is_a_clear_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    let config = h.proxy.state().config.clone();
    let err = State::new(config, Arc::new(h.clock.clone()), Vec::new()).unwrap_err().to_string();
    assert!(err.contains("cache.disk.dir") && err.contains("locked by another process"), "{err}");

    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let mut config = h.proxy.state().config.clone();
    config.cache.disk.dir = Some(file.join("tier"));
    let err = State::new(config, Arc::new(h.clock.clone()), Vec::new()).unwrap_err().to_string();
    assert!(err.contains("cache.disk.dir") && err.contains("cannot open the disk tier"), "{err}");

    let bad = Config::parse(
        "[[listener]]\naddr = \"127.0.0.1:0\"\n[cache.disk]\ndir = \"/tmp/x\"\nhigh_water = 0.5\nlow_water = 0.8\n",
    );
    assert!(bad.unwrap_err().to_string().contains("water marks"));
}

#[tokio::test]
async fn an_object_too_large_for_memory_is_kept_on_disk_and_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| {
        c.cache.max_object = Size(64 << 10);
        c.cache.disk.max_object = Some(Size(1 << 20));
    })
    .await;
    let body = "L".repeat(200_000);
    h.origin.on("/large", Reply::ok(body.clone()).header("cache-control", FRESH));
    assert_eq!(h.get("/large").await.text(), body);
    on_disk(&h, 1).await;
    assert_eq!(h.proxy.state().store.stats().objects, 0, "not in memory");
    let reply = h.get("/large").await;
    assert_eq!(reply.text(), body);
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/large"), 1);
    assert_eq!(h.proxy.state().store.counters().promotions.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test]
async fn an_object_too_large_for_memory_is_served_while_its_disk_write_is_in_flight() {
    // Between the end of its fetch and the disk's commit the object is in neither tier's
    // index: it is still served, not fetched (and written) a second time.
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| {
        c.cache.max_object = Size(64 << 10);
        c.cache.disk.max_object = Some(Size(4 << 20));
    })
    .await;
    let body = "W".repeat(3_000_000);
    h.origin.on("/written", Reply::ok(body.clone()).header("cache-control", FRESH));
    assert_eq!(h.get("/written").await.text(), body);
    let again = h.get("/written").await;
    assert_eq!(again.text(), body);
    assert!(cache_status(&again).contains("hit"), "{}", cache_status(&again));
    assert_eq!(h.origin.hits("/written"), 1);
    on_disk(&h, 1).await;
    let writes = h.proxy.state().store.counters().disk_writes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(writes, 1, "written once");
}

/// Collapsing works across tiers: concurrent misses wait on one origin fetch whether the
/// object will live in both tiers or on disk only, and concurrent first hits after a
/// restart are all served from disk.
#[tokio::test]
async fn concurrent_misses_collapse_and_concurrent_disk_hits_are_served_with_a_disk_tier() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| {
        c.cache.max_object = Size(64 << 10);
        c.cache.disk.max_object = Some(Size(1 << 20));
    })
    .await;
    let slow =
        |body: String| Reply::ok(body).header("cache-control", FRESH).delay(std::time::Duration::from_millis(300));
    let (small, large) = ("s".repeat(10_000), "L".repeat(300_000));
    h.origin.on("/small", slow(small.clone()));
    h.origin.on("/large", slow(large.clone()));
    let burst = |h: &Harness, path: &str| {
        let (addr, target) = (h.addr(), h.target(path));
        (0..8)
            .map(|_| {
                let (addr, target) = (addr, target.clone());
                tokio::spawn(async move { sluice_testkit::client::get(addr, &target, &[]).await })
            })
            .collect::<Vec<_>>()
    };
    for (path, body) in [("/small", &small), ("/large", &large)] {
        for task in burst(&h, path) {
            let reply = task.await.unwrap();
            assert_eq!(reply.status, 200);
            assert!(reply.text() == *body, "{path}: the body differs");
        }
        assert_eq!(h.origin.hits(path), 1, "{path}: one origin fetch for the burst");
    }
    assert!(h.proxy.state().metrics.collapsed.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    on_disk(&h, 2).await;

    let h = restart(h).await;
    for (path, body) in [("/small", &small), ("/large", &large)] {
        for task in burst(&h, path) {
            let reply = task.await.unwrap();
            assert!(reply.text() == *body, "{path}: the body differs");
            assert!(cache_status(&reply).contains("hit"), "{path}: {}", cache_status(&reply));
        }
        assert_eq!(h.origin.hits(path), 1, "{path}: no origin request after the restart");
    }
    // Concurrent first serves of a recovered object open and verify its file once.
    assert_eq!(disk(&h).verified_at_read, 2, "one verification per object");
}
