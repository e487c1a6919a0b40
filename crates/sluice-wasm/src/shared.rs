//! What the instances of one plugin version share: identity, configuration, the plugin log,
//! shared data, deliveries outside transactions, gRPC streams, metrics, statistics and the
//! tick period.

use crate::abi::{LogLevel, Status};
use crate::callout::{CallClients, Cluster};
use crate::delivery::Delivery;
use crate::grpc_stream::Streams;
use crate::stats::Stats;
use bytes::Bytes;
use parking_lot::Mutex;
use sluice_module::CacheApi;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

/// Lines kept by [`Shared::log`] for the admin API and tests.
pub const LOG_LINES: usize = 256;

/// Most shared-data entries per plugin, most bytes per key and most bytes per value.
const SHARED_DATA_ENTRIES: usize = 4096;
pub(crate) const SHARED_DATA_KEY_BYTES: usize = 4 << 10;
const SHARED_DATA_VALUE_BYTES: usize = 64 << 10;

/// Most metrics one plugin may define, and most bytes per metric name.
const METRICS: usize = 1024;
pub(crate) const METRIC_NAME_BYTES: usize = 1 << 10;

/// Per-plugin-version state shared by its instances (behind an `Arc`).
pub(crate) struct Shared {
    pub name: String,
    pub version: u64,
    pub plugin_config: Bytes,
    pub vm_config: Bytes,
    pub log_level: LogLevel,
    logs: Mutex<VecDeque<String>>,
    /// Tick period the plugin asked for, in ms (`0`: none).
    pub tick_period_ms: AtomicU64,
    data: Mutex<HashMap<Vec<u8>, (Bytes, u32)>>,
    metrics: Mutex<Vec<Metric>>,
    pub stats: Stats,
    /// The cache for foreign functions called outside a transaction (`proxy_on_tick`): given
    /// at load time or learned from the first transaction.
    pub cache: OnceLock<Arc<dyn CacheApi>>,
    /// Wall-clock time for plugins.
    pub clock: WallClock,
    /// The upstreams the plugin may call (`WasmConfig::clusters`), and the connections to
    /// them.
    pub clusters: BTreeMap<String, Cluster>,
    pub call_clients: CallClients,
    /// The delivery of what arrives for this version's contexts outside their phases
    /// (shared-queue notices, gRPC stream events), and the gRPC streams they opened.
    pub delivery: Arc<Delivery>,
    pub grpc_streams: Streams,
    /// The largest message a gRPC stream may deliver (the plugin's `max_buffer_bytes`).
    pub max_stream_message: usize,
    /// The runtime gRPC streams run on when opened from a thread outside it (the delivery
    /// thread): the one the plugin was loaded on.
    pub runtime: Option<tokio::runtime::Handle>,
}

/// A source of wall-clock time (the proxy passes its injected clock; see [`HostEnv`]).
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The system clock.
pub fn system_clock() -> WallClock {
    // The one place sluice-wasm reads the system's wall clock; the proxy passes its own
    // clock instead (HostEnv::clock).
    #[allow(clippy::disallowed_methods)]
    fn now() -> SystemTime {
        SystemTime::now()
    }
    Arc::new(now)
}

/// What the host gives every plugin version besides its configuration.
#[derive(Clone)]
pub struct HostEnv {
    /// The cache for foreign functions called outside transactions (`proxy_on_tick`);
    /// transactions bring their own. Without one, a plugin's first transaction provides it.
    pub cache: Option<Arc<dyn CacheApi>>,
    /// Wall-clock time (`proxy_get_current_time_nanoseconds`, WASI's realtime clock).
    pub clock: WallClock,
}

impl Default for HostEnv {
    fn default() -> Self {
        Self { cache: None, clock: system_clock() }
    }
}

impl std::fmt::Debug for HostEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEnv").field("cache", &self.cache.is_some()).finish_non_exhaustive()
    }
}

/// A metric a plugin defined (`proxy_define_metric`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Metric {
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    pub value: i64,
}

impl Shared {
    pub(crate) fn new(
        name: &str,
        version: u64,
        plugin_config: Bytes,
        vm_config: Bytes,
        log_level: LogLevel,
        env: &HostEnv,
    ) -> Self {
        let cache = OnceLock::new();
        if let Some(given) = &env.cache {
            let _ = cache.set(Arc::clone(given));
        }
        Self {
            name: name.to_string(),
            version,
            plugin_config,
            vm_config,
            log_level,
            logs: Mutex::new(VecDeque::with_capacity(LOG_LINES)),
            tick_period_ms: AtomicU64::new(0),
            data: Mutex::new(HashMap::new()),
            metrics: Mutex::new(Vec::new()),
            stats: Stats::default(),
            cache,
            clock: Arc::clone(&env.clock),
            clusters: BTreeMap::new(),
            call_clients: CallClients::default(),
            delivery: Arc::default(),
            grpc_streams: Streams::default(),
            max_stream_message: 1 << 20,
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Records a plugin log line (kept in a ring of [`LOG_LINES`]) and passes it to `tracing`.
    pub(crate) fn log(&self, level: LogLevel, message: &str) {
        if level < self.log_level {
            return;
        }
        match level {
            LogLevel::Trace => tracing::trace!(plugin = %self.name, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin = %self.name, "{message}"),
            LogLevel::Info => tracing::info!(plugin = %self.name, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin = %self.name, "{message}"),
            LogLevel::Error | LogLevel::Critical => tracing::error!(plugin = %self.name, "{message}"),
        }
        let mut logs = self.logs.lock();
        if logs.len() == LOG_LINES {
            logs.pop_front();
        }
        logs.push_back(format!("{} {message}", level.as_str()));
    }

    /// The recent log lines, oldest first, each `LEVEL message`.
    pub(crate) fn recent_logs(&self) -> Vec<String> {
        self.logs.lock().iter().cloned().collect()
    }

    /// `proxy_get_shared_data`: the value and its CAS token.
    pub(crate) fn get_data(&self, key: &[u8]) -> Option<(Bytes, u32)> {
        self.data.lock().get(key).cloned()
    }

    /// `proxy_set_shared_data`: stores `value` if `cas` is `0` or matches the current token.
    /// `BadArgument` for a key over [`SHARED_DATA_KEY_BYTES`] or a value over 64 KiB;
    /// `InternalFailure` for a new key past 4,096 entries.
    pub(crate) fn set_data(&self, key: &[u8], value: &[u8], cas: u32) -> Status {
        if key.len() > SHARED_DATA_KEY_BYTES || value.len() > SHARED_DATA_VALUE_BYTES {
            return Status::BadArgument;
        }
        let mut data = self.data.lock();
        let current = data.get(key).map(|(_, token)| *token);
        if cas != 0 && current.is_some_and(|token| token != cas) {
            return Status::CasMismatch;
        }
        if current.is_none() && data.len() >= SHARED_DATA_ENTRIES {
            return Status::InternalFailure;
        }
        let token = current.unwrap_or(0).wrapping_add(1).max(1);
        data.insert(key.to_vec(), (Bytes::copy_from_slice(value), token));
        Status::Ok
    }

    /// `proxy_define_metric`: the metric's id (defining a name twice gives the same id).
    /// `BadArgument` for an unknown kind or a name over [`METRIC_NAME_BYTES`];
    /// `InternalFailure` for a new name past 1,024 metrics.
    pub(crate) fn define_metric(&self, kind: i32, name: &[u8]) -> Result<u32, Status> {
        if name.len() > METRIC_NAME_BYTES {
            return Err(Status::BadArgument);
        }
        let kind = match kind {
            0 => "counter",
            1 => "gauge",
            2 => "histogram",
            _ => return Err(Status::BadArgument),
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let mut metrics = self.metrics.lock();
        if let Some(id) = metrics.iter().position(|m| m.name == name) {
            return Ok(id as u32);
        }
        if metrics.len() >= METRICS {
            return Err(Status::InternalFailure);
        }
        metrics.push(Metric { name, kind, value: 0 });
        Ok((metrics.len() - 1) as u32)
    }

    /// Applies `update` to metric `id`'s value; `NotFound` for an unknown id.
    pub(crate) fn update_metric(&self, id: u32, update: impl FnOnce(&mut i64)) -> Status {
        match self.metrics.lock().get_mut(id as usize) {
            Some(metric) => {
                update(&mut metric.value);
                Status::Ok
            }
            None => Status::NotFound,
        }
    }

    /// Metric `id`'s value.
    pub(crate) fn metric(&self, id: u32) -> Option<i64> {
        self.metrics.lock().get(id as usize).map(|m| m.value)
    }

    /// Every metric, in definition order.
    pub(crate) fn metrics(&self) -> Vec<Metric> {
        self.metrics.lock().clone()
    }

    /// Nanoseconds since the Unix epoch, by the host's clock.
    pub(crate) fn now_nanos(&self) -> u64 {
        let since = (self.clock)().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The tick period the plugin asked for.
    pub(crate) fn tick_period(&self) -> Option<std::time::Duration> {
        match self.tick_period_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared::new("t", 1, Bytes::new(), Bytes::new(), LogLevel::Info, &HostEnv::default())
    }

    #[test]
    fn shared_data_honours_cas() {
        let shared = shared();
        assert_eq!(shared.set_data(b"k", b"v1", 0), Status::Ok);
        let (value, cas) = shared.get_data(b"k").unwrap();
        assert_eq!(value.as_ref(), b"v1");
        assert_eq!(shared.set_data(b"k", b"v2", cas + 1), Status::CasMismatch);
        assert_eq!(shared.set_data(b"k", b"v2", cas), Status::Ok);
        assert_eq!(shared.get_data(b"k").unwrap().0.as_ref(), b"v2");
    }

    #[test]
    fn shared_data_keys_and_values_are_bounded() {
        let shared = shared();
        let key = vec![b'k'; SHARED_DATA_KEY_BYTES];
        assert_eq!(shared.set_data(&key, b"v", 0), Status::Ok);
        let long = vec![b'k'; SHARED_DATA_KEY_BYTES + 1];
        assert_eq!(shared.set_data(&long, b"v", 0), Status::BadArgument);
        assert_eq!(shared.get_data(&long), None, "nothing kept");
        assert_eq!(shared.set_data(b"k", &vec![0; SHARED_DATA_VALUE_BYTES + 1], 0), Status::BadArgument);
        for n in 1..SHARED_DATA_ENTRIES {
            assert_eq!(shared.set_data(n.to_string().as_bytes(), b"v", 0), Status::Ok);
        }
        assert_eq!(shared.set_data(b"one more", b"v", 0), Status::InternalFailure);
    }

    #[test]
    fn log_ring_keeps_the_newest_lines_above_the_level() {
        let shared = shared();
        shared.log(LogLevel::Debug, "hidden");
        for n in 0..LOG_LINES + 3 {
            shared.log(LogLevel::Info, &n.to_string());
        }
        let logs = shared.recent_logs();
        assert_eq!(logs.len(), LOG_LINES);
        assert_eq!(logs[0], "info 3");
    }

    #[test]
    fn metrics_are_defined_once_and_updated() {
        let shared = shared();
        let id = shared.define_metric(0, b"hits").unwrap();
        assert_eq!(shared.define_metric(0, b"hits"), Ok(id));
        assert_eq!(shared.update_metric(id, |v| *v += 2), Status::Ok);
        assert_eq!(shared.metric(id), Some(2));
        assert_eq!(shared.update_metric(99, |v| *v += 1), Status::NotFound);
        assert_eq!(shared.define_metric(7, b"x"), Err(Status::BadArgument));
    }

    #[test]
    fn metric_names_are_bounded() {
        let shared = shared();
        assert!(shared.define_metric(0, &vec![b'm'; METRIC_NAME_BYTES]).is_ok());
        assert_eq!(shared.define_metric(0, &vec![b'm'; METRIC_NAME_BYTES + 1]), Err(Status::BadArgument));
        assert_eq!(shared.metrics().len(), 1, "the long name is not kept");
    }
}
