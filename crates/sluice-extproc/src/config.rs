//! Configuration of one helper process and how Sluice talks to it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// What a transaction gets when the helper cannot answer: it is down (starting, restarting,
/// failed to start), its queue is full, it broke the stream or missed the message timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnUnavailable {
    /// Go on without the helper, as if it had answered "continue, no changes".
    Bypass,
    /// Answer 503 (request phase), or replace the response with a 503 (response phase).
    /// Envoy's default (`failure_mode_allow: false`).
    #[default]
    Fail,
}

/// Where the response headers are sent to the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponsePhase {
    /// `client_resp_headers`: every response towards a client, cache hits included; changes
    /// are per client and not stored. Like an ext_proc filter placed before Envoy's cache.
    #[default]
    Client,
    /// `origin_resp_headers`: responses from the origin only, before the store, so changes
    /// are what gets cached; hits are not sent again.
    Origin,
    /// Response headers are not sent.
    None,
}

/// Whether and how a message body is sent to the helper (Envoy's `ProcessingMode` body
/// send modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyMode {
    /// Not sent (Envoy's `NONE`).
    #[default]
    None,
    /// Held until complete (at most `max_body_bytes`), then sent in one message; the helper's
    /// answer may replace or clear it (Envoy's `BUFFERED`).
    Buffered,
}

/// One supervised ext_proc helper process.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExtProcConfig {
    /// The module's name (admin endpoints live under `/modules/<name>/`).
    #[serde(default = "default_name")]
    pub name: String,
    /// The helper's executable (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments; `{socket}` in an argument is replaced by the socket path.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables. `SLUICE_EXTPROC_SOCKET` is always set to the socket path.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The Unix socket the helper serves gRPC on. Sluice removes a stale file before each
    /// start and waits for the helper to accept connections on it.
    pub socket: PathBuf,
    /// The helper's nice level (absolute, -20..=19); unset: inherit Sluice's.
    #[serde(default)]
    pub nice: Option<i32>,
    /// At most this many messages waiting for the helper's answer at once; one more is
    /// treated as "unavailable".
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// First restart delay after the helper exits or fails to start; doubles on each
    /// consecutive failure.
    #[serde(default = "default_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    /// Restart delay cap. A helper that ran at least this long before it exited starts over
    /// from `backoff_initial_ms`.
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// How long a started helper may take to accept connections on its socket before it is
    /// killed and counted as failed.
    #[serde(default = "default_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
    /// How long one message may wait for its answer (Envoy's `message_timeout`), stream
    /// opening included.
    #[serde(default = "default_message_timeout_ms")]
    pub message_timeout_ms: u64,
    /// What a transaction gets when the helper cannot answer.
    #[serde(default)]
    pub on_unavailable: OnUnavailable,
    /// Send request headers (`req_headers`).
    #[serde(default = "default_true")]
    pub request_headers: bool,
    /// Where response headers are sent.
    #[serde(default)]
    pub response_headers: ResponsePhase,
    /// How request bodies are sent.
    #[serde(default)]
    pub request_body: BodyMode,
    /// How response bodies are sent (towards clients, hits included: needs
    /// `response_headers = "client"` or `"none"`).
    #[serde(default)]
    pub response_body: BodyMode,
    /// The largest body held for the helper in `buffered` mode; a larger one fails the
    /// module as its `on_error` says (open: the body goes on unchanged, unseen by the helper).
    /// Sluice's gRPC client accepts messages up to this plus [`MESSAGE_HEADROOM`]; the
    /// helper's server must accept as much (see [`ExtProcConfig::max_message_bytes`]).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// Kept for existing configurations; has no effect on what a client gets. When the
    /// helper replaces a response in the response phase (an immediate response, or a
    /// failure with `on_unavailable = "fail"`), the original body is dropped as it streams,
    /// never held, so no size of it can let it through (only a body known to be empty is
    /// "held", against this limit); see `docs/modules-extproc.md`.
    #[serde(default = "default_replace_buffer_max")]
    pub replace_buffer_max: usize,
}

/// Room for everything in a message besides a body (headers, framing), added to
/// `max_body_bytes` for the gRPC message size limit.
pub const MESSAGE_HEADROOM: usize = 1 << 20;

/// tonic's and grpc's default limit on a received message (4 MiB), the least Sluice allows.
const GRPC_DEFAULT_MAX_MESSAGE: usize = 4 << 20;

fn default_name() -> String {
    "extproc".into()
}
fn default_max_in_flight() -> usize {
    64
}
fn default_backoff_initial_ms() -> u64 {
    100
}
fn default_backoff_max_ms() -> u64 {
    10_000
}
fn default_startup_timeout_ms() -> u64 {
    10_000
}
fn default_message_timeout_ms() -> u64 {
    1_000
}
fn default_true() -> bool {
    true
}
fn default_replace_buffer_max() -> usize {
    8 << 20
}
fn default_max_body_bytes() -> usize {
    8 << 20
}

impl ExtProcConfig {
    /// A configuration with defaults for everything but the command and the socket.
    pub fn new(command: impl Into<String>, socket: impl Into<PathBuf>) -> Self {
        Self {
            name: default_name(),
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            socket: socket.into(),
            nice: None,
            max_in_flight: default_max_in_flight(),
            backoff_initial_ms: default_backoff_initial_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            startup_timeout_ms: default_startup_timeout_ms(),
            message_timeout_ms: default_message_timeout_ms(),
            on_unavailable: OnUnavailable::default(),
            request_headers: true,
            response_headers: ResponsePhase::default(),
            request_body: BodyMode::default(),
            response_body: BodyMode::default(),
            max_body_bytes: default_max_body_bytes(),
            replace_buffer_max: default_replace_buffer_max(),
        }
    }

    /// Reads the settings table of a `[[module]]` entry.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, String> {
        let config: Self = toml::Value::Table(settings.clone()).try_into().map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.command.is_empty() {
            return Err("`command` is empty".into());
        }
        if self.socket.as_os_str().is_empty() {
            return Err("`socket` is empty".into());
        }
        if self.max_in_flight == 0 {
            return Err("`max_in_flight` must be at least 1".into());
        }
        if let Some(nice) = self.nice {
            if !(-20..=19).contains(&nice) {
                return Err(format!("`nice` {nice} is outside -20..=19"));
            }
        }
        if self.backoff_initial_ms == 0 || self.backoff_max_ms < self.backoff_initial_ms {
            return Err("need 0 < `backoff_initial_ms` <= `backoff_max_ms`".into());
        }
        if self.message_timeout_ms == 0 || self.startup_timeout_ms == 0 {
            return Err("`message_timeout_ms` and `startup_timeout_ms` must be positive".into());
        }
        if self.response_body == BodyMode::Buffered && self.response_headers == ResponsePhase::Origin {
            return Err("`response_body = \"buffered\"` needs `response_headers = \"client\"` or `\"none\"` \
                        (bodies go to the helper on their way to clients)"
                .into());
        }
        if self.max_body_bytes == 0 {
            return Err("`max_body_bytes` must be at least 1".into());
        }
        if self.name.is_empty() || self.name.contains('/') {
            return Err(format!("invalid module name {:?}", self.name));
        }
        // The helper could never bind its socket (and `--check-config` should say so).
        let dir = match self.socket.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => std::path::Path::new("."),
        };
        if !dir.is_dir() {
            return Err(format!("`socket` {}: its directory {} does not exist", self.socket.display(), dir.display()));
        }
        Ok(())
    }

    /// The largest gRPC message Sluice sends or accepts on the helper's streams: a whole
    /// body (`max_body_bytes`) and room for the rest, never below gRPC's default 4 MiB. Also
    /// given to the helper as `SLUICE_EXTPROC_MAX_MESSAGE_BYTES`, for its server's limits.
    pub fn max_message_bytes(&self) -> usize {
        self.max_body_bytes.saturating_add(MESSAGE_HEADROOM).max(GRPC_DEFAULT_MAX_MESSAGE)
    }

    pub(crate) fn message_timeout(&self) -> Duration {
        Duration::from_millis(self.message_timeout_ms)
    }

    /// The restart delay after `failures` consecutive failures (1 for the first).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(63);
        let delay = self.backoff_initial_ms.saturating_mul(1u64.checked_shl(doublings).unwrap_or(u64::MAX));
        Duration::from_millis(delay.min(self.backoff_max_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_with_defaults_and_reject_unknown_keys() {
        let table: toml::Table = toml::from_str(
            "command = \"/usr/bin/helper\"\nsocket = \"/run/h.sock\"\non_unavailable = \"bypass\"\nnice = 10",
        )
        .unwrap();
        let config = ExtProcConfig::from_settings(&table).unwrap();
        assert_eq!(config.on_unavailable, OnUnavailable::Bypass);
        assert_eq!(config.nice, Some(10));
        assert_eq!(config.max_in_flight, 64);
        assert_eq!(config.response_headers, ResponsePhase::Client);
        let table: toml::Table = toml::from_str("command = \"x\"\nsocket = \"/s\"\nbogus = 1").unwrap();
        assert!(ExtProcConfig::from_settings(&table).unwrap_err().contains("bogus"));
        let table: toml::Table = toml::from_str("command = \"x\"\nsocket = \"/s\"\nnice = 40").unwrap();
        assert!(ExtProcConfig::from_settings(&table).is_err());
        assert_eq!((config.request_body, config.response_body), (BodyMode::None, BodyMode::None));
        let table: toml::Table = toml::from_str(
            "command = \"x\"\nsocket = \"/s\"\nresponse_body = \"buffered\"\nresponse_headers = \"origin\"",
        )
        .unwrap();
        assert!(ExtProcConfig::from_settings(&table).unwrap_err().contains("response_body"));
        let table: toml::Table = toml::from_str("command = \"x\"\nsocket = \"/nonexistent-dir/h.sock\"").unwrap();
        let error = ExtProcConfig::from_settings(&table).unwrap_err();
        assert!(error.contains("/nonexistent-dir does not exist"), "{error}");
    }

    #[test]
    fn the_message_limit_covers_the_largest_body() {
        let mut config = ExtProcConfig::new("x", "/s");
        assert_eq!(config.max_message_bytes(), (8 << 20) + MESSAGE_HEADROOM);
        config.max_body_bytes = 1000;
        assert_eq!(config.max_message_bytes(), 4 << 20);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut config = ExtProcConfig::new("x", "/s");
        config.backoff_initial_ms = 100;
        config.backoff_max_ms = 1_000;
        let delays: Vec<u64> = (1..=6).map(|n| config.backoff(n).as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(config.backoff(200).as_millis(), 1_000);
    }
}
