//! S3-FIFO: three static FIFO queues, a small probationary one, a main one and a ghost one.
//!
//! **Algorithm.** New objects enter the small queue S, sized to 10% of the capacity; objects
//! whose id is still remembered by the ghost queue G enter the main queue M instead. Each
//! resident has a 2-bit request counter (capped at 3) bumped by hits; nothing moves on a hit.
//! To evict, if S holds at least its 10% (or M is empty), look at the oldest object of S:
//!
//! * **promotion rule:** if it was hit at least once while in S (counter >= 1) it moves to
//!   the front of M with its counter cleared; this is the rule of the paper's text and of
//!   the authors' blog (libCacheSim's current default waits for 2 hits);
//! * otherwise it is evicted and its id goes to the front of G.
//!
//! Otherwise look at the oldest object of M: if its counter is above 0 it is reinserted at
//! the front with the counter decremented (2-bit CLOCK), else it is evicted. G forgets its
//! oldest ids once it remembers more than M's 90% share of the capacity. Most one-hit
//! wonders thus leave through S quickly ("quick demotion") and popular objects are promoted
//! only when they reach a queue's end ("lazy promotion").
//!
//! **Paper.** J. Yang, Y. Zhang, Z. Qiu, Y. Yue, R. Vinayak, "FIFO queues are all you need
//! for cache eviction", SOSP 2023.
//!
//! **Complexity.** `on_hit`: O(1) (counter bump). `on_insert`, `on_remove`: O(1). `evict`:
//! O(1) amortised: each promotion or reinsertion spends counter bits that only hits refill.
//!
//! **Memory.** 32-byte node plus one hash-table entry per resident, and the same per ghost
//! id: 173.0 bytes per resident object including the ghost queue, measured by
//! `bench/sim`.

use crate::arena::{Arena, List};
use crate::hash::{id_map, IdMap};
use crate::{Capacity, ObjectId, Policy, PolicyConfig};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
    Ghost,
}

#[derive(Clone, Copy)]
struct Node {
    id: ObjectId,
    weight: u64,
    freq: u8,
    queue: Queue,
}

/// Share of the capacity given to the small queue.
const SMALL_SHARE: f64 = 0.10;
/// Highest value of the per-object counter (2 bits).
const MAX_FREQ: u8 = 3;

/// S3-FIFO with a 10% small queue, 2-bit counters and a ghost queue as large as M's share.
pub struct S3Fifo {
    capacity: Capacity,
    nodes: Arena<Node>,
    small: List,
    main: List,
    ghost: List,
    small_weight: u64,
    ghost_weight: u64,
    small_target: u64,
    ghost_limit: u64,
    /// Residents and ghost ids.
    index: IdMap<u32>,
}

impl S3Fifo {
    /// An empty S3-FIFO whose queue shares are taken from `config.capacity`.
    pub fn new(config: &PolicyConfig) -> Self {
        let small_target = config.capacity.share(SMALL_SHARE);
        Self {
            capacity: config.capacity,
            nodes: Arena::new(),
            small: List::new(),
            main: List::new(),
            ghost: List::new(),
            small_weight: 0,
            ghost_weight: 0,
            small_target,
            ghost_limit: config.capacity.limit().saturating_sub(small_target),
            index: id_map(),
        }
    }

    /// Remembers evicted node `i` in G, then trims G to its limit.
    fn remember_in_ghost(&mut self, i: u32) {
        let node = self.nodes.get_mut(i);
        node.queue = Queue::Ghost;
        node.freq = 0;
        self.ghost_weight += node.weight;
        self.ghost.push_front(&mut self.nodes, i);
        while self.ghost_weight > self.ghost_limit {
            let Some(g) = self.ghost.pop_back(&mut self.nodes) else {
                break;
            };
            let Node { id, weight, .. } = *self.nodes.get(g);
            self.ghost_weight -= weight;
            self.index.remove(&id);
            self.nodes.release(g);
        }
    }

    /// Forgets node `i` (already unlinked) entirely.
    fn drop_node(&mut self, i: u32) -> ObjectId {
        let id = self.nodes.get(i).id;
        self.index.remove(&id);
        self.nodes.release(i);
        id
    }
}

impl Policy for S3Fifo {
    #[inline]
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        if let Some(&i) = self.index.get(&id) {
            let node = self.nodes.get_mut(i);
            if node.queue != Queue::Ghost {
                node.freq = (node.freq + 1).min(MAX_FREQ);
            }
        }
    }

    #[inline]
    fn on_insert(&mut self, id: ObjectId, size: u64) {
        let weight = self.capacity.weight(size);
        if let Some(&i) = self.index.get(&id) {
            let node = *self.nodes.get(i);
            if node.queue != Queue::Ghost {
                return; // already resident: protocol violation, keep it as it is
            }
            self.ghost.unlink(&mut self.nodes, i);
            self.ghost_weight -= node.weight;
            *self.nodes.get_mut(i) = Node { id, weight, freq: 0, queue: Queue::Main };
            self.main.push_front(&mut self.nodes, i);
            return;
        }
        let i = self.nodes.alloc(Node { id, weight, freq: 0, queue: Queue::Small });
        self.small.push_front(&mut self.nodes, i);
        self.small_weight += weight;
        self.index.insert(id, i);
    }

    fn on_remove(&mut self, id: ObjectId) {
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        let node = *self.nodes.get(i);
        match node.queue {
            Queue::Ghost => return, // not resident; the history stays useful
            Queue::Small => {
                self.small.unlink(&mut self.nodes, i);
                self.small_weight -= node.weight;
            }
            Queue::Main => self.main.unlink(&mut self.nodes, i),
        }
        self.drop_node(i);
    }

    #[inline]
    fn evict(&mut self) -> Option<ObjectId> {
        loop {
            if !self.small.is_empty() && (self.small_weight >= self.small_target || self.main.is_empty()) {
                let i = self.small.pop_back(&mut self.nodes)?;
                let node = self.nodes.get_mut(i);
                self.small_weight -= node.weight;
                if node.freq >= 1 {
                    node.freq = 0;
                    node.queue = Queue::Main;
                    self.main.push_front(&mut self.nodes, i);
                    continue;
                }
                let id = node.id;
                self.remember_in_ghost(i);
                return Some(id);
            }
            let i = self.main.pop_back(&mut self.nodes)?;
            let node = self.nodes.get_mut(i);
            if node.freq > 0 {
                node.freq -= 1;
                self.main.push_front(&mut self.nodes, i);
                continue;
            }
            return Some(self.drop_node(i));
        }
    }

    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    #[test]
    fn one_hit_promotes_and_ghosts_readmit_to_main() {
        // Capacity 10: small target 1. Fill 1..=10 (all in S), hit 2; 11 evicts 1 (to G);
        // 12 promotes 2 to M and evicts 3; 1 (ghost) enters M, evicting 4 from S.
        let mut ids: Vec<u64> = (1..=10).collect();
        ids.extend([2, 11, 12, 1]);
        let run = drive("s3-fifo", Capacity::Objects(10), &unit(&ids));
        assert_eq!(run.victims, vec![1, 3, 4]);
        // Then 2 and 1 hit (both in M) while newcomers keep flowing through S.
        ids.extend([13, 14, 2, 1]);
        let run = drive("s3-fifo", Capacity::Objects(10), &unit(&ids));
        assert_eq!(run.victims, vec![1, 3, 4, 5, 6]);
        assert_eq!(run.hits, 3);
    }
}
