//! Module timers: each module with a [`sluice_module::Module::tick_interval`] gets a task that
//! calls `tick` on that interval until shutdown. A panicking tick is logged and the timer
//! goes on. The timers follow the module list: after each change, modules that left (or
//! changed their interval, as a reloaded Wasm plugin may) lose their timer, new ones get one.

use crate::module_list::ModuleList;
use crate::state::State;
use sluice_module::{CacheApi, Module};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

/// A running timer: its module, its interval, and how to stop it.
struct Timer {
    module: Arc<dyn Module>,
    interval: Duration,
    handle: AbortHandle,
}

/// Starts the task that runs the module timers.
pub fn spawn(state: &Arc<State>, shutdown: &watch::Receiver<bool>, tasks: &mut JoinSet<()>) {
    let list = state.modules.clone();
    let cache = Arc::clone(&state.content);
    let mut shutdown = shutdown.clone();
    tasks.spawn(async move {
        let mut changes = list.subscribe();
        let mut running = Vec::new();
        // Dropped on shutdown, which aborts every timer.
        let mut timers = JoinSet::new();
        loop {
            follow(&list, &cache, &mut running, &mut timers);
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
                Some(_) = timers.join_next() => {}
            }
        }
    });
}

/// Makes the running timers those the current list asks for.
fn follow(list: &ModuleList, cache: &Arc<dyn CacheApi>, running: &mut Vec<Timer>, timers: &mut JoinSet<()>) {
    let wanted: Vec<(Arc<dyn Module>, Duration)> = list
        .snapshot()
        .iter()
        .filter_map(|m| m.module.tick_interval().map(|interval| (Arc::clone(&m.module), interval)))
        .collect();
    running.retain(|timer| {
        let keep = wanted.iter().any(|(m, i)| Arc::ptr_eq(m, &timer.module) && *i == timer.interval);
        if !keep {
            timer.handle.abort();
        }
        keep
    });
    for (module, interval) in wanted {
        if running.iter().any(|t| Arc::ptr_eq(&t.module, &module)) {
            continue;
        }
        let handle = timers.spawn(tick(Arc::clone(&module), interval, Arc::clone(cache)));
        running.push(Timer { module, interval, handle });
    }
}

async fn tick(module: Arc<dyn Module>, interval: Duration, cache: Arc<dyn CacheApi>) {
    let mut timer = tokio::time::interval(interval);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    timer.tick().await;
    loop {
        timer.tick().await;
        if std::panic::catch_unwind(AssertUnwindSafe(|| module.tick(cache.as_ref()))).is_err() {
            tracing::error!("module {} panicked in tick", module.name());
        }
    }
}
