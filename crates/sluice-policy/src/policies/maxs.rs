//! MAXS: evict the largest object first (the seed paper's size-based policy).
//!
//! **Algorithm.** Residents are ranked by body size in bytes, whatever the capacity unit;
//! eviction takes the largest, and among equal sizes the one inserted first. Hits change
//! nothing. With a count-sized cache this tends to evict popular pages of common sizes
//! (the "ping-pong" the seed paper observed).
//!
//! **Paper.** M. Abrams, C. R. Standridge, G. Abdulla, S. Williams, E. A. Fox, "Caching
//! proxies: limitations and potentials", WWW 1995 (SIZE); Kumar and Viswanathan's MAXS.
//!
//! **Complexity.** `on_hit`: O(1) (nothing to do). `on_insert`, `on_remove`, `evict`:
//! O(log n) (indexed binary heap).
//!
//! **Memory.** Heap slot, heap position and one hash-table entry: 91.8 bytes per resident
//! object, measured by `bench/sim`.

use std::cmp::Reverse;

use crate::heap::IndexedHeap;
use crate::{ObjectId, Policy, PolicyConfig};

/// Largest size first, oldest insert among equal sizes.
pub struct Maxs {
    heap: IndexedHeap<(Reverse<u64>, u64)>,
    seq: u64,
}

impl Maxs {
    /// An empty MAXS; the configuration is not needed.
    pub fn new(_config: &PolicyConfig) -> Self {
        Self { heap: IndexedHeap::new(), seq: 0 }
    }
}

impl Policy for Maxs {
    fn on_hit(&mut self, _id: ObjectId, _size: u64) {}

    fn on_insert(&mut self, id: ObjectId, size: u64) {
        self.seq += 1;
        self.heap.set(id, (Reverse(size), self.seq), ());
    }

    fn on_remove(&mut self, id: ObjectId) {
        self.heap.remove(id);
    }

    fn evict(&mut self) -> Option<ObjectId> {
        self.heap.pop().map(|(id, _)| id)
    }

    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::drive;
    use crate::Capacity;

    #[test]
    fn evicts_largest_then_oldest() {
        let t = [(1, 100), (2, 10), (3, 50), (2, 10), (1, 100), (4, 10), (5, 10)];
        let run = drive("maxs", Capacity::Objects(2), &t);
        // 3: evict 1 (100); 1: evict 3 (50); 4: evict 1; 5: sizes 10/10, oldest is 2.
        assert_eq!(run.victims, vec![1, 3, 1, 2]);
        assert_eq!(run.hits, 1);
    }
}
