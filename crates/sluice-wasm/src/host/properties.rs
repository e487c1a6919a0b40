//! Properties: `proxy_get_property`, `proxy_set_property`.
//!
//! A property path is a list of segments separated by NUL bytes, e.g. `request\0path`.
//! Strings are returned as raw bytes, integers as 8-byte little-endian (as in Envoy).
//!
//! | path | value |
//! |---|---|
//! | `plugin_name`, `plugin_root_id`, `plugin_vm_id` | the module's name |
//! | `request.path` / `url_path` / `query` | path with query / without / the query |
//! | `request.host`, `request.scheme`, `request.method`, `request.protocol` | from the request head |
//! | `request.useragent`, `request.referer` | those headers |
//! | `request.id`, `sluice.txn_id` | the transaction id (decimal) |
//! | `response.code` | status code (integer) |
//! | `source.address`, `source.port` | the client's `ip:port`, and port (integer) |
//! | `sluice.module`, `sluice.version` | module name, plugin version (decimal) |
//! | `sluice.cache_lookup` | `hit`, `stale` or `miss` once the cache was consulted |
//!
//! Anything else is `NotFound`, unless the plugin set it for this context with
//! `proxy_set_property` (at most [`MAX_SET`] per context, each path at most [`MAX_PATH`]
//! bytes and each value at most [`MAX_VALUE`]; past any, `BadArgument`).

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::headermap::{request_authority, request_path, request_scheme};
use crate::memory;
use bytes::Bytes;
use http::header::{REFERER, USER_AGENT};
use http::Version;
use sluice_module::LookupOutcome;
use wasmtime::{Caller, Linker};

/// Most properties one context may set.
pub const MAX_SET: usize = 64;
/// Largest value of a set property.
pub const MAX_VALUE: usize = 16 << 10;
/// Longest path of a set property.
pub const MAX_PATH: usize = 4 << 10;

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_property",
        |mut caller: Caller<'_, HostState>, path_ptr: i32, path_len: i32, ret_ptr: i32, ret_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            let value = match memory::slice(mem, path_ptr, path_len) {
                Ok(path) => lookup(state, path),
                Err(status) => return Ok(status.code()),
            };
            match value {
                Some(value) => Ok(memory::copy_out(&mut caller, &value, ret_ptr, ret_len)?.code()),
                None => wasmtime::Result::Ok(Status::NotFound.code()),
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_property",
        |mut caller: Caller<'_, HostState>, path_ptr: i32, path_len: i32, value_ptr: i32, value_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
            status((|| {
                let path = memory::slice(mem, path_ptr, path_len)?;
                let value = memory::slice(mem, value_ptr, value_len)?;
                if path.len() > MAX_PATH || value.len() > MAX_VALUE {
                    return Err(Status::BadArgument);
                }
                let set = state.properties.entry(state.call.context_id).or_default();
                if let Some((_, old)) = set.iter_mut().find(|(p, _)| p.as_slice() == path) {
                    *old = value.to_vec();
                } else if set.len() < MAX_SET {
                    set.push((path.to_vec(), value.to_vec()));
                } else {
                    return Err(Status::BadArgument);
                }
                Ok(Status::Ok)
            })())
        },
    )?;
    Ok(())
}

fn int(value: i64) -> Bytes {
    Bytes::copy_from_slice(&value.to_le_bytes())
}

fn text(value: impl Into<String>) -> Bytes {
    Bytes::from(value.into())
}

/// The value of the property at `path` for the current callback.
fn lookup(state: &mut HostState, path: &[u8]) -> Option<Bytes> {
    if let Some(set) = state.properties.get(&state.call.context_id) {
        if let Some((_, value)) = set.iter().find(|(p, _)| p.as_slice() == path) {
            return Some(Bytes::copy_from_slice(value));
        }
    }
    let lend = state.call.lend();
    let lend = lend.as_deref();
    let segments: Vec<&[u8]> = path.split(|b| *b == 0).collect();
    let request = lend.and_then(|lend| lend.request());
    Some(match segments.as_slice() {
        [b"plugin_name"] | [b"plugin_root_id"] | [b"plugin_vm_id"] | [b"sluice", b"module"] => {
            text(state.shared.name.clone())
        }
        [b"sluice", b"version"] => text(state.shared.version.to_string()),
        [b"request", b"id"] | [b"sluice", b"txn_id"] => text(lend?.txn().id.to_string()),
        [b"request", b"path"] => text(request_path(request?)),
        [b"request", b"url_path"] => text(request?.uri().path()),
        [b"request", b"query"] => text(request?.uri().query().unwrap_or("")),
        [b"request", b"host"] => request_authority(request?),
        [b"request", b"scheme"] => text(request_scheme(request?)),
        [b"request", b"method"] => text(request?.method().as_str()),
        [b"request", b"protocol"] => text(protocol(request?.version())),
        [b"request", b"useragent"] => Bytes::copy_from_slice(request?.header(&USER_AGENT)?),
        [b"request", b"referer"] => Bytes::copy_from_slice(request?.header(&REFERER)?),
        [b"response", b"code"] => int(i64::from(lend?.response_status()?.as_u16())),
        [b"source", b"address"] => text(lend?.txn().client.to_string()),
        [b"source", b"port"] => int(i64::from(lend?.txn().client.port())),
        [b"sluice", b"cache_lookup"] => text(match lend?.lookup()? {
            LookupOutcome::Hit => "hit",
            LookupOutcome::Stale => "stale",
            LookupOutcome::Miss => "miss",
        }),
        _ => return None,
    })
}

fn protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}
