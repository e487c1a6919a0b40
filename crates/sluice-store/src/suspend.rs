//! Suspended objects: what the memory tier keeps of an evicted object that has validators —
//! its metadata and access history, without the body — so the next request for it can be
//! a conditional request (a 304 costs no body) instead of a full fetch.
//!
//! Contract:
//! - a suspended entry never serves a body; it only lends its validators (`ETag`,
//!   `Last-Modified`) to a conditional request, and its hit count to the object that
//!   replaces it (so admission treats a returning object as known-popular);
//! - each entry is charged its metadata's footprint ([`ObjectMeta::footprint`], what the
//!   object already paid for its metadata while whole) to the memory tier's capacity;
//! - the set holds at most `max_entries`; beyond that the oldest suspension goes first
//!   (FIFO).

use crate::ObjectMeta;
use sluice_policy::{IdMap, ObjectId};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One suspended object: metadata and hits, no body.
#[derive(Debug)]
pub struct Suspended {
    pub meta: Arc<ObjectMeta>,
    /// Body bytes the object had when it was suspended (for listings).
    pub body_len: u64,
    hits: AtomicU64,
}

impl Suspended {
    /// A suspended entry for `meta` with `hits` carried over from the evicted object.
    pub fn new(meta: Arc<ObjectMeta>, body_len: u64, hits: u64) -> Self {
        Self { meta, body_len, hits: AtomicU64::new(hits) }
    }

    /// Requests seen for the object (before and since its suspension).
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Counts one request for it.
    pub fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes charged to the memory tier.
    pub fn footprint(&self) -> u64 {
        self.meta.footprint()
    }
}

/// True when an evicted object may be suspended: a 200 with a validator and a body (an
/// empty body would save nothing).
pub fn suspendable(meta: &ObjectMeta, body_len: u64) -> bool {
    meta.status == http::StatusCode::OK
        && body_len > 0
        && (meta.headers.contains_key(http::header::ETAG) || meta.headers.contains_key(http::header::LAST_MODIFIED))
}

/// The suspended entries of one tier, indexed by variant id and by primary key, bounded in
/// number with FIFO eviction. Pure bookkeeping; the tier charges the bytes.
#[derive(Debug, Default)]
pub(crate) struct SuspendedSet {
    entries: IdMap<(u64, Arc<Suspended>)>,
    /// Primary key to its suspended variants.
    index: HashMap<String, Vec<ObjectId>>,
    /// Suspension order (sequence number to id), oldest first.
    order: BTreeMap<u64, ObjectId>,
    seq: u64,
    bytes: u64,
}

impl SuspendedSet {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn get(&self, id: ObjectId) -> Option<&Arc<Suspended>> {
        self.entries.get(&id).map(|(_, s)| s)
    }

    /// Adds (or replaces) the entry for `id` as the newest.
    pub(crate) fn add(&mut self, id: ObjectId, entry: Arc<Suspended>) {
        self.remove(id);
        self.seq += 1;
        self.bytes += entry.footprint();
        self.index.entry(entry.meta.key.clone()).or_default().push(id);
        self.order.insert(self.seq, id);
        self.entries.insert(id, (self.seq, entry));
    }

    /// Replaces the metadata of `id`'s entry in place (after a 304), keeping its hits and
    /// its place in the order; returns the bytes charged before and after.
    pub(crate) fn freshen(&mut self, id: ObjectId, meta: Arc<ObjectMeta>) -> Option<(u64, u64)> {
        let (_, entry) = self.entries.get_mut(&id)?;
        let before = entry.footprint();
        *entry = Arc::new(Suspended::new(meta, entry.body_len, entry.hits()));
        let after = entry.footprint();
        self.bytes = self.bytes - before + after;
        Some((before, after))
    }

    /// Removes `id`'s entry.
    pub(crate) fn remove(&mut self, id: ObjectId) -> Option<Arc<Suspended>> {
        let (seq, entry) = self.entries.remove(&id)?;
        self.order.remove(&seq);
        self.bytes -= entry.footprint();
        if let Some(ids) = self.index.get_mut(&entry.meta.key) {
            ids.retain(|v| *v != id);
            if ids.is_empty() {
                self.index.remove(&entry.meta.key);
            }
        }
        Some(entry)
    }

    /// Removes the oldest entry.
    pub(crate) fn pop_oldest(&mut self) -> Option<Arc<Suspended>> {
        let (_, id) = self.order.first_key_value().map(|(s, id)| (*s, *id))?;
        self.remove(id)
    }

    /// The ids suspended under `key`.
    pub(crate) fn ids_of(&self, key: &str) -> Vec<ObjectId> {
        self.index.get(key).cloned().unwrap_or_default()
    }

    /// Every id for which `matches` holds of its entry.
    pub(crate) fn ids_where(&self, matches: impl Fn(&Suspended) -> bool) -> Vec<ObjectId> {
        self.entries.iter().filter(|(_, (_, e))| matches(e)).map(|(id, _)| *id).collect()
    }

    /// Every id.
    pub(crate) fn ids(&self) -> Vec<ObjectId> {
        self.entries.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    use std::time::Duration;

    fn meta(key: &str, etag: bool) -> Arc<ObjectMeta> {
        let mut headers = HeaderMap::new();
        if etag {
            headers.insert(http::header::ETAG, http::HeaderValue::from_static("\"v1\""));
        }
        Arc::new(ObjectMeta::ok(key, headers, Duration::from_secs(60)))
    }

    #[test]
    fn only_bodies_with_validators_are_suspendable() {
        assert!(suspendable(&meta("a", true), 10));
        assert!(!suspendable(&meta("a", false), 10));
        assert!(!suspendable(&meta("a", true), 0));
    }

    #[test]
    fn fifo_order_and_byte_accounting() {
        let mut set = SuspendedSet::default();
        for id in 0..3 {
            set.add(id, Arc::new(Suspended::new(meta(&format!("k{id}"), true), 5, id)));
        }
        let one = set.get(0).unwrap().footprint();
        assert_eq!(set.bytes(), 3 * one);
        set.add(0, Arc::new(Suspended::new(meta("k0", true), 5, 0)));
        assert_eq!(set.pop_oldest().unwrap().meta.key, "k1", "re-suspending makes an entry the newest");
        assert_eq!(set.ids_of("k2"), vec![2]);
        assert!(set.remove(2).is_some());
        assert!(set.ids_of("k2").is_empty());
        assert_eq!((set.len(), set.bytes()), (1, one));
        set.get(0).unwrap().record_hit();
        set.freshen(0, meta("k0", true)).unwrap();
        assert_eq!(set.get(0).unwrap().hits(), 1, "freshening keeps the hits");
    }
}
