//! LFU: evict the least frequently used object; ties go to the least recently used.
//!
//! **Algorithm.** Every resident counts its requests since it was inserted (insert = 1).
//! Residents with the same count share a bucket; buckets form a list in increasing count and
//! each bucket keeps its residents in recency order. A hit moves the object to the front of
//! the next bucket (count + 1), creating it if missing; eviction takes the least recently used
//! object of the lowest bucket. Counts are forgotten on eviction (in-cache LFU), which is what
//! the seed paper measured. Old popular objects can pollute the cache: see LFU-DA and
//! W-TinyLFU for aged variants.
//!
//! **Paper.** K. Shah, A. Mitra, D. Matani, "An O(1) algorithm for implementing the LFU cache
//! eviction scheme", 2010 (the bucket structure); LFU itself is folklore from paging.
//!
//! **Complexity.** `on_hit`, `on_insert`, `on_remove`, `evict`: O(1).
//!
//! **Memory.** 16-byte item node, one hash-table entry and a share of the bucket nodes:
//! 76.7 bytes per resident object, measured by `bench/sim`.

use crate::arena::{Arena, List, NIL};
use crate::hash::{id_map, IdMap};
use crate::{ObjectId, Policy, PolicyConfig};

#[derive(Clone, Copy)]
struct Item {
    id: ObjectId,
    bucket: u32,
}

#[derive(Clone, Copy)]
struct Bucket {
    count: u64,
    /// Residents with this count, most recent at the front.
    items: List,
}

/// Least frequently used, recency among equals.
pub struct Lfu {
    items: Arena<Item>,
    buckets: Arena<Bucket>,
    /// Buckets in increasing count, lowest at the front.
    order: List,
    index: IdMap<u32>,
    len: usize,
}

impl Lfu {
    /// An empty LFU; the configuration is not needed.
    pub fn new(_config: &PolicyConfig) -> Self {
        Self { items: Arena::new(), buckets: Arena::new(), order: List::new(), index: id_map(), len: 0 }
    }

    /// Puts item `i` at the front of bucket `b`.
    fn enter(&mut self, i: u32, b: u32) {
        let mut items = self.buckets.get(b).items;
        items.push_front(&mut self.items, i);
        self.buckets.get_mut(b).items = items;
        self.items.get_mut(i).bucket = b;
    }

    /// Takes item `i` out of its bucket; frees the bucket when it empties.
    fn leave(&mut self, i: u32) {
        let b = self.items.get(i).bucket;
        let mut items = self.buckets.get(b).items;
        items.unlink(&mut self.items, i);
        if items.is_empty() {
            self.order.unlink(&mut self.buckets, b);
            self.buckets.release(b);
        } else {
            self.buckets.get_mut(b).items = items;
        }
    }

    /// The bucket with `count` right after `after` (`NIL` = the list's front), created if
    /// needed.
    fn bucket_after(&mut self, after: u32, count: u64) -> u32 {
        let next = if after == NIL { self.order.front().unwrap_or(NIL) } else { self.buckets.next(after) };
        if next != NIL && self.buckets.get(next).count == count {
            return next;
        }
        let b = self.buckets.alloc(Bucket { count, items: List::new() });
        if after == NIL {
            self.order.push_front(&mut self.buckets, b);
        } else {
            self.order.insert_after(&mut self.buckets, after, b);
        }
        b
    }
}

impl Policy for Lfu {
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        let b = self.items.get(i).bucket;
        let count = self.buckets.get(b).count + 1;
        let target = self.bucket_after(b, count);
        self.leave(i);
        self.enter(i, target);
    }

    fn on_insert(&mut self, id: ObjectId, _size: u64) {
        if self.index.contains_key(&id) {
            return;
        }
        let b = self.bucket_after(NIL, 1);
        let i = self.items.alloc(Item { id, bucket: b });
        self.enter(i, b);
        self.index.insert(id, i);
        self.len += 1;
    }

    fn on_remove(&mut self, id: ObjectId) {
        if let Some(i) = self.index.remove(&id) {
            self.leave(i);
            self.items.release(i);
            self.len -= 1;
        }
    }

    fn evict(&mut self) -> Option<ObjectId> {
        let b = self.order.front()?;
        let i = self.buckets.get(b).items.back()?;
        let id = self.items.get(i).id;
        self.leave(i);
        self.items.release(i);
        self.index.remove(&id);
        self.len -= 1;
        Some(id)
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    #[test]
    fn keeps_the_frequent_object() {
        // LRU would evict 1 at the request for 3; LFU evicts 2 (count 1 < 2) and hits on 1.
        let run = drive("lfu", Capacity::Objects(2), &unit(&[1, 1, 2, 3, 1]));
        assert_eq!((run.hits, run.victims), (2, vec![2]));
    }

    #[test]
    fn ties_go_to_the_least_recent() {
        // Classic string, 3 frames: victims by hand 1 2 3 4 5 3 4, hits on 1 and 2.
        let t = unit(&[1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]);
        let run = drive("lfu", Capacity::Objects(3), &t);
        assert_eq!(run.victims, vec![1, 2, 3, 4, 5, 3, 4]);
        assert_eq!(run.hits, 2);
    }
}
