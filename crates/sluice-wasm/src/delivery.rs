//! Delivers what arrives for a plugin outside its transactions' phases, to the context it
//! is for, in its instance: `proxy_on_queue_ready` for a shared queue the context owns
//! (`crate::queues`), and the events of a gRPC stream it opened (`crate::grpc_stream`). It
//! runs on a thread of the plugin version's own (`sluice-wasm-events`, started by the first
//! delivery), in arrival order: whoever enqueues or whatever a stream receives never waits
//! for the owner's instance, which may be busy with a transaction on another thread. A fault
//! in the callback is a crash of that instance, as in any callback.

use crate::grpc_stream::{StreamEvent, StreamEventKind};
use crate::pool::Core;
use crate::queues::{registry, NextNotice};
use crate::vm::Callback;
use parking_lot::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock, Weak};

/// One thing to deliver.
enum Notice {
    /// Queue `id` owes notices.
    Queue(u32),
    Stream(StreamEvent),
}

/// The deliveries of one plugin version, on their way to its delivery thread.
#[derive(Default)]
pub(crate) struct Delivery {
    /// To the delivery thread, once started.
    sender: Mutex<Option<Sender<Notice>>>,
    /// The plugin version whose instances get the deliveries, and this delivery (as queue
    /// owners name it).
    core: OnceLock<(Weak<Core>, Weak<Delivery>)>,
}

impl Delivery {
    /// Names the plugin version to deliver to (once, when it is loaded).
    pub(crate) fn attach(self: &Arc<Self>, core: &Arc<Core>) {
        let _ = self.core.set((Arc::downgrade(core), Arc::downgrade(self)));
    }

    /// Queue `id` owes notices.
    pub(crate) fn notice(&self, id: u32) {
        self.send(Notice::Queue(id));
    }

    /// A gRPC stream received `event`.
    pub(crate) fn stream_event(&self, event: StreamEvent) {
        self.send(Notice::Stream(event));
    }

    /// Wakes the delivery thread (starting it the first time).
    fn send(&self, notice: Notice) {
        let Some((core, me)) = self.core.get() else { return };
        let mut sender = self.sender.lock();
        let sender = sender.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::channel();
            let (core, me) = (Weak::clone(core), Weak::clone(me));
            let spawned = std::thread::Builder::new()
                .name("sluice-wasm-events".into())
                .spawn(move || deliver(&receiver, &core, &me));
            if let Err(err) = spawned {
                tracing::error!("cannot start the wasm event delivery thread: {err}");
            }
            sender
        });
        // Fails only if the thread could not start (or the version is gone): queue items stay
        // for any instance to dequeue; stream events are lost with the plugin version.
        let _ = sender.send(notice);
    }
}

/// The delivery thread of one plugin version (`me`). Ends with the plugin version (its
/// sender goes with it).
fn deliver(receiver: &Receiver<Notice>, core: &Weak<Core>, me: &Weak<Delivery>) {
    for notice in receiver {
        let Some(core) = core.upgrade() else { return };
        match notice {
            Notice::Queue(id) => deliver_queue(&core, me, id),
            Notice::Stream(event) => deliver_stream(&core, event),
        }
    }
}

/// For queue `id`, `proxy_on_queue_ready` on its owner while items wait and notices are
/// owed (or the notices handed to the delivery of the version that took the queue over).
fn deliver_queue(core: &Arc<Core>, me: &Weak<Delivery>, id: u32) {
    loop {
        match registry().next_notice(id, me) {
            NextNotice::Deliver(owner) => {
                on_instance(core, owner.instance, |vm| vm.invoke(owner.context, Callback::QueueReady { id }, None));
            }
            NextNotice::Elsewhere(delivery) => {
                if let Some(delivery) = delivery.upgrade() {
                    delivery.notice(id);
                }
                return;
            }
            NextNotice::Done => return,
        }
    }
}

/// A stream's event, to the context that opened it, while the stream is open (not
/// cancelled); a stream whose instance is gone is cancelled.
fn deliver_stream(core: &Arc<Core>, event: StreamEvent) {
    let streams = &core.shared().grpc_streams;
    if !streams.is_open(event.instance, event.token) {
        return;
    }
    let StreamEvent { instance, context, token, kind } = event;
    let callback = match &kind {
        StreamEventKind::InitialMetadata(map) => Callback::GrpcReceiveInitialMetadata { token, count: map.len() },
        StreamEventKind::Message(message) => Callback::GrpcReceive { token, size: message.len() },
        StreamEventKind::TrailingMetadata(map) => Callback::GrpcReceiveTrailingMetadata { token, count: map.len() },
        StreamEventKind::Close(status) => Callback::GrpcClose { token, status: status.code },
    };
    let closed = matches!(kind, StreamEventKind::Close(_));
    let found = on_instance(core, instance, |vm| vm.invoke_with_event(context, callback, kind));
    if closed {
        streams.ended(instance, token);
    } else if !found {
        streams.cancel(instance, token);
    }
}

/// Runs `call` on instance `instance` if it still lives (a fault crashes it); whether it did.
fn on_instance(
    core: &Arc<Core>,
    instance: u64,
    call: impl FnOnce(&mut crate::vm::PluginVm) -> Result<i32, crate::vm::Fault>,
) -> bool {
    let mut call = Some(call);
    core.pool.each(|index, slot| {
        let Some(vm) = slot.vm.as_mut().filter(|vm| vm.instance() == instance) else { return };
        let Some(call) = call.take() else { return };
        if let Err(fault) = call(vm) {
            slot.crash(core, index, &fault);
        }
    });
    call.is_none()
}
