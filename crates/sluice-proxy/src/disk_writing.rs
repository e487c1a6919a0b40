//! Objects on their way to the disk tier that the memory tier did not take (larger than
//! `cache.max_object`, or refused by its admission rule): between the end of their fetch and
//! the disk's commit they are in neither tier's index, and a request for them would go to
//! the origin again and write a second copy. [`Writing`] keeps them findable for that
//! window; [`crate::tiers::Tiers::lookup_disk`] serves them like a disk hit.

use parking_lot::Mutex;
use sluice_store::{Object, ObjectMeta};
use std::sync::Arc;

/// The objects being written (few at a time: large ones, while their write lasts).
#[derive(Debug, Default)]
pub struct Writing {
    objects: Mutex<Vec<Arc<Object>>>,
}

impl Writing {
    /// `object` is being written, and is in no tier until the write ends.
    pub fn started(&self, object: &Arc<Object>) {
        self.objects.lock().push(Arc::clone(object));
    }

    /// The write of `object` ended (committed, refused or undone).
    pub fn ended(&self, object: &Arc<Object>) {
        self.objects.lock().retain(|o| !Arc::ptr_eq(o, object));
    }

    /// The object being written for `key` that `selects` (its variant for the request).
    pub fn find(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Option<Arc<Object>> {
        let objects = self.objects.lock();
        objects.iter().rev().find(|o| o.meta.key == key && selects(&o.meta)).cloned()
    }

    /// Forgets the objects `removed` covers (a purge, delete or invalidation: their writes
    /// undo themselves when they end).
    pub fn remove(&self, removed: impl Fn(&ObjectMeta) -> bool) {
        self.objects.lock().retain(|o| !removed(&o.meta));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_store::StoredBody;

    fn object(key: &str) -> Arc<Object> {
        let meta = ObjectMeta::ok(key, http::HeaderMap::new(), std::time::Duration::from_secs(60));
        Arc::new(Object::new(Arc::new(meta), StoredBody::new(vec![bytes::Bytes::from_static(b"x")])))
    }

    #[test]
    fn an_object_is_found_while_it_is_written_and_not_after() {
        let writing = Writing::default();
        let (a, b) = (object("http://a/"), object("http://b/"));
        writing.started(&a);
        writing.started(&b);
        assert!(writing.find("http://a/", |_| true).is_some_and(|o| Arc::ptr_eq(&o, &a)));
        assert!(writing.find("http://a/", |_| false).is_none(), "another variant");
        writing.ended(&a);
        assert!(writing.find("http://a/", |_| true).is_none());
        writing.remove(|meta| meta.key.starts_with("http://b"));
        assert!(writing.find("http://b/", |_| true).is_none());
    }
}
