//! The resource managers under load (docs/store.md, "The memory tier as a resource
//! manager", "Resource manager and water marks"): many distinct objects of random sizes
//! driven through the running proxy by concurrent clients on real sockets, with small
//! memory and disk tiers. `/stats` is sampled while the load runs and read after it: memory
//! usage never exceeds its capacity (its high mark), disk usage never exceeds its high-water
//! marks (bytes and entries), suspended entries stay within their limit.

mod common;

use common::admin::{admin, json};
use common::Harness;
use sluice_proxy::config::Mode;
use sluice_proxy::units::Size;
use sluice_testkit::client;
use sluice_testkit::Reply as OriginReply;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const OBJECTS: usize = 300;
const CLIENTS: usize = 8;
const REQUESTS_PER_CLIENT: usize = 60;
const MEMORY: u64 = 256 * 1024;
const DISK: u64 = 1024 * 1024;
const DISK_ENTRIES: u64 = 64;
const SUSPEND_MAX: u64 = 16;

/// xorshift64: reproducible sizes and request orders without a dependency.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn size_of(i: usize) -> usize {
    let mut x = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1);
    1 + (next(&mut x) % (48 * 1024)) as usize
}

/// Limits read from one `/stats` sample; panics (with the sample) when one is exceeded.
fn check(stats: &serde_json::Value) {
    let cache = &stats["cache"];
    let disk = &stats["disk"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("not a number in {stats}"));
    assert!(n(&cache["bytes"]) <= MEMORY, "memory bytes above capacity: {cache}");
    assert!(n(&cache["suspended"]) <= SUSPEND_MAX, "{cache}");
    assert!(n(&disk["bytes"]) <= n(&disk["high_water_bytes"]), "disk bytes above the high mark: {disk}");
    assert!(n(&disk["objects"]) <= (DISK_ENTRIES as f64 * 0.9) as u64, "disk entries above the high mark: {disk}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn water_marks_hold_under_concurrent_load() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let h = Arc::new(
        Harness::build(Mode::Forward, move |c| {
            c.cache.memory = Size(MEMORY);
            c.cache.suspend_max_entries = SUSPEND_MAX;
            c.cache.disk.dir = Some(dir_path);
            c.cache.disk.size = Size(DISK);
            c.cache.disk.max_entries = Some(DISK_ENTRIES);
            c.cache.disk.high_water = 0.9;
            c.cache.disk.low_water = 0.7;
            // Objects above 32 KiB are kept in memory only, so evicting them (with an ETag)
            // suspends them.
            c.cache.disk.max_object = Some(Size(32 * 1024));
        })
        .await,
    );
    for i in 0..OBJECTS {
        // Every third object has an ETag (suspendable when it has no disk copy).
        let mut reply =
            OriginReply::ok(vec![b'a' + (i % 26) as u8; size_of(i)]).header("cache-control", "max-age=3600");
        if i % 3 == 0 {
            reply = reply.header("etag", &format!("\"e{i}\""));
        }
        h.origin.on(&format!("/o/{i}"), reply);
    }

    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (h, done) = (Arc::clone(&h), Arc::clone(&done));
        tokio::spawn(async move {
            let mut samples = 0u32;
            while !done.load(Ordering::Relaxed) {
                check(&json(&admin(&h, "GET", "/stats", &[], None).await));
                samples += 1;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            samples
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let h = Arc::clone(&h);
            tokio::spawn(async move {
                let mut x = 0xDEAD_BEEF ^ ((c as u64 + 1) * 0x1000_0001);
                for _ in 0..REQUESTS_PER_CLIENT {
                    // Half the requests go to a hot tenth of the objects, so there are hits.
                    let r = next(&mut x) as usize;
                    let i = if r.is_multiple_of(2) { r / 2 % (OBJECTS / 10) } else { r / 2 % OBJECTS };
                    let reply = client::get(h.addr(), &h.origin.url(&format!("/o/{i}")), &[]).await;
                    assert_eq!(reply.status, 200);
                    assert_eq!(reply.body.len(), size_of(i), "object {i}");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.expect("client");
    }
    done.store(true, Ordering::Relaxed);
    let samples = sampler.await.expect("sampler");
    h.eventually("background disk writes to finish", |h| h.proxy.state().store.pending_disk_jobs() == 0).await;

    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    check(&stats);
    assert!(samples >= 5, "sampled while loaded ({samples})");
    let (cache, disk) = (&stats["cache"], &stats["disk"]);
    assert_eq!(stats["requests"].as_u64(), Some((CLIENTS * REQUESTS_PER_CLIENT) as u64));
    assert!(cache["evictions"].as_u64().unwrap() > 0, "the memory tier was full: {cache}");
    assert!(disk["evictions"].as_u64().unwrap() > 0, "the disk tier was full: {disk}");
    assert!(stats["hits"].as_u64().unwrap() > 0, "{stats}");
    assert!(cache["suspensions"].as_u64().unwrap() > 0, "memory-only objects were suspended: {cache}");
    // The tiers' own figures agree with /stats after the load.
    let memory = h.proxy.state().store.stats();
    assert!(memory.bytes <= memory.capacity);
    let tier = h.proxy.state().store.disk_stats().unwrap();
    assert!(tier.bytes <= tier.high_water_bytes && tier.objects <= (DISK_ENTRIES as f64 * 0.9) as u64);
    println!(
        "load: {} requests, {} hits, {samples} samples; memory {} B / {MEMORY} B, {} evictions, {} suspensions, {} suspended; disk {} B / {} B high, {} objects, {} evictions",
        stats["requests"], stats["hits"], memory.bytes, memory.evictions, memory.suspensions, memory.suspended, tier.bytes, tier.high_water_bytes, tier.objects, tier.evictions
    );
}
