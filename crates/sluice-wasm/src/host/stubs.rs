//! ABI calls Sluice does not implement: gRPC streams and shared queues.
//!
//! Each answers with an error status at once. Where the Rust SDK turns a status into an
//! `Err` the plugin can handle, that status is used (so a plugin that tries a gRPC stream
//! and copes with failure keeps working); elsewhere `Unimplemented` (12).
//!
//! | call | status |
//! |---|---|
//! | `proxy_grpc_stream` | `InternalFailure` (10) |
//! | `proxy_grpc_send`, `proxy_grpc_close` | `NotFound` (1): no such stream |
//! | `proxy_resolve_shared_queue`, `proxy_dequeue_shared_queue`, `proxy_enqueue_shared_queue` | `NotFound` (1): no such queue |
//! | `proxy_register_shared_queue` | `Unimplemented` (12) |
//!
//! (Unary gRPC calls, their cancellation and `proxy_get_status` are in `calls.rs`.)

use super::HostState;
use crate::abi::Status;
use wasmtime::Linker;

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let failure = Status::InternalFailure.code();
    let not_found = Status::NotFound.code();
    let unimplemented = Status::Unimplemented.code();
    linker.func_wrap(
        "env",
        "proxy_grpc_stream",
        move |_: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32| failure,
    )?;
    linker.func_wrap("env", "proxy_grpc_send", move |_: i32, _: i32, _: i32, _: i32| not_found)?;
    linker.func_wrap("env", "proxy_grpc_close", move |_: i32| not_found)?;
    linker.func_wrap("env", "proxy_resolve_shared_queue", move |_: i32, _: i32, _: i32, _: i32, _: i32| not_found)?;
    linker.func_wrap("env", "proxy_dequeue_shared_queue", move |_: i32, _: i32, _: i32| not_found)?;
    linker.func_wrap("env", "proxy_enqueue_shared_queue", move |_: i32, _: i32, _: i32| not_found)?;
    linker.func_wrap("env", "proxy_register_shared_queue", move |_: i32, _: i32, _: i32| unimplemented)?;
    Ok(())
}
