//! Intrusive doubly linked lists whose nodes live in one `Vec` and link by `u32` index.
//!
//! One [`Arena`] can hold several [`List`]s (ARC's four, S3-FIFO's three); a node is in at
//! most one list at a time. Freed slots are chained through `next` and reused, so a policy in
//! steady state never allocates. Indices are `u32`: a policy holds fewer than 2^32 - 1 nodes.

/// Marks "no node" in links and list ends.
pub(crate) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node<T> {
    prev: u32,
    next: u32,
    val: T,
}

/// Slots for list nodes carrying a `T` each.
pub(crate) struct Arena<T> {
    nodes: Vec<Node<T>>,
    free: u32,
}

impl<T: Copy> Arena<T> {
    pub(crate) fn new() -> Self {
        Self { nodes: Vec::new(), free: NIL }
    }

    /// Stores `val` in an unlinked node and returns its index. O(1) amortised.
    #[inline]
    pub(crate) fn alloc(&mut self, val: T) -> u32 {
        let node = Node { prev: NIL, next: NIL, val };
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            let i = u32::try_from(self.nodes.len()).expect("more than 2^32 - 1 policy nodes");
            self.nodes.push(node);
            i
        }
    }

    /// Returns node `i` (already unlinked from its list) to the free chain. O(1).
    #[inline]
    pub(crate) fn release(&mut self, i: u32) {
        self.nodes[i as usize].next = self.free;
        self.free = i;
    }

    #[inline]
    pub(crate) fn get(&self, i: u32) -> &T {
        &self.nodes[i as usize].val
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.nodes[i as usize].val
    }

    /// The node before `i` (towards the list's front), or [`NIL`].
    #[inline]
    pub(crate) fn prev(&self, i: u32) -> u32 {
        self.nodes[i as usize].prev
    }

    /// The node after `i` (towards the list's back), or [`NIL`].
    #[inline]
    pub(crate) fn next(&self, i: u32) -> u32 {
        self.nodes[i as usize].next
    }
}

/// One list threaded through an [`Arena`]: front is the most recent end by convention.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    pub(crate) const fn new() -> Self {
        Self { head: NIL, tail: NIL, len: 0 }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// First (most recent) node or `None`.
    #[inline]
    pub(crate) fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// Last (oldest) node or `None`.
    #[inline]
    pub(crate) fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Links unlinked node `i` at the front. O(1).
    #[inline]
    pub(crate) fn push_front<T>(&mut self, a: &mut Arena<T>, i: u32) {
        let n = &mut a.nodes[i as usize];
        n.prev = NIL;
        n.next = self.head;
        if self.head != NIL {
            a.nodes[self.head as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    /// Links unlinked node `i` right after `anchor` (which is in this list). O(1).
    #[inline]
    pub(crate) fn insert_after<T>(&mut self, a: &mut Arena<T>, anchor: u32, i: u32) {
        let after = a.nodes[anchor as usize].next;
        {
            let n = &mut a.nodes[i as usize];
            n.prev = anchor;
            n.next = after;
        }
        a.nodes[anchor as usize].next = i;
        if after != NIL {
            a.nodes[after as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.len += 1;
    }

    /// Unlinks node `i`, which must be in this list. O(1).
    #[inline]
    pub(crate) fn unlink<T>(&mut self, a: &mut Arena<T>, i: u32) {
        let Node { prev, next, .. } = a.nodes[i as usize];
        if prev != NIL {
            a.nodes[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            a.nodes[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
        self.len -= 1;
    }

    /// Moves node `i` (in this list) to the front. O(1).
    #[inline]
    pub(crate) fn move_to_front<T>(&mut self, a: &mut Arena<T>, i: u32) {
        if self.head != i {
            self.unlink(a, i);
            self.push_front(a, i);
        }
    }

    /// Unlinks and returns the last node. O(1).
    #[inline]
    pub(crate) fn pop_back<T>(&mut self, a: &mut Arena<T>) -> Option<u32> {
        let i = self.back()?;
        self.unlink(a, i);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(l: &List, a: &Arena<u64>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut i = l.front().unwrap_or(NIL);
        while i != NIL {
            out.push(*a.get(i));
            i = a.next(i);
        }
        out
    }

    #[test]
    fn push_unlink_move_and_reuse_slots() {
        let mut a = Arena::new();
        let mut l = List::new();
        let ids: Vec<u32> = (0..4).map(|v| a.alloc(v)).collect();
        for &i in &ids {
            l.push_front(&mut a, i);
        }
        assert_eq!(collect(&l, &a), vec![3, 2, 1, 0]);
        l.move_to_front(&mut a, ids[0]);
        assert_eq!(collect(&l, &a), vec![0, 3, 2, 1]);
        l.unlink(&mut a, ids[2]);
        a.release(ids[2]);
        assert_eq!(collect(&l, &a), vec![0, 3, 1]);
        let nine = a.alloc(9);
        assert_eq!(nine, ids[2], "the freed slot is reused");
        l.insert_after(&mut a, ids[1], nine);
        assert_eq!(collect(&l, &a), vec![0, 3, 1, 9]);
        assert_eq!(l.pop_back(&mut a).map(|i| *a.get(i)), Some(9));
        assert_eq!(l.len(), 3);
        assert_eq!(a.nodes.len(), 4);
    }
}
