//! Shared queues (`proxy_register_shared_queue`, `proxy_resolve_shared_queue`,
//! `proxy_enqueue_shared_queue`, `proxy_dequeue_shared_queue`): named FIFO queues of byte
//! strings, one registry for the whole process ([`registry`]), as in Envoy.
//!
//! A queue is named by a VM id (a plugin's `plugin_vm_id`: its module name) and a name: a
//! plugin registers queues under its own VM id, and any plugin can resolve them by that id
//! and name, so filters can feed a plugin running as a singleton service (Envoy's pattern).
//! Registering a name that exists gives the same queue (with the items it holds, also across
//! a reload of the plugin), and the context that registered it last owns it: that context,
//! in its instance, is told of new items with `proxy_on_queue_ready` (`crate::delivery`
//! delivers it, off the enqueuing thread). A queue is told once per item enqueued, unless it
//! is empty by then (a plugin that drains the queue on the first notice gets no more notices
//! for the items it took).
//!
//! The queues of a VM id belong to the plugin of that name: unloading it frees them
//! ([`SharedQueues::remove_vm`]; their ids are not given out again, so a plugin still
//! holding one gets `NotFound`).
//!
//! A queue holds at most [`QUEUE_ITEMS`] items and [`QUEUE_BYTES`] bytes; past either, the
//! oldest items are dropped (counted in the enqueuing plugin's `queue_items_dropped`). An
//! item over [`QUEUE_BYTES`] is refused (`BadArgument`), as is a queue name over
//! [`QUEUE_NAME_BYTES`]. The process has at most [`QUEUES`] queues, one VM id at most
//! [`VM_QUEUES`] (past either, registering is `InternalFailure`).

use crate::abi::Status;
use crate::delivery::Delivery;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Weak};

/// Most queues in the process.
pub(crate) const QUEUES: usize = 4096;
/// Most queues of one VM id (one plugin), so that one plugin cannot take them all.
pub(crate) const VM_QUEUES: usize = 1024;
/// Longest queue name.
pub(crate) const QUEUE_NAME_BYTES: usize = 1 << 10;
/// Most items one queue holds.
pub(crate) const QUEUE_ITEMS: usize = 10_000;
/// Most bytes one queue holds (and so the largest item).
pub(crate) const QUEUE_BYTES: usize = 16 << 20;

/// The process's queues.
pub(crate) fn registry() -> &'static SharedQueues {
    static QUEUES: LazyLock<SharedQueues> = LazyLock::new(SharedQueues::default);
    &QUEUES
}

/// Who is told of a queue's new items: a context of one instance, through its plugin
/// version's delivery (gone with that version: the notices then wait for a new owner).
#[derive(Debug, Clone)]
pub(crate) struct QueueOwner {
    /// The instance (`HostState::instance`).
    pub instance: u64,
    /// The context that registered the queue.
    pub context: u32,
    /// The delivery of the instance's plugin version.
    pub delivery: Weak<Delivery>,
}

/// What the delivery of a plugin version does next for a queue (see
/// [`SharedQueues::next_notice`]).
#[derive(Debug)]
pub(crate) enum NextNotice {
    /// Tell this owner, one of the version's own.
    Deliver(QueueOwner),
    /// The queue changed hands to another version's context: its delivery takes over.
    Elsewhere(Weak<Delivery>),
    /// Nothing owed, or nothing left to take.
    Done,
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
    /// Queue ids by VM id and name.
    ids: HashMap<(Vec<u8>, Vec<u8>), u32>,
    queues: HashMap<u32, Queue>,
    /// How many queues each VM id has.
    per_vm: HashMap<Vec<u8>, usize>,
    /// The last id given out (ids are not reused while the counter does not wrap).
    last_id: u32,
}

impl Registry {
    /// An id no queue has (never `0`).
    fn fresh_id(&mut self) -> u32 {
        loop {
            self.last_id = self.last_id.wrapping_add(1);
            if self.last_id != 0 && !self.queues.contains_key(&self.last_id) {
                return self.last_id;
            }
        }
    }
}

/// What an enqueue asks of the delivery: nothing (a notice of this queue is already on its
/// way), or a notice of the queue to the owner's delivery.
#[derive(Debug, Clone)]
pub(crate) enum Enqueued {
    NoticePending,
    Notice(Weak<Delivery>),
}

/// A registry of queues ([`registry`] is the process's).
#[derive(Default)]
pub(crate) struct SharedQueues {
    registry: Mutex<Registry>,
}

impl SharedQueues {
    /// `proxy_register_shared_queue`: the id of queue `name` of `vm_id` (made if new), now
    /// owned by `owner`, and whether notices are owed to it (items that came while the last
    /// owner's plugin version was gone). `BadArgument` for a name over
    /// [`QUEUE_NAME_BYTES`]; `InternalFailure` for a new queue past [`QUEUES`] or, for
    /// `vm_id`, [`VM_QUEUES`].
    pub(crate) fn register(&self, vm_id: &[u8], name: &[u8], owner: QueueOwner) -> Result<(u32, bool), Status> {
        if name.len() > QUEUE_NAME_BYTES {
            return Err(Status::BadArgument);
        }
        let mut registry = self.registry.lock();
        let key = (vm_id.to_vec(), name.to_vec());
        if let Some(&id) = registry.ids.get(&key) {
            let queue = queue_mut(&mut registry, id)?;
            queue.owner = owner;
            return Ok((id, queue.unnoticed > 0 && !queue.items.is_empty()));
        }
        let of_vm = registry.per_vm.get(vm_id).copied().unwrap_or(0);
        if registry.queues.len() >= QUEUES || of_vm >= VM_QUEUES {
            return Err(Status::InternalFailure);
        }
        let id = registry.fresh_id();
        registry.queues.insert(id, Queue { items: VecDeque::new(), bytes: 0, owner, unnoticed: 0 });
        registry.ids.insert(key, id);
        *registry.per_vm.entry(vm_id.to_vec()).or_default() += 1;
        Ok((id, false))
    }

    /// Frees every queue of `vm_id` (its plugin was unloaded), items and all; returns how
    /// many.
    pub(crate) fn remove_vm(&self, vm_id: &[u8]) -> usize {
        let mut registry = self.registry.lock();
        let Registry { ids, queues, per_vm, .. } = &mut *registry;
        let before = queues.len();
        ids.retain(|(vm, _), id| {
            let keep = vm.as_slice() != vm_id;
            if !keep {
                queues.remove(id);
            }
            keep
        });
        per_vm.remove(vm_id);
        before - queues.len()
    }

    /// `proxy_resolve_shared_queue`: the id of queue `name` of `vm_id`, if registered.
    pub(crate) fn resolve(&self, vm_id: &[u8], name: &[u8]) -> Option<u32> {
        self.registry.lock().ids.get(&(vm_id.to_vec(), name.to_vec())).copied()
    }

    /// `proxy_enqueue_shared_queue`: appends `value` to queue `id` (dropping the oldest items
    /// past the limits: how many is returned too); a notice owed goes to the owner's
    /// delivery. `NotFound` for no such queue, `BadArgument` for an item over
    /// [`QUEUE_BYTES`].
    pub(crate) fn enqueue(&self, id: u32, value: &[u8]) -> Result<(Enqueued, usize), Status> {
        if value.len() > QUEUE_BYTES {
            return Err(Status::BadArgument);
        }
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
        let enqueued =
            if queue.unnoticed == 1 { Enqueued::Notice(queue.owner.delivery.clone()) } else { Enqueued::NoticePending };
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

    /// The next notice `delivery` (a plugin version's) is to deliver for queue `id`: its
    /// owner, while items wait and notices are owed; [`NextNotice::Done`] ends the delivery
    /// (and forgets the notices owed to an empty queue).
    pub(crate) fn next_notice(&self, id: u32, delivery: &Weak<Delivery>) -> NextNotice {
        let mut registry = self.registry.lock();
        let Ok(queue) = queue_mut(&mut registry, id) else { return NextNotice::Done };
        if queue.items.is_empty() || queue.unnoticed == 0 {
            queue.unnoticed = 0;
            return NextNotice::Done;
        }
        if !Weak::ptr_eq(&queue.owner.delivery, delivery) {
            return NextNotice::Elsewhere(queue.owner.delivery.clone());
        }
        queue.unnoticed -= 1;
        NextNotice::Deliver(queue.owner.clone())
    }
}

fn queue_mut(registry: &mut Registry, id: u32) -> Result<&mut Queue, Status> {
    registry.queues.get_mut(&id).ok_or(Status::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn owner(instance: u64, delivery: &Arc<Delivery>) -> QueueOwner {
        QueueOwner { instance, context: 1, delivery: Arc::downgrade(delivery) }
    }

    fn delivered(next: NextNotice) -> Option<u64> {
        match next {
            NextNotice::Deliver(owner) => Some(owner.instance),
            _ => None,
        }
    }

    #[test]
    fn a_name_registered_again_is_the_same_queue_with_the_last_owner() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        let (id, _) = queues.register(b"vm", b"events", owner(1, &delivery)).unwrap();
        assert_eq!(queues.register(b"vm", b"events", owner(2, &delivery)), Ok((id, false)));
        assert_ne!(queues.register(b"vm", b"other", owner(1, &delivery)).unwrap().0, id);
        assert_ne!(queues.register(b"other-vm", b"events", owner(1, &delivery)).unwrap().0, id);
        assert_eq!((queues.resolve(b"vm", b"events"), queues.resolve(b"vm", b"none")), (Some(id), None));
        assert!(matches!(queues.enqueue(id, b"x").unwrap().0, Enqueued::Notice(_)));
        assert_eq!(delivered(queues.next_notice(id, &Arc::downgrade(&delivery))), Some(2));
    }

    #[test]
    fn items_come_out_in_order_and_notices_stop_when_the_queue_is_empty() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        let me = Arc::downgrade(&delivery);
        let (id, _) = queues.register(b"vm", b"q", owner(1, &delivery)).unwrap();
        assert!(matches!(queues.enqueue(id, b"1"), Ok((Enqueued::Notice(_), 0))));
        assert!(matches!(queues.enqueue(id, b"2"), Ok((Enqueued::NoticePending, 0))));
        assert!(matches!(queues.enqueue(id, b"3"), Ok((Enqueued::NoticePending, 0))));
        // One notice per item while items wait ...
        assert_eq!(delivered(queues.next_notice(id, &me)), Some(1));
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(delivered(queues.next_notice(id, &me)), Some(1));
        // ... and none once the plugin took the rest.
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"3"[..]));
        assert_eq!(queues.dequeue(id), Ok(None));
        assert!(matches!(queues.next_notice(id, &me), NextNotice::Done));
        // The next item asks for a notice again.
        assert!(matches!(queues.enqueue(id, b"4"), Ok((Enqueued::Notice(_), 0))));
    }

    #[test]
    fn a_queue_taken_over_by_another_version_is_delivered_there() {
        let queues = SharedQueues::default();
        let (old, new) = (Arc::new(Delivery::default()), Arc::new(Delivery::default()));
        let (id, _) = queues.register(b"vm", b"q", owner(1, &old)).unwrap();
        queues.enqueue(id, b"1").unwrap();
        // Notices are owed (the old delivery has not run): the new owner is told too.
        assert_eq!(queues.register(b"vm", b"q", owner(2, &new)), Ok((id, true)));
        match queues.next_notice(id, &Arc::downgrade(&old)) {
            NextNotice::Elsewhere(delivery) => assert!(Weak::ptr_eq(&delivery, &Arc::downgrade(&new))),
            other => panic!("expected the new owner's delivery, got {other:?}"),
        }
        assert_eq!(delivered(queues.next_notice(id, &Arc::downgrade(&new))), Some(2));
    }

    #[test]
    fn unknown_ids_are_not_found_and_full_queues_drop_their_oldest() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        assert_eq!(queues.enqueue(0, b"x").map(|(_, dropped)| dropped), Err(Status::NotFound));
        assert_eq!(queues.dequeue(7), Err(Status::NotFound));
        let (id, _) = queues.register(b"vm", b"q", owner(1, &delivery)).unwrap();
        for i in 0..QUEUE_ITEMS {
            queues.enqueue(id, i.to_string().as_bytes()).unwrap();
        }
        assert_eq!(queues.enqueue(id, b"last").unwrap().1, 1);
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"1"[..]));
        let big = vec![0u8; QUEUE_BYTES];
        assert_eq!(queues.enqueue(id, &big).unwrap().1, QUEUE_ITEMS - 1, "all but the big one dropped");
        assert_eq!(queues.dequeue(id).unwrap().map(|item| item.len()), Some(QUEUE_BYTES));
        // An item over the queue's bound is refused, and nothing is dropped for it.
        queues.enqueue(id, b"kept").unwrap();
        assert_eq!(
            queues.enqueue(id, &vec![0u8; QUEUE_BYTES + 1]).map(|(_, dropped)| dropped),
            Err(Status::BadArgument)
        );
        assert_eq!(queues.dequeue(id).unwrap().as_deref(), Some(&b"kept"[..]));
    }

    #[test]
    fn the_number_of_queues_is_bounded_per_plugin_and_in_all() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        for i in 0..VM_QUEUES {
            queues.register(b"greedy", i.to_string().as_bytes(), owner(1, &delivery)).unwrap();
        }
        assert_eq!(queues.register(b"greedy", b"one more", owner(1, &delivery)), Err(Status::InternalFailure));
        assert!(queues.register(b"greedy", b"7", owner(1, &delivery)).is_ok(), "existing names still register");
        for vm in 1..QUEUES / VM_QUEUES {
            for i in 0..VM_QUEUES {
                queues.register(vm.to_string().as_bytes(), i.to_string().as_bytes(), owner(1, &delivery)).unwrap();
            }
        }
        assert_eq!(queues.register(b"other", b"q", owner(1, &delivery)), Err(Status::InternalFailure));
        // Unloading the greedy plugin frees its share for the others.
        assert_eq!(queues.remove_vm(b"greedy"), VM_QUEUES);
        assert!(queues.register(b"other", b"q", owner(1, &delivery)).is_ok());
    }

    #[test]
    fn removing_a_plugins_queues_frees_them_and_their_ids() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        let (gone, _) = queues.register(b"evil", b"q", owner(1, &delivery)).unwrap();
        let (kept, _) = queues.register(b"good", b"q", owner(2, &delivery)).unwrap();
        queues.enqueue(gone, b"x").unwrap();
        assert_eq!(queues.remove_vm(b"evil"), 1);
        assert_eq!((queues.resolve(b"evil", b"q"), queues.resolve(b"good", b"q")), (None, Some(kept)));
        assert_eq!(queues.enqueue(gone, b"y").map(|(_, dropped)| dropped), Err(Status::NotFound));
        assert!(matches!(queues.next_notice(gone, &Arc::downgrade(&delivery)), NextNotice::Done));
        // Registered again, the name is a new, empty queue under a new id.
        let (again, _) = queues.register(b"evil", b"q", owner(1, &delivery)).unwrap();
        assert_ne!(again, gone);
        assert_eq!(queues.dequeue(again), Ok(None));
    }

    #[test]
    fn long_queue_names_are_refused() {
        let (queues, delivery) = (SharedQueues::default(), Arc::new(Delivery::default()));
        assert!(queues.register(b"vm", &vec![b'q'; QUEUE_NAME_BYTES], owner(1, &delivery)).is_ok());
        let long = vec![b'q'; QUEUE_NAME_BYTES + 1];
        assert_eq!(queues.register(b"vm", &long, owner(1, &delivery)), Err(Status::BadArgument));
        assert_eq!(queues.resolve(b"vm", &long), None);
    }
}
