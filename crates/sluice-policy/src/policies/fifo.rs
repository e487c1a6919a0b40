//! FIFO: evict the object that entered the cache first.
//!
//! **Algorithm.** Residents sit in one list in insertion order; hits change nothing, eviction
//! takes the oldest insert. Not a stack algorithm: a bigger FIFO cache can miss more on the
//! same trace (Belady's anomaly), which `sluice sim` reports when it happens.
//!
//! **Paper.** L. A. Belady, R. A. Nelson, G. S. Shedler, "An anomaly in space-time
//! characteristics of certain programs running in a paging machine", CACM 12(6), 1969.
//!
//! **Complexity.** `on_hit`: O(1) (nothing to do). `on_insert`, `on_remove`, `evict`: O(1).
//!
//! **Memory.** Same layout as LRU: 65.5 bytes per resident object, measured by
//! `bench/sim`.

use crate::keyed_list::KeyedList;
use crate::{ObjectId, Policy, PolicyConfig};

/// First in, first out.
pub struct Fifo {
    list: KeyedList,
}

impl Fifo {
    /// An empty FIFO; the configuration is not needed.
    pub fn new(_config: &PolicyConfig) -> Self {
        Self { list: KeyedList::new() }
    }
}

impl Policy for Fifo {
    #[inline]
    fn on_hit(&mut self, _id: ObjectId, _size: u64) {}

    #[inline]
    fn on_insert(&mut self, id: ObjectId, _size: u64) {
        self.list.push_front(id);
    }

    fn on_remove(&mut self, id: ObjectId) {
        self.list.remove(id);
    }

    #[inline]
    fn evict(&mut self) -> Option<ObjectId> {
        self.list.pop_back()
    }

    fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{drive, unit};
    use crate::Capacity;

    /// Belady's anomaly: 9 faults with 3 frames, 10 with 4.
    #[test]
    fn beladys_anomaly_on_the_classic_string() {
        let t = unit(&[1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]);
        assert_eq!(drive("fifo", Capacity::Objects(3), &t).hits, 3);
        assert_eq!(drive("fifo", Capacity::Objects(4), &t).hits, 2);
    }

    #[test]
    fn hits_do_not_reorder() {
        let run = drive("fifo", Capacity::Objects(2), &unit(&[1, 2, 1, 3, 4]));
        assert_eq!(run.victims, vec![1, 2]);
    }
}
