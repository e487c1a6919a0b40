//! Expiry processing: the periodic sweep of both tiers (NICache), its admin trigger
//! (`POST /cache/sweep`) and its counters. The rule is [`sluice_store::SweepRule`]; "now" is
//! the proxy's injected clock, the interval is tokio time. The disk tier is swept first, so
//! the hits of an object's memory copy still count for its disk copy.

use crate::admin::{reply, AdminResponse};
use crate::config::CacheConfig;
use crate::state::State;
use http::StatusCode;
use sluice_store::{SweepReport, SweepRule};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The rule `[cache]` configures.
pub fn rule(cache: &CacheConfig) -> SweepRule {
    SweepRule { grace: cache.sweep_grace.0, min_hits_per_hour: cache.sweep_min_hits_per_hour }
}

/// What one sweep of both tiers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// The memory tier (objects and suspended entries).
    pub memory: SweepReport,
    /// The disk tier; `None` without one.
    pub disk: Option<SweepReport>,
}

/// Runs one sweep of both tiers now and counts it in the metrics. Blocking (short locks;
/// the disk files are deleted in the background).
pub fn run(state: &State) -> Swept {
    let now = state.clock.now();
    let rule = rule(&state.config.cache);
    let disk = state.store.sweep_disk(now, &rule);
    let memory = state.store.memory().sweep(now, &rule);
    state.metrics.sweep_runs.fetch_add(1, Relaxed);
    state.metrics.sweep_removed.fetch_add(memory.removed, Relaxed);
    if let Some(disk) = &disk {
        state.metrics.sweep_disk_removed.fetch_add(disk.removed, Relaxed);
    }
    let disk_removed = disk.map_or(0, |d| d.removed);
    if memory.removed + disk_removed > 0 {
        tracing::debug!(
            "expiry sweep removed {} objects ({} bytes) from memory, {disk_removed} from disk",
            memory.removed,
            memory.removed_bytes
        );
    }
    Swept { memory, disk }
}

fn report_json(r: &SweepReport) -> serde_json::Value {
    serde_json::json!({
        "examined": r.examined,
        "removed": r.removed,
        "removed_bytes": r.removed_bytes,
        "kept_fresh": r.kept_fresh,
        "kept_grace": r.kept_grace,
        "kept_busy": r.kept_busy,
    })
}

/// Starts the periodic sweep, unless `cache.sweep_interval` is 0 or the cache is off (as
/// configured at start: both need a restart). The first sweep runs one interval after
/// start, each with the current generation's rules; the task ends on shutdown.
pub fn spawn(generations: watch::Receiver<Arc<State>>, shutdown: &watch::Receiver<bool>, tasks: &mut JoinSet<()>) {
    let (interval, enabled) = {
        let cache = &generations.borrow().config.cache;
        (cache.sweep_interval.0, cache.enabled)
    };
    if interval.is_zero() || !enabled {
        return;
    }
    let mut shutdown = shutdown.clone();
    tasks.spawn(async move {
        let mut timer = tokio::time::interval(interval);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        timer.tick().await;
        loop {
            tokio::select! {
                _ = timer.tick() => {
                    let state = Arc::clone(&generations.borrow());
                    // The walk takes short locks; keep it off the async workers.
                    let _ = tokio::task::spawn_blocking(move || run(&state)).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

/// `POST /cache/sweep`: one sweep now; the memory tier's report as JSON, with the disk
/// tier's under `disk` when there is one.
pub(crate) fn admin(state: &State) -> AdminResponse {
    let swept = run(state);
    let mut json = report_json(&swept.memory);
    if let Some(disk) = &swept.disk {
        json["disk"] = report_json(disk);
    }
    reply(StatusCode::OK, "application/json", json.to_string())
}
