//! The id-keyed hash map every policy uses.
//!
//! Ids are already well spread (trace ids, or hashes of cache keys chosen by the store), so a
//! single folded multiply is enough mixing and is several times faster than SipHash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::ObjectId;

/// A map keyed by [`ObjectId`] with the cheap hasher below.
pub(crate) type IdMap<V> = HashMap<ObjectId, V, BuildHasherDefault<IdHasher>>;

/// Creates an empty [`IdMap`].
pub(crate) fn id_map<V>() -> IdMap<V> {
    IdMap::default()
}

/// Folded-multiply hasher for `u64` keys (other input falls back to the same mix per byte).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

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
