//! LRU: evict the least recently used object.
//!
//! **Algorithm.** Residents sit in one list ordered by last use. A hit moves the object to the
//! front, an insert puts it at the front, eviction takes the back. It is a stack algorithm:
//! a bigger cache always holds a superset, so its miss ratio never rises with size.
//!
//! **Paper.** The classic paging policy; analysed in R. L. Mattson, J. Gecsei, D. R. Slutz,
//! I. L. Traiger, "Evaluation techniques for storage hierarchies", IBM Systems Journal 9(2),
//! 1970 (stack algorithms).
//!
//! **Complexity.** `on_hit`, `on_insert`, `on_remove`, `evict`: O(1) (one hash lookup and a
//! few index writes; `on_insert` amortised for table growth).
//!
//! **Memory.** 16-byte list node plus one hash-table entry: 65.5 bytes per resident
//! object, measured by `bench/sim` (see `docs/sim.md`).

use crate::keyed_list::KeyedList;
use crate::{ObjectId, Policy, PolicyConfig};

/// Least recently used.
pub struct Lru {
    list: KeyedList,
}

impl Lru {
    /// An empty LRU; the configuration is not needed (the caller enforces capacity).
    pub fn new(_config: &PolicyConfig) -> Self {
        Self { list: KeyedList::new() }
    }
}

impl Policy for Lru {
    #[inline]
    fn on_hit(&mut self, id: ObjectId, _size: u64) {
        self.list.move_to_front(id);
    }

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

    /// Belady's 1969 reference string: LRU takes 10 faults with 3 frames and 8 with 4.
    #[test]
    fn classic_reference_string() {
        let t = unit(&[1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]);
        assert_eq!(drive("lru", Capacity::Objects(3), &t).hits, 2);
        assert_eq!(drive("lru", Capacity::Objects(4), &t).hits, 4);
    }

    #[test]
    fn evicts_least_recent() {
        let run = drive("lru", Capacity::Objects(2), &unit(&[1, 2, 1, 3, 2]));
        assert_eq!(run.victims, vec![2, 1]);
    }
}
