//! Reads in flight, so that a change the watcher sees while a file is being read also drops
//! what that read stores.
//!
//! Without this, a miss that opened a file just before it was replaced (a deploy renaming a
//! new version over it) would finish reading the old version after the watcher had already
//! removed the key, and the cache would store the old version until it expired. Each read
//! holds a [`ReadGuard`]; the watcher marks the guards of a changed key (or of every key
//! below a changed directory); a marked guard removes its key from the store when it is
//! dropped. The guard lives in the file's body, which the cache's fill task drops after it
//! has stored the object, so the removal comes after the store.

use crate::tiers::Tiers;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The reads in flight of one served directory.
pub struct Inflight {
    store: Arc<Tiers>,
    /// Key → one flag per read in flight ("changed while being read").
    reads: Mutex<HashMap<String, Vec<Arc<AtomicBool>>>>,
}

impl std::fmt::Debug for Inflight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflight").field("keys", &self.reads.lock().len()).finish_non_exhaustive()
    }
}

impl Inflight {
    pub fn new(store: Arc<Tiers>) -> Self {
        Self { store, reads: Mutex::default() }
    }

    /// Registers a read of the file whose cache key is `key`, until the guard is dropped.
    pub fn start(self: &Arc<Self>, key: String) -> ReadGuard {
        let changed = Arc::new(AtomicBool::new(false));
        self.reads.lock().entry(key.clone()).or_default().push(Arc::clone(&changed));
        ReadGuard { inflight: Arc::clone(self), key, changed }
    }

    /// The file with cache key `key` changed; with `tree`, so did everything below it.
    pub fn changed(&self, key: &str, tree: bool) {
        let reads = self.reads.lock();
        let below = |k: &str| tree && k.strip_prefix(key).is_some_and(|rest| rest.starts_with('/'));
        for (k, flags) in reads.iter() {
            if k == key || below(k) {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
        }
    }
}

/// One read in flight; see the module documentation.
pub struct ReadGuard {
    inflight: Arc<Inflight>,
    key: String,
    changed: Arc<AtomicBool>,
}

impl std::fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGuard").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        {
            let mut reads = self.inflight.reads.lock();
            if let Some(flags) = reads.get_mut(&self.key) {
                flags.retain(|f| !Arc::ptr_eq(f, &self.changed));
                if flags.is_empty() {
                    reads.remove(&self.key);
                }
            }
        }
        if self.changed.load(Ordering::Relaxed) {
            let removed = self.inflight.store.remove(&self.key);
            tracing::debug!("{} changed while being read: dropped {removed} object(s)", self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{describe, Directives, Received};
    use http::{HeaderMap, StatusCode};
    use sluice_http::freshness::Heuristic;
    use sluice_store::{Object, StoredBody};
    use std::time::{Duration, UNIX_EPOCH};

    fn store() -> Arc<Tiers> {
        let memory = sluice_store::MemoryStore::new(1 << 20, 1 << 20, crate::policy::build("lru", 1 << 20).unwrap());
        Arc::new(Tiers::new(memory, None, 0))
    }

    fn put(store: &Tiers, key: &str) {
        let received = Received {
            key: key.to_owned(),
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            request: &HeaderMap::new(),
            request_time: UNIX_EPOCH,
            response_time: UNIX_EPOCH,
        };
        let heuristic = Heuristic { last_modified_fraction: 0.1, max: Duration::from_secs(60), fixed: None };
        let meta = describe(received, Directives::default(), &heuristic);
        store.insert(Object::new(Arc::new(meta), StoredBody::new(vec![bytes::Bytes::from_static(b"old")])));
    }

    #[test]
    fn a_change_during_a_read_drops_what_the_read_stored() {
        let store = store();
        let inflight = Arc::new(Inflight::new(Arc::clone(&store)));
        let read = inflight.start("file://localhost/www/a".into());
        inflight.changed("file://localhost/www/a", false);
        put(&store, "file://localhost/www/a"); // the fill stores the old version ...
        drop(read); // ... and the body is dropped after
        assert!(store.variants("file://localhost/www/a").is_empty());
    }

    #[test]
    fn only_reads_of_the_changed_file_or_directory_are_marked() {
        let store = store();
        let inflight = Arc::new(Inflight::new(Arc::clone(&store)));
        let keys = ["file://localhost/www/a", "file://localhost/www/ab", "file://localhost/www/d/x"];
        let reads: Vec<_> = keys.iter().map(|k| inflight.start((*k).into())).collect();
        inflight.changed("file://localhost/www/a", true);
        inflight.changed("file://localhost/www/d", false);
        for k in keys {
            put(&store, k);
        }
        drop(reads);
        assert!(store.variants(keys[0]).is_empty());
        assert_eq!(store.variants(keys[1]).len(), 1, "a sibling with the same prefix is not below");
        assert_eq!(store.variants(keys[2]).len(), 1, "a file event is not a directory event");
        assert!(inflight.reads.lock().is_empty());
    }

    #[test]
    fn a_read_that_started_after_the_change_keeps_its_object() {
        let store = store();
        let inflight = Arc::new(Inflight::new(Arc::clone(&store)));
        let before = inflight.start("file://localhost/www/a".into());
        inflight.changed("file://localhost/www/a", false);
        let after = inflight.start("file://localhost/www/a".into());
        drop(before);
        put(&store, "file://localhost/www/a");
        drop(after);
        assert_eq!(store.variants("file://localhost/www/a").len(), 1);
    }
}
