//! Shared queues (`crate::queues`): `proxy_register_shared_queue`,
//! `proxy_resolve_shared_queue`, `proxy_enqueue_shared_queue`, `proxy_dequeue_shared_queue`.
//!
//! A plugin registers queues under its own VM id (`plugin_vm_id`, its module name) and
//! resolves them under any plugin's (an empty VM id is its own).
//!
//! Statuses are those the Rust SDK expects: resolving a queue that is not registered is
//! `NotFound`; so are enqueuing and dequeuing with an unknown id; dequeuing from an empty
//! queue is `Empty`. Registering past the process's or the plugin's queue limit is
//! `InternalFailure`; a queue name or an item over its bound is `BadArgument` (an item's
//! length is checked before its bytes are read).

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::memory;
use crate::queues::{registry, Enqueued, QueueOwner, QUEUE_BYTES};
use crate::stats::Stats;
use std::sync::Arc;
use wasmtime::{Caller, Linker};

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_register_shared_queue", register)?;
    linker.func_wrap("env", "proxy_resolve_shared_queue", resolve)?;
    linker.func_wrap("env", "proxy_enqueue_shared_queue", enqueue)?;
    linker.func_wrap("env", "proxy_dequeue_shared_queue", dequeue)?;
    Ok(())
}

/// The calling context, in this instance, owns the queue from now on.
fn register(mut caller: Caller<'_, HostState>, name_ptr: i32, name_len: i32, id_ptr: i32) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let delivery = Arc::downgrade(&state.shared.delivery);
        let owner = QueueOwner { instance: state.instance, context: state.call.context_id, delivery };
        let name = memory::slice(mem, name_ptr, name_len)?;
        let (id, owed) = registry().register(state.shared.name.as_bytes(), name, owner)?;
        if owed {
            state.shared.delivery.notice(id);
        }
        memory::write_u32(mem, id_ptr, id)?;
        Ok(Status::Ok)
    })())
}

fn resolve(
    mut caller: Caller<'_, HostState>,
    vm_ptr: i32,
    vm_len: i32,
    name_ptr: i32,
    name_len: i32,
    id_ptr: i32,
) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let vm_id = match memory::slice(mem, vm_ptr, vm_len)? {
            [] => state.shared.name.as_bytes(),
            vm_id => vm_id,
        };
        let id = registry().resolve(vm_id, memory::slice(mem, name_ptr, name_len)?).ok_or(Status::NotFound)?;
        memory::write_u32(mem, id_ptr, id)?;
        Ok(Status::Ok)
    })())
}

fn enqueue(mut caller: Caller<'_, HostState>, id: i32, value_ptr: i32, value_len: i32) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let shared = &state.shared;
        if value_len as u32 as usize > QUEUE_BYTES {
            return Err(Status::BadArgument);
        }
        let (enqueued, dropped) = registry().enqueue(id as u32, memory::slice(mem, value_ptr, value_len)?)?;
        if dropped > 0 {
            Stats::add(&shared.stats.queue_items_dropped, dropped as u64);
        }
        if let Enqueued::Notice(delivery) = enqueued {
            // Gone with its plugin version: the notices wait for the queue's next owner.
            if let Some(delivery) = delivery.upgrade() {
                delivery.notice(id as u32);
            }
        }
        Ok(Status::Ok)
    })())
}

fn dequeue(mut caller: Caller<'_, HostState>, id: i32, value_ptr: i32, value_len: i32) -> wasmtime::Result<i32> {
    let item = match registry().dequeue(id as u32) {
        Ok(Some(item)) => item,
        Ok(None) => return Ok(Status::Empty.code()),
        Err(status) => return Ok(status.code()),
    };
    Ok(memory::copy_out(&mut caller, &item, value_ptr, value_len)?.code())
}
