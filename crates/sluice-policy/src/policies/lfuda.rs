//! LFU-DA: LFU with dynamic aging, evict the object with the lowest `L + frequency`.
//!
//! **Algorithm.** Each resident has key `K = L + f`, where `f` counts its requests since
//! insertion. Eviction takes the lowest `K` (least recently used among equals) and sets the
//! age `L` to it; a hit recomputes `K` with the current `L`. Newcomers thus start level with
//! the objects recently evicted, so once-popular objects cannot squat forever as in LFU.
//! Sizes are ignored.
//!
//! **Paper.** M. Arlitt, L. Cherkasova, J. Dilley, R. Friedrich, T. Jin, "Evaluating content
//! management techniques for Web proxy caches", ACM SIGMETRICS PER 27(4), 2000.
//!
//! **Complexity.** `on_hit`, `on_insert`, `on_remove`, `evict`: O(log n) (indexed heap).
//!
//! **Memory.** Heap slot with key and count plus one hash-table entry: 102.2 bytes per
//! resident object, measured by `bench/sim`.

use crate::heap::IndexedHeap;
use crate::{ObjectId, Policy, PolicyConfig};

/// LFU with dynamic aging.
pub struct LfuDa {
    /// Key: (`K`, last access); payload: request count.
    heap: IndexedHeap<(u64, u64), u64>,
    age: u64,
    clock: u64,
}

impl LfuDa {
    /// An empty LFU-DA; the configuration is not needed.
    pub fn new(_config: &PolicyConfig) -> Self {
        Self { heap: IndexedHeap::new(), age: 0, clock: 0 }
    }

    fn rank(&mut self, id: ObjectId, freq: u64) {
        self.clock += 1;
        self.heap.set(id, (self.age + freq, self.clock), freq);
    }
}

impl Policy for LfuDa {
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        if let Some((_, freq)) = self.heap.get(id) {
            self.rank(id, freq + 1);
        }
    }

    fn on_insert(&mut self, id: ObjectId, _size: u64) {
        self.rank(id, 1);
    }

    fn on_remove(&mut self, id: ObjectId) {
        self.heap.remove(id);
    }

    fn evict(&mut self) -> Option<ObjectId> {
        let (id, (k, _)) = self.heap.pop()?;
        self.age = k;
        Some(id)
    }

    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    #[test]
    fn aging_lets_newcomers_compete() {
        // 1 K=2, 2 K=1; 3 evicts 2 (L=1) and enters at K=2; 4 then ties 1 and 3 at K=2 and
        // evicts the least recent, 1 (plain LFU would evict 3).
        let run = drive("lfu-da", Capacity::Objects(2), &unit(&[1, 1, 2, 3, 4]));
        assert_eq!(run.victims, vec![2, 1]);
        let lfu = drive("lfu", Capacity::Objects(2), &unit(&[1, 1, 2, 3, 4]));
        assert_eq!(lfu.victims, vec![2, 3]);
    }
}
