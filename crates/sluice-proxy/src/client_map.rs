//! Per-client state kept in a map sharded by a keyed hash, shared by the request rate limits
//! (`crate::rate_limit`) and the count of each client's requests in progress
//! (`crate::in_flight`). A client is its address, an IPv6 client its /64 (one subscriber's
//! network, which it may otherwise hop around in); IPv4-mapped IPv6 addresses are IPv4.
//!
//! foldhash rather than SipHash: a lookup per request, keyed by short addresses; its
//! per-process random seed keeps collisions out of a client's reach.

use parking_lot::{Mutex, MutexGuard};
use std::hash::BuildHasher;
use std::net::IpAddr;

/// Shards of a [`ClientMap`]: requests of different clients rarely wait on one lock.
pub const SHARDS: usize = 16;

/// A shard of a [`ClientMap`]: the clients whose key hashes to it.
pub type Shard<V> = foldhash::HashMap<IpAddr, V>;

/// Per-client values, sharded.
#[derive(Debug)]
pub struct ClientMap<V> {
    shards: [Mutex<Shard<V>>; SHARDS],
    /// Picks the shard (the maps' own hashers pick the slot).
    hasher: foldhash::fast::RandomState,
}

impl<V> Default for ClientMap<V> {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::new(Shard::default())),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<V> ClientMap<V> {
    /// The key of the client at `ip` (see the module documentation).
    pub fn key(ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
            v4 => v4,
        }
    }

    /// The shard of `key` (a client's [`ClientMap::key`]), locked.
    pub fn lock(&self, key: IpAddr) -> MutexGuard<'_, Shard<V>> {
        self.shards[self.hasher.hash_one(key) as usize % SHARDS].lock()
    }

    /// Clients held, over all shards.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }
}
