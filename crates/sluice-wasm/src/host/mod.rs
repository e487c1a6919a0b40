//! The host side of the ABI: the per-instance state every host function sees, and the
//! linker that binds the plugin's imports.
//!
//! Each file here implements one family of imports. Every host function returns the ABI
//! status as `i32`, never panics on guest input, and bounds-checks every guest pointer
//! (`crate::memory`). Imports the plugin has that Sluice does not define trap when called.

mod buffers;
mod calls;
mod foreign;
mod grpc_stream;
mod headers;
mod lend;
mod log;
mod misc;
mod properties;
mod queues;
mod wasi;

use crate::abi::Status;
use crate::kept::HeaderList;
use crate::shared::Shared;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) use lend::{Asked, Call, Lend, Lending, RequestHead, RequestView, ResponseHead, TxnFacts};
use wasmtime::{Caller, Engine, Linker, Memory, ResourceLimiter, TypedFunc};

/// The store data of one plugin instance.
pub(crate) struct HostState {
    pub shared: Arc<Shared>,
    pub limiter: MemoryLimiter,
    /// The plugin's memory and allocator, once instantiated.
    pub exports: Option<GuestExports>,
    /// What the current callback may see and change; empty between callbacks.
    pub call: Call,
    /// Properties set by the plugin (`proxy_set_property`), per context id.
    pub properties: HashMap<u32, SetProperties>,
    /// Emptied header lists of ended transactions, for the next ones' kept heads.
    pub spare_lists: Vec<HeaderList>,
    /// The token of the next call (`proxy_http_call`, `proxy_grpc_call`).
    pub next_call_token: u32,
    /// This instance's identity, unique in the process (the owner of a shared queue).
    pub instance: u64,
    /// A context of this instance opened a gRPC stream (its deletion then cancels them).
    pub opened_streams: bool,
    /// What a gRPC stream delivers, during the callback it is delivered to.
    pub event: Option<crate::grpc_stream::StreamEventKind>,
}

/// The identity of the next instance.
static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl HostState {
    pub(crate) fn new(shared: Arc<Shared>, memory_bytes: usize) -> Self {
        Self {
            shared,
            limiter: MemoryLimiter { max_bytes: memory_bytes, hit: false },
            exports: None,
            call: Call::default(),
            properties: HashMap::new(),
            spare_lists: Vec::new(),
            next_call_token: 1,
            instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            opened_streams: false,
            event: None,
        }
    }
}

/// The imports (module `env`) through which a plugin can read a message head: the header
/// map readers and `proxy_get_property` (`request.*`, `response.code`). A plugin importing
/// none of them cannot tell whether the heads were kept for its later callbacks, so they
/// are not kept for it (`CompiledPlugin::reads_heads`).
pub(crate) const HEAD_READERS: [&str; 4] =
    ["proxy_get_header_map_value", "proxy_get_header_map_pairs", "proxy_get_header_map_size", "proxy_get_property"];

/// Properties a context set: (path, value) pairs.
pub(crate) type SetProperties = Vec<(Vec<u8>, Vec<u8>)>;

/// The plugin exports host functions need.
#[derive(Clone)]
pub(crate) struct GuestExports {
    pub memory: Memory,
    /// `proxy_on_memory_allocate` (or `malloc`): `size -> pointer`.
    pub alloc: TypedFunc<i32, i32>,
}

/// Which body a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Request,
    Response,
}

/// The body data of a body callback.
pub(crate) struct BodyBuf {
    pub kind: BodyKind,
    pub data: Bytes,
    /// The plugin may change the body's length.
    pub resizable: bool,
    /// The body may not grow past this (`max_buffer_bytes`, or its length at the call).
    pub max_len: usize,
    /// The plugin changed the data.
    pub changed: bool,
}

/// The memory limit of one instance; remembers whether it refused a growth.
pub(crate) struct MemoryLimiter {
    pub max_bytes: usize,
    /// A growth past `max_bytes` was refused (the instance traps).
    pub hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory limit: growing to {desired} bytes exceeds the {}-byte limit",
                self.max_bytes
            )));
        }
        Ok(maximum.is_none_or(|max| desired <= max))
    }

    fn table_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000 && maximum.is_none_or(|max| desired <= max))
    }
}

/// The calling instance's memory and state, borrowed together; `None` before instantiation.
pub(crate) fn memory_and_state<'a>(caller: &'a mut Caller<'_, HostState>) -> Option<(&'a mut [u8], &'a mut HostState)> {
    let memory = caller.data().exports.as_ref()?.memory;
    Some(memory.data_and_store_mut(caller))
}

/// Flattens a host call's outcome to its `i32` status.
pub(crate) fn status(result: Result<Status, Status>) -> i32 {
    match result {
        Ok(status) | Err(status) => status.code(),
    }
}

/// A linker with every import Sluice provides; undefined imports of `module` trap.
pub(crate) fn linker(engine: &Engine, module: &wasmtime::Module) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    log::add(&mut linker)?;
    misc::add(&mut linker)?;
    headers::add(&mut linker)?;
    calls::add(&mut linker)?;
    grpc_stream::add(&mut linker)?;
    buffers::add(&mut linker)?;
    properties::add(&mut linker)?;
    queues::add(&mut linker)?;
    foreign::add(&mut linker)?;
    wasi::add(&mut linker)?;
    linker.define_unknown_imports_as_traps(module)?;
    Ok(linker)
}
