//! Proxy-Wasm plugins as Sluice modules, on wasmtime.
//!
//! A Proxy-Wasm plugin (ABI 0.2.1, as built with the `proxy-wasm` Rust SDK for
//! `wasm32-wasip1`, or any other SDK) runs as a [`sluice_module::Module`]:
//!
//! - [`CompiledPlugin`] compiles a `.wasm` once (Cranelift) and links it against Sluice's
//!   host functions (`host/`: headers, bodies, properties, logging, local responses, ticks,
//!   shared data, metrics, the Sluice foreign functions, and the few WASI calls plugins
//!   import).
//! - [`WasmModule`] is one loaded version: a pool of instances, each with its root context
//!   (`proxy_on_vm_start`, `proxy_on_configure`); each transaction gets an HTTP context in one
//!   of them ([`txn`] has the phase mapping).
//! - [`WasmRegistry`] loads, reloads and unloads plugins by name at run time behind stable
//!   [`WasmHandle`]s, without dropping transactions.
//!
//! Limits: every callback runs under a deadline (epoch interruption, [`EPOCH_TICK`]
//! granularity) and every instance under a memory limit; a fault discards the instance (its
//! transactions fail open or closed per [`WasmConfig::failure`]) and a background thread
//! starts a new one after an exponential backoff. See `docs/modules-wasm.md`.

mod abi;
mod callout;
mod compiled;
mod config;
mod delivery;
mod engine;
mod error;
mod grpc;
mod grpc_stream;
mod headermap;
mod host;
mod joined;
mod kept;
mod memory;
mod module;
mod pool;
mod queues;
mod registry;
mod shared;
mod stats;
pub mod txn;
mod vm;

pub use abi::LogLevel;
pub use callout::Cluster;
pub use compiled::CompiledPlugin;
pub use config::{Attach, Limits, WasmConfig, WasmSpec};
pub use engine::EPOCH_TICK;
pub use error::WasmError;
pub use module::WasmModule;
pub use registry::{WasmHandle, WasmRegistry, WasmSource};
pub use shared::{system_clock, HostEnv, Metric, WallClock};
pub use stats::WasmStats;
pub use txn::PluginFailure;
