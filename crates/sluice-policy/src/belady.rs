//! Belady's offline optimum and a byte-aware heuristic. Both need the future (each request's
//! next use), so they run in the simulator only and are not [`crate::Policy`]s.
//!
//! **Algorithm ([`Belady`]).** On a miss, if the requested object is never requested again
//! it is not cached (bypass). Otherwise, while it does not fit, compare it with the resident
//! whose next use is furthest away: if that resident is needed later than the newcomer, it is
//! evicted, else the newcomer is bypassed. With every object weighing 1 (an object-count
//! capacity, or unit sizes) this is exactly the optimum (Belady's MIN, with the bypass a
//! proxy is allowed), so it bounds every policy from below. With varying sizes under a byte
//! capacity it is only a heuristic (optimal byte-aware caching is NP-hard).
//!
//! **Algorithm ([`BeladySize`], a heuristic, not an optimum).** Under a byte capacity, evict
//! first the residents that are never requested again; then, from 64 residents sampled with
//! a seeded generator, the one with the largest `size × time to next use`, unless the
//! newcomer scores higher, in which case it is bypassed. This is the "Belady-size" heuristic
//! used as a reference in the caching literature.
//!
//! **Paper.** L. A. Belady, "A study of replacement algorithms for a virtual-storage
//! computer", IBM Systems Journal 5(2), 1966; R. L. Mattson et al., IBM Systems Journal 9(2),
//! 1970 (optimality of MIN); Z. Song et al., "Learning relaxed Belady for content
//! distribution network caching", NSDI 2020 (Belady-size).
//!
//! **Complexity.** [`Belady::access`]: O(log n) (indexed heap by next use).
//! [`BeladySize::access`]: O(1) for hits, O(64) per eviction.

use std::cmp::Reverse;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::hash::{id_map, IdMap};
use crate::heap::IndexedHeap;
use crate::{Capacity, ObjectId, PolicyConfig};

/// One request as an oracle sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FutureRequest {
    /// Position of this request in the trace (0-based).
    pub now: u64,
    /// The object requested.
    pub id: ObjectId,
    /// Its size in bytes.
    pub size: u64,
    /// Position of the next request for the same object, `None` if there is none.
    pub next: Option<u64>,
}

/// An offline policy: it serves requests knowing when each object is next needed, and does
/// its own capacity accounting (it may decline to cache an object).
pub trait Oracle: Send {
    /// Serves `req`; true on a hit. Requests must come in trace order.
    fn access(&mut self, req: FutureRequest) -> bool;
    /// Number of resident objects.
    fn len(&self) -> usize;
    /// True when nothing is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const NEVER: u64 = u64::MAX;

/// Furthest-next-use eviction with bypass: the exact optimum for unit weights.
pub struct Belady {
    capacity: Capacity,
    used: u64,
    /// Min-heap on (Reverse(next use), id): the top is needed furthest in the future.
    /// Payload: the resident's weight.
    heap: IndexedHeap<(Reverse<u64>, ObjectId), u64>,
}

impl Belady {
    /// An empty cache of `config.capacity`.
    pub fn new(config: &PolicyConfig) -> Self {
        Self { capacity: config.capacity, used: 0, heap: IndexedHeap::new() }
    }
}

impl Oracle for Belady {
    fn access(&mut self, req: FutureRequest) -> bool {
        let next = req.next.unwrap_or(NEVER);
        if let Some((_, weight)) = self.heap.get(req.id) {
            self.heap.set(req.id, (Reverse(next), req.id), weight);
            return true;
        }
        let weight = self.capacity.weight(req.size);
        if next == NEVER || weight > self.capacity.limit() {
            return false;
        }
        while self.used + weight > self.capacity.limit() {
            let Some((victim, (Reverse(victim_next), _))) = self.heap.peek() else {
                break;
            };
            if victim_next <= next {
                return false; // every resident is needed sooner than the newcomer
            }
            if let Some(w) = self.heap.get(victim).map(|(_, w)| w) {
                self.used -= w;
            }
            self.heap.remove(victim);
        }
        self.used += weight;
        self.heap.set(req.id, (Reverse(next), req.id), weight);
        false
    }

    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[derive(Clone, Copy)]
struct Resident {
    id: ObjectId,
    weight: u64,
    next: u64,
}

/// Residents sampled per eviction by [`BeladySize`].
const SAMPLE: usize = 64;

/// Byte-aware Belady-size heuristic (sampled `size × time to next use`). Not an optimum.
pub struct BeladySize {
    capacity: Capacity,
    used: u64,
    residents: Vec<Resident>,
    index: IdMap<u32>,
    /// Residents that are never requested again (evicted first).
    dead: Vec<ObjectId>,
    rng: ChaCha8Rng,
}

impl BeladySize {
    /// An empty cache of `config.capacity`, sampling from `config.seed`.
    pub fn new(config: &PolicyConfig) -> Self {
        Self {
            capacity: config.capacity,
            used: 0,
            residents: Vec::new(),
            index: id_map(),
            dead: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
        }
    }

    fn remove(&mut self, id: ObjectId) {
        let Some(pos) = self.index.remove(&id) else {
            return;
        };
        let r = self.residents.swap_remove(pos as usize);
        self.used -= r.weight;
        if let Some(moved) = self.residents.get(pos as usize) {
            self.index.insert(moved.id, pos);
        }
    }

    /// The sampled resident with the highest score and that score.
    fn worst_sampled(&mut self, now: u64) -> Option<(ObjectId, u128)> {
        let n = self.residents.len();
        let score = |r: &Resident| u128::from(r.weight.max(1)) * u128::from(r.next - now);
        if n <= SAMPLE {
            return self.residents.iter().map(|r| (r.id, score(r))).max_by_key(|&(_, s)| s);
        }
        (0..SAMPLE)
            .map(|_| {
                let r = &self.residents[self.rng.gen_range(0..n)];
                (r.id, score(r))
            })
            .max_by_key(|&(_, s)| s)
    }
}

impl Oracle for BeladySize {
    fn access(&mut self, req: FutureRequest) -> bool {
        let next = req.next.unwrap_or(NEVER);
        if let Some(&pos) = self.index.get(&req.id) {
            self.residents[pos as usize].next = next;
            if next == NEVER {
                self.dead.push(req.id);
            }
            return true;
        }
        let weight = self.capacity.weight(req.size);
        if next == NEVER || weight > self.capacity.limit() {
            return false;
        }
        let own_score = u128::from(weight.max(1)) * u128::from(next - req.now);
        while self.used + weight > self.capacity.limit() {
            if let Some(id) = self.dead.pop() {
                self.remove(id);
                continue;
            }
            let Some((victim, score)) = self.worst_sampled(req.now) else {
                break;
            };
            if score <= own_score {
                return false;
            }
            self.remove(victim);
        }
        self.index.insert(req.id, self.residents.len() as u32);
        self.residents.push(Resident { id: req.id, weight, next });
        self.used += weight;
        false
    }

    fn len(&self) -> usize {
        self.residents.len()
    }
}

/// The next-use position of every request of a trace given as object ids: `result[i]` is
/// the index of the next request for `ids[i]`, or `None`. O(n) time, O(distinct) memory.
pub fn next_uses(ids: impl DoubleEndedIterator<Item = ObjectId> + ExactSizeIterator) -> Vec<Option<u64>> {
    let n = ids.len();
    let mut out = vec![None; n];
    let mut seen: IdMap<u64> = id_map();
    for (i, id) in ids.rev().enumerate() {
        let pos = (n - 1 - i) as u64;
        out[pos as usize] = seen.insert(id, pos);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(oracle: &mut dyn Oracle, ids: &[u64]) -> usize {
        let next = next_uses(ids.iter().copied());
        ids.iter()
            .enumerate()
            .filter(|&(i, &id)| oracle.access(FutureRequest { now: i as u64, id, size: 1, next: next[i] }))
            .count()
    }

    #[test]
    fn next_uses_points_at_the_following_request() {
        assert_eq!(next_uses([1u64, 2, 1, 3, 2].into_iter()), vec![Some(2), Some(4), None, None, None]);
    }

    #[test]
    fn belady_hand_checked() {
        // Capacity 2. Trace a b c a b c a b: MIN keeps a and b, bypasses c; hits: a(3) b(4)
        // a(6) b(7) = 4, and the c requests are misses.
        let ids = [1, 2, 3, 1, 2, 3, 1, 2];
        let mut b = Belady::new(&PolicyConfig::new(Capacity::Objects(2)));
        assert_eq!(run(&mut b, &ids), 4);
        let mut s = BeladySize::new(&PolicyConfig::new(Capacity::Bytes(2)));
        assert_eq!(run(&mut s, &ids), 4);
    }
}
