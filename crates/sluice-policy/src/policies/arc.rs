//! ARC: Adaptive Replacement Cache, balancing recency and frequency with ghost feedback.
//!
//! **Algorithm.** Residents live in T1 (seen once recently) or T2 (seen at least twice);
//! ids recently evicted from them are remembered in the ghost lists B1 and B2. A hit moves
//! the object to the front of T2. A miss on an id in B1 means T1 was too small, so the
//! target size `p` of T1 grows (by `max(1, |B2|/|B1|)` objects' worth); a miss on an id in B2
//! shrinks it symmetrically; such an object re-enters at the front of T2, any other new
//! object at the front of T1. Eviction takes the back of T1 into B1 when T1 exceeds `p`
//! (or equals it and the missing id is in B2), otherwise the back of T2 into B2. The ghost
//! lists are trimmed so that T1 + B1 holds at most the capacity and all four lists at most
//! twice the capacity. Sizes are counted with the capacity's weight, which generalises the
//! paper's page counts to bytes.
//!
//! The adaptation runs in [`Policy::on_miss`], before the evictions for that miss, exactly
//! as in the paper; a caller that skips `on_miss` gets it in `on_insert` instead.
//!
//! **Paper.** N. Megiddo, D. S. Modha, "ARC: a self-tuning, low overhead replacement cache",
//! FAST 2003.
//!
//! **Complexity.** `on_hit`, `on_miss`, `on_remove`, `evict`: O(1). `on_insert`: O(1)
//! amortised (ghost trimming frees at most what earlier inserts added).
//!
//! **Memory.** 24-byte node plus one hash-table entry per resident and per ghost id (up to
//! one ghost per resident): 173.0 bytes per resident object including ghosts, measured by
//! `bench/sim`.

use crate::arena::{Arena, List};
use crate::hash::{id_map, IdMap};
use crate::{Capacity, ObjectId, Policy, PolicyConfig};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Where {
    T1,
    T2,
    B1,
    B2,
}

#[derive(Clone, Copy)]
struct Node {
    id: ObjectId,
    weight: u64,
    at: Where,
}

/// A list and the total weight of its nodes.
#[derive(Clone, Copy)]
struct Part {
    list: List,
    weight: u64,
}

impl Part {
    const fn new() -> Self {
        Self { list: List::new(), weight: 0 }
    }
}

/// Adaptive Replacement Cache.
pub struct Arc {
    capacity: Capacity,
    nodes: Arena<Node>,
    parts: [Part; 4],
    /// Target weight of T1.
    p: u64,
    /// The id whose miss `on_miss` already adapted to, and whether it was in B2.
    pending: Option<(ObjectId, bool)>,
    index: IdMap<u32>,
}

impl Arc {
    /// An empty ARC for `config.capacity`.
    pub fn new(config: &PolicyConfig) -> Self {
        Self {
            capacity: config.capacity,
            nodes: Arena::new(),
            parts: [Part::new(); 4],
            p: 0,
            pending: None,
            index: id_map(),
        }
    }

    fn part(&mut self, at: Where) -> &mut Part {
        &mut self.parts[at as usize]
    }

    fn weight(&self, at: Where) -> u64 {
        self.parts[at as usize].weight
    }

    fn link_front(&mut self, i: u32, at: Where) {
        let node = self.nodes.get_mut(i);
        node.at = at;
        let w = node.weight;
        let part = &mut self.parts[at as usize];
        part.list.push_front(&mut self.nodes, i);
        part.weight += w;
    }

    fn unlink(&mut self, i: u32) {
        let Node { at, weight, .. } = *self.nodes.get(i);
        let part = &mut self.parts[at as usize];
        part.list.unlink(&mut self.nodes, i);
        part.weight -= weight;
    }

    /// Drops the oldest id of ghost list `at`; false when it is empty.
    fn forget_oldest(&mut self, at: Where) -> bool {
        let Some(i) = self.part(at).list.back() else {
            return false;
        };
        self.unlink(i);
        let id = self.nodes.get(i).id;
        self.index.remove(&id);
        self.nodes.release(i);
        true
    }

    /// Moves `p` towards T1 (ghost hit in B1) or T2 (ghost hit in B2) for node `i`.
    fn adapt(&mut self, i: u32) -> bool {
        let Node { at, weight, .. } = *self.nodes.get(i);
        let (b1, b2) = (self.weight(Where::B1).max(1), self.weight(Where::B2).max(1));
        match at {
            Where::B1 => {
                let delta = weight.max(weight * (b2 / b1));
                self.p = (self.p + delta).min(self.capacity.limit());
                false
            }
            Where::B2 => {
                let delta = weight.max(weight * (b1 / b2));
                self.p = self.p.saturating_sub(delta);
                true
            }
            Where::T1 | Where::T2 => false,
        }
    }

    /// Keeps T1 + B1 within the capacity and the whole directory within twice it.
    fn trim_ghosts(&mut self) {
        let c = self.capacity.limit();
        while self.weight(Where::T1) + self.weight(Where::B1) > c {
            if !self.forget_oldest(Where::B1) {
                break;
            }
        }
        while self.parts.iter().map(|p| p.weight).sum::<u64>() > 2 * c {
            if !self.forget_oldest(Where::B2) && !self.forget_oldest(Where::B1) {
                break;
            }
        }
    }
}

impl Policy for Arc {
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        if matches!(self.nodes.get(i).at, Where::T1 | Where::T2) {
            self.unlink(i);
            self.link_front(i, Where::T2);
        }
    }

    fn on_miss(&mut self, id: ObjectId, _size: u64) {
        self.pending = None;
        if let Some(&i) = self.index.get(&id) {
            let in_b2 = self.adapt(i);
            self.pending = Some((id, in_b2));
        }
    }

    fn on_insert(&mut self, id: ObjectId, size: u64) {
        let weight = self.capacity.weight(size);
        let adapted = matches!(self.pending.take(), Some((p, _)) if p == id);
        match self.index.get(&id).copied() {
            Some(i) if matches!(self.nodes.get(i).at, Where::B1 | Where::B2) => {
                if !adapted {
                    self.adapt(i);
                }
                self.unlink(i);
                self.nodes.get_mut(i).weight = weight;
                self.link_front(i, Where::T2);
            }
            Some(_) => return, // already resident
            None => {
                let i = self.nodes.alloc(Node { id, weight, at: Where::T1 });
                self.index.insert(id, i);
                self.link_front(i, Where::T1);
            }
        }
        self.trim_ghosts();
    }

    fn on_remove(&mut self, id: ObjectId) {
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        if matches!(self.nodes.get(i).at, Where::T1 | Where::T2) {
            self.unlink(i);
            self.index.remove(&id);
            self.nodes.release(i);
        }
    }

    fn evict(&mut self) -> Option<ObjectId> {
        let incoming_in_b2 = matches!(self.pending, Some((_, true)));
        let t1 = self.weight(Where::T1);
        let from_t1 = !self.parts[Where::T1 as usize].list.is_empty()
            && (t1 > self.p || (incoming_in_b2 && t1 == self.p) || self.parts[Where::T2 as usize].list.is_empty());
        let (from, to) = if from_t1 { (Where::T1, Where::B1) } else { (Where::T2, Where::B2) };
        let i = self.part(from).list.back()?;
        self.unlink(i);
        self.link_front(i, to);
        Some(self.nodes.get(i).id)
    }

    fn len(&self) -> usize {
        self.parts[Where::T1 as usize].list.len() + self.parts[Where::T2 as usize].list.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    #[test]
    fn ghost_hits_move_the_target() {
        // c=2. 1,2 -> T1; 1 hits -> T2. 3: T1 (1) > p (0), evict 2 to B1. 2: B1 hit, p=1;
        // T1 (1) is not above p, evict 1 from T2 to B2. 1: B2 hit, p=0; evict 3 from T1.
        let run = drive("arc", Capacity::Objects(2), &unit(&[1, 2, 1, 3, 2, 1]));
        assert_eq!(run.victims, vec![2, 1, 3]);
        assert_eq!(run.hits, 1);
    }
}
