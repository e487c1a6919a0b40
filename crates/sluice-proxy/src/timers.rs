//! Module timers: each module with a [`sluice_module::Module::tick_interval`] gets a task that
//! calls `tick` on that interval until shutdown. A panicking tick is logged and the timer
//! goes on.

use crate::state::State;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Starts the module timers.
pub fn spawn(state: &Arc<State>, shutdown: &watch::Receiver<bool>, tasks: &mut JoinSet<()>) {
    for loaded in &state.modules {
        let Some(interval) = loaded.module.tick_interval() else { continue };
        let module = Arc::clone(&loaded.module);
        let cache = Arc::clone(&state.content);
        let mut shutdown = shutdown.clone();
        tasks.spawn(async move {
            let mut timer = tokio::time::interval(interval);
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            timer.tick().await;
            loop {
                tokio::select! {
                    _ = timer.tick() => {}
                    _ = shutdown.changed() => return,
                }
                if std::panic::catch_unwind(AssertUnwindSafe(|| module.tick(cache.as_ref()))).is_err() {
                    tracing::error!("module {} panicked in tick", module.name());
                }
            }
        });
    }
}
