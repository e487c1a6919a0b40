//! Configuration reload while the proxy runs (`SIGHUP`, `POST /config/reload`): the next
//! [`State`] generation is built from the file and swapped in, without dropping a connection
//! or a cached object.
//!
//! What a reload does, in order (any failure leaves everything as it was):
//! 1. reads and validates the file (as `sluice serve --check-config`);
//! 2. keeps the settings that need a restart as they run ([`restart_only`]), and reports them;
//! 3. builds the next generation over the lasting parts ([`State::reconfigured`]): routes,
//!    ACLs, proxy authentication, TLS certificates, headers and timeouts, the access log
//!    (when its section changed) and the upstream client (when its section changed);
//! 4. binds the listeners whose addresses are new ([`crate::listeners`]);
//! 5. configures the `[[module]]` entries (unchanged entries keep their modules);
//! 6. swaps it in: every request that starts from then on is served by it, on new
//!    connections and on those already open (which stay open: no client sees the reload).
//!    Transactions in progress finish on the generation they started with. What a connection
//!    settled when it was accepted (its listener's mode, TLS certificate, h2c, PROXY
//!    protocol, header limits) stays for its life; the client's access is checked anew.
//!    Listeners no longer in the file stop accepting, and their connections close
//!    gracefully; the reload returns once their sockets are closed.

use crate::config::{Config, ConfigError};
use crate::listeners::{ListenError, ListenerChanges, Listeners};
use crate::module_manager::Changes;
use crate::reload_outcomes::ReloadOutcomes;
use crate::state::{same, State, StateError};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// The running proxy's current generation, and reloads of it.
#[derive(Debug)]
pub struct Generations {
    current: watch::Sender<Arc<State>>,
    /// The client listeners, kept, opened and closed by reloads.
    listeners: Listeners,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// How reloads went, for `/metrics` and `/stats`.
    outcomes: ReloadOutcomes,
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReloadReport {
    /// The file read.
    pub path: PathBuf,
    /// Settings that changed in the file but keep their running values until a restart.
    pub restart_needed: Vec<String>,
    /// The listeners now open, and those the reload opened and closed.
    pub listeners: ListenerChanges,
    /// The `[[module]]` entries: kept, reconfigured in place, built anew, removed.
    pub modules: Option<Changes>,
}

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the proxy runs on its embedded defaults (no --config file): nothing to re-read")]
    NoFile,
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    State(#[from] StateError),
    #[error("{0}")]
    Listen(#[from] ListenError),
    #[error("modules: {0}")]
    Modules(String),
}

impl Generations {
    /// `first` as the current generation, its listeners not open yet
    /// ([`Self::open_listeners`]); `shutdown` ends their accept loops.
    pub(crate) fn new(first: Arc<State>, shutdown: watch::Receiver<bool>) -> Self {
        first.content_impl.attach(&first);
        let outcomes = ReloadOutcomes::loaded_at(first.clock.now());
        Self {
            current: watch::Sender::new(first),
            listeners: Listeners::new(shutdown),
            reloading: tokio::sync::Mutex::new(()),
            outcomes,
        }
    }

    /// Binds the current generation's listeners and starts accepting on them (at start).
    pub(crate) fn open_listeners(&self) -> Result<(), ListenError> {
        let fresh = self.listeners.bind_new(&self.current())?;
        let (_opened, _nothing_closed) = self.listeners.open(fresh, &self.current, None);
        Ok(())
    }

    /// The bound address of each `[[listener]]` of the current generation, in configuration
    /// order (ports given as 0 are the ones the system chose).
    pub fn listener_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.listeners.addrs(&self.current)
    }

    /// Waits for the accept loops to end (they end at shutdown, once their connections have
    /// closed or `shutdown.drain` has passed).
    pub(crate) async fn join_listeners(&self) {
        self.listeners.join().await;
    }

    /// The generation every request that starts now is served by.
    pub fn current(&self) -> Arc<State> {
        Arc::clone(&self.current.borrow())
    }

    /// Follows the current generation (listeners, background tasks).
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<State>> {
        self.current.subscribe()
    }

    /// Re-reads the file the current configuration came from ([`Config::source`]) and
    /// reloads it (see the module documentation).
    pub async fn reload_file(&self) -> Result<ReloadReport, ReloadError> {
        let path = self.current().config.source.clone().ok_or(ReloadError::NoFile)?;
        let result = match Config::load(&path) {
            Ok(config) => {
                for warning in config.warnings() {
                    tracing::warn!("{}: {warning}", path.display());
                }
                self.apply(config).await
            }
            Err(e) => Err(e.into()),
        };
        self.outcomes.record(&result, self.current().clock.now());
        result
    }

    /// Makes `config` the running configuration (see the module documentation).
    pub async fn reload(&self, config: Config) -> Result<ReloadReport, ReloadError> {
        let result = self.apply(config).await;
        self.outcomes.record(&result, self.current().clock.now());
        result
    }

    /// How reloads went (`/metrics`, `/stats`).
    pub(crate) fn outcomes(&self) -> &ReloadOutcomes {
        &self.outcomes
    }

    async fn apply(&self, mut config: Config) -> Result<ReloadReport, ReloadError> {
        let _one = self.reloading.lock().await;
        let running = self.current();
        let restart_needed = restart_only(&running.config, &mut config);
        // What will run, with the settings kept for a restart.
        config.validate()?;
        let path = config.source.clone().unwrap_or_default();
        // Files are read (TLS, password file, access log) and directories watched: off the
        // async workers.
        let next = tokio::task::spawn_blocking(move || running.reconfigured(config))
            .await
            .map_err(|_| StateError("building the configuration panicked".to_owned()))??;
        let next = Arc::new(next);
        // Dropped (closed again) if a later step fails.
        let fresh = self.listeners.bind_new(&next)?;
        let modules = match &next.module_manager {
            Some(manager) => {
                let (manager, entries) = (Arc::clone(manager), next.config.module.clone());
                let changes = tokio::task::spawn_blocking(move || manager.configure(&entries))
                    .await
                    .map_err(|_| ReloadError::Modules("configuring the modules panicked".to_owned()))?
                    .map_err(|e| ReloadError::Modules(e.to_string()))?;
                Some(changes)
            }
            None => None,
        };
        next.content_impl.attach(&next);
        next.connection_limit.set(next.config.client.max_connections);
        let (listeners, sockets_closed) = self.listeners.open(fresh, &self.current, Some(next));
        sockets_closed.await;
        Ok(ReloadReport { path, restart_needed, listeners, modules })
    }
}

/// Gives the settings of `next` that cannot change while the proxy runs the values of
/// `running`, and names those that differed. They are:
/// - `[admin]` (its listener and token);
/// - what shapes the store: `cache.memory`, `max_object`, `policy`, `admission`,
///   `admission_window`, `suspend`, `suspend_max_entries`, `hit_for_pass`, `sweep_interval`
///   and `[cache.disk]` (the cached objects stay);
/// - `[cpu_pool]`.
pub fn restart_only(running: &Config, next: &mut Config) -> Vec<String> {
    let mut kept = Vec::new();
    keep("admin", &running.admin, &mut next.admin, &mut kept);
    keep("cpu_pool", &running.cpu_pool, &mut next.cpu_pool, &mut kept);
    let (was, cache) = (&running.cache, &mut next.cache);
    keep("cache.memory", &was.memory, &mut cache.memory, &mut kept);
    keep("cache.max_object", &was.max_object, &mut cache.max_object, &mut kept);
    keep("cache.filling_memory", &was.filling_memory, &mut cache.filling_memory, &mut kept);
    keep("cache.policy", &was.policy, &mut cache.policy, &mut kept);
    keep("cache.admission", &was.admission, &mut cache.admission, &mut kept);
    keep("cache.admission_window", &was.admission_window, &mut cache.admission_window, &mut kept);
    keep("cache.suspend", &was.suspend, &mut cache.suspend, &mut kept);
    keep("cache.suspend_max_entries", &was.suspend_max_entries, &mut cache.suspend_max_entries, &mut kept);
    keep("cache.hit_for_pass", &was.hit_for_pass, &mut cache.hit_for_pass, &mut kept);
    keep("cache.sweep_interval", &was.sweep_interval, &mut cache.sweep_interval, &mut kept);
    keep("cache.disk", &was.disk, &mut cache.disk, &mut kept);
    kept
}

fn keep<T: serde::Serialize + Clone>(name: &str, running: &T, next: &mut T, kept: &mut Vec<String>) {
    if !same(running, next) {
        kept.push(name.to_owned());
        next.clone_from(running);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_need_a_restart_keep_their_running_values_and_are_named() {
        let running = Config::parse(
            "[[listener]]\naddr = \"127.0.0.1:3128\"\n[cache]\nmemory = \"64MiB\"\n[access]\nallow = [\"127.0.0.0/8\"]\n",
        )
        .unwrap();
        let mut next = Config::parse(
            "[[listener]]\naddr = \"127.0.0.1:4128\"\nmode = \"reverse\"\n[[route]]\norigin = \"http://127.0.0.1:80\"\n\
             [cache]\nmemory = \"128MiB\"\ncollapse_wait = \"3s\"\n[access]\nallow = [\"10.0.0.0/8\"]\n",
        )
        .unwrap();
        let kept = restart_only(&running, &mut next);
        assert_eq!(kept, ["cache.memory"]);
        assert_eq!(next.listener[0].addr.port(), 4128, "reloadable: taken");
        assert_eq!(next.cache.memory.0, running.cache.memory.0);
        assert_eq!(next.cache.collapse_wait.0, std::time::Duration::from_secs(3), "reloadable: taken");
        assert_eq!(next.access.allow[0].to_string(), "10.0.0.0/8", "reloadable: taken");
    }

    #[test]
    fn an_unchanged_file_needs_no_restart() {
        let running = Config::default();
        let mut next = Config::default();
        assert!(restart_only(&running, &mut next).is_empty());
    }
}
