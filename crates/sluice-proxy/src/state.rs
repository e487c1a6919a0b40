//! What every transaction shares: configuration, store, upstream, metrics, log, modules.

use crate::access_log::AccessLog;
use crate::acl::Acl;
use crate::chain::LoadedModule;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::date::DateCache;
use crate::metrics::Metrics;
use crate::module_list::ModuleList;
use crate::module_manager::ModuleManager;
use crate::route::Routes;
use crate::tiers::Tiers;
use crate::upstream::Upstream;
use http::{HeaderValue, Version};
use sluice_http::freshness::Heuristic;
use sluice_module::{CacheApi, CpuPool};
use sluice_store::{Collapser, MemoryStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Shared by all connections of one running proxy.
pub struct State {
    pub config: Config,
    pub clock: SharedClock,
    pub dates: DateCache,
    /// The cache: the memory tier over the optional disk tier (`[cache.disk]`).
    pub store: Arc<Tiers>,
    /// Content management over `store`, handed to modules.
    pub content: Arc<dyn CacheApi>,
    /// The same object, concretely (attached to the running proxy by `start`).
    pub(crate) content_impl: Arc<crate::content::Content>,
    /// The bounded pool for modules' CPU work (`[cpu_pool]`), handed to modules.
    pub cpu: CpuPool,
    pub collapser: Collapser,
    pub hit_for_pass: crate::hit_for_pass::HitForPass,
    pub upstream: Upstream,
    pub routes: Routes,
    pub client_acl: Acl,
    /// Checks the credentials of forward-proxy requests (`[proxy_auth]`), when configured.
    pub proxy_auth: Option<crate::proxy_auth::ProxyAuth>,
    /// Peers whose PROXY protocol headers are believed (`access.proxy_protocol_from`).
    pub proxy_protocol_acl: Acl,
    pub purge_acl: Acl,
    pub metrics: Arc<Metrics>,
    pub access_log: Option<AccessLog>,
    /// The module chain new transactions start with; swapped by `module_manager`.
    pub modules: ModuleList,
    /// Loads, reloads and unloads modules while the proxy runs (admin API, configuration
    /// reload). `None`: the list is fixed (set it before [`crate::start`]).
    pub module_manager: Option<Arc<ModuleManager>>,
    pub heuristic: Heuristic,
    /// `Cache-Status` / `Via` name.
    pub name: String,
    via: [HeaderValue; 3],
    /// `Surrogate-Capability` announcing this cache, without and with ESI; `None` when
    /// `cache.surrogate_control` is off.
    surrogate_capability: Option<[HeaderValue; 2]>,
    next_txn: AtomicU64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Errors building the state from a configuration.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StateError(pub String);

impl State {
    /// Builds the shared state. Fails on an unusable configuration (bad routes, log file).
    pub fn new(config: Config, clock: SharedClock, modules: Vec<LoadedModule>) -> Result<Self, StateError> {
        let metrics = Arc::new(Metrics::default());
        let routes = Routes::new(&config.route, &clock).map_err(StateError)?;
        let proxy_auth = config
            .proxy_auth
            .as_ref()
            .map(|auth| crate::proxy_auth::ProxyAuth::load(auth, Arc::clone(&clock)))
            .transpose()
            .map_err(StateError)?;
        let access_log = match &config.log.access_log {
            Some(path) => Some(
                AccessLog::open(path, config.log.format)
                    .map_err(|e| StateError(format!("cannot open access log {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let capacity = config.cache.memory.0;
        let policy = crate::policy::build(&config.cache.policy, capacity).map_err(StateError)?;
        let admission = config.cache.admission_rule().map_err(StateError)?;
        let memory = MemoryStore::new(capacity, config.cache.max_object.0, policy)
            .with_admission(admission)
            .with_suspend(config.cache.suspend_entries());
        let disk = crate::tiers_open::open_disk(&config.cache).map_err(StateError)?;
        let store = Arc::new(
            Tiers::new(memory, disk, config.cache.disk.promote_max.0)
                .with_promote_min_hits(config.cache.disk.promote_min_hits),
        );
        routes.watch_files(&store).map_err(StateError)?;
        let name = config.cache.name.clone();
        let heuristic = Heuristic {
            last_modified_fraction: config.cache.heuristic_fraction,
            max: config.cache.heuristic_max.0,
            fixed: None,
        };
        let content_impl = Arc::new(crate::content::Content::new(Arc::clone(&store), Arc::clone(&clock), heuristic));
        let content: Arc<dyn CacheApi> = Arc::clone(&content_impl) as Arc<dyn CacheApi>;
        let via = ["1.0", "1.1", "2"].map(|v| HeaderValue::from_str(&format!("{v} {name}")).expect("name is a token"));
        let surrogate_capability = if config.cache.surrogate_control {
            let announce = |esi| sluice_http::surrogate::capability(&name, esi).expect("name is a token");
            Some([announce(false), announce(true)])
        } else {
            None
        };
        Ok(Self {
            dates: DateCache::new(Arc::clone(&clock)),
            clock,
            store,
            collapser: Collapser::default(),
            hit_for_pass: crate::hit_for_pass::HitForPass::new(config.cache.hit_for_pass.0, 100_000),
            upstream: Upstream::new(config.upstream.clone(), Arc::clone(&metrics)),
            routes,
            client_acl: Acl::new(&config.access.allow),
            proxy_auth,
            proxy_protocol_acl: Acl::new(&config.access.proxy_protocol_from),
            purge_acl: Acl::new(&config.access.purge_allow),
            metrics,
            access_log,
            modules: ModuleList::new(modules),
            module_manager: None,
            heuristic,
            content,
            content_impl,
            cpu: config.cpu_pool.build(),
            name,
            via,
            surrogate_capability,
            next_txn: AtomicU64::new(1),
            config,
        })
    }

    /// A new transaction id.
    pub fn next_txn_id(&self) -> u64 {
        self.next_txn.fetch_add(1, Ordering::Relaxed)
    }

    /// Our `Surrogate-Capability` for requests to the origins of reverse routes (with
    /// `ESI/1.0` on routes that assemble ESI); `None` when `cache.surrogate_control` is off.
    pub fn surrogate_capability(&self, esi: bool) -> Option<&HeaderValue> {
        self.surrogate_capability.as_ref().map(|values| &values[usize::from(esi)])
    }

    /// Our `Via` entry for a message received with `version`.
    pub fn via(&self, version: Version) -> HeaderValue {
        match version {
            Version::HTTP_10 | Version::HTTP_09 => self.via[0].clone(),
            Version::HTTP_2 | Version::HTTP_3 => self.via[2].clone(),
            _ => self.via[1].clone(),
        }
    }
}
