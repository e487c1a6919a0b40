//! Errors of loading and starting plugins.

use std::path::PathBuf;

/// Why a plugin could not be loaded, started or found.
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    /// The `.wasm` file could not be read.
    #[error("cannot read wasm plugin {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid module, or Cranelift refused them.
    #[error("cannot compile wasm plugin {name:?}: {reason}")]
    Compile { name: String, reason: String },
    /// The module is valid but no Proxy-Wasm 0.2.x plugin (missing exports, wrong types).
    #[error("wasm plugin {name:?} does not follow Proxy-Wasm ABI 0.2.1: {reason}")]
    Abi { name: String, reason: String },
    /// Instantiation or a start-up callback (`_initialize`, `proxy_on_vm_start`,
    /// `proxy_on_configure`) trapped, timed out or returned false.
    #[error("wasm plugin {name:?} failed to start: {reason}")]
    Start { name: String, reason: String },
    /// The registry has no plugin of that name.
    #[error("no wasm plugin named {0:?} is loaded")]
    NotLoaded(String),
}
