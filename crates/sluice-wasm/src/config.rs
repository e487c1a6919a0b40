//! How a Proxy-Wasm plugin is run: where it attaches, what it may change, its limits.
//!
//! [`WasmConfig`] deserialises from the module's table in the proxy configuration (all fields
//! optional), e.g.
//!
//! ```toml
//! attach = "client"          # or "origin": response callbacks before the store
//! failure = "open"           # or "closed"
//! plugin_config = "mode=fast"
//! deadline_ms = 50
//! memory_mib = 64
//! clusters = { auth = "http://127.0.0.1:9000" }   # for HTTP and gRPC calls, gRPC streams
//! ```

use crate::abi::LogLevel;
use crate::callout::Cluster;
use serde::Deserialize;
use sluice_module::FailurePolicy;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which response phases the plugin's response callbacks run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attach {
    /// `client_resp_headers` / `client_resp_body`: the response as this client gets it, on
    /// hits and misses alike (what an Envoy filter sees). Changes are not stored.
    #[default]
    Client,
    /// `origin_resp_headers` / `origin_resp_body`: the origin's response before the store,
    /// on misses and validations only. Changes are what gets stored and served to later hits.
    Origin,
}

/// Resource limits of one plugin. Every instance gets them on its own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit of one callback after start-up (`proxy_on_request_headers`, ...,
    /// `proxy_on_tick`), host calls included, in ms. A callback past it is stopped (epoch
    /// interruption, a few ms of slack), its instance discarded.
    pub deadline_ms: u64,
    /// Limit of the start-up callbacks (`_initialize`, `proxy_on_vm_start`,
    /// `proxy_on_configure`), in ms.
    pub start_deadline_ms: u64,
    /// Largest linear memory of one instance, in MiB. Growing past it traps.
    pub memory_mib: u64,
    /// Most body bytes held for a plugin that pauses (`Action::Pause` from a headers or body
    /// callback), per message. Past it the transaction fails as the failure policy says.
    pub max_buffer_bytes: usize,
    /// First delay before an instance that crashed is recreated, in ms; it doubles with each
    /// further crash of that instance slot.
    pub backoff_base_ms: u64,
    /// Longest such delay, in ms.
    pub backoff_max_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline_ms: 50,
            start_deadline_ms: 1_000,
            memory_mib: 64,
            max_buffer_bytes: 1 << 20,
            backoff_base_ms: 50,
            backoff_max_ms: 30_000,
        }
    }
}

impl Limits {
    /// [`Limits::deadline_ms`] as a duration.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms.max(1))
    }

    /// [`Limits::start_deadline_ms`] as a duration.
    pub fn start_deadline(&self) -> Duration {
        Duration::from_millis(self.start_deadline_ms.max(1))
    }

    /// [`Limits::memory_mib`] in bytes.
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// The delay before recreating an instance after its `consecutive`-th crash in a row
    /// (1 for the first): `backoff_base * 2^(consecutive-1)`, at most `backoff_max`.
    pub fn backoff(&self, consecutive: u32) -> Duration {
        let shift = consecutive.saturating_sub(1).min(30);
        let ms = self.backoff_base_ms.saturating_mul(1u64 << shift).min(self.backoff_max_ms);
        Duration::from_millis(ms)
    }
}

/// Everything about one plugin except its code.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WasmConfig {
    /// Plugin configuration, handed to `proxy_on_configure` (`get_plugin_configuration()`).
    pub plugin_config: String,
    /// VM configuration, handed to `proxy_on_vm_start` (`get_vm_configuration()`).
    pub vm_config: String,
    /// Where the response callbacks run.
    pub attach: Attach,
    /// What a trap, a missed deadline or a lost instance does to the transaction.
    #[serde(with = "failure_policy")]
    pub failure: FailurePolicy,
    /// Instances (VMs) of the plugin; each holds the contexts of the transactions it serves.
    /// `0`: one per CPU, at least two, at most sixteen.
    pub instances: usize,
    /// The plugin may change request bodies' length (the host then drops `Content-Length`).
    /// Without it, same-length edits still work; length-changing ones are refused.
    pub edits_request_body: bool,
    /// The same for response bodies.
    pub edits_response_body: bool,
    /// Keep the request head for the later callbacks (request body, response, done, log,
    /// delete), read-only there, as Envoy lets a plugin read request headers there. Costs a
    /// copy of the request header map per transaction, for plugins that can read a head at
    /// all (`CompiledPlugin::reads_heads`; for others nothing is kept, which they cannot tell).
    pub request_headers_in_response: bool,
    /// Keep the response head for the later callbacks (response body, done, log, delete),
    /// read-only there, e.g. for a plugin that checks `content-type` before transforming a
    /// chunk, or logs the status. Costs a copy of the response header map per transaction
    /// (only for plugins that can read a head, as above).
    pub response_headers_in_body: bool,
    /// Lowest plugin log level passed on (`trace` ... `critical`).
    pub log_level: LogLevel,
    /// The upstreams the plugin may call (`dispatch_http_call`, `dispatch_grpc_call`,
    /// `open_grpc_stream`), by the cluster name it passes:
    /// `clusters = { auth = "http://127.0.0.1:9000" }`.
    pub clusters: BTreeMap<String, Cluster>,
    /// Resource limits.
    pub limits: Limits,
}

impl Default for WasmConfig {
    fn default() -> Self {
        Self {
            plugin_config: String::new(),
            vm_config: String::new(),
            attach: Attach::default(),
            failure: FailurePolicy::default(),
            instances: 0,
            edits_request_body: false,
            edits_response_body: false,
            request_headers_in_response: true,
            response_headers_in_body: true,
            log_level: LogLevel::Info,
            clusters: BTreeMap::new(),
            limits: Limits::default(),
        }
    }
}

impl WasmConfig {
    /// The number of instances to run: [`WasmConfig::instances`], or one per CPU (at least
    /// two, at most sixteen) when it is `0`.
    pub fn instance_count(&self) -> usize {
        if self.instances > 0 {
            return self.instances;
        }
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 16)
    }
}

/// A plugin as a configuration entry names it: the `.wasm` file and its [`WasmConfig`]
/// (the proxy's `[[module]]` settings table deserialises into it, e.g.
/// `settings = { path = "plugins/x.wasm", attach = "origin", limits = { deadline_ms = 20 } }`).
/// Unknown keys are refused.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// The `.wasm` file.
    pub path: std::path::PathBuf,
    /// Everything else.
    pub config: WasmConfig,
}

impl<'de> Deserialize<'de> for WasmSpec {
    // By hand: `#[serde(flatten)]` would lose `deny_unknown_fields`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let path = table.remove("path").ok_or_else(|| D::Error::missing_field("path"))?;
        let path = serde_json::from_value(path).map_err(D::Error::custom)?;
        let config = serde_json::from_value(serde_json::Value::Object(table))
            // The known keys serde lists are `WasmConfig`'s: `path` is one too.
            .map_err(|e| {
                D::Error::custom(e.to_string().replacen("expected one of `", "expected one of `path`, `", 1))
            })?;
        Ok(Self { path, config })
    }
}

/// `"open"` / `"closed"` for [`FailurePolicy`] (which has no serde support of its own).
mod failure_policy {
    use serde::{Deserialize, Deserializer};
    use sluice_module::FailurePolicy;

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<FailurePolicy, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "open" => Ok(FailurePolicy::Open),
            "closed" => Ok(FailurePolicy::Closed),
            other => Err(serde::de::Error::custom(format!("failure must be \"open\" or \"closed\", not {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let limits = Limits { backoff_base_ms: 10, backoff_max_ms: 100, ..Limits::default() };
        assert_eq!(limits.backoff(1), Duration::from_millis(10));
        assert_eq!(limits.backoff(2), Duration::from_millis(20));
        assert_eq!(limits.backoff(4), Duration::from_millis(80));
        assert_eq!(limits.backoff(5), Duration::from_millis(100));
        assert_eq!(limits.backoff(u32::MAX), Duration::from_millis(100));
    }

    #[test]
    fn specs_parse_with_defaults_and_refuse_unknown_keys() {
        let spec: WasmSpec = serde_json::from_str(
            r#"{"path": "p.wasm", "attach": "origin", "failure": "closed", "limits": {"deadline_ms": 20}}"#,
        )
        .unwrap();
        assert_eq!(spec.path, std::path::PathBuf::from("p.wasm"));
        assert_eq!(spec.config.attach, Attach::Origin);
        assert_eq!(spec.config.failure, FailurePolicy::Closed);
        assert_eq!(spec.config.limits.deadline_ms, 20);
        assert_eq!(spec.config.limits.memory_mib, 64);
        assert!(spec.config.request_headers_in_response);
        let unknown = serde_json::from_str::<WasmSpec>(r#"{"path": "p.wasm", "atach": "origin"}"#).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown field `atach`, expected one of `path`, `plugin_config`"),
            "{unknown}"
        );
        assert!(serde_json::from_str::<WasmSpec>(r#"{"path": "p.wasm", "limits": {"deadline": 1}}"#).is_err());
        assert!(serde_json::from_str::<WasmSpec>(r#"{"path": "p.wasm", "failure": "maybe"}"#).is_err());
        assert!(serde_json::from_str::<WasmSpec>(r#"{"path": "p.wasm", "log_level": "loud"}"#).is_err());
        let spec: WasmSpec = serde_json::from_str(r#"{"path": "p.wasm", "log_level": "warning"}"#).unwrap();
        assert_eq!(spec.config.log_level, LogLevel::Warn);
        assert!(serde_json::from_str::<WasmSpec>(r#"{"attach": "origin"}"#).is_err());
    }

    #[test]
    fn defaults_are_sane() {
        let config = WasmConfig::default();
        assert_eq!(config.attach, Attach::Client);
        assert_eq!(config.failure, FailurePolicy::Open);
        assert!(config.instance_count() >= 2);
        assert_eq!(config.limits.deadline(), Duration::from_millis(50));
        assert_eq!(config.limits.memory_bytes(), 64 << 20);
    }
}
