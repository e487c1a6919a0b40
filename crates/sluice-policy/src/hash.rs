//! The id-keyed hash map every policy uses, and the store's maps by id.
//!
//! Ids are already well spread (trace ids, or hashes of cache keys chosen by the store), so a
//! single folded multiply is enough mixing and is several times faster than SipHash.
//!
//! The multiply starts from a seed drawn once per process. In a proxy the ids derive from
//! URLs that clients choose, by fixed functions (the disk tier's must stay the same across
//! restarts): with a fixed seed as well, a client could compute URLs whose ids all fall into
//! the same buckets, and turn every map operation into a scan. No policy depends on a map's
//! iteration order (the maps index arenas, lists and heaps that keep the order), so
//! simulations stay reproducible.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use crate::ObjectId;

/// A map keyed by [`ObjectId`] with the cheap hasher below.
pub type IdMap<V> = HashMap<ObjectId, V, BuildHasherDefault<IdHasher>>;

/// Creates an empty [`IdMap`].
pub fn id_map<V>() -> IdMap<V> {
    IdMap::default()
}

/// Folded-multiply hasher for `u64` keys (other input falls back to the same mix per byte),
/// from this process's seed.
#[derive(Clone, Copy)]
pub struct IdHasher(u64);

impl Default for IdHasher {
    #[inline]
    fn default() -> Self {
        Self(*PROCESS_SEED)
    }
}

/// Drawn from the operating system's randomness once per process (std's `RandomState`).
static PROCESS_SEED: LazyLock<u64> = LazyLock::new(|| {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
});

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED: u64 = 0x243f_6a88_85a3_08d3;

/// Mixes `x` into 64 well-distributed bits (high and low halves of a 128-bit product).
#[inline]
pub(crate) fn mix(x: u64) -> u64 {
    let p = u128::from(x ^ SEED) * u128::from(MUL);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = mix(self.0 ^ x);
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn an_id_hashes_the_same_within_the_process_and_not_as_the_bare_mix() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let id: ObjectId = 0x1234_5678_9abc_def0;
        assert_eq!(build.hash_one(id), build.hash_one(id));
        // The seed enters the hash: the unseeded mix would let anyone compute bucket positions.
        assert_ne!(build.hash_one(id), mix(id), "fails only if the random seed is 0");
        let mut map = id_map();
        map.insert(id, "a");
        assert_eq!(map.get(&id), Some(&"a"));
    }
}
