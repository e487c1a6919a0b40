//! Header maps: `proxy_get_header_map_value`, `proxy_get_header_map_pairs`,
//! `proxy_get_header_map_size`, `proxy_add_header_map_value`,
//! `proxy_replace_header_map_value`, `proxy_remove_header_map_value`,
//! `proxy_set_header_map_pairs`.
//!
//! The request head is writable in the request headers callback and readable in the later
//! callbacks (with `request_headers_in_response`); the response head is writable in the
//! response headers callback and readable in the later ones: response body, done, log,
//! delete (with `response_headers_in_body`). An HTTP call's response headers are readable in
//! `proxy_on_http_call_response` (with `:status`; none when the call failed); a gRPC stream's
//! initial and trailing metadata in the callbacks that announce them. Trailers are always
//! empty. Reading a map that is not there gives an empty map (the SDK
//! would panic on an error); changing one gives `BadArgument`.

use super::{memory_and_state, status, Call, HostState};
use crate::abi::{MapType, Status};
use crate::grpc_stream::StreamEventKind;
use crate::headermap::Head;
use crate::memory;
use wasmtime::{Caller, Linker};

/// The head `map` names, `Ok(None)` when it is absent or always empty; for `write`, `Err`
/// unless it is there and writable. `event` is what a gRPC stream delivers, if this is the
/// callback it is delivered to.
fn head<'a>(
    call: &'a mut Call,
    event: Option<&'a StreamEventKind>,
    map: i32,
    write: bool,
) -> Result<Option<Head<'a>>, Status> {
    let map = MapType::from_guest(map).ok_or(Status::BadArgument)?;
    let head = match (map, event) {
        (MapType::GrpcReceiveInitialMetadata, Some(StreamEventKind::InitialMetadata(metadata)))
        | (MapType::GrpcReceiveTrailingMetadata, Some(StreamEventKind::TrailingMetadata(metadata)))
            if !write =>
        {
            Some(Head::Metadata(metadata))
        }
        _ => match (map, call.lend()) {
            (MapType::RequestHeaders, Some(lend)) => lend.request_map(write),
            (MapType::ResponseHeaders, Some(lend)) => lend.response_map(write),
            (MapType::HttpCallResponseHeaders, Some(lend)) if !write => lend.call_response_map(),
            _ => None,
        },
    };
    match head {
        None if write => Err(Status::BadArgument),
        head => Ok(head),
    }
}

/// An empty map in the wire format.
const EMPTY_MAP: [u8; 4] = [0; 4];

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_header_map_value",
        |mut caller: Caller<'_, HostState>, map: i32, key_ptr: i32, key_len: i32, ret_ptr: i32, ret_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            let value = (|| {
                let key = memory::slice(mem, key_ptr, key_len)?;
                head(&mut state.call, state.event.as_ref(), map, false)?
                    .and_then(|head| head.get(key))
                    .ok_or(Status::NotFound)
            })();
            match value {
                Ok(value) => Ok(memory::copy_out(&mut caller, &value, ret_ptr, ret_len)?.code()),
                Err(status) => wasmtime::Result::Ok(status.code()),
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_pairs",
        |mut caller: Caller<'_, HostState>, map: i32, ret_ptr: i32, ret_len: i32| {
            let Some((_, state)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            match head(&mut state.call, state.event.as_ref(), map, false) {
                Ok(Some(head)) => {
                    let wire = head.serialize();
                    Ok(memory::copy_out(&mut caller, &wire, ret_ptr, ret_len)?.code())
                }
                Ok(None) => Ok(memory::copy_out(&mut caller, &EMPTY_MAP, ret_ptr, ret_len)?.code()),
                Err(status) => wasmtime::Result::Ok(status.code()),
            }
        },
    )?;
    linker.func_wrap("env", "proxy_get_header_map_size", |mut caller: Caller<'_, HostState>, map: i32, ret: i32| {
        let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
        status((|| {
            let size = head(&mut state.call, state.event.as_ref(), map, false)?
                .map(|head| head.serialize().len())
                .unwrap_or(EMPTY_MAP.len());
            memory::write_u32(mem, ret, size as u32)?;
            Ok(Status::Ok)
        })())
    })?;
    linker.func_wrap(
        "env",
        "proxy_add_header_map_value",
        |mut caller: Caller<'_, HostState>, map: i32, key_ptr: i32, key_len: i32, value_ptr: i32, value_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let key = memory::slice(mem, key_ptr, key_len)?;
                let value = memory::slice(mem, value_ptr, value_len)?;
                head(&mut state.call, state.event.as_ref(), map, true)?.ok_or(Status::BadArgument)?.add(key, value)?;
                Ok(Status::Ok)
            })())
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_replace_header_map_value",
        |mut caller: Caller<'_, HostState>, map: i32, key_ptr: i32, key_len: i32, value_ptr: i32, value_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let key = memory::slice(mem, key_ptr, key_len)?;
                let value = memory::slice(mem, value_ptr, value_len)?;
                head(&mut state.call, state.event.as_ref(), map, true)?
                    .ok_or(Status::BadArgument)?
                    .replace(key, value)?;
                Ok(Status::Ok)
            })())
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_remove_header_map_value",
        |mut caller: Caller<'_, HostState>, map: i32, key_ptr: i32, key_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let key = memory::slice(mem, key_ptr, key_len)?;
                head(&mut state.call, state.event.as_ref(), map, true)?.ok_or(Status::BadArgument)?.remove(key)?;
                Ok(Status::Ok)
            })())
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_header_map_pairs",
        |mut caller: Caller<'_, HostState>, map: i32, pairs_ptr: i32, pairs_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let pairs = memory::slice(mem, pairs_ptr, pairs_len)?;
                head(&mut state.call, state.event.as_ref(), map, true)?.ok_or(Status::BadArgument)?.set_all(pairs)?;
                Ok(Status::Ok)
            })())
        },
    )?;
    Ok(())
}
