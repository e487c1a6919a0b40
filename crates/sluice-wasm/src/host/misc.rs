//! Time, ticks, stream control, local responses, shared data and metrics.

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::headermap;
use crate::memory;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use sluice_module::LocalResponse;
use std::sync::atomic::Ordering;
use wasmtime::{Caller, Linker};

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_current_time_nanoseconds", |mut caller: Caller<'_, HostState>, ret: i32| {
        let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
        status(memory::write_u64(mem, ret, state.shared.now_nanos()).map(|()| Status::Ok))
    })?;
    linker.func_wrap("env", "proxy_set_tick_period_milliseconds", |caller: Caller<'_, HostState>, period: i32| {
        caller.data().shared.tick_period_ms.store(u64::from(period as u32), Ordering::Relaxed);
        Status::Ok.code()
    })?;
    // A transaction waits for a plugin only during its HTTP call, and goes on when
    // `proxy_on_http_call_response` returns (unless the plugin answered locally), so
    // resuming is a no-op; closing (resetting) a stream is not supported.
    linker.func_wrap("env", "proxy_continue_stream", |_: i32| Status::Ok.code())?;
    linker.func_wrap("env", "proxy_continue_request", || Status::Ok.code())?;
    linker.func_wrap("env", "proxy_continue_response", || Status::Ok.code())?;
    linker.func_wrap("env", "proxy_close_stream", |_: i32| Status::Unimplemented.code())?;
    linker.func_wrap("env", "proxy_done", || Status::Ok.code())?;
    linker.func_wrap("env", "proxy_set_effective_context", |_: i32| Status::Ok.code())?;
    linker.func_wrap("env", "proxy_send_local_response", send_local_response)?;
    add_shared_data(linker)?;
    add_metrics(linker)?;
    Ok(())
}

/// `proxy_send_local_response`: the transaction is answered with this response when the
/// callback returns (in request phases; see `txn.rs`). A body comes with `content-type:
/// text/plain` unless the plugin gives one, as from Envoy.
///
/// `BadArgument` for a status outside 200–599 (the host frames the response itself: an
/// interim or out-of-range status cannot be one), for bad header names or values, and
/// outside a transaction's callbacks or in the callbacks that end its context
/// (`proxy_on_done`, `proxy_on_log`, `proxy_on_delete`: the response is already on its way).
/// A second call in the same callback replaces the first: the last one is the answer.
#[allow(clippy::too_many_arguments)]
fn send_local_response(
    mut caller: Caller<'_, HostState>,
    status_code: i32,
    _details_ptr: i32,
    _details_len: i32,
    body_ptr: i32,
    body_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    _grpc_status: i32,
) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
    status((|| {
        if state.call.ending || state.call.lend().is_none() {
            return Err(Status::BadArgument);
        }
        let status = u16::try_from(status_code).ok().filter(|code| (200..=599).contains(code));
        let status = status.and_then(|code| StatusCode::from_u16(code).ok()).ok_or(Status::BadArgument)?;
        let body = Bytes::copy_from_slice(memory::slice(mem, body_ptr, body_len)?);
        let pairs = headermap::deserialize(memory::slice(mem, headers_ptr, headers_len)?)?;
        let mut headers = HeaderMap::with_capacity(pairs.len());
        for (name, value) in pairs {
            let name = HeaderName::from_bytes(name).map_err(|_| Status::BadArgument)?;
            let value = HeaderValue::from_bytes(value).map_err(|_| Status::BadArgument)?;
            headers.append(name, value);
        }
        // As Envoy's local replies: a body is plain text unless the plugin says otherwise.
        if !body.is_empty() && !headers.contains_key(http::header::CONTENT_TYPE) {
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        }
        let lend = state.call.lend().ok_or(Status::BadArgument)?;
        lend.asked().local_response = Some(LocalResponse { status, headers, body });
        Ok(Status::Ok)
    })())
}

fn add_shared_data(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_shared_data",
        |mut caller: Caller<'_, HostState>, key_ptr: i32, key_len: i32, ret_ptr: i32, ret_len: i32, ret_cas: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            let found = match memory::slice(mem, key_ptr, key_len) {
                Ok(key) => state.shared.get_data(key),
                Err(status) => return Ok(status.code()),
            };
            let Some((value, cas)) = found else { return Ok(Status::NotFound.code()) };
            let copied = memory::copy_out(&mut caller, &value, ret_ptr, ret_len)?;
            if copied != Status::Ok {
                return Ok(copied.code());
            }
            let Some((mem, _)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            wasmtime::Result::Ok(status(memory::write_u32(mem, ret_cas, cas).map(|()| Status::Ok)))
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_shared_data",
        |mut caller: Caller<'_, HostState>, key_ptr: i32, key_len: i32, value_ptr: i32, value_len: i32, cas: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let key = memory::slice(mem, key_ptr, key_len)?;
                let value = memory::slice(mem, value_ptr, value_len)?;
                Ok(state.shared.set_data(key, value, cas as u32))
            })())
        },
    )?;
    Ok(())
}

fn add_metrics(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_define_metric",
        |mut caller: Caller<'_, HostState>, kind: i32, name_ptr: i32, name_len: i32, ret_id: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let id = state.shared.define_metric(kind, memory::slice(mem, name_ptr, name_len)?)?;
                memory::write_u32(mem, ret_id, id)?;
                Ok(Status::Ok)
            })())
        },
    )?;
    linker.func_wrap("env", "proxy_get_metric", |mut caller: Caller<'_, HostState>, id: i32, ret: i32| {
        let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
        status((|| {
            let value = state.shared.metric(id as u32).ok_or(Status::NotFound)?;
            memory::write_u64(mem, ret, value as u64)?;
            Ok(Status::Ok)
        })())
    })?;
    linker.func_wrap("env", "proxy_record_metric", |caller: Caller<'_, HostState>, id: i32, value: i64| {
        caller.data().shared.update_metric(id as u32, |v| *v = value).code()
    })?;
    linker.func_wrap("env", "proxy_increment_metric", |caller: Caller<'_, HostState>, id: i32, offset: i64| {
        caller.data().shared.update_metric(id as u32, |v| *v = v.saturating_add(offset)).code()
    })?;
    Ok(())
}
