//! A plugin compiled and linked once, instantiated many times.

use crate::abi::ABI_MARKERS;
use crate::engine;
use crate::error::WasmError;
use crate::host::{self, HostState};
use std::path::Path;
use wasmtime::{ExternType, InstancePre, Module};

/// A compiled, linked Proxy-Wasm plugin: cheap to clone, shared by all instances (and by
/// later versions loaded from the same bytes, if the caller keeps it).
#[derive(Clone)]
pub struct CompiledPlugin {
    name: String,
    pub(crate) pre: InstancePre<HostState>,
    reads_heads: bool,
}

impl std::fmt::Debug for CompiledPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPlugin").field("name", &self.name).finish_non_exhaustive()
    }
}

impl CompiledPlugin {
    /// Compiles `wasm` (binary module) with Cranelift and checks it is a Proxy-Wasm 0.2.x
    /// plugin: an ABI marker export, `memory`, an allocator, `proxy_on_context_create`, and
    /// imports of the right types.
    pub fn compile(name: &str, wasm: &[u8]) -> Result<Self, WasmError> {
        let engine = engine::engine().map_err(|reason| WasmError::Compile { name: name.to_string(), reason })?;
        let module = Module::new(engine, wasm)
            .map_err(|err| WasmError::Compile { name: name.to_string(), reason: format!("{err:#}") })?;
        check_exports(&module).map_err(|reason| WasmError::Abi { name: name.to_string(), reason })?;
        let abi = |err: wasmtime::Error| WasmError::Abi { name: name.to_string(), reason: format!("{err:#}") };
        let linker = host::linker(engine, &module).map_err(abi)?;
        let pre = linker.instantiate_pre(&module).map_err(abi)?;
        let reads_heads =
            module.imports().any(|import| import.module() == "env" && host::HEAD_READERS.contains(&import.name()));
        Ok(Self { name: name.to_string(), pre, reads_heads })
    }

    /// Reads and compiles the `.wasm` file at `path`.
    pub fn from_file(name: &str, path: &Path) -> Result<Self, WasmError> {
        let wasm = std::fs::read(path).map_err(|source| WasmError::Io { path: path.to_path_buf(), source })?;
        Self::compile(name, &wasm)
    }

    /// Whether the plugin imports a host function that reads a message head (a header map
    /// reader or `proxy_get_property`). Only then are the heads kept for its later callbacks
    /// (`request_headers_in_response`, `response_headers_in_body`): a plugin without one
    /// cannot tell, and is spared the copies.
    pub fn reads_heads(&self) -> bool {
        self.reads_heads
    }

    /// The name it was compiled under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn check_exports(module: &Module) -> Result<(), String> {
    if !ABI_MARKERS.iter().any(|marker| module.get_export(marker).is_some()) {
        return Err(
            "no proxy_abi_version_0_2_1 (or 0_2_0) export: not a Proxy-Wasm plugin, or another ABI version".into()
        );
    }
    match module.get_export("memory") {
        Some(ExternType::Memory(_)) => {}
        _ => return Err("no exported memory".into()),
    }
    if !["proxy_on_memory_allocate", "malloc"].iter().any(|f| matches!(module.get_export(f), Some(ExternType::Func(_))))
    {
        return Err("no proxy_on_memory_allocate (or malloc) export".into());
    }
    if !matches!(module.get_export("proxy_on_context_create"), Some(ExternType::Func(_))) {
        return Err("no proxy_on_context_create export".into());
    }
    Ok(())
}
