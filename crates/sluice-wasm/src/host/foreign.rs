//! Sluice's extensions, through `proxy_call_foreign_function` (so plugins stay portable:
//! another host just answers `NotFound`).
//!
//! | name | argument | result |
//! |---|---|---|
//! | `sluice.no_more_callbacks` | none | none; the module is called no more for this transaction (`Flow::Done`) |
//! | `sluice.cache_query` | absolute URL | JSON array, one object per stored variant |
//! | `sluice.cache_expire` | absolute URL | number of variants made stale (decimal) |
//! | `sluice.cache_delete` | absolute URL | number of variants removed (decimal) |
//! | `sluice.cache_delete_prefix` | absolute URL prefix | number of objects removed (decimal) |
//! | `sluice.cache_delete_tag` | a tag (`Surrogate-Key` / `Cache-Tag`) | number of objects removed (decimal) |
//! | `sluice.cache_validate` | absolute URL | number of stored responses whose revalidation was started (decimal: `1`, or `0` when nothing is stored) |
//! | `sluice.log_field` | `NAME=VALUE` | none; appends `NAME=VALUE` to the transaction's access log line |
//!
//! `sluice.cache_validate` starts the revalidation ([`CacheApi::validate`]: a conditional
//! request to the origin) in the background on the proxy's runtime and returns at once:
//! Proxy-Wasm has no way to suspend a plugin on a host call, so the plugin does not wait for
//! the origin and does not see the outcome (a later `sluice.cache_query` shows the refreshed
//! object; the outcome is traced at debug level, a failure at warn).
//!
//! `sluice.log_field`: NAME is one or more of `A-Z a-z 0-9 _ . -`, VALUE any UTF-8 without
//! control characters (the line stays one line); at most [`MAX_LOG_FIELDS`] per transaction.
//! Fields are written in the order they were added, after those of the modules before this
//! one, when the host calls the module's log phase: not after `sluice.no_more_callbacks` or
//! a failure of the plugin, after which the host calls the module no more.
//!
//! Errors: an unknown name gives `NotFound`; a bad URL `BadArgument`; no cache at hand (a
//! tick before the proxy passed one), a cache failure, or `sluice.cache_validate` called
//! outside the proxy's runtime `InternalFailure`; `sluice.no_more_callbacks` or
//! `sluice.log_field` outside an HTTP callback, a malformed field or one too many
//! `BadArgument`.

use super::{memory_and_state, HostState};
use crate::abi::Status;
use crate::memory;
use sluice_module::{CacheApi, CacheError, ObjectInfo};
use std::sync::Arc;
use std::time::UNIX_EPOCH;
use wasmtime::{Caller, Linker};

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_call_foreign_function",
        |mut caller: Caller<'_, HostState>,
         name_ptr: i32,
         name_len: i32,
         args_ptr: i32,
         args_len: i32,
         ret_ptr: i32,
         ret_len: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return Ok(Status::InternalFailure.code()) };
            let result = (|| {
                let name = memory::slice(mem, name_ptr, name_len)?;
                let args = memory::slice(mem, args_ptr, args_len)?;
                call(state, name, args)
            })();
            match result {
                Ok(Some(bytes)) => Ok(memory::copy_out(&mut caller, &bytes, ret_ptr, ret_len)?.code()),
                Ok(None) => Ok(Status::Ok.code()),
                Err(status) => wasmtime::Result::Ok(status.code()),
            }
        },
    )?;
    Ok(())
}

/// Runs foreign function `name`; `Ok(None)` for a function without a result.
fn call(state: &mut HostState, name: &[u8], args: &[u8]) -> Result<Option<Vec<u8>>, Status> {
    if name == b"sluice.no_more_callbacks" {
        let lend = state.call.lend().ok_or(Status::BadArgument)?;
        lend.no_more_callbacks = true;
        return Ok(None);
    }
    if name == b"sluice.log_field" {
        let lend = state.call.lend().ok_or(Status::BadArgument)?;
        add_log_field(&mut lend.txn().log_fields.lock(), args)?;
        return Ok(None);
    }
    let op: fn(&dyn CacheApi, &str) -> Result<Vec<u8>, CacheError> = match name {
        b"sluice.cache_query" => |cache, url| Ok(query_json(&cache.query(url)?)),
        b"sluice.cache_expire" => |cache, url| Ok(cache.expire(url)?.to_string().into_bytes()),
        b"sluice.cache_delete" => |cache, url| Ok(cache.delete(url)?.to_string().into_bytes()),
        b"sluice.cache_delete_prefix" => |cache, url| Ok(cache.delete_prefix(url)?.to_string().into_bytes()),
        b"sluice.cache_delete_tag" => |cache, tag| Ok(cache.delete_tag(tag)?.to_string().into_bytes()),
        b"sluice.cache_validate" => |cache, url| Ok(start_validation(cache, url)?.to_string().into_bytes()),
        _ => return Err(Status::NotFound),
    };
    let url = std::str::from_utf8(args).map_err(|_| Status::BadArgument)?;
    let cache: Arc<dyn CacheApi> = match state.call.lend() {
        Some(lend) => Arc::clone(&lend.txn().cache),
        None => Arc::clone(state.shared.cache.get().ok_or(Status::InternalFailure)?),
    };
    match op(cache.as_ref(), url) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(CacheError::BadUrl(_)) => Err(Status::BadArgument),
        Err(_) => Err(Status::InternalFailure),
    }
}

/// How many fields `sluice.log_field` may add to one transaction.
pub(crate) const MAX_LOG_FIELDS: usize = 64;

/// Parses `NAME=VALUE` and appends it to `fields` (see the module docs for the rules).
fn add_log_field(fields: &mut Vec<(String, String)>, arg: &[u8]) -> Result<(), Status> {
    let arg = std::str::from_utf8(arg).map_err(|_| Status::BadArgument)?;
    let (name, value) = arg.split_once('=').ok_or(Status::BadArgument)?;
    let name_ok =
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !name_ok || value.chars().any(char::is_control) || fields.len() >= MAX_LOG_FIELDS {
        return Err(Status::BadArgument);
    }
    fields.push((name.to_owned(), value.to_owned()));
    Ok(())
}

/// Starts revalidating `url` in the background; 1 when started, 0 when nothing is stored.
fn start_validation(cache: &dyn CacheApi, url: &str) -> Result<usize, CacheError> {
    if cache.query(url)?.is_empty() {
        return Ok(0);
    }
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| CacheError::Unsupported("sluice.cache_validate outside the proxy's runtime"))?;
    let validation = cache.validate(url);
    let url = url.to_owned();
    runtime.spawn(async move {
        match validation.await {
            Ok(done) => tracing::debug!(%url, outcome = ?done.outcome, "sluice.cache_validate"),
            Err(e) => tracing::warn!(%url, "sluice.cache_validate failed: {e}"),
        }
    });
    Ok(1)
}

/// The `sluice.cache_query` result: `[{"key", "status", "size", "age_s", "lifetime_s",
/// "fresh", "hits", "stored_at"}]` (`stored_at` in Unix seconds).
fn query_json(objects: &[ObjectInfo]) -> Vec<u8> {
    let list: Vec<serde_json::Value> = objects
        .iter()
        .map(|object| {
            serde_json::json!({
                "key": object.key,
                "status": object.status.as_u16(),
                "size": object.size,
                "age_s": object.age.as_secs(),
                "lifetime_s": object.lifetime.as_secs(),
                "fresh": object.is_fresh(),
                "hits": object.hits,
                "stored_at": object.stored_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            })
        })
        .collect();
    serde_json::to_vec(&list).unwrap_or_else(|_| b"[]".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_fields_are_checked_and_bounded() {
        let mut fields = Vec::new();
        add_log_field(&mut fields, b"a.b-c_9=value with = and spaces").unwrap();
        assert_eq!(fields, [("a.b-c_9".to_owned(), "value with = and spaces".to_owned())]);
        for bad in [&b"no-equals"[..], b"=v", b"sp ace=v", b"n=\x01", b"n=\xff"] {
            assert_eq!(add_log_field(&mut fields, bad), Err(Status::BadArgument), "{bad:?}");
        }
        while fields.len() < MAX_LOG_FIELDS {
            add_log_field(&mut fields, b"n=v").unwrap();
        }
        assert_eq!(add_log_field(&mut fields, b"n=v"), Err(Status::BadArgument), "one too many");
        assert_eq!(fields.len(), MAX_LOG_FIELDS);
    }
}
