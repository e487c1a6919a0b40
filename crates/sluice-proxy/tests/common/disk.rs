//! Helpers for tests of the disk tier under the proxy.

use super::Harness;
use sluice_proxy::config::{Config, Mode};
use sluice_proxy::outcome::ResultCode;
use sluice_proxy::State;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub const FRESH: &str = "max-age=3600";

/// A forward proxy whose disk tier lives in `dir`, with `tweak` applied.
pub async fn proxy(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Harness {
    let dir = dir.to_path_buf();
    Harness::build(Mode::Forward, move |c| {
        c.cache.disk.dir = Some(dir);
        tweak(c);
    })
    .await
}

/// Shuts the proxy down gracefully and starts a new one on the same configuration, origin
/// and clock (so on the same disk directory).
pub async fn restart(h: Harness) -> Harness {
    let Harness { origin, others, proxy, clock, mode } = h;
    let config = proxy.state().config.clone();
    proxy.shutdown().await;
    let state = new_state(config, &clock).await;
    let proxy = sluice_proxy::start(state).await.expect("start");
    Harness { origin, others, proxy, clock, mode }
}

pub fn disk(h: &Harness) -> sluice_store::disk::DiskStats {
    h.proxy.state().store.disk_stats().expect("a disk tier")
}

/// Waits until `n` objects are committed to disk (the background write is durable).
pub async fn on_disk(h: &Harness, n: u64) {
    h.eventually(&format!("{n} object(s) on disk"), |h| {
        disk(h).objects == n && h.proxy.state().store.pending_disk_jobs() == 0
    })
    .await;
}

/// Every object file below `dir`.
pub fn object_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "obj") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("objects"), &mut out);
    out
}

pub async fn disk_hits(h: &Harness, n: u64) {
    h.eventually(&format!("{n} TCP_HIT(s) counted"), |h| h.proxy.state().metrics.results.get(ResultCode::DiskHit) == n)
        .await;
}

/// A state on `config`, waiting (bounded) for the previous proxy's directory lock: it goes
/// with the last reference to the old state, which tasks that are finishing may hold.
pub async fn new_state(config: Config, clock: &sluice_proxy::clock::ManualClock) -> State {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match State::new(config.clone(), Arc::new(clock.clone()), Vec::new()) {
            Ok(state) => return state,
            Err(e) if e.to_string().contains("locked") && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("start: {e}"),
        }
    }
}
