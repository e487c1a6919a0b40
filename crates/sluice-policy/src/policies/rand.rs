//! RAND: evict a resident chosen uniformly at random (seeded).
//!
//! **Algorithm.** Residents sit in a dense array with an id -> position map. Eviction draws a
//! position from the seeded generator, swaps the last element into the hole and shrinks the
//! array. The same seed and trace give the same evictions. Not a stack algorithm, so it can
//! show Belady's anomaly.
//!
//! **Paper.** L. A. Belady, "A study of replacement algorithms for a virtual-storage
//! computer", IBM Systems Journal 5(2), 1966 (RAND as a baseline); the seed paper's RAND.
//!
//! **Complexity.** `on_hit`: O(1) (nothing to do). `on_insert`, `on_remove`, `evict`: O(1).
//!
//! **Memory.** 8-byte array slot plus one hash-table entry: 55.1 bytes per resident
//! object, measured by `bench/sim`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::hash::{id_map, IdMap};
use crate::{ObjectId, Policy, PolicyConfig};

/// Uniformly random eviction from a seeded ChaCha8 generator.
pub struct Rand {
    ids: Vec<ObjectId>,
    index: IdMap<u32>,
    rng: ChaCha8Rng,
}

impl Rand {
    /// An empty RAND drawing from `config.seed`.
    pub fn new(config: &PolicyConfig) -> Self {
        Self { ids: Vec::new(), index: id_map(), rng: ChaCha8Rng::seed_from_u64(config.seed) }
    }

    fn remove_at(&mut self, pos: usize) -> ObjectId {
        let id = self.ids.swap_remove(pos);
        if let Some(&moved) = self.ids.get(pos) {
            self.index.insert(moved, pos as u32);
        }
        self.index.remove(&id);
        id
    }
}

impl Policy for Rand {
    fn on_hit(&mut self, _id: ObjectId, _size: u64) {}

    fn on_insert(&mut self, id: ObjectId, _size: u64) {
        if self.index.contains_key(&id) {
            return;
        }
        self.index.insert(id, self.ids.len() as u32);
        self.ids.push(id);
    }

    fn on_remove(&mut self, id: ObjectId) {
        if let Some(&pos) = self.index.get(&id) {
            self.remove_at(pos as usize);
        }
    }

    fn evict(&mut self) -> Option<ObjectId> {
        if self.ids.is_empty() {
            return None;
        }
        let pos = self.rng.gen_range(0..self.ids.len());
        Some(self.remove_at(pos))
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive_policy, unit};
    use crate::{Capacity, PolicyConfig};

    use super::Rand;

    #[test]
    fn same_seed_same_victims_other_seed_differs() {
        let ids: Vec<u64> = (0..200).map(|i| (i * 7919) % 61).collect();
        let t = unit(&ids);
        let cap = Capacity::Objects(10);
        let run = |seed| drive_policy(&mut Rand::new(&PolicyConfig::new(cap).with_seed(seed)), cap, &t).victims;
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
