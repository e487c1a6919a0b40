//! The memory tier: objects indexed by primary key and variant, bounded in bytes, evicting
//! by a replacement policy; optionally admitting by an [`AdmissionRule`] and suspending
//! evicted objects that have validators (see `suspend.rs`).

use crate::admission::{key_id, Admitter};
use crate::suspend::{suspendable, Suspended, SuspendedSet};
use crate::{AdmissionRule, Object, ObjectMeta, SweepReport, SweepRule, Verdict};
use parking_lot::Mutex;
use sluice_policy::{IdMap, ObjectId, Policy};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

/// Objects judged per lock by [`MemoryStore::sweep`].
const SWEEP_BATCH: usize = 256;

/// Counters and gauges of a store, for `/stats` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub objects: u64,
    /// Bytes charged: objects' bodies and metadata, plus suspended entries' metadata.
    pub bytes: u64,
    pub capacity: u64,
    pub insertions: u64,
    pub evictions: u64,
    pub rejected_too_large: u64,
    /// New objects the admission rule did not store.
    pub rejected_admission: u64,
    /// Suspended entries held, and the bytes charged for them (part of `bytes`).
    pub suspended: u64,
    pub suspended_bytes: u64,
    /// Evictions that left a suspended entry.
    pub suspensions: u64,
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

/// Called for every object the memory tier evicts: true when another tier keeps a copy, so
/// evicting it from memory loses nothing and it is not suspended. (The disk tier also takes
/// the call as a use of its copy, so an object kept hot in memory does not age out of the
/// disk tier first.)
pub type KeptElsewhere = Box<dyn Fn(&ObjectMeta) -> bool + Send + Sync>;

struct Inner {
    /// Primary key to its variants' ids, newest first.
    index: HashMap<String, Vec<ObjectId>>,
    objects: IdMap<Arc<Object>>,
    /// Cache tag (`Surrogate-Key`, `Cache-Tag`) to the variants carrying it.
    tags: HashMap<String, Vec<ObjectId>>,
    policy: Box<dyn Policy>,
    admitter: Admitter,
    suspended: SuspendedSet,
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
///
/// Accounting contract: `stats().bytes` (objects plus suspended entries) never exceeds the
/// capacity after any call, and suspended entries never exceed their limit.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_object: u64,
    /// Most suspended entries held; 0: evicted objects are dropped whole.
    suspend_max: usize,
    kept_elsewhere: Option<KeptElsewhere>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").field("stats", &self.stats()).finish()
    }
}

/// Whether [`MemoryStore::insert_with`] asks the admission rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Ask it (objects from origins, promotions).
    Judge,
    /// Store regardless (content pushed by an operator).
    Bypass,
}

impl MemoryStore {
    /// A store holding at most `capacity` bytes, objects of at most `max_object` bytes, that
    /// evicts by `policy`, admits everything and suspends nothing.
    pub fn new(capacity: u64, max_object: u64, policy: Box<dyn Policy>) -> Self {
        let stats = StoreStats { capacity, ..StoreStats::default() };
        let inner = Inner {
            index: HashMap::new(),
            objects: IdMap::default(),
            tags: HashMap::new(),
            policy,
            admitter: Admitter::new(AdmissionRule::Always),
            suspended: SuspendedSet::default(),
            stats,
        };
        Self { inner: Mutex::new(inner), max_object: max_object.min(capacity), suspend_max: 0, kept_elsewhere: None }
    }

    /// Admits new objects by `rule`.
    pub fn with_admission(self, rule: AdmissionRule) -> Self {
        self.inner.lock().admitter = Admitter::new(rule);
        self
    }

    /// Keeps up to `max_entries` suspended entries (0: none) of evicted objects that have
    /// validators.
    pub fn with_suspend(mut self, max_entries: usize) -> Self {
        self.suspend_max = max_entries;
        self
    }

    /// Sets the call made for each evicted object (see [`KeptElsewhere`]).
    pub fn set_kept_elsewhere(&mut self, check: KeptElsewhere) {
        self.kept_elsewhere = Some(check);
    }

    /// The largest object this store accepts, in bytes.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    /// Finds the newest variant of `key` for which `selects` is true and counts a hit on it.
    pub fn lookup(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Lookup {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        if inner.admitter.duels() {
            inner.admitter.record(key_id(key));
        }
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

    /// The suspended entry of `key` for which `selects` is true, counting a request on it.
    /// Call after a miss: a suspended entry has no body to serve.
    pub fn lookup_suspended(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Option<Arc<Suspended>> {
        if self.suspend_max == 0 {
            return None;
        }
        let inner = self.inner.lock();
        let found = inner
            .suspended
            .ids_of(key)
            .into_iter()
            .filter_map(|id| inner.suspended.get(id))
            .find(|s| selects(&s.meta))?;
        found.record_hit();
        Some(Arc::clone(found))
    }

    /// Every suspended entry of `key` (no request is counted).
    pub fn suspended_variants(&self, key: &str) -> Vec<Arc<Suspended>> {
        let inner = self.inner.lock();
        inner.suspended.ids_of(key).into_iter().filter_map(|id| inner.suspended.get(id).cloned()).collect()
    }

    /// Replaces the metadata of the suspended entry for `meta`'s variant (after a 304
    /// freshened it), keeping its hits; false when it is no longer suspended. May evict to
    /// make room when the new metadata is larger.
    pub fn freshen_suspended(&self, meta: Arc<ObjectMeta>) -> bool {
        let id = object_id(&meta);
        let mut inner = self.inner.lock();
        let Some((before, after)) = inner.suspended.freshen(id, meta) else { return false };
        inner.stats.bytes = inner.stats.bytes - before + after;
        inner.make_room(0, self);
        inner.sync_suspended_stats();
        true
    }

    /// Drops the suspended entry of `meta`'s variant, if any (another tier now holds the
    /// object, e.g. a disk write that finished after the memory tier evicted it); true when
    /// there was one.
    pub fn drop_suspended(&self, meta: &ObjectMeta) -> bool {
        let id = object_id(meta);
        let mut inner = self.inner.lock();
        let had = inner.suspended.get(id).is_some();
        inner.unsuspend(&[id]);
        had
    }

    /// Stores `object` if the admission rule admits it (see [`MemoryStore::insert_with`]).
    pub fn insert(&self, object: Object) -> Option<Arc<Object>> {
        self.insert_with(object, Admit::Judge)
    }

    /// Stores `object`, replacing a variant of the same key with the same Vary key (or its
    /// suspended entry, whose hits it inherits), and evicts until the total fits. A new
    /// object (neither resident nor suspended) is first judged by the admission rule unless
    /// `admit` is [`Admit::Bypass`]. Returns the stored object, or `None` when it is too
    /// large or not admitted.
    pub fn insert_with(&self, object: Object, admit: Admit) -> Option<Arc<Object>> {
        let size = object.footprint();
        let id = object_id(&object.meta);
        let mut inner = self.inner.lock();
        if size > self.max_object {
            inner.stats.rejected_too_large += 1;
            return None;
        }
        let resident = inner.objects.contains_key(&id);
        let suspended = inner.suspended.remove(id);
        if let Some(s) = &suspended {
            // Known-popular: it was stored before; its history carries over.
            inner.stats.bytes -= s.footprint();
            object.add_hits(s.hits());
        }
        let known = resident || suspended.is_some();
        let candidate = key_id(&object.meta.key);
        if !known && admit == Admit::Judge && !inner.admitter.passes_doorkeeper(candidate) {
            inner.stats.rejected_admission += 1;
            inner.sync_suspended_stats();
            return None;
        }
        if resident {
            inner.policy.on_remove(id);
            inner.forget(id);
        }
        if !known && admit == Admit::Judge && inner.admitter.duels() && !inner.wins_duel(candidate, size, self) {
            inner.stats.rejected_admission += 1;
            inner.sync_suspended_stats();
            return None;
        }
        inner.policy.on_miss(id, size);
        inner.make_room(size, self);
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
        inner.sync_suspended_stats();
        Some(object)
    }

    /// Removes every variant stored or suspended under `key`; returns how many.
    pub fn remove(&self, key: &str) -> usize {
        let mut inner = self.inner.lock();
        let ids = inner.index.get(key).cloned().unwrap_or_default();
        for id in &ids {
            inner.policy.on_remove(*id);
            inner.forget(*id);
        }
        let suspended = inner.suspended.ids_of(key);
        inner.unsuspend(&suspended);
        ids.len() + suspended.len()
    }

    /// Removes `object` if it is still the stored copy of its variant (not a newer one);
    /// true when it was. For moving an object to another tier once its copy there is safe.
    pub fn remove_object(&self, object: &Arc<Object>) -> bool {
        let mut inner = self.inner.lock();
        let id = object_id(&object.meta);
        if !inner.objects.get(&id).is_some_and(|stored| Arc::ptr_eq(stored, object)) {
            return false;
        }
        inner.policy.on_remove(id);
        inner.forget(id);
        true
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

    /// Removes every object (stored or suspended) whose primary key starts with `prefix`;
    /// returns how many. Walks the whole index: meant for administration, not the request
    /// path.
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
        let suspended = inner.suspended.ids_where(|s| s.meta.key.starts_with(prefix));
        inner.unsuspend(&suspended);
        ids.len() + suspended.len()
    }

    /// Removes every object tagged `tag` (by `Surrogate-Key` or `Cache-Tag`), stored or
    /// suspended; returns how many. Costs one lock and the tagged objects (plus a walk of
    /// the bounded suspended set), not a walk of the index.
    pub fn remove_tag(&self, tag: &str) -> usize {
        let mut inner = self.inner.lock();
        let ids = inner.tags.get(tag).cloned().unwrap_or_default();
        for id in &ids {
            inner.policy.on_remove(*id);
            inner.forget(*id);
        }
        let suspended = inner.suspended.ids_where(|s| {
            sluice_http::tags::has_tags(&s.meta.headers)
                && sluice_http::tags::tags(&s.meta.headers).iter().any(|t| t == tag)
        });
        inner.unsuspend(&suspended);
        ids.len() + suspended.len()
    }

    /// How many stored objects carry `tag`.
    pub fn tagged(&self, tag: &str) -> usize {
        self.inner.lock().tags.get(tag).map_or(0, Vec::len)
    }

    /// Expiry processing: removes every object (and suspended entry) `rule` judges removable
    /// at `now` (see [`SweepRule`]) and reports what it saw. Takes one lock to copy the ids,
    /// then works through them in batches of 256, one short lock each, so requests
    /// are never held up for a whole walk. Objects stored or replaced during the sweep may
    /// be skipped; a removed object is forgotten by the policy as for [`MemoryStore::remove`].
    pub fn sweep(&self, now: SystemTime, rule: &SweepRule) -> SweepReport {
        let (ids, suspended): (Vec<ObjectId>, Vec<ObjectId>) = {
            let inner = self.inner.lock();
            (inner.objects.keys().copied().collect(), inner.suspended.ids())
        };
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
        for batch in suspended.chunks(SWEEP_BATCH) {
            let mut inner = self.inner.lock();
            for id in batch {
                let Some(entry) = inner.suspended.get(*id) else { continue };
                let verdict = rule.judge_meta(&entry.meta, entry.hits(), now);
                report.count(verdict, entry.footprint());
                if verdict == Verdict::Remove {
                    inner.unsuspend(std::slice::from_ref(id));
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
    fn forget(&mut self, id: ObjectId) -> Option<Arc<Object>> {
        let object = self.objects.remove(&id)?;
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
        Some(object)
    }

    /// Drops suspended entries (purge, sweep).
    fn unsuspend(&mut self, ids: &[ObjectId]) {
        for id in ids {
            if let Some(s) = self.suspended.remove(*id) {
                self.stats.bytes -= s.footprint();
            }
        }
        self.sync_suspended_stats();
    }

    fn sync_suspended_stats(&mut self) {
        self.stats.suspended = self.suspended.len() as u64;
        self.stats.suspended_bytes = self.suspended.bytes();
    }

    /// Evicts (by policy, then the oldest suspended entries) until `size` more bytes fit.
    /// Every eviction frees bytes: a suspended entry costs less than the object it replaces
    /// (its metadata only; bodies are never empty), so this ends.
    fn make_room(&mut self, size: u64, store: &MemoryStore) {
        while self.stats.bytes + size > self.stats.capacity {
            if let Some(victim) = self.policy.evict() {
                self.evict(victim, store);
            } else if let Some(oldest) = self.suspended.pop_oldest() {
                self.stats.bytes -= oldest.footprint();
            } else {
                break;
            }
        }
    }

    /// Evicts `victim` (already out of the policy), suspending it when allowed.
    fn evict(&mut self, victim: ObjectId, store: &MemoryStore) {
        let Some(object) = self.forget(victim) else { return };
        self.stats.evictions += 1;
        let kept = store.kept_elsewhere.as_ref().is_some_and(|kept| kept(&object.meta));
        if kept || store.suspend_max == 0 || !suspendable(&object.meta, object.body.len()) {
            return;
        }
        while self.suspended.len() >= store.suspend_max {
            match self.suspended.pop_oldest() {
                Some(oldest) => self.stats.bytes -= oldest.footprint(),
                None => break,
            }
        }
        let entry = Arc::new(Suspended::new(Arc::clone(&object.meta), object.body.len(), object.hits()));
        self.stats.bytes += entry.footprint();
        self.stats.suspensions += 1;
        self.suspended.add(victim, entry);
    }

    /// TinyLFU's duel against the first victim, when `size` more bytes need room: true to
    /// admit (the victim is then evicted). A losing candidate leaves the victim resident
    /// (re-inserted into the policy, which counts as a second chance).
    fn wins_duel(&mut self, candidate: u64, size: u64, store: &MemoryStore) -> bool {
        if self.stats.bytes + size <= self.stats.capacity {
            return true;
        }
        let Some(victim) = self.policy.evict() else { return true };
        let Some(object) = self.objects.get(&victim) else { return true };
        let (victim_key, victim_size) = (key_id(&object.meta.key), object.footprint());
        if candidate == victim_key || self.admitter.admit_over(candidate, victim_key) {
            self.evict(victim, store);
            return true;
        }
        self.policy.on_insert(victim, victim_size);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectMeta, StoredBody};
    use bytes::Bytes;
    use http::HeaderMap;

    use std::time::{Duration, SystemTime};

    fn object(key: &str, size: usize) -> Object {
        let meta = ObjectMeta::ok(key, HeaderMap::new(), Duration::from_secs(60));
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
    fn remove_object_removes_only_that_copy() {
        let store = store(1 << 20);
        let first = store.insert(object("k", 100)).unwrap();
        let newer = store.insert(object("k", 200)).unwrap();
        assert!(!store.remove_object(&first), "a newer copy replaced it: left alone");
        assert_eq!(store.stats().objects, 1);
        assert!(store.remove_object(&newer));
        assert_eq!((store.stats().objects, store.stats().bytes), (0, 0));
        assert!(!store.remove_object(&newer), "already gone");
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
