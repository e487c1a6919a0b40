//! Admission to the memory tier and promotion from disk by access count (docs/store.md,
//! "Admission and promotion"): `second-hit` stores an object on its second request;
//! `promote_min_hits = 2` promotes a disk object on its second disk hit. Real sockets on
//! 127.0.0.1, a scripted origin, the harness clock.

mod common;

use common::admin::{admin, enc, json, stored};
use common::disk::{disk_hits, on_disk, proxy as disk_proxy, restart, FRESH};
use common::{cache_status, Harness};
use sluice_proxy::config::Mode;
use sluice_proxy::outcome::ResultCode;
use sluice_testkit::Reply;
use std::sync::atomic::Ordering::Relaxed;

#[tokio::test]
async fn second_hit_admission_stores_only_on_the_second_request() {
    let h = Harness::build(Mode::Forward, |c| c.cache.admission = "second-hit".into()).await;
    h.origin.on("/x", Reply::ok("popular").header("cache-control", FRESH));
    h.origin.on("/once", Reply::ok("one-hit wonder").header("cache-control", FRESH));

    assert_eq!(h.get("/once").await.text(), "one-hit wonder");
    let first = h.get("/x").await;
    assert_eq!(first.text(), "popular");
    assert!(cache_status(&first).contains("fwd=uri-miss"), "{}", cache_status(&first));
    assert!(!stored(&h, "/x").await, "not admitted on the first request");
    assert_eq!(h.proxy.state().store.stats().rejected_admission, 2);

    let second = h.get("/x").await;
    assert!(cache_status(&second).contains("fwd=uri-miss"), "{}", cache_status(&second));
    assert!(stored(&h, "/x").await, "admitted on the second");
    let third = h.get("/x").await;
    assert!(cache_status(&third).contains("hit"), "{}", cache_status(&third));
    assert_eq!(h.origin.hits("/x"), 2);
    assert!(!stored(&h, "/once").await);
    let metrics = sluice_testkit::client::send(h.admin(), "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("\nsluice_cache_rejected_admission_total 2\n"), "{metrics}");
}

#[tokio::test]
async fn pushed_content_bypasses_admission() {
    let h = Harness::build(Mode::Forward, |c| c.cache.admission = "second-hit".into()).await;
    let url = enc(&h.origin.url("/pushed"));
    let reply = admin(&h, "PUT", &format!("/cache?url={url}&ttl=60"), &[], Some("pushed body")).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert_eq!(json(&reply)["size"], 11);
    assert_eq!(h.get("/pushed").await.text(), "pushed body");
    assert_eq!(h.origin.hits("/pushed"), 0);
}

#[tokio::test]
async fn tinylfu_admission_is_accepted_and_stores_into_free_room() {
    let h = Harness::build(Mode::Forward, |c| c.cache.admission = "tinylfu".into()).await;
    h.origin.on("/t", Reply::ok("t").header("cache-control", FRESH));
    h.get("/t").await;
    assert!(cache_status(&h.get("/t").await).contains("hit"), "room to spare: admitted at once");
}

#[tokio::test]
async fn promote_min_hits_promotes_a_disk_object_on_its_second_disk_hit() {
    let dir = tempfile::tempdir().unwrap();
    let h = disk_proxy(dir.path(), |c| c.cache.disk.promote_min_hits = 2).await;
    h.origin.on("/p", Reply::ok("from disk").header("cache-control", FRESH));
    assert_eq!(h.get("/p").await.text(), "from disk");
    on_disk(&h, 1).await;
    // A restart empties the memory tier; the object is on disk only.
    let h = restart(h).await;
    let promotions = |h: &Harness| h.proxy.state().store.counters().promotions.load(Relaxed);

    let first = h.get("/p").await;
    assert_eq!(first.text(), "from disk");
    assert!(cache_status(&first).contains("detail=disk"), "{}", cache_status(&first));
    disk_hits(&h, 1).await;
    assert_eq!((promotions(&h), h.proxy.state().store.stats().objects), (0, 0), "streamed, not promoted");

    let second = h.get("/p").await;
    assert!(cache_status(&second).contains("detail=disk"), "{}", cache_status(&second));
    disk_hits(&h, 2).await;
    assert_eq!((promotions(&h), h.proxy.state().store.stats().objects), (1, 1), "promoted on the second");

    let third = h.get("/p").await;
    assert!(!cache_status(&third).contains("detail=disk"), "{}", cache_status(&third));
    h.eventually("a memory hit", |h| h.proxy.state().metrics.results.get(ResultCode::MemHit) == 1).await;
    assert_eq!(h.origin.hits("/p"), 1);
}
