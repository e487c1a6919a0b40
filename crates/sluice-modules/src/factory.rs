//! Builds the modules of `[[module]]` entries of every kind: built-in modules (the table in
//! this crate), Proxy-Wasm plugins (`sluice-wasm`) and ext_proc helper processes
//! (`sluice-extproc`). It implements the proxy's [`ModuleFactory`] seam, so the proxy itself
//! links neither wasmtime nor gRPC; `sluice serve` and the tests hand one to the proxy's
//! module manager.

use parking_lot::Mutex;
use sluice_extproc::{ExtProc, ExtProcConfig};
use sluice_module::Module;
use sluice_proxy::config::{ModuleConfig, ModuleKind};
use sluice_proxy::module_manager::{ModuleError, ModuleFactory, ModuleManager};
use sluice_proxy::State;
use sluice_wasm::{CompiledPlugin, HostEnv, WasmRegistry, WasmSpec};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Builds modules from `[[module]]` entries, and keeps what lives beyond one build: the
/// Wasm plugins (behind stable handles, reloaded in place) and the helper supervisors.
pub struct Factory {
    wasm: WasmRegistry,
    /// The code last compiled for each plugin name and the bytes it was compiled from:
    /// reloading (or loading again after an unload) a file that did not change starts new
    /// instances without compiling again.
    compiled: Mutex<HashMap<String, (Vec<u8>, CompiledPlugin)>>,
    extprocs: Mutex<HashMap<String, ExtProc>>,
}

impl std::fmt::Debug for Factory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factory").field("wasm", &self.wasm).finish_non_exhaustive()
    }
}

impl Default for Factory {
    /// A factory for checking entries, or for a proxy without a cache: plugins see the
    /// system clock.
    fn default() -> Self {
        Self::new(HostEnv::default())
    }
}

impl Factory {
    /// A factory whose Wasm plugins get `env` (the cache for `proxy_on_tick`, the proxy's
    /// wall clock).
    pub fn new(env: HostEnv) -> Self {
        Self { wasm: WasmRegistry::with_env(env), compiled: Mutex::default(), extprocs: Mutex::default() }
    }

    /// A factory for `state`'s proxy: its Wasm plugins reach the proxy's cache from
    /// `proxy_on_tick` and read the proxy's (injected) clock.
    pub fn for_state(state: &State) -> Self {
        let clock = Arc::clone(&state.clock);
        Self::new(HostEnv { cache: Some(Arc::clone(&state.content)), clock: Arc::new(move || clock.now()) })
    }

    /// Sets up run-time module management for `state` before it is started: a factory for
    /// it, a manager storing into `state.modules`, and the modules of `state.config.module`
    /// built and in place. Blocking (Wasm plugins compile). Fails, naming the entry, when an
    /// entry cannot be built.
    pub fn attach(state: &mut State) -> Result<Arc<ModuleManager>, ModuleError> {
        let factory = Arc::new(Self::for_state(state));
        let manager = Arc::new(ModuleManager::new(state.modules.clone(), factory));
        manager.configure(&state.config.module)?;
        state.module_manager = Some(Arc::clone(&manager));
        Ok(manager)
    }

    /// Plugin `name`'s code from `path`: compiled, or the code compiled last time for the
    /// same bytes.
    fn compile(&self, name: &str, path: &Path) -> Result<CompiledPlugin, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("settings.path: cannot read {}: {e}", path.display()))?;
        if let Some((seen, compiled)) = self.compiled.lock().get(name) {
            if *seen == bytes {
                return Ok(compiled.clone());
            }
        }
        let compiled = CompiledPlugin::compile(name, &bytes).map_err(|e| e.to_string())?;
        self.compiled.lock().insert(name.to_owned(), (bytes, compiled.clone()));
        Ok(compiled)
    }

    /// The Wasm plugins loaded so far.
    pub fn wasm(&self) -> &WasmRegistry {
        &self.wasm
    }

    /// The helper of ext_proc entry `name`, while it is configured (for its status).
    pub fn extproc(&self, name: &str) -> Option<ExtProc> {
        self.extprocs.lock().get(name).cloned()
    }
}

impl ModuleFactory for Factory {
    fn check(&self, entry: &ModuleConfig) -> Result<(), String> {
        match entry.kind {
            ModuleKind::Builtin => crate::build(&entry.name, &entry.settings).map(drop),
            ModuleKind::Wasm => {
                let spec = wasm_spec(entry)?;
                // Compiling proves the file is a Proxy-Wasm module of the right ABI; no
                // instance is started.
                CompiledPlugin::from_file(&entry.name, &spec.path).map(drop).map_err(|e| e.to_string())
            }
            ModuleKind::Extproc => {
                let config = extproc_config(entry)?;
                find_command(&config.command)
            }
        }
    }

    fn build(&self, entry: &ModuleConfig) -> Result<Vec<Arc<dyn Module>>, String> {
        match entry.kind {
            ModuleKind::Builtin => Ok(vec![crate::build(&entry.name, &entry.settings)?]),
            ModuleKind::Wasm => {
                let spec = wasm_spec(entry)?;
                let mut config = spec.config;
                config.failure = entry.on_error.into();
                let compiled = self.compile(&entry.name, &spec.path)?;
                let handle = self.wasm.load(&entry.name, compiled, config).map_err(|e| e.to_string())?;
                Ok(vec![handle])
            }
            ModuleKind::Extproc => {
                let config = extproc_config(entry)?;
                find_command(&config.command)?;
                let extproc = ExtProc::start(config)?;
                let module = extproc.module();
                // A replaced helper's supervisor lives on in its module until the
                // transactions under way end.
                self.extprocs.lock().insert(entry.name.clone(), extproc);
                Ok(vec![module])
            }
        }
    }

    fn removed(&self, entry: &ModuleConfig, _modules: &[Arc<dyn Module>]) {
        match entry.kind {
            ModuleKind::Builtin => {}
            ModuleKind::Wasm => {
                // The compiled code stays: loading the same file again under this name starts
                // at once.
                if let Err(e) = self.wasm.unload(&entry.name) {
                    tracing::warn!("unloading wasm plugin {}: {e}", entry.name);
                }
            }
            ModuleKind::Extproc => {
                self.extprocs.lock().remove(&entry.name);
            }
        }
    }

    fn state(&self, entry: &ModuleConfig, _modules: &[Arc<dyn Module>]) -> String {
        match entry.kind {
            ModuleKind::Builtin => "loaded".into(),
            ModuleKind::Wasm => match self.wasm.get(&entry.name) {
                Some(handle) if handle.is_loaded() => "loaded".into(),
                _ => "unloaded".into(),
            },
            ModuleKind::Extproc => match self.extproc(&entry.name) {
                Some(extproc) => serde_json::to_value(extproc.status().state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into()),
                None => "stopped".into(),
            },
        }
    }
}

/// The settings of a Wasm entry; the `.wasm` file must exist.
fn wasm_spec(entry: &ModuleConfig) -> Result<WasmSpec, String> {
    let spec: WasmSpec =
        toml::Value::Table(entry.settings.clone()).try_into().map_err(|e| format!("settings: {}", e.message()))?;
    if !spec.path.is_file() {
        return Err(format!("settings.path: no plugin file {}", spec.path.display()));
    }
    Ok(spec)
}

/// The settings of an ext_proc entry, named after the entry.
fn extproc_config(entry: &ModuleConfig) -> Result<ExtProcConfig, String> {
    let mut settings = entry.settings.clone();
    match settings.get("name").map(|v| v.as_str()) {
        None => {
            settings.insert("name".into(), toml::Value::String(entry.name.clone()));
        }
        Some(Some(name)) if name == entry.name => {}
        Some(_) => return Err("settings.name must be the entry's name (or left out)".into()),
    }
    ExtProcConfig::from_settings(&settings).map_err(|e| format!("settings: {e}"))
}

/// The helper's executable exists: a path, or a name found in `PATH`.
fn find_command(command: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let found = if command.contains('/') {
        executable(Path::new(command))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(command))))
    };
    if found {
        Ok(())
    } else {
        Err(format!("settings.command: no executable {command}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proxy::config::OnError;

    fn entry(name: &str, kind: ModuleKind, settings: &str) -> ModuleConfig {
        ModuleConfig { name: name.into(), kind, on_error: OnError::Open, settings: toml::from_str(settings).unwrap() }
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let factory = Factory::new(HostEnv::default());
        let check = |e: ModuleConfig| factory.check(&e).unwrap_err();
        assert!(check(entry("w", ModuleKind::Wasm, "path = \"/nonexistent/x.wasm\"")).contains("no plugin file"));
        assert!(check(entry("w", ModuleKind::Wasm, "")).contains("path"));
        assert!(check(entry("w", ModuleKind::Wasm, "path = \"/dev/null\"\natach = 1")).contains("atach"));
        let helper = "command = \"/nonexistent/helper\"\nsocket = \"/tmp/x.sock\"";
        assert!(check(entry("e", ModuleKind::Extproc, helper)).contains("no executable /nonexistent/helper"));
        assert!(check(entry("e", ModuleKind::Extproc, "socket = \"/tmp/x.sock\"")).contains("command"));
        let renamed = "command = \"sh\"\nsocket = \"/tmp/x.sock\"\nname = \"other\"";
        assert!(check(entry("e", ModuleKind::Extproc, renamed)).contains("settings.name"));
        assert!(factory.check(&entry("e", ModuleKind::Extproc, "command = \"sh\"\nsocket = \"/tmp/x.sock\"")).is_ok());
        assert!(check(entry("nope", ModuleKind::Builtin, "")).contains("unknown module"));
        assert!(factory.check(&entry("noop", ModuleKind::Builtin, "")).is_ok());
    }
}
