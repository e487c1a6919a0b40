//! Loading, reloading and unloading plugins at run time.
//!
//! The proxy keeps one [`WasmHandle`] per configured plugin name in its module chain (as an
//! `Arc<dyn Module>`). Loading a name that is already loaded compiles and starts the new
//! version first and then swaps it in behind the same handle: transactions that started on
//! the old version finish on it (their state holds it), new transactions get the new one,
//! and nothing is dropped. A version that fails to compile or start is not swapped in; the
//! old one keeps serving. Unloading makes the handle sit out every new transaction; loading
//! the name again revives the same handle.
//!
//! ```no_run
//! # use sluice_wasm::{WasmRegistry, WasmConfig};
//! # use std::sync::Arc;
//! let registry = WasmRegistry::new();
//! // config load / reload, or `PUT /modules/<name>` on the admin API:
//! let handle = registry.load("headers", "plugins/add_headers.wasm", WasmConfig::default()).unwrap();
//! let module: Arc<dyn sluice_module::Module> = handle; // put in the module chain once
//! // later: same call with a new file swaps the version behind `module`
//! registry.unload("headers").unwrap(); // `module` now sits out new transactions
//! // a later load of "headers" revives `module`
//! ```

use crate::compiled::CompiledPlugin;
use crate::config::WasmConfig;
use crate::error::WasmError;
use crate::module::WasmModule;
use crate::shared::HostEnv;
use crate::stats::WasmStats;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sluice_module::{CacheApi, LocalResponse, Module, Txn, TxnInfo};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where a plugin's code comes from.
#[derive(Debug, Clone)]
pub enum WasmSource {
    /// A `.wasm` file.
    Path(PathBuf),
    /// The module's bytes (e.g. uploaded through the admin API).
    Bytes(Bytes),
    /// Already compiled code.
    Compiled(CompiledPlugin),
}

impl From<&str> for WasmSource {
    fn from(path: &str) -> Self {
        Self::Path(PathBuf::from(path))
    }
}

impl From<&Path> for WasmSource {
    fn from(path: &Path) -> Self {
        Self::Path(path.to_path_buf())
    }
}

impl From<PathBuf> for WasmSource {
    fn from(path: PathBuf) -> Self {
        Self::Path(path)
    }
}

impl From<Bytes> for WasmSource {
    fn from(bytes: Bytes) -> Self {
        Self::Bytes(bytes)
    }
}

impl From<Vec<u8>> for WasmSource {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Bytes(Bytes::from(bytes))
    }
}

impl From<CompiledPlugin> for WasmSource {
    fn from(compiled: CompiledPlugin) -> Self {
        Self::Compiled(compiled)
    }
}

/// A stable module for one plugin name: forwards to the currently loaded version, or sits
/// out every transaction once unloaded.
pub struct WasmHandle {
    name: String,
    current: RwLock<Option<Arc<WasmModule>>>,
    versions: AtomicU64,
}

impl std::fmt::Debug for WasmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHandle").field("name", &self.name).field("loaded", &self.is_loaded()).finish()
    }
}

impl WasmHandle {
    fn new(name: &str) -> Self {
        Self { name: name.to_string(), current: RwLock::new(None), versions: AtomicU64::new(0) }
    }

    /// The version serving new transactions, if loaded.
    pub fn current(&self) -> Option<Arc<WasmModule>> {
        self.current.read().clone()
    }

    /// True while a version is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current.read().is_some()
    }

    /// The current version's counters.
    pub fn stats(&self) -> Option<WasmStats> {
        self.current().map(|module| module.stats())
    }
}

impl Module for WasmHandle {
    fn name(&self) -> &str {
        &self.name
    }

    /// Under the read lock, without an `Arc` clone per transaction (the transaction keeps
    /// its version alive itself).
    fn new_txn(&self, info: &TxnInfo) -> Option<Box<dyn Txn>> {
        self.current.read().as_ref()?.new_txn(info)
    }

    fn tick(&self, cache: &dyn CacheApi) {
        if let Some(module) = self.current() {
            module.tick(cache);
        }
    }

    fn tick_interval(&self) -> Option<Duration> {
        self.current().and_then(|module| module.tick_interval())
    }

    fn admin(&self, method: &http::Method, path: &str, body: &[u8]) -> Option<LocalResponse> {
        self.current().and_then(|module| module.admin(method, path, body))
    }
}

/// The plugins by name. A name keeps its handle for the registry's lifetime once loaded
/// (unloading and loading it again revives the same handle), so the proxy can keep the
/// handle in its module chain across unloads.
#[derive(Default)]
pub struct WasmRegistry {
    plugins: Mutex<BTreeMap<String, Arc<WasmHandle>>>,
    /// Serialises loads and unloads (they are rare; compilation happens under it).
    changes: Mutex<()>,
    env: HostEnv,
}

impl std::fmt::Debug for WasmRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRegistry").field("plugins", &self.names()).finish_non_exhaustive()
    }
}

impl WasmRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry whose plugins reach `cache` from `proxy_on_tick` (transactions
    /// bring their own through `TxnInfo`).
    pub fn with_cache(cache: Arc<dyn CacheApi>) -> Self {
        Self::with_env(HostEnv { cache: Some(cache), ..HostEnv::default() })
    }

    /// An empty registry giving its plugins `env` (cache for ticks, wall clock).
    pub fn with_env(env: HostEnv) -> Self {
        Self { plugins: Mutex::default(), changes: Mutex::default(), env }
    }

    /// Loads (or reloads) plugin `name` from `source` with `config`, and returns its handle
    /// (the same handle for every version of `name`). The new version is compiled and all
    /// its instances started before it replaces the old one; on error the old one (if any)
    /// keeps serving. Blocking (compiling takes from milliseconds to a second): call it off
    /// the async runtime, e.g. from `tokio::task::spawn_blocking`.
    pub fn load(
        &self,
        name: &str,
        source: impl Into<WasmSource>,
        config: WasmConfig,
    ) -> Result<Arc<WasmHandle>, WasmError> {
        let _changes = self.changes.lock();
        let compiled = match source.into() {
            WasmSource::Path(path) => CompiledPlugin::from_file(name, &path)?,
            WasmSource::Bytes(bytes) => CompiledPlugin::compile(name, &bytes)?,
            WasmSource::Compiled(compiled) => compiled,
        };
        let existing = self.get(name);
        let version = existing.as_ref().map_or(0, |handle| handle.versions.load(Ordering::Relaxed)) + 1;
        let module = match WasmModule::start(name, compiled, config, version, &self.env) {
            Ok(module) => module,
            Err(err) => {
                // A name not loaded owns no queues: free any its failed start registered.
                if existing.as_ref().is_none_or(|handle| !handle.is_loaded()) {
                    crate::queues::registry().remove_vm(name.as_bytes());
                }
                return Err(err);
            }
        };
        let handle = existing.unwrap_or_else(|| {
            let handle = Arc::new(WasmHandle::new(name));
            self.plugins.lock().insert(name.to_string(), Arc::clone(&handle));
            handle
        });
        handle.versions.store(version, Ordering::Relaxed);
        let previous = handle.current.write().replace(Arc::new(module));
        tracing::info!(plugin = name, version, reloaded = previous.is_some(), "wasm plugin loaded");
        Ok(handle)
    }

    /// Unloads plugin `name`: its handle sits out new transactions from now on; running
    /// ones finish on the version they started with. The shared queues registered under
    /// its VM id (`name`) are freed with their items (a reload keeps them; an unload does
    /// not): other plugins resolving them get `NotFound`, and they count no more against
    /// the process's queue limit.
    pub fn unload(&self, name: &str) -> Result<(), WasmError> {
        let _changes = self.changes.lock();
        let not_loaded = || WasmError::NotLoaded(name.to_string());
        let handle = self.get(name).ok_or_else(not_loaded)?;
        handle.current.write().take().ok_or_else(not_loaded)?;
        let queues = crate::queues::registry().remove_vm(name.as_bytes());
        tracing::info!(plugin = name, queues, "wasm plugin unloaded");
        Ok(())
    }

    /// The handle of plugin `name` (loaded or not), if it was ever loaded.
    pub fn get(&self, name: &str) -> Option<Arc<WasmHandle>> {
        self.plugins.lock().get(name).cloned()
    }

    /// The names of the loaded plugins, sorted.
    pub fn names(&self) -> Vec<String> {
        self.plugins.lock().iter().filter(|(_, handle)| handle.is_loaded()).map(|(name, _)| name.clone()).collect()
    }
}
