//! gRPC streams (`crate::grpc_stream`): `proxy_grpc_stream`, `proxy_grpc_send`,
//! `proxy_grpc_close` (`proxy_grpc_cancel` is in `calls.rs`, shared with calls).
//!
//! Statuses are those the Rust SDK expects. `proxy_grpc_stream`: `ParseFailure` for service
//! or method names that do not make a path and for malformed metadata, `InternalFailure`
//! for an unknown cluster or no runtime to run on. `proxy_grpc_send`: `NotFound` for no
//! such stream, `BadArgument` after the plugin's end of stream. `proxy_grpc_close`:
//! `NotFound` for no such stream.

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::grpc_stream::StreamOwner;
use crate::{headermap, memory};
use std::sync::Arc;
use wasmtime::{Caller, Linker};

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_grpc_stream", open)?;
    linker.func_wrap("env", "proxy_grpc_send", send)?;
    linker.func_wrap("env", "proxy_grpc_close", close)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn open(
    mut caller: Caller<'_, HostState>,
    upstream_ptr: i32,
    upstream_len: i32,
    service_ptr: i32,
    service_len: i32,
    method_ptr: i32,
    method_len: i32,
    metadata_ptr: i32,
    metadata_len: i32,
    token_ptr: i32,
) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let shared = Arc::clone(&state.shared);
        let cluster = super::calls::cluster(&shared.clusters, memory::slice(mem, upstream_ptr, upstream_len)?)
            .ok_or(Status::InternalFailure)?;
        let names = (memory::slice(mem, service_ptr, service_len)?, memory::slice(mem, method_ptr, method_len)?);
        let metadata = headermap::deserialize(memory::slice(mem, metadata_ptr, metadata_len)?)?;
        let head = crate::grpc::head(cluster.address(), names, &metadata, None)?;
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| shared.runtime.clone())
            .ok_or(Status::InternalFailure)?;
        let token = state.next_call_token;
        memory::write_u32(mem, token_ptr, token)?;
        state.next_call_token = token.wrapping_add(1);
        state.opened_streams = true;
        let owner = StreamOwner {
            instance: state.instance,
            context: state.call.context_id,
            token,
            delivery: Arc::downgrade(&shared.delivery),
        };
        let client = shared.call_clients.grpc();
        shared.grpc_streams.open(&runtime, client, head, owner, shared.max_stream_message);
        Ok(Status::Ok)
    })())
}

fn send(mut caller: Caller<'_, HostState>, token: i32, message_ptr: i32, message_len: i32, end: i32) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let message = memory::slice(mem, message_ptr, message_len)?;
        state.shared.grpc_streams.send(state.instance, token as u32, message, end != 0)?;
        Ok(Status::Ok)
    })())
}

fn close(caller: Caller<'_, HostState>, token: i32) -> i32 {
    let state = caller.data();
    if state.shared.grpc_streams.close(state.instance, token as u32) { Status::Ok } else { Status::NotFound }.code()
}
