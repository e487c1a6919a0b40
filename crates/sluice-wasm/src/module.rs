//! [`WasmModule`]: one version of a Proxy-Wasm plugin as a Sluice [`Module`].

use crate::compiled::CompiledPlugin;
use crate::config::WasmConfig;
use crate::error::WasmError;
use crate::kept::HeaderList;
use crate::pool::{Blueprint, Core, Pool};
use crate::shared::{HostEnv, Metric, Shared};
use crate::stats::{Stats, WasmStats};
use crate::txn::{FailedTxn, WasmTxn};
use crate::vm::{Callback, ROOT_ID};
use bytes::Bytes;
use http::StatusCode;
use sluice_module::{CacheApi, FailurePolicy, LocalResponse, Module, Txn, TxnInfo};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One loaded version of a Proxy-Wasm plugin: a compiled module and a pool of started
/// instances (see `WasmConfig::instances`), each with its root context. Every transaction
/// gets an HTTP context in one instance (see `txn.rs` for the phase mapping); the context
/// is deleted (`proxy_on_delete`) exactly once, at the transaction's `log` phase or, failing
/// that, when its state is dropped.
pub struct WasmModule {
    core: Arc<Core>,
}

impl std::fmt::Debug for WasmModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmModule").field("name", &self.core.shared().name).finish_non_exhaustive()
    }
}

impl WasmModule {
    /// Starts `compiled` under `name` with `config`: every instance is started now, so a
    /// plugin that fails to start (trap, deadline, `proxy_on_configure` returning false) is
    /// reported here instead of on the first transaction. `version` shows in stats and the
    /// `sluice.version` property; `env` gives the cache for ticks and the wall clock.
    pub fn start(
        name: &str,
        compiled: CompiledPlugin,
        config: WasmConfig,
        version: u64,
        env: &HostEnv,
    ) -> Result<Self, WasmError> {
        let mut shared = Shared::new(
            name,
            version,
            Bytes::from(config.plugin_config.clone().into_bytes()),
            Bytes::from(config.vm_config.clone().into_bytes()),
            config.log_level,
            env,
        );
        shared.clusters = config.clusters.clone();
        shared.max_stream_message = config.limits.max_buffer_bytes;
        let pool = Pool::new(config.instance_count());
        let blueprint = Blueprint { compiled, config, shared: Arc::new(shared) };
        let core = Arc::new(Core { blueprint, pool, retired: AtomicBool::new(false) });
        // Before the instances start: their `proxy_on_vm_start` may register queues or open
        // streams.
        core.shared().delivery.attach(&core);
        let mut failure = None;
        core.pool.each(|_, slot| {
            if failure.is_none() {
                failure = slot.start(&core.blueprint).err();
            }
        });
        if let Some(fault) = failure {
            return Err(WasmError::Start { name: name.to_string(), reason: fault.to_string() });
        }
        Ok(Self { core })
    }

    /// Compiles and starts `wasm` in one go (version 1, default environment).
    pub fn load(name: &str, wasm: &[u8], config: WasmConfig) -> Result<Self, WasmError> {
        Self::start(name, CompiledPlugin::compile(name, wasm)?, config, 1, &HostEnv::default())
    }

    /// This version's counters.
    pub fn stats(&self) -> WasmStats {
        self.core.shared().stats.snapshot(self.core.shared().version)
    }

    /// The plugin's recent log lines (`LEVEL message`), oldest first.
    pub fn recent_logs(&self) -> Vec<String> {
        self.core.shared().recent_logs()
    }

    /// The metrics the plugin defined.
    pub fn metrics(&self) -> Vec<Metric> {
        self.core.shared().metrics()
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &WasmConfig {
        self.core.config()
    }

    fn unavailable(&self) -> Option<Box<dyn Txn>> {
        match self.core.config().failure {
            FailurePolicy::Open => None,
            FailurePolicy::Closed => Some(Box::new(FailedTxn::new(self.core.shared().name.clone()))),
        }
    }
}

impl Drop for WasmModule {
    /// Retires the version: transactions still running on it finish, but its crashed
    /// instances are not restarted any more.
    fn drop(&mut self) {
        self.core.retired.store(true, Ordering::Relaxed);
    }
}

impl Module for WasmModule {
    fn name(&self) -> &str {
        &self.core.shared().name
    }

    /// Gives the transaction an HTTP context in an instance (created by its first callback,
    /// `WasmTxn::run`). No instance at hand (all waiting out a crash backoff): the module
    /// sits the transaction out (failure policy open) or answers 500 (closed).
    fn new_txn(&self, info: &TxnInfo) -> Option<Box<dyn Txn>> {
        let core = &self.core;
        let shared = core.shared();
        if shared.cache.get().is_none() {
            let _ = shared.cache.set(Arc::clone(&info.cache));
        }
        let assigned = core.pool.with_vm(&core.blueprint, |index, slot| {
            let generation = slot.generation;
            let vm = slot.vm.as_mut()?;
            let context = vm.new_context();
            // Storage for the copies of the heads kept for later callbacks.
            let request = if core.keeps_request() { vm.spare_list() } else { HeaderList::default() };
            let response = if core.keeps_response() { vm.spare_list() } else { HeaderList::default() };
            Some((index, generation, context, request, response))
        });
        match assigned.flatten() {
            Some((slot, generation, context, request, response)) => {
                Stats::bump(&shared.stats.contexts_created);
                Some(Box::new(WasmTxn::new(Arc::clone(core), slot, generation, context, info, request, response)))
            }
            None => {
                Stats::bump(&shared.stats.unavailable);
                self.unavailable()
            }
        }
    }

    /// Calls `proxy_on_tick` on the root context of every running instance (as Envoy ticks
    /// each worker's VM). Foreign cache functions called from it use the cache given at load
    /// time or by the first transaction (the `&dyn CacheApi` here cannot be kept).
    fn tick(&self, _cache: &dyn CacheApi) {
        let core = &self.core;
        core.pool.each(|index, slot| {
            let Some(vm) = slot.vm.as_mut() else { return };
            let result = vm.invoke(ROOT_ID, Callback::Tick, None);
            if let Err(fault) = result {
                slot.crash(core, index, &fault);
            }
        });
    }

    fn tick_interval(&self) -> Option<Duration> {
        self.core.shared().tick_period()
    }

    /// `GET stats`: counters and plugin metrics as JSON; `GET logs`: recent plugin log lines.
    fn admin(&self, method: &http::Method, path: &str, _body: &[u8]) -> Option<LocalResponse> {
        if method != http::Method::GET {
            return None;
        }
        match path.trim_matches('/') {
            "stats" => {
                let body = serde_json::json!({ "stats": self.stats(), "metrics": self.metrics() });
                let mut response = LocalResponse::text(StatusCode::OK, body.to_string());
                response.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                Some(response)
            }
            "logs" => Some(LocalResponse::text(StatusCode::OK, self.recent_logs().join("\n") + "\n")),
            _ => None,
        }
    }
}
