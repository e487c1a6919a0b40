//! Expiry processing: the periodic sweep of the memory tier (NICache), its admin trigger
//! (`POST /cache/sweep`) and its counters. The rule is [`sluice_store::SweepRule`]; "now" is
//! the proxy's injected clock, the interval is tokio time. The disk tier is not swept: it
//! keeps its copies (bounded by its water marks), and a swept object found there again is
//! revalidated like any stale hit.

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

/// Runs one sweep now and counts it in the metrics.
pub fn run(state: &State) -> SweepReport {
    let report = state.store.memory().sweep(state.clock.now(), &rule(&state.config.cache));
    state.metrics.sweep_runs.fetch_add(1, Relaxed);
    state.metrics.sweep_removed.fetch_add(report.removed, Relaxed);
    if report.removed > 0 {
        tracing::debug!("expiry sweep removed {} objects ({} bytes)", report.removed, report.removed_bytes);
    }
    report
}

/// Starts the periodic sweep, unless `cache.sweep_interval` is 0 or the cache is off. The
/// first sweep runs one interval after start; the task ends on shutdown.
pub fn spawn(state: &Arc<State>, shutdown: &watch::Receiver<bool>, tasks: &mut JoinSet<()>) {
    let interval = state.config.cache.sweep_interval.0;
    if interval.is_zero() || !state.config.cache.enabled {
        return;
    }
    let state = Arc::clone(state);
    let mut shutdown = shutdown.clone();
    tasks.spawn(async move {
        let mut timer = tokio::time::interval(interval);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        timer.tick().await;
        loop {
            tokio::select! {
                _ = timer.tick() => {
                    let state = Arc::clone(&state);
                    // The walk takes short locks; keep it off the async workers.
                    let _ = tokio::task::spawn_blocking(move || run(&state)).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

/// `POST /cache/sweep`: one sweep now; the report as JSON.
pub(crate) fn admin(state: &State) -> AdminResponse {
    let r = run(state);
    let json = serde_json::json!({
        "examined": r.examined,
        "removed": r.removed,
        "removed_bytes": r.removed_bytes,
        "kept_fresh": r.kept_fresh,
        "kept_grace": r.kept_grace,
        "kept_busy": r.kept_busy,
    });
    reply(StatusCode::OK, "application/json", json.to_string())
}
