//! W-TinyLFU: a small LRU window in front of a segmented LRU, with TinyLFU deciding who may
//! enter the main part.
//!
//! **Algorithm.** New objects always enter the window, an LRU holding 1% of the capacity.
//! The main part (the other 99%) is a segmented LRU: objects come in on probation, a hit on
//! probation promotes to the protected segment (80% of main), whose overflow is demoted back
//! to the front of probation; hits in a segment move the object to its front. While main has
//! room, window overflow moves to probation directly. Once the cache is full, an eviction
//! pits the window's LRU object (the candidate) against main's LRU object (the victim,
//! probation first): the [`Admission`] filter, TinyLFU by default, keeps the one with the
//! higher estimated recent frequency and the other leaves. Every request is recorded in the
//! filter. The window lets bursts of new objects build up frequency before they must win a
//! duel; the filter keeps one-hit wonders out of main.
//!
//! **Paper.** G. Einziger, R. Friedman, B. Manes, "TinyLFU: a highly efficient cache
//! admission policy", ACM Transactions on Storage 13(4), 2017 (W-TinyLFU, as in Caffeine,
//! without its adaptive window sizing).
//!
//! **Complexity.** `on_hit`, `on_insert`, `on_remove`, `evict`: O(1) (list moves and 4
//! sketch counters), plus the sketch's amortised O(1) aging.
//!
//! **Memory.** 24-byte node, one hash-table entry and about 2 bytes of sketch per resident:
//! 89.1 bytes per resident object, measured by `bench/sim`.

use crate::admission::{Admission, TinyLfu};
use crate::arena::{Arena, List};
use crate::hash::{id_map, IdMap};
use crate::{Capacity, ObjectId, Policy, PolicyConfig};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Segment {
    Window,
    Probation,
    Protected,
}

#[derive(Clone, Copy)]
struct Node {
    id: ObjectId,
    weight: u64,
    seg: Segment,
}

const WINDOW_SHARE: f64 = 0.01;
const PROTECTED_SHARE_OF_MAIN: f64 = 0.80;

/// Window TinyLFU over a segmented LRU; the admission filter is pluggable.
pub struct WTinyLfu<A: Admission = TinyLfu> {
    capacity: Capacity,
    nodes: Arena<Node>,
    lists: [List; 3],
    weights: [u64; 3],
    window_limit: u64,
    main_limit: u64,
    protected_limit: u64,
    index: IdMap<u32>,
    filter: A,
}

impl WTinyLfu<TinyLfu> {
    /// An empty W-TinyLFU with a TinyLFU filter sized from `config.capacity` (the object
    /// count, or 1 per KiB of a byte capacity; the filter grows with the resident count).
    pub fn new(config: &PolicyConfig) -> Self {
        let expected = match config.capacity {
            Capacity::Objects(n) => n,
            Capacity::Bytes(b) => b / 1024,
        };
        Self::with_filter(config, TinyLfu::new(expected.min(1 << 24) as usize))
    }
}

impl<A: Admission> WTinyLfu<A> {
    /// An empty W-TinyLFU using `filter` for the window-versus-main duels.
    pub fn with_filter(config: &PolicyConfig, filter: A) -> Self {
        let capacity = config.capacity;
        let window_limit = capacity.share(WINDOW_SHARE);
        let main_limit = capacity.limit().saturating_sub(window_limit);
        Self {
            capacity,
            nodes: Arena::new(),
            lists: [List::new(); 3],
            weights: [0; 3],
            window_limit,
            main_limit,
            protected_limit: (main_limit as f64 * PROTECTED_SHARE_OF_MAIN) as u64,
            index: id_map(),
            filter,
        }
    }

    fn link_front(&mut self, i: u32, seg: Segment) {
        let node = self.nodes.get_mut(i);
        node.seg = seg;
        self.weights[seg as usize] += node.weight;
        self.lists[seg as usize].push_front(&mut self.nodes, i);
    }

    fn unlink(&mut self, i: u32) {
        let Node { seg, weight, .. } = *self.nodes.get(i);
        self.weights[seg as usize] -= weight;
        self.lists[seg as usize].unlink(&mut self.nodes, i);
    }

    fn main_weight(&self) -> u64 {
        self.weights[Segment::Probation as usize] + self.weights[Segment::Protected as usize]
    }

    /// Main's eviction candidate: probation's LRU, else protected's.
    fn main_victim(&self) -> Option<u32> {
        self.lists[Segment::Probation as usize].back().or_else(|| self.lists[Segment::Protected as usize].back())
    }

    fn drop_node(&mut self, i: u32) -> ObjectId {
        self.unlink(i);
        let id = self.nodes.get(i).id;
        self.index.remove(&id);
        self.nodes.release(i);
        id
    }

    /// Moves window overflow to probation while main has room.
    fn spill_window(&mut self) {
        while self.weights[Segment::Window as usize] > self.window_limit {
            let Some(i) = self.lists[Segment::Window as usize].back() else {
                break;
            };
            if self.main_weight() + self.nodes.get(i).weight > self.main_limit {
                break;
            }
            self.unlink(i);
            self.link_front(i, Segment::Probation);
        }
    }

    /// Demotes protected overflow to the front of probation.
    fn demote_protected(&mut self) {
        while self.weights[Segment::Protected as usize] > self.protected_limit {
            let Some(i) = self.lists[Segment::Protected as usize].back() else {
                break;
            };
            self.unlink(i);
            self.link_front(i, Segment::Probation);
        }
    }
}

impl<A: Admission> Policy for WTinyLfu<A> {
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        self.filter.record(id);
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        let seg = match self.nodes.get(i).seg {
            Segment::Window => Segment::Window,
            Segment::Probation | Segment::Protected => Segment::Protected,
        };
        self.unlink(i);
        self.link_front(i, seg);
        if seg == Segment::Protected {
            self.demote_protected();
        }
    }

    fn on_insert(&mut self, id: ObjectId, size: u64) {
        self.filter.record(id);
        if self.index.contains_key(&id) {
            return;
        }
        let i = self.nodes.alloc(Node { id, weight: self.capacity.weight(size), seg: Segment::Window });
        self.index.insert(id, i);
        self.link_front(i, Segment::Window);
        self.filter.reserve(self.index.len());
        self.spill_window();
    }

    fn on_remove(&mut self, id: ObjectId) {
        if let Some(&i) = self.index.get(&id) {
            self.drop_node(i);
        }
    }

    fn evict(&mut self) -> Option<ObjectId> {
        let window_over = self.weights[Segment::Window as usize] > self.window_limit;
        let candidate = self.lists[Segment::Window as usize].back();
        let victim = self.main_victim();
        match (candidate, victim) {
            (Some(c), Some(v)) if window_over => {
                let (cid, vid) = (self.nodes.get(c).id, self.nodes.get(v).id);
                if self.filter.admit(cid, vid) {
                    self.unlink(c);
                    self.link_front(c, Segment::Probation);
                    Some(self.drop_node(v))
                } else {
                    Some(self.drop_node(c))
                }
            }
            (_, Some(v)) => Some(self.drop_node(v)),
            (Some(c), None) => Some(self.drop_node(c)),
            (None, None) => None,
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    #[test]
    fn a_scan_does_not_flush_the_hot_set() {
        // 50 hot ids requested 4 times each, then a scan of 1000 one-time ids interleaved
        // with the hot set; W-TinyLFU keeps the hot set, LRU loses it.
        let mut ids = Vec::new();
        for _ in 0..4 {
            ids.extend(0..50u64);
        }
        for i in 0..1000u64 {
            ids.push(1000 + i);
            if i % 20 == 0 {
                ids.extend(0..50u64);
            }
        }
        let cap = Capacity::Objects(60);
        let w = drive("w-tinylfu", cap, &unit(&ids)).hits;
        let lru = drive("lru", cap, &unit(&ids)).hits;
        assert!(w > lru + 1000, "w-tinylfu {w} hits vs lru {lru}");
    }
}
