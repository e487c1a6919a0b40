//! ABI calls Sluice does not implement: gRPC streams.
//!
//! Each answers at once with an error status that the Rust SDK turns into an
//! `Err` the plugin can handle (so a plugin that tries a gRPC stream and copes with failure
//! keeps working).
//!
//! | call | status |
//! |---|---|
//! | `proxy_grpc_stream` | `InternalFailure` (10) |
//! | `proxy_grpc_send`, `proxy_grpc_close` | `NotFound` (1): no such stream |
//!
//! (Unary gRPC calls, their cancellation and `proxy_get_status` are in `calls.rs`; shared
//! queues in `queues.rs`.)

use super::HostState;
use crate::abi::Status;
use wasmtime::Linker;

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let failure = Status::InternalFailure.code();
    let not_found = Status::NotFound.code();
    linker.func_wrap(
        "env",
        "proxy_grpc_stream",
        move |_: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32| failure,
    )?;
    linker.func_wrap("env", "proxy_grpc_send", move |_: i32, _: i32, _: i32, _: i32| not_found)?;
    linker.func_wrap("env", "proxy_grpc_close", move |_: i32| not_found)?;
    Ok(())
}
