//! The memory tier: objects indexed by primary key and variant, bounded in bytes, evicting
//! by a replacement policy.

use crate::{Object, ObjectMeta, SweepReport, SweepRule, Verdict};
use parking_lot::Mutex;
use sluice_policy::{ObjectId, Policy};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

/// Objects judged per lock by [`MemoryStore::sweep`].
const SWEEP_BATCH: usize = 256;

/// Counters and gauges of a store, for `/stats` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub objects: u64,
    pub bytes: u64,
    pub capacity: u64,
    pub insertions: u64,
    pub evictions: u64,
    pub rejected_too_large: u64,
}

/// The outcome of [`MemoryStore::lookup`].
#[derive(Debug)]
pub enum Lookup {
    /// A stored variant matched.
    Found(Arc<Object>),
    /// The key is stored but no variant matches the request (`Cache-Status: fwd=vary-miss`).
    VaryMiss,
    /// Nothing stored under the key.
    Miss,
}

struct Inner {
    /// Primary key to its variants' ids, newest first.
    index: HashMap<String, Vec<ObjectId>>,
    objects: HashMap<ObjectId, Arc<Object>>,
    /// Cache tag (`Surrogate-Key`, `Cache-Tag`) to the variants carrying it.
    tags: HashMap<String, Vec<ObjectId>>,
    policy: Box<dyn Policy>,
    stats: StoreStats,
}

/// A variant's id: a hash of its key and Vary key, stable across re-insertions so policies
/// that keep history (ghost entries, frequency sketches) recognise an object that returns.
/// Two variants colliding on 64 bits would share a slot: the newer replaces the older, which
/// costs a miss, never a wrong answer (lookups still compare keys and Vary keys).
fn object_id(meta: &ObjectMeta) -> ObjectId {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.key.hash(&mut hasher);
    meta.vary_key.hash(&mut hasher);
    hasher.finish()
}

/// An in-memory tier. All methods are safe to call from any thread; each holds one short lock.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_object: u64,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").field("stats", &self.stats()).finish()
    }
}

impl MemoryStore {
    /// A store holding at most `capacity` bytes, objects of at most `max_object` bytes, that
    /// evicts by `policy`.
    pub fn new(capacity: u64, max_object: u64, policy: Box<dyn Policy>) -> Self {
        let stats = StoreStats { capacity, ..StoreStats::default() };
        let inner = Inner { index: HashMap::new(), objects: HashMap::new(), tags: HashMap::new(), policy, stats };
        Self { inner: Mutex::new(inner), max_object: max_object.min(capacity) }
    }

    /// The largest object this store accepts, in bytes.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    /// Finds the newest variant of `key` for which `selects` is true and counts a hit on it.
    pub fn lookup(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Lookup {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let Some(ids) = inner.index.get(key) else { return Lookup::Miss };
        for id in ids {
            let object = &inner.objects[id];
            if selects(&object.meta) {
                object.record_hit();
                inner.policy.on_hit(*id, object.footprint());
                return Lookup::Found(Arc::clone(object));
            }
        }
        Lookup::VaryMiss
    }

    /// Stores `object`, replacing a variant of the same key with the same Vary key, and evicts
    /// until the total fits. Returns the stored object, or `None` when it is too large.
    pub fn insert(&self, object: Object) -> Option<Arc<Object>> {
        let size = object.footprint();
        let id = object_id(&object.meta);
        let mut inner = self.inner.lock();
        if size > self.max_object {
            inner.stats.rejected_too_large += 1;
            return None;
        }
        if inner.objects.contains_key(&id) {
            inner.policy.on_remove(id);
            inner.forget(id);
        }
        inner.policy.on_miss(id, size);
        while inner.stats.bytes + size > inner.stats.capacity {
            let Some(victim) = inner.policy.evict() else { break };
            inner.forget(victim);
            inner.stats.evictions += 1;
        }
        let object = Arc::new(object);
        inner.index.entry(object.meta.key.clone()).or_default().insert(0, id);
        inner.objects.insert(id, Arc::clone(&object));
        if sluice_http::tags::has_tags(&object.meta.headers) {
            for tag in sluice_http::tags::tags(&object.meta.headers) {
                inner.tags.entry(tag).or_default().push(id);
            }
        }
        inner.stats.bytes += size;
        inner.stats.objects += 1;
        inner.stats.insertions += 1;
        inner.policy.on_insert(id, size);
        Some(object)
    }

    /// Removes every variant stored under `key`; returns how many were removed.
    pub fn remove(&self, key: &str) -> usize {
        let mut inner = self.inner.lock();
        let ids = inner.index.get(key).cloned().unwrap_or_default();
        for id in &ids {
            inner.policy.on_remove(*id);
            inner.forget(*id);
        }
        ids.len()
    }

    /// Every stored variant of `key`, newest first (no hit is counted).
    pub fn variants(&self, key: &str) -> Vec<Arc<Object>> {
        let inner = self.inner.lock();
        inner
            .index
            .get(key)
            .map(|ids| ids.iter().map(|id| Arc::clone(&inner.objects[id])).collect())
            .unwrap_or_default()
    }

    /// Removes every object whose primary key starts with `prefix`; returns how many.
    /// Walks the whole index: meant for administration, not the request path.
    pub fn remove_prefix(&self, prefix: &str) -> usize {
        let mut inner = self.inner.lock();
        let ids: Vec<ObjectId> = inner
            .index
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for id in &ids {
            inner.policy.on_remove(*id);
            inner.forget(*id);
        }
        ids.len()
    }

    /// Removes every object tagged `tag` (by `Surrogate-Key` or `Cache-Tag`); returns how
    /// many. Costs one lock and the tagged objects, not a walk of the index.
    pub fn remove_tag(&self, tag: &str) -> usize {
        let mut inner = self.inner.lock();
        let ids = inner.tags.get(tag).cloned().unwrap_or_default();
        for id in &ids {
            inner.policy.on_remove(*id);
            inner.forget(*id);
        }
        ids.len()
    }

    /// How many stored objects carry `tag`.
    pub fn tagged(&self, tag: &str) -> usize {
        self.inner.lock().tags.get(tag).map_or(0, Vec::len)
    }

    /// Expiry processing: removes every object `rule` judges removable at `now` (see
    /// [`SweepRule`]) and reports what it saw. Takes one lock to copy the object ids, then
    /// works through them in batches of 256, one short lock each, so requests
    /// are never held up for a whole walk. Objects stored or replaced during the sweep may
    /// be skipped; a removed object is forgotten by the policy as for [`MemoryStore::remove`].
    pub fn sweep(&self, now: SystemTime, rule: &SweepRule) -> SweepReport {
        let ids: Vec<ObjectId> = self.inner.lock().objects.keys().copied().collect();
        let mut report = SweepReport::default();
        for batch in ids.chunks(SWEEP_BATCH) {
            let mut inner = self.inner.lock();
            for id in batch {
                let Some(object) = inner.objects.get(id) else { continue };
                let verdict = rule.judge(object, now);
                report.count(verdict, object.footprint());
                if verdict == Verdict::Remove {
                    inner.policy.on_remove(*id);
                    inner.forget(*id);
                }
            }
        }
        report
    }

    /// Current counters and gauges.
    pub fn stats(&self) -> StoreStats {
        self.inner.lock().stats
    }
}

impl Inner {
    /// Drops object `id` from the index and the accounting (not from the policy).
    fn forget(&mut self, id: ObjectId) {
        let Some(object) = self.objects.remove(&id) else { return };
        self.stats.bytes -= object.footprint();
        self.stats.objects -= 1;
        if let Some(ids) = self.index.get_mut(&object.meta.key) {
            ids.retain(|v| *v != id);
            if ids.is_empty() {
                self.index.remove(&object.meta.key);
            }
        }
        if sluice_http::tags::has_tags(&object.meta.headers) {
            for tag in sluice_http::tags::tags(&object.meta.headers) {
                if let Some(ids) = self.tags.get_mut(&tag) {
                    ids.retain(|v| *v != id);
                    if ids.is_empty() {
                        self.tags.remove(&tag);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectMeta, StoredBody};
    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};
    use sluice_http::freshness::LifetimeSource;
    use std::time::{Duration, SystemTime};

    fn object(key: &str, size: usize) -> Object {
        let meta = ObjectMeta {
            key: key.to_owned(),
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            vary: Vec::new(),
            vary_key: Vec::new(),
            request_time: SystemTime::UNIX_EPOCH,
            response_time: SystemTime::UNIX_EPOCH,
            initial_age: Duration::ZERO,
            lifetime: Duration::from_secs(60),
            lifetime_source: LifetimeSource::MaxAge,
            cc: Default::default(),
        };
        Object::new(Arc::new(meta), StoredBody::new(vec![Bytes::from(vec![b'x'; size])]))
    }

    fn store(capacity: u64) -> MemoryStore {
        let policy =
            sluice_policy::build("lru", &sluice_policy::PolicyConfig::new(sluice_policy::Capacity::Bytes(capacity)))
                .expect("lru exists");
        MemoryStore::new(capacity, capacity, policy)
    }

    #[test]
    fn bytes_never_exceed_capacity_and_lru_evicts_the_coldest() {
        let s = store(10_000);
        for i in 0..50 {
            s.insert(object(&format!("k{i}"), 1000));
            assert!(s.stats().bytes <= 10_000);
        }
        assert!(matches!(s.lookup("k49", |_| true), Lookup::Found(_)));
        assert!(matches!(s.lookup("k0", |_| true), Lookup::Miss));
        assert!(s.stats().evictions > 0);
    }

    #[test]
    fn too_large_objects_are_rejected_and_counted() {
        let s = store(1000);
        assert!(s.insert(object("big", 5000)).is_none());
        assert_eq!(s.stats().rejected_too_large, 1);
        assert_eq!(s.stats().objects, 0);
    }

    fn tagged(key: &str, tags: &'static str) -> Object {
        let mut o = object(key, 10);
        let mut meta = (*o.meta).clone();
        meta.headers.insert("surrogate-key", http::HeaderValue::from_static(tags));
        o = o.with_meta(Arc::new(meta));
        o
    }

    #[test]
    fn tag_removal_takes_exactly_the_tagged_objects_and_forgets_evicted_ones() {
        let s = store(1 << 20);
        s.insert(tagged("http://a/1", "red blue"));
        s.insert(tagged("http://a/2", "blue"));
        s.insert(object("http://a/3", 10));
        assert_eq!(s.tagged("blue"), 2);
        assert_eq!(s.remove_tag("red"), 1);
        assert_eq!(s.tagged("blue"), 1);
        assert_eq!(s.remove_tag("blue"), 1);
        assert_eq!(s.remove_tag("blue"), 0);
        assert_eq!(s.stats().objects, 1);
        // Replacing a tagged object with an untagged one drops its tags.
        s.insert(tagged("http://a/3", "green"));
        s.insert(object("http://a/3", 10));
        assert_eq!(s.tagged("green"), 0);
    }

    #[test]
    fn sweep_removes_stale_idle_objects_and_keeps_the_rest() {
        let s = store(1 << 20);
        // `object` responses arrived at the epoch with a 60 s lifetime.
        for i in 0..600 {
            s.insert(object(&format!("http://a/{i}"), 10));
        }
        for _ in 0..5 {
            assert!(matches!(s.lookup("http://a/7", |_| true), Lookup::Found(_)));
        }
        let rule = SweepRule { grace: Duration::from_secs(100), min_hits_per_hour: 1.0 };
        let within_grace = s.sweep(SystemTime::UNIX_EPOCH + Duration::from_secs(160), &rule);
        assert_eq!((within_grace.examined, within_grace.kept_grace, within_grace.removed), (600, 600, 0));
        let report = s.sweep(SystemTime::UNIX_EPOCH + Duration::from_secs(161), &rule);
        assert_eq!((report.examined, report.removed, report.kept_busy), (600, 599, 1));
        assert!(report.removed_bytes > 0);
        assert_eq!(s.stats().objects, 1);
        assert_eq!(s.variants("http://a/7").len(), 1);
        assert!(matches!(s.lookup("http://a/8", |_| true), Lookup::Miss));
        assert_eq!(s.stats().bytes, s.variants("http://a/7")[0].footprint());
    }

    #[test]
    fn prefix_removal_only_touches_matching_keys() {
        let s = store(1 << 20);
        for key in ["http://a/x/1", "http://a/x/2", "http://a/y/1"] {
            s.insert(object(key, 10));
        }
        assert_eq!(s.remove_prefix("http://a/x/"), 2);
        assert_eq!(s.variants("http://a/y/1").len(), 1);
        assert_eq!(s.stats().objects, 1);
    }
}
