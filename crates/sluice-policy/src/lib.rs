//! Replacement policies (one file each) behind one trait, and one registry table.
//!
//! Policies are pure: no I/O and no clock. The store and `sluice sim` drive them the same way:
//!
//! ```text
//! lookup(id):  resident? -> policy.on_hit(id, size)
//!              else      -> (admission?) then, while used + size > capacity:
//!                               victim = policy.evict(); drop victim
//!                           policy.on_insert(id, size)
//! external removal (purge, expiry, replaced body): policy.on_remove(id)
//! ```
//!
//! The caller owns capacity accounting (bytes or object count); a policy only orders
//! residents and may keep ghost history of its own.

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
}
