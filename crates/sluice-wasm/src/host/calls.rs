//! Calls out: `proxy_http_call` and `proxy_grpc_call` (a headers callback asks for a call to
//! one of the plugin's clusters, `crate::callout`), `proxy_grpc_cancel`, and
//! `proxy_get_status` (how a gRPC call ended). A call is recorded in the callback's lend and
//! made when the callback returns, while the transaction waits; its token is written for
//! the plugin, which gets it back in the callback with the answer.
//!
//! The plugin's timeout bounds the call (0, or more than a minute: a minute).
//!
//! A callback may ask for several calls (up to `lend::MAX_CALLS`): they are made at once, and
//! their answers come back one callback each, in the order they were asked for.
//!
//! Statuses of `proxy_http_call`: `BadArgument` for an unknown cluster, a request without
//! `:method`, `:path` or `:authority`, or a callback that cannot wait for a call (outside the
//! request and response headers callbacks and the answer to a call, or past
//! `lend::MAX_CALLS` calls from one callback); `ParseFailure` for malformed header pairs.
//!
//! `proxy_grpc_call` answers only with the statuses the Rust SDK hands back to the plugin
//! (any other makes it panic): `ParseFailure` for service or method names that do not make a
//! path and for malformed metadata, `InternalFailure` for an unknown cluster or a callback
//! that cannot wait for a call. `proxy_grpc_cancel` cancels the call the same callback asked
//! for (it is then not made) or an open stream (`grpc_stream.rs`); any other token is
//! `NotFound`. `proxy_get_status` gives the code and message of the gRPC call being
//! answered (in `proxy_on_grpc_receive`, `OK`; in `proxy_on_grpc_close`, why it failed) or of
//! the stream that ended (in `proxy_on_grpc_close`), and `OK` with no message elsewhere.

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::callout::{Callout, Cluster};
use crate::grpc_stream::StreamEventKind;
use crate::{headermap, memory};
use std::time::Duration;
use wasmtime::{Caller, Linker};

/// The longest a transaction waits for one call.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_http_call", http_call)?;
    linker.func_wrap("env", "proxy_grpc_call", grpc_call)?;
    linker.func_wrap("env", "proxy_grpc_cancel", grpc_cancel)?;
    linker.func_wrap("env", "proxy_get_status", get_status)?;
    Ok(())
}

/// The ABI's timeout is an unsigned millisecond count; 0 (none of its own) and anything
/// longer get the longest the host allows.
fn call_timeout(timeout_ms: i32) -> Duration {
    match timeout_ms as u32 {
        0 => MAX_CALL_TIMEOUT,
        ms => Duration::from_millis(u64::from(ms)).min(MAX_CALL_TIMEOUT),
    }
}

/// The cluster the plugin named, if configured.
pub(super) fn cluster<'s>(
    clusters: &'s std::collections::BTreeMap<String, Cluster>,
    name: &[u8],
) -> Option<&'s Cluster> {
    std::str::from_utf8(name).ok().and_then(|name| clusters.get(name))
}

/// Records `callout` as the current callback's call and writes its token at `token_ptr`;
/// `refused` when the callback cannot wait for a call.
fn record(
    state: &mut HostState,
    mem: &mut [u8],
    callout: Callout,
    token_ptr: i32,
    refused: Status,
) -> Result<Status, Status> {
    let token = callout.token;
    let lend = state.call.lend().filter(|lend| lend.may_call()).ok_or(refused)?;
    lend.asked().callouts.push(callout);
    state.next_call_token = token.wrapping_add(1);
    memory::write_u32(mem, token_ptr, token)?;
    Ok(Status::Ok)
}

#[allow(clippy::too_many_arguments)]
fn http_call(
    mut caller: Caller<'_, HostState>,
    upstream_ptr: i32,
    upstream_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    body_ptr: i32,
    body_len: i32,
    _trailers_ptr: i32,
    _trailers_len: i32,
    timeout_ms: i32,
    token_ptr: i32,
) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        let cluster = cluster(&state.shared.clusters, memory::slice(mem, upstream_ptr, upstream_len)?)
            .ok_or(Status::BadArgument)?;
        let headers = headermap::deserialize(memory::slice(mem, headers_ptr, headers_len)?)?;
        let body = memory::slice(mem, body_ptr, body_len)?;
        let callout = Callout::http(state.next_call_token, cluster, &headers, body, call_timeout(timeout_ms))?;
        record(state, mem, callout, token_ptr, Status::BadArgument)
    })())
}

#[allow(clippy::too_many_arguments)]
fn grpc_call(
    mut caller: Caller<'_, HostState>,
    upstream_ptr: i32,
    upstream_len: i32,
    service_ptr: i32,
    service_len: i32,
    method_ptr: i32,
    method_len: i32,
    metadata_ptr: i32,
    metadata_len: i32,
    message_ptr: i32,
    message_len: i32,
    timeout_ms: i32,
    token_ptr: i32,
) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        // A bad guest pointer gives `InvalidMemoryAccess`, as from every host call (the SDK
        // panics on it: it is the plugin's bug).
        let cluster = cluster(&state.shared.clusters, memory::slice(mem, upstream_ptr, upstream_len)?)
            .ok_or(Status::InternalFailure)?;
        let names = (memory::slice(mem, service_ptr, service_len)?, memory::slice(mem, method_ptr, method_len)?);
        let metadata = headermap::deserialize(memory::slice(mem, metadata_ptr, metadata_len)?)?;
        let message = memory::slice(mem, message_ptr, message_len)?;
        let callout =
            Callout::grpc(state.next_call_token, cluster, names, &metadata, message, call_timeout(timeout_ms))?;
        record(state, mem, callout, token_ptr, Status::InternalFailure)
    })())
}

/// Cancels the gRPC call this callback asked for, or an open stream.
fn grpc_cancel(mut caller: Caller<'_, HostState>, token: i32) -> i32 {
    let token = token as u32;
    let state = caller.data_mut();
    let asked = state.call.lend().and_then(|lend| lend.asked.as_mut());
    let call = asked.and_then(|asked| {
        let at = asked.callouts.iter().position(|call| call.is_grpc() && call.token == token)?;
        Some(asked.callouts.remove(at))
    });
    let cancelled = call.is_some() || state.shared.grpc_streams.cancel(state.instance, token);
    if cancelled { Status::Ok } else { Status::NotFound }.code()
}

fn get_status(
    mut caller: Caller<'_, HostState>,
    code_ptr: i32,
    message_ptr: i32,
    message_len: i32,
) -> wasmtime::Result<i32> {
    let state = caller.data_mut();
    let ended = match &state.event {
        Some(StreamEventKind::Close(status)) => Some(status),
        _ => state.call.lend().and_then(|lend| lend.grpc_status()),
    };
    let (code, message) = match ended {
        Some(status) => (status.code, status.message.clone()),
        None => (crate::grpc::code::OK, String::new()),
    };
    let Some((mem, _)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
    if let Err(status) = memory::write_u32(mem, code_ptr, code) {
        return Ok(status.code());
    }
    if message.is_empty() {
        // The SDK reads a null pointer as no message.
        let written = memory::write_u32(mem, message_ptr, 0).and_then(|()| memory::write_u32(mem, message_len, 0));
        return Ok(status(written.map(|()| Status::Ok)));
    }
    Ok(memory::copy_out(&mut caller, message.as_bytes(), message_ptr, message_len)?.code())
}
