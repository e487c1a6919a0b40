//! How configuration reloads went, for `/metrics` and `/stats`: counts of applied and
//! rejected reloads, and whether the last one took, as Prometheus reports its own
//! (`prometheus_config_last_reload_successful`). That is what to alert on: a rejected
//! `SIGHUP` leaves the previous configuration running with only a log line to say so.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{SystemTime, UNIX_EPOCH};

/// The outcomes of the reloads since start (`crate::generation`).
#[derive(Debug, Default)]
pub struct ReloadOutcomes {
    applied: AtomicU64,
    rejected: AtomicU64,
    last_rejected: AtomicBool,
    /// When the running configuration was loaded (start or the last applied reload), Unix
    /// seconds.
    last_success_unix: AtomicU64,
}

impl ReloadOutcomes {
    /// None yet; the configuration running since `start`.
    pub(crate) fn loaded_at(start: SystemTime) -> Self {
        let outcomes = Self::default();
        outcomes.last_success_unix.store(unix_seconds(start), Relaxed);
        outcomes
    }

    /// Counts one reload, which ended with `result` at `now`.
    pub(crate) fn record<T, E>(&self, result: &Result<T, E>, now: SystemTime) {
        match result {
            Ok(_) => {
                self.applied.fetch_add(1, Relaxed);
                self.last_rejected.store(false, Relaxed);
                self.last_success_unix.store(unix_seconds(now), Relaxed);
            }
            Err(_) => {
                self.rejected.fetch_add(1, Relaxed);
                self.last_rejected.store(true, Relaxed);
            }
        }
    }

    /// The Prometheus text exposition.
    pub(crate) fn prometheus(&self) -> String {
        format!(
            "# HELP sluice_config_reloads_total Configuration reloads, by result.\n\
             # TYPE sluice_config_reloads_total counter\n\
             sluice_config_reloads_total{{result=\"applied\"}} {}\n\
             sluice_config_reloads_total{{result=\"rejected\"}} {}\n\
             # HELP sluice_config_last_reload_successful 0 when the last reload was rejected (the previous configuration runs on).\n\
             # TYPE sluice_config_last_reload_successful gauge\n\
             sluice_config_last_reload_successful {}\n\
             # HELP sluice_config_last_reload_success_timestamp_seconds When the running configuration was loaded.\n\
             # TYPE sluice_config_last_reload_success_timestamp_seconds gauge\n\
             sluice_config_last_reload_success_timestamp_seconds {}\n",
            self.applied.load(Relaxed),
            self.rejected.load(Relaxed),
            u8::from(!self.last_rejected.load(Relaxed)),
            self.last_success_unix.load(Relaxed),
        )
    }

    /// The same for `/stats`.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "reloads_applied": self.applied.load(Relaxed),
            "reloads_rejected": self.rejected.load(Relaxed),
            "last_reload_successful": !self.last_rejected.load(Relaxed),
            "loaded_at": self.last_success_unix.load(Relaxed),
        })
    }
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
