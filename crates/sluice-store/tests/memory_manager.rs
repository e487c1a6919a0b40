//! The memory tier as a resource manager: suspension of evicted objects with validators,
//! admission rules, and the byte and entry bounds under random load (property test).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use sluice_store::{AdmissionRule, Lookup, MemoryStore, Object, ObjectMeta, StoredBody, SweepRule};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn object(key: &str, size: usize, etag: bool) -> Object {
    let mut headers = HeaderMap::new();
    if etag {
        headers.insert(http::header::ETAG, HeaderValue::from_static("\"v1\""));
    }
    let meta = ObjectMeta::ok(key, headers, Duration::from_secs(60));
    Object::new(Arc::new(meta), StoredBody::new(vec![Bytes::from(vec![b'x'; size])]))
}

fn store(policy: &str, capacity: u64) -> MemoryStore {
    let config = sluice_policy::PolicyConfig::new(sluice_policy::Capacity::Bytes(capacity));
    MemoryStore::new(capacity, capacity, sluice_policy::build(policy, &config).expect("policy exists"))
}

#[test]
fn evicted_objects_with_validators_are_suspended_and_inherit_hits_when_stored_again() {
    let s = store("lru", 20_000).with_suspend(100);
    s.insert(object("http://a/etag", 5000, true));
    s.insert(object("http://a/plain", 5000, false));
    for _ in 0..3 {
        assert!(matches!(s.lookup("http://a/etag", |_| true), Lookup::Found(_)));
    }
    for i in 0..10 {
        s.insert(object(&format!("http://a/{i}"), 5000, false));
    }
    assert!(matches!(s.lookup("http://a/etag", |_| true), Lookup::Miss), "its body is gone");
    assert!(s.lookup_suspended("http://a/plain", |_| true).is_none(), "no validators: evicted whole");
    let suspended = s.lookup_suspended("http://a/etag", |_| true).expect("suspended");
    assert_eq!(suspended.hits(), 4, "three hits, plus this request");
    let stats = s.stats();
    assert_eq!((stats.suspended, stats.suspensions), (1, 1));
    assert_eq!(stats.suspended_bytes, suspended.meta.footprint());
    assert!(stats.bytes <= stats.capacity);

    let meta = std::sync::Arc::clone(&suspended.meta);
    let again = s.insert(object("http://a/etag", 100, true)).expect("stored");
    assert_eq!(again.hits(), 4, "history carried over");
    assert_eq!(s.stats().suspended, 0);
    assert!(!s.drop_suspended(&meta), "nothing left to drop");
}

#[test]
fn suspended_entries_are_bounded_fifo_and_removed_like_objects() {
    let s = store("fifo", 10_000).with_suspend(3);
    for i in 0..20 {
        s.insert(object(&format!("http://a/p/{i}"), 3000, true));
    }
    assert_eq!(s.stats().suspended, 3);
    assert!(s.lookup_suspended("http://a/p/0", |_| true).is_none(), "oldest suspensions go first");
    let listed: Vec<_> = (0..20).filter(|i| !s.suspended_variants(&format!("http://a/p/{i}")).is_empty()).collect();
    assert_eq!(listed.len(), 3);
    let first = format!("http://a/p/{}", listed[0]);
    assert_eq!(s.remove(&first), 1);
    assert!(s.suspended_variants(&first).is_empty());
    let second = s.suspended_variants(&format!("http://a/p/{}", listed[1]))[0].meta.clone();
    assert!(s.drop_suspended(&second), "another tier took it over");
    let objects = s.stats().objects as usize;
    assert_eq!(s.remove_prefix("http://a/p/"), 1 + objects);
    assert_eq!((s.stats().suspended, s.stats().suspended_bytes, s.stats().bytes), (0, 0, 0));
}

#[test]
fn the_sweep_removes_idle_suspended_entries() {
    let s = store("lru", 10_000).with_suspend(10);
    s.insert(object("http://a/old", 6000, true));
    s.insert(object("http://a/new", 6000, false));
    assert_eq!(s.stats().suspended, 1);
    let rule = SweepRule { grace: Duration::from_secs(10), min_hits_per_hour: 1.0 };
    let report = s.sweep(SystemTime::UNIX_EPOCH + Duration::from_secs(3600), &rule);
    assert_eq!(report.removed, 2);
    assert_eq!((s.stats().suspended, s.stats().bytes), (0, 0));
}

#[test]
fn second_hit_admission_stores_on_the_second_attempt() {
    let s = store("lru", 1 << 20).with_admission(AdmissionRule::SecondHit { window: 100 });
    assert!(s.insert(object("http://a/x", 10, false)).is_none());
    assert_eq!(s.stats().rejected_admission, 1);
    assert!(s.insert(object("http://a/x", 10, false)).is_some());
    assert!(s.insert(object("http://a/x", 20, false)).is_some(), "a resident object is replaced without judging");
    assert!(s.insert_with(object("http://a/y", 10, false), sluice_store::Admit::Bypass).is_some());
}

#[test]
fn tinylfu_admission_keeps_popular_residents_against_one_hit_wonders() {
    let s = store("lru", 10_000).with_admission(AdmissionRule::TinyLfu { expected: 100 });
    for i in 0..5 {
        let key = format!("http://a/hot{i}");
        s.insert(object(&key, 1500, false));
        for _ in 0..5 {
            s.lookup(&key, |_| true);
        }
    }
    for i in 0..50 {
        let key = format!("http://a/cold{i}");
        s.lookup(&key, |_| true);
        s.insert(object(&key, 1500, false));
    }
    for i in 0..5 {
        assert!(matches!(s.lookup(&format!("http://a/hot{i}"), |_| true), Lookup::Found(_)), "hot{i} kept");
    }
    assert!(s.stats().rejected_admission > 0);
}

#[derive(Debug, Clone)]
enum Op {
    Insert { key: u8, size: usize, etag: bool },
    Lookup(u8),
    Remove(u8),
    Sweep(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..80, 1usize..6000, any::<bool>()).prop_map(|(key, size, etag)| Op::Insert { key, size, etag }),
        3 => (0u8..80).prop_map(Op::Lookup),
        1 => (0u8..80).prop_map(Op::Remove),
        1 => (0u64..10_000).prop_map(Op::Sweep),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, .. ProptestConfig::default() })]

    /// Whatever the policy, admission and suspension limits: bytes (objects plus suspended
    /// metadata) never exceed the capacity, suspended entries never exceed their limit, and
    /// the gauges match what lookups find.
    #[test]
    fn bounds_hold_under_random_load(
        policy in prop::sample::select(vec!["lru", "fifo", "s3-fifo", "sieve", "w-tinylfu", "gdsf"]),
        capacity in 8_000u64..60_000,
        suspend_max in 0usize..8,
        admission in prop::sample::select(vec![
            AdmissionRule::Always,
            AdmissionRule::SecondHit { window: 16 },
            AdmissionRule::TinyLfu { expected: 64 },
        ]),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let s = store(policy, capacity).with_suspend(suspend_max).with_admission(admission);
        let rule = SweepRule { grace: Duration::from_secs(30), min_hits_per_hour: 1.0 };
        for op in ops {
            match op {
                Op::Insert { key, size, etag } => {
                    s.insert(object(&format!("http://a/{key}"), size, etag));
                }
                Op::Lookup(key) => {
                    let key = format!("http://a/{key}");
                    if matches!(s.lookup(&key, |_| true), Lookup::Miss) {
                        s.lookup_suspended(&key, |_| true);
                    }
                }
                Op::Remove(key) => {
                    s.remove(&format!("http://a/{key}"));
                }
                Op::Sweep(secs) => {
                    s.sweep(SystemTime::UNIX_EPOCH + Duration::from_secs(secs), &rule);
                }
            }
            let stats = s.stats();
            prop_assert!(stats.bytes <= stats.capacity, "bytes {} > capacity {}", stats.bytes, stats.capacity);
            prop_assert!(stats.suspended <= suspend_max as u64);
            let (mut objects, mut bytes, mut suspended, mut suspended_bytes) = (0, 0, 0, 0);
            for key in 0..80u8 {
                let key = format!("http://a/{key}");
                for o in s.variants(&key) {
                    objects += 1;
                    bytes += o.footprint();
                }
                for e in s.suspended_variants(&key) {
                    prop_assert!(s.variants(&key).is_empty(), "never both stored and suspended");
                    suspended += 1;
                    suspended_bytes += e.footprint();
                }
            }
            prop_assert_eq!((stats.objects, stats.suspended), (objects, suspended));
            prop_assert_eq!(stats.suspended_bytes, suspended_bytes);
            prop_assert_eq!(stats.bytes, bytes + suspended_bytes);
        }
    }
}
