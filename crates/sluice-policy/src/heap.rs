//! An indexed binary min-heap: priority-ordered residents with O(log n) update and removal
//! by id. Used by the policies that rank by a computed priority (MAXS, GDSF, LFU-DA) and by
//! Belady.

use crate::hash::{id_map, IdMap};
use crate::ObjectId;

#[derive(Clone, Copy)]
struct Slot<K, V> {
    key: K,
    val: V,
    id: ObjectId,
    /// Index of this slot in `heap`.
    pos: u32,
}

/// Min-heap of ids by key `K`, each carrying a payload `V`. Make `K` unique (callers append
/// a sequence number) so that ties are broken deterministically.
pub(crate) struct IndexedHeap<K, V = ()> {
    slots: Vec<Slot<K, V>>,
    free: Vec<u32>,
    heap: Vec<u32>,
    index: IdMap<u32>,
}

impl<K: Ord + Copy, V: Copy> IndexedHeap<K, V> {
    pub(crate) fn new() -> Self {
        Self { slots: Vec::new(), free: Vec::new(), heap: Vec::new(), index: id_map() }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// The key and payload of `id`, if present. O(1).
    pub(crate) fn get(&self, id: ObjectId) -> Option<(K, V)> {
        self.index.get(&id).map(|&s| {
            let slot = &self.slots[s as usize];
            (slot.key, slot.val)
        })
    }

    /// The smallest entry. O(1).
    pub(crate) fn peek(&self) -> Option<(ObjectId, K)> {
        self.heap.first().map(|&s| {
            let slot = &self.slots[s as usize];
            (slot.id, slot.key)
        })
    }

    /// Adds `id` with `key` and `val`, or replaces both if present. O(log n).
    pub(crate) fn set(&mut self, id: ObjectId, key: K, val: V) {
        if let Some(&s) = self.index.get(&id) {
            self.slots[s as usize].val = val;
            let old = std::mem::replace(&mut self.slots[s as usize].key, key);
            let pos = self.slots[s as usize].pos as usize;
            if key < old {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
            return;
        }
        let pos = self.heap.len() as u32;
        let slot = Slot { key, val, id, pos };
        let s = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = slot;
                s
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(id, s);
        self.heap.push(s);
        self.sift_up(pos as usize);
    }

    /// Removes and returns the smallest entry. O(log n).
    pub(crate) fn pop(&mut self) -> Option<(ObjectId, K)> {
        let (id, key) = self.peek()?;
        self.remove(id);
        Some((id, key))
    }

    /// Removes `id`; returns its key, or `None` when absent. O(log n).
    pub(crate) fn remove(&mut self, id: ObjectId) -> Option<K> {
        let s = self.index.remove(&id)?;
        let Slot { key, pos, .. } = self.slots[s as usize];
        let pos = pos as usize;
        let last = self.heap.len() - 1;
        self.heap.swap(pos, last);
        self.heap.pop();
        self.free.push(s);
        if pos < last {
            self.slots[self.heap[pos] as usize].pos = pos as u32;
            self.sift_down(pos);
            self.sift_up(pos);
        }
        Some(key)
    }

    #[inline]
    fn key_at(&self, pos: usize) -> K {
        self.slots[self.heap[pos] as usize].key
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.slots[self.heap[a] as usize].pos = a as u32;
        self.slots[self.heap[b] as usize].pos = b as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.key_at(pos) >= self.key_at(parent) {
                break;
            }
            self.swap(pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.key_at(right) < self.key_at(left) { right } else { left };
            if self.key_at(child) >= self.key_at(pos) {
                break;
            }
            self.swap(pos, child);
            pos = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_key_order_after_updates_and_removals() {
        let mut h = IndexedHeap::new();
        for (id, key) in [(1, 50), (2, 10), (3, 40), (4, 30), (5, 20)] {
            h.set(id, key, ());
        }
        h.set(3, 5, ()); // decrease
        h.set(2, 60, ()); // increase
        assert_eq!(h.remove(4), Some(30));
        assert_eq!(h.remove(4), None);
        assert!(h.get(1).is_some() && h.get(4).is_none());
        assert_eq!(h.get(5), Some((20, ())));
        let order: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(order, vec![(3, 5), (5, 20), (1, 50), (2, 60)]);
        assert_eq!(h.len(), 0);
    }
}
