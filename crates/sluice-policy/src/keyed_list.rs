//! A doubly linked list of object ids with an id index: the shared bookkeeping of list-ordered
//! policies (FIFO inserts at the front and evicts from the back; LRU also moves hits to the
//! front). Every operation is O(1): one hash lookup and a few index writes.

use crate::arena::{Arena, List};
use crate::hash::{id_map, IdMap};
use crate::ObjectId;

/// Resident ids in list order, front = most recently inserted (or used).
pub(crate) struct KeyedList {
    nodes: Arena<ObjectId>,
    list: List,
    index: IdMap<u32>,
}

impl KeyedList {
    pub(crate) fn new() -> Self {
        Self { nodes: Arena::new(), list: List::new(), index: id_map() }
    }

    /// Puts `id` at the front; an id already present keeps one node (moved to the front).
    #[inline]
    pub(crate) fn push_front(&mut self, id: ObjectId) {
        let i = self.nodes.alloc(id);
        if let Some(old) = self.index.insert(id, i) {
            // Protocol violation (insert of a resident): keep one node per id.
            self.list.unlink(&mut self.nodes, old);
            self.nodes.release(old);
        }
        self.list.push_front(&mut self.nodes, i);
    }

    /// Moves `id` to the front; unknown ids are ignored.
    #[inline]
    pub(crate) fn move_to_front(&mut self, id: ObjectId) {
        if let Some(&i) = self.index.get(&id) {
            self.list.move_to_front(&mut self.nodes, i);
        }
    }

    /// Removes `id`; unknown ids are ignored.
    pub(crate) fn remove(&mut self, id: ObjectId) {
        if let Some(i) = self.index.remove(&id) {
            self.list.unlink(&mut self.nodes, i);
            self.nodes.release(i);
        }
    }

    /// Removes and returns the id at the back.
    #[inline]
    pub(crate) fn pop_back(&mut self) -> Option<ObjectId> {
        let i = self.list.pop_back(&mut self.nodes)?;
        let id = *self.nodes.get(i);
        self.nodes.release(i);
        self.index.remove(&id);
        Some(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}
