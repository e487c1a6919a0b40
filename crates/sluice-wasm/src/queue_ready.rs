//! Delivers `proxy_on_queue_ready` (`crate::queues`) to the context that owns a queue, in
//! its instance, from a thread of the plugin version's own (`sluice-wasm-queues`, started by
//! the first notice): an enqueue never waits for the owner's instance, which may be busy
//! with a transaction on another thread. A fault in the callback is a crash of that
//! instance, as in any callback.

use crate::pool::Core;
use crate::vm::Callback;
use parking_lot::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock, Weak};

/// The notices of one plugin version's queues, on their way to the delivery thread.
#[derive(Default)]
pub(crate) struct QueueReady {
    /// To the delivery thread, once started: queue ids with notices owed.
    sender: Mutex<Option<Sender<u32>>>,
    /// The plugin version whose instances get the notices.
    core: OnceLock<Weak<Core>>,
}

impl QueueReady {
    /// Names the plugin version to deliver to (once, when it is loaded).
    pub(crate) fn attach(&self, core: &Arc<Core>) {
        let _ = self.core.set(Arc::downgrade(core));
    }

    /// Queue `id` owes notices: wakes the delivery thread (starting it the first time).
    pub(crate) fn notice(&self, id: u32) {
        let Some(core) = self.core.get() else { return };
        let mut sender = self.sender.lock();
        let sender = sender.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::channel();
            let core = Weak::clone(core);
            let spawned =
                std::thread::Builder::new().name("sluice-wasm-queues".into()).spawn(move || deliver(&receiver, &core));
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

/// The delivery thread: for each queue with notices owed, `proxy_on_queue_ready` on its
/// owner while items wait. Ends with the plugin version (its sender goes with it).
fn deliver(receiver: &Receiver<u32>, core: &Weak<Core>) {
    for id in receiver {
        let Some(core) = core.upgrade() else { return };
        while let Some(owner) = core.shared().queues.next_notice(id) {
            core.pool.each(|index, slot| {
                let Some(vm) = slot.vm.as_mut().filter(|vm| vm.instance() == owner.instance) else { return };
                if let Err(fault) = vm.invoke(owner.context, Callback::QueueReady { id }, None) {
                    slot.crash(&core, index, &fault);
                }
            });
        }
    }
}
