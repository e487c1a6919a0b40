//! Replacement policies (one file each) behind one trait, and one registry table.
//!
//! Policies are pure: no I/O and no clock. The store and `sluice sim` drive them the same way:
//!
//! ```text
//! lookup(id):  resident? -> policy.on_hit(id, size)
//!              else      -> policy.on_miss(id, size)            (optional, see below)
//!                           (admission?) then, while used + weight(size) > capacity:
//!                               victim = policy.evict(); drop victim
//!                           policy.on_insert(id, size)
//! external removal (purge, expiry, replaced body): policy.on_remove(id)
//! ```
//!
//! The caller owns capacity accounting (bytes or object count, see [`Capacity`]); a policy
//! only orders residents and may keep ghost history of its own. Policies that size internal
//! queues (S3-FIFO, ARC, W-TinyLFU) read the same [`Capacity`] from their [`PolicyConfig`], so
//! the caller must account with [`Capacity::weight`].
//!
//! Build a policy by name with [`build`]; [`names`] lists what [`build`] accepts. Belady's
//! offline optimum needs the future and so is not a [`Policy`]: see [`belady`].

mod arena;
mod capacity;
mod hash;
mod heap;
mod keyed_list;
mod registry;
#[cfg(test)]
mod testutil;

pub mod admission;
pub mod belady;
pub mod policies;

pub use capacity::{Capacity, PolicyConfig};
pub use hash::{id_map, IdHasher, IdMap};
pub use registry::{build, describe, names, PolicyInfo, UnknownPolicy, POLICIES};

/// Identifies one object to a policy. The store maps its keys to ids; the simulator uses
/// the trace's object ids.
pub type ObjectId = u64;

/// A replacement policy. Implementations document the time complexity of each method.
pub trait Policy: Send {
    /// `id` (resident, `size` bytes) was requested again.
    fn on_hit(&mut self, id: ObjectId, size: u64);
    /// `id` (not resident) has just become resident with `size` bytes.
    fn on_insert(&mut self, id: ObjectId, size: u64);
    /// `id` left the cache for a reason other than [`Policy::evict`] (purge, expiry). Unknown
    /// ids are ignored.
    fn on_remove(&mut self, id: ObjectId);
    /// Chooses a resident object to evict and forgets it. `None` when nothing is resident.
    fn evict(&mut self) -> Option<ObjectId>;
    /// Number of resident objects the policy tracks.
    fn len(&self) -> usize;
    /// True when no object is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `id` (not resident) was requested; called once per miss, before the evictions made to
    /// fit it and whether or not it is then inserted.
    ///
    /// Default: nothing. ARC adapts its target on a ghost hit here, so that the evictions for
    /// this miss already use the new target (as in the paper); a caller that never calls it
    /// still gets a correct ARC whose adaptation lags by one miss.
    fn on_miss(&mut self, id: ObjectId, size: u64) {
        let _ = (id, size);
    }
}
