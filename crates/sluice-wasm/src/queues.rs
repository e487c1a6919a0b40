//! Shared queues (`proxy_register_shared_queue`, `proxy_resolve_shared_queue`,
//! `proxy_enqueue_shared_queue`, `proxy_dequeue_shared_queue`): named FIFO queues of byte
//! strings, shared by the instances of one plugin version (as shared data is).
//!
//! As in Envoy, registering a name that exists gives the same queue, and the context that
//! registered it last owns it: that context, in its instance, is told of new items with
//! `proxy_on_queue_ready` (`crate::queue_ready` delivers it, off the enqueuing thread). A
//! queue is told once per item enqueued, unless it is empty by then (a plugin that drains
//! the queue on the first notice gets no more notices for the items it took).
//!
//! A queue holds at most [`QUEUE_ITEMS`] items and [`QUEUE_BYTES`] bytes; past either, the
//! oldest items are dropped (counted in the plugin's `queue_items_dropped`). A plugin has
//! at most [`QUEUES`] queues.

use crate::abi::Status;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Most queues per plugin version.
pub(crate) const QUEUES: usize = 1024;
/// Most items one queue holds.
pub(crate) const QUEUE_ITEMS: usize = 10_000;
/// Most bytes one queue holds.
pub(crate) const QUEUE_BYTES: usize = 16 << 20;

/// Who is told of a queue's new items: a context of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueOwner {
    /// The instance (`HostState::instance`).
    pub instance: u64,
    /// The context that registered the queue.
    pub context: u32,
}

struct Queue {
    items: VecDeque<Bytes>,
    bytes: usize,
    owner: QueueOwner,
    /// Items enqueued whose notice has not been delivered yet.
    unnoticed: usize,
}

#[derive(Default)]
struct Registry {
    /// Queue ids by name; a queue's id is its index in `queues` plus one.
    ids: HashMap<Vec<u8>, u32>,
    queues: Vec<Queue>,
}

/// What an enqueue asks of the delivery: nothing (a notice of this queue is already on its
/// way), or a notice of queue `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Enqueued {
    NoticePending,
    Notice(u32),
}

/// The queues of one plugin version.
#[derive(Default)]
pub(crate) struct SharedQueues {
    registry: Mutex<Registry>,
}

impl SharedQueues {
    /// `proxy_register_shared_queue`: the id of queue `name` (made if new), now owned by
    /// `owner`. `InternalFailure` past [`QUEUES`].
    pub(crate) fn register(&self, name: &[u8], owner: QueueOwner) -> Result<u32, Status> {
        let mut registry = self.registry.lock();
        if let Some(&id) = registry.ids.get(name) {
            registry.queues[id as usize - 1].owner = owner;
            return Ok(id);
        }
        if registry.queues.len() >= QUEUES {
            return Err(Status::InternalFailure);
        }
        registry.queues.push(Queue { items: VecDeque::new(), bytes: 0, owner, unnoticed: 0 });
        let id = registry.queues.len() as u32;
        registry.ids.insert(name.to_vec(), id);
        Ok(id)
    }

    /// `proxy_resolve_shared_queue`: the id of queue `name`, if registered.
    pub(crate) fn resolve(&self, name: &[u8]) -> Option<u32> {
        self.registry.lock().ids.get(name).copied()
    }

    /// `proxy_enqueue_shared_queue`: appends `value` to queue `id` (dropping the oldest items
    /// past the limits: how many is returned too). `NotFound` for no such queue.
    pub(crate) fn enqueue(&self, id: u32, value: &[u8]) -> Result<(Enqueued, usize), Status> {
        let mut registry = self.registry.lock();
        let queue = queue_mut(&mut registry, id)?;
        queue.bytes += value.len();
        queue.items.push_back(Bytes::copy_from_slice(value));
        let mut dropped = 0;
        while queue.items.len() > QUEUE_ITEMS || (queue.bytes > QUEUE_BYTES && queue.items.len() > 1) {
            let oldest = queue.items.pop_front().expect("more than one item");
            queue.bytes -= oldest.len();
            dropped += 1;
        }
        queue.unnoticed += 1;
        let enqueued = if queue.unnoticed == 1 { Enqueued::Notice(id) } else { Enqueued::NoticePending };
        Ok((enqueued, dropped))
    }

    /// `proxy_dequeue_shared_queue`: the oldest item of queue `id`, `None` when empty.
    /// `NotFound` for no such queue.
    pub(crate) fn dequeue(&self, id: u32) -> Result<Option<Bytes>, Status> {
        let mut registry = self.registry.lock();
        let queue = queue_mut(&mut registry, id)?;
        let item = queue.items.pop_front();
        if let Some(item) = &item {
            queue.bytes -= item.len();
        }
        Ok(item)
    }

    /// The next notice to deliver for queue `id`: its owner, while items wait and notices are
    /// owed; `None` ends the delivery (and forgets the notices owed to an empty queue).
    pub(crate) fn next_notice(&self, id: u32) -> Option<QueueOwner> {
        let mut registry = self.registry.lock();
        let queue = queue_mut(&mut registry, id).ok()?;
        if queue.items.is_empty() || queue.unnoticed == 0 {
            queue.unnoticed = 0;
            return None;
        }
        queue.unnoticed -= 1;
        Some(queue.owner)
    }
}

fn queue_mut(registry: &mut Registry, id: u32) -> Result<&mut Queue, Status> {
    let index = (id as usize).checked_sub(1).ok_or(Status::NotFound)?;
    registry.queues.get_mut(index).ok_or(Status::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: QueueOwner = QueueOwner { instance: 1, context: 1 };
    const B: QueueOwner = QueueOwner { instance: 2, context: 1 };

    #[test]
    fn a_name_registered_again_is_the_same_queue_with_the_last_owner() {
        let queues = SharedQueues::default();
        let id = queues.register(b"events", A).unwrap();
        assert_eq!(queues.register(b"events", B), Ok(id));
        assert_ne!(queues.register(b"other", A), Ok(id));
        assert_eq!((queues.resolve(b"events"), queues.resolve(b"none")), (Some(id), None));
        assert_eq!(queues.enqueue(id, b"x").unwrap().0, Enqueued::Notice(id));
        assert_eq!(queues.next_notice(id), Some(B));
    }

    #[test]
    fn items_come_out_in_order_and_notices_stop_when_the_queue_is_empty() {
        let queues = SharedQueues::default();
        let id = queues.register(b"q", A).unwrap();
        assert_eq!(queues.enqueue(id, b"1"), Ok((Enqueued::Notice(id), 0)));
        assert_eq!(queues.enqueue(id, b"2"), Ok((Enqueued::NoticePending, 0)));
        assert_eq!(queues.enqueue(id, b"3"), Ok((Enqueued::NoticePending, 0)));
        // One notice per item while items wait ...
        assert_eq!(queues.next_notice(id), Some(A));
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(queues.next_notice(id), Some(A));
        // ... and none once the plugin took the rest.
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"3"[..]));
        assert_eq!(queues.dequeue(id), Ok(None));
        assert_eq!(queues.next_notice(id), None);
        // The next item asks for a notice again.
        assert_eq!(queues.enqueue(id, b"4"), Ok((Enqueued::Notice(id), 0)));
    }

    #[test]
    fn unknown_ids_are_not_found_and_full_queues_drop_their_oldest() {
        let queues = SharedQueues::default();
        assert_eq!(queues.enqueue(0, b"x"), Err(Status::NotFound));
        assert_eq!(queues.dequeue(7), Err(Status::NotFound));
        let id = queues.register(b"q", A).unwrap();
        for i in 0..QUEUE_ITEMS {
            queues.enqueue(id, i.to_string().as_bytes()).unwrap();
        }
        assert_eq!(queues.enqueue(id, b"last").unwrap().1, 1);
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"1"[..]));
        let big = vec![0u8; QUEUE_BYTES];
        assert_eq!(queues.enqueue(id, &big).unwrap().1, QUEUE_ITEMS - 1, "all but the big one dropped");
        assert_eq!(queues.dequeue(id).unwrap().map(|item| item.len()), Some(QUEUE_BYTES));
    }

    #[test]
    fn a_plugin_has_a_bounded_number_of_queues() {
        let queues = SharedQueues::default();
        for i in 0..QUEUES {
            queues.register(i.to_string().as_bytes(), A).unwrap();
        }
        assert_eq!(queues.register(b"one more", A), Err(Status::InternalFailure));
        assert!(queues.register(b"7", A).is_ok(), "existing names still register");
    }
}
