//! Buffers: `proxy_get_buffer_bytes`, `proxy_set_buffer_bytes`.
//!
//! The HTTP request and response bodies are there in their body callbacks (the current
//! chunk, or everything held so far after a pause); an HTTP call's response body in
//! `proxy_on_http_call_response`; a gRPC call's answer or a stream's message in
//! `proxy_on_grpc_receive`; the plugin and VM configurations always.
//! An empty range reads as `NotFound` (the SDK gives `None`). Setting replaces
//! `[start, start + size)` (clamped to the end) with the new bytes: `size == 0` inserts, a
//! `start` equal to the length appends. A change of the body's length needs
//! `edits_request_body` / `edits_response_body` in the plugin's configuration (the host
//! must drop `Content-Length`); without it it is refused with `BadArgument`, and so is
//! growing a body past `max_buffer_bytes` (or its size at the call, if larger).

use super::{memory_and_state, status, BodyKind, HostState};
use crate::abi::{BufferType, LogLevel, Status};
use crate::grpc_stream::StreamEventKind;
use crate::memory;
use bytes::Bytes;
use wasmtime::{Caller, Linker};

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_buffer_bytes",
        |mut caller: Caller<'_, HostState>, kind: i32, start: i32, max: i32, ret_ptr: i32, ret_len: i32| {
            let state = caller.data_mut();
            let data: Option<Bytes> = match BufferType::from_guest(kind) {
                Some(BufferType::RequestBody) => body(state, BodyKind::Request),
                Some(BufferType::ResponseBody) => body(state, BodyKind::Response),
                Some(BufferType::VmConfiguration) => Some(state.shared.vm_config.clone()),
                Some(BufferType::PluginConfiguration) => Some(state.shared.plugin_config.clone()),
                Some(BufferType::HttpCallResponseBody) => {
                    state.call.lend().and_then(|lend| lend.call_response_body(false))
                }
                Some(BufferType::GrpcReceiveBuffer) => match &state.event {
                    Some(StreamEventKind::Message(message)) => Some(message.clone()),
                    _ => state.call.lend().and_then(|lend| lend.call_response_body(true)),
                },
                Some(BufferType::Other) => None,
                None => return Ok(Status::BadArgument.code()),
            };
            let Some(data) = data else { return Ok(Status::NotFound.code()) };
            let start = memory::offset(start);
            if start >= data.len() {
                return Ok(Status::NotFound.code());
            }
            let end = start.saturating_add(memory::offset(max)).min(data.len());
            let range = data.slice(start..end);
            wasmtime::Result::Ok(memory::copy_out(&mut caller, &range, ret_ptr, ret_len)?.code())
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_buffer_bytes",
        |mut caller: Caller<'_, HostState>, kind: i32, start: i32, size: i32, data_ptr: i32, data_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let kind = match BufferType::from_guest(kind) {
                    Some(BufferType::RequestBody) => BodyKind::Request,
                    Some(BufferType::ResponseBody) => BodyKind::Response,
                    _ => return Err(Status::BadArgument),
                };
                let value = memory::slice(mem, data_ptr, data_len)?;
                let body = state.call.lend().and_then(|lend| lend.body(kind)).ok_or(Status::NotFound)?;
                let start = memory::offset(start);
                if start > body.data.len() {
                    return Err(Status::BadArgument);
                }
                let end = start.saturating_add(memory::offset(size)).min(body.data.len());
                let new_len = body.data.len() - (end - start) + value.len();
                if new_len != body.data.len() && !body.resizable {
                    let which = if kind == BodyKind::Request { "request" } else { "response" };
                    state.shared.log(
                        LogLevel::Warn,
                        &format!("refused a {which} body change of length: set edits_{which}_body in the plugin's configuration"),
                    );
                    return Err(Status::BadArgument);
                }
                if new_len > body.data.len() && new_len > body.max_len {
                    return Err(Status::BadArgument);
                }
                let mut new = Vec::with_capacity(new_len);
                new.extend_from_slice(&body.data[..start]);
                new.extend_from_slice(value);
                new.extend_from_slice(&body.data[end..]);
                body.data = Bytes::from(new);
                body.changed = true;
                Ok(Status::Ok)
            })())
        },
    )?;
    Ok(())
}

fn body(state: &mut HostState, kind: BodyKind) -> Option<Bytes> {
    state.call.lend()?.body(kind).map(|body| body.data.clone())
}
