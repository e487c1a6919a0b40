//! Delivers `proxy_on_queue_ready` (`crate::queues`) to the context that owns a queue, in
//! its instance, from a thread of the plugin version's own (`sluice-wasm-queues`, started by
//! the first notice): an enqueue never waits for the owner's instance, which may be busy
//! with a transaction on another thread. A fault in the callback is a crash of that
//! instance, as in any callback.

use crate::pool::Core;
use crate::queues::{registry, NextNotice};
use crate::vm::Callback;
use parking_lot::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock, Weak};

/// The notices of one plugin version's queues, on their way to the delivery thread.
#[derive(Default)]
pub(crate) struct QueueReady {
    /// To the delivery thread, once started: queue ids with notices owed.
    sender: Mutex<Option<Sender<u32>>>,
    /// The plugin version whose instances get the notices, and this delivery (as queue
    /// owners name it).
    core: OnceLock<(Weak<Core>, Weak<QueueReady>)>,
}

impl QueueReady {
    /// Names the plugin version to deliver to (once, when it is loaded).
    pub(crate) fn attach(self: &Arc<Self>, core: &Arc<Core>) {
        let _ = self.core.set((Arc::downgrade(core), Arc::downgrade(self)));
    }

    /// Queue `id` owes notices: wakes the delivery thread (starting it the first time).
    pub(crate) fn notice(&self, id: u32) {
        let Some((core, me)) = self.core.get() else { return };
        let mut sender = self.sender.lock();
        let sender = sender.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::channel();
            let (core, me) = (Weak::clone(core), Weak::clone(me));
            let spawned = std::thread::Builder::new()
                .name("sluice-wasm-queues".into())
                .spawn(move || deliver(&receiver, &core, &me));
            if let Err(err) = spawned {
                tracing::error!("cannot start the wasm queue delivery thread: {err}");
            }
            sender
        });
        // Fails only if the thread could not start (or the version is gone): the items stay
        // in the queue for any instance to dequeue.
        let _ = sender.send(id);
    }
}

/// The delivery thread of one plugin version (`me`): for each queue with notices owed,
/// `proxy_on_queue_ready` on its owner while items wait (or the notices handed to the
/// delivery of the version that took the queue over). Ends with the plugin version (its
/// sender goes with it).
fn deliver(receiver: &Receiver<u32>, core: &Weak<Core>, me: &Weak<QueueReady>) {
    for id in receiver {
        let Some(core) = core.upgrade() else { return };
        loop {
            match registry().next_notice(id, me) {
                NextNotice::Deliver(owner) => core.pool.each(|index, slot| {
                    let Some(vm) = slot.vm.as_mut().filter(|vm| vm.instance() == owner.instance) else { return };
                    if let Err(fault) = vm.invoke(owner.context, Callback::QueueReady { id }, None) {
                        slot.crash(&core, index, &fault);
                    }
                }),
                NextNotice::Elsewhere(delivery) => {
                    if let Some(delivery) = delivery.upgrade() {
                        delivery.notice(id);
                    }
                    break;
                }
                NextNotice::Done => break,
            }
        }
    }
}
