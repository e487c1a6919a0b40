//! Admission: whether a newcomer may take a resident's place. Kept apart from eviction so
//! that any filter can sit in front of any policy; W-TinyLFU composes [`TinyLfu`] with a
//! segmented LRU.

mod tinylfu;

pub use tinylfu::TinyLfu;

use crate::ObjectId;

/// An admission filter: sees every request and judges candidate-versus-victim duels.
pub trait Admission: Send {
    /// Counts one request for `id`, hit or miss. Call it for every request the cache sees.
    fn record(&mut self, id: ObjectId);

    /// True when `candidate` should enter the cache at the expense of `victim`, false when
    /// the candidate should be dropped and the victim kept.
    fn admit(&mut self, candidate: ObjectId, victim: ObjectId) -> bool;

    /// Hint that the cache now holds `resident` objects, so that a frequency filter can grow
    /// to keep its error bounded. Default: nothing.
    fn reserve(&mut self, resident: usize) {
        let _ = resident;
    }
}
