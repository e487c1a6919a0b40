//! `proxy_http_call`: a headers callback asks for an HTTP call to one of the plugin's
//! clusters (`crate::callout`). The call is recorded in the callback's lend and made when
//! the callback returns, while the transaction waits; its token is written for the plugin,
//! which gets it back in `proxy_on_http_call_response`.
//!
//! The plugin's timeout bounds the call (0, or more than a minute: a minute).
//!
//! Statuses: `BadArgument` for an unknown cluster, a request without `:method`, `:path` or
//! `:authority`, or a callback that cannot wait for a call (outside the request and
//! response headers callbacks and `proxy_on_http_call_response`, or a second call from one
//! callback); `ParseFailure` for malformed header pairs.

use super::{memory_and_state, status, HostState};
use crate::abi::Status;
use crate::callout::Callout;
use crate::{headermap, memory};
use std::time::Duration;
use wasmtime::{Caller, Linker};

/// The longest a transaction waits for one HTTP call.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_http_call", http_call)?;
    Ok(())
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
        let upstream = memory::slice(mem, upstream_ptr, upstream_len)?;
        let cluster = std::str::from_utf8(upstream)
            .ok()
            .and_then(|name| state.shared.clusters.get(name))
            .ok_or(Status::BadArgument)?;
        let headers = headermap::deserialize(memory::slice(mem, headers_ptr, headers_len)?)?;
        let body = memory::slice(mem, body_ptr, body_len)?;
        // The ABI's timeout is an unsigned millisecond count; 0 (none of its own) and anything
        // longer get the longest the host allows.
        let timeout = match timeout_ms as u32 {
            0 => MAX_CALL_TIMEOUT,
            ms => Duration::from_millis(u64::from(ms)).min(MAX_CALL_TIMEOUT),
        };
        let token = state.next_call_token;
        let callout = Callout::new(token, cluster, &headers, body, timeout)?;
        let lend = state.call.lend().filter(|lend| lend.may_call()).ok_or(Status::BadArgument)?;
        lend.asked().callout = Some(callout);
        state.next_call_token = token.wrapping_add(1);
        memory::write_u32(mem, token_ptr, token)?;
        Ok(Status::Ok)
    })())
}
