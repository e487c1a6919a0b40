//! What every transaction shares: configuration, store, upstream, metrics, log, modules.
//!
//! A [`State`] is one *generation* of the running proxy: the configuration and what is built
//! from it (routes, ACLs, TLS, the upstream client), over the parts that outlive a
//! configuration reload (the store, content management, request collapsing, hit-for-pass,
//! the connection limit, metrics, the module list, the CPU pool, transaction and listener
//! ids). [`State::reconfigured`] builds the next generation over the same lasting parts;
//! `crate::generation` swaps it in.

use crate::access_log::{AccessLog, AccessLogs};
use crate::acl::Acl;
use crate::chain::LoadedModule;
use crate::clock::SharedClock;
use crate::config::{Config, LogConfig};
use crate::date::DateCache;
use crate::listeners::ListenerId;
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

/// Shared by all connections of one generation of a running proxy.
pub struct State {
    pub config: Config,
    pub clock: SharedClock,
    pub dates: DateCache,
    /// The cache: the memory tier over the optional disk tier (`[cache.disk]`).
    pub store: Arc<Tiers>,
    /// Content management over `store`, handed to modules.
    pub content: Arc<dyn CacheApi>,
    /// The same object, concretely (attached to the current generation by `start` and by
    /// each reload).
    pub(crate) content_impl: Arc<crate::content::Content>,
    /// The bounded pool for modules' CPU work (`[cpu_pool]`), handed to modules.
    pub cpu: CpuPool,
    pub collapser: Collapser,
    /// The limit on open client connections (`client.max_connections`).
    pub connection_limit: Arc<crate::conn_limit::ConnectionLimit>,
    pub hit_for_pass: Arc<crate::hit_for_pass::HitForPass>,
    pub upstream: Upstream,
    pub routes: Routes,
    pub client_acl: Acl,
    /// Where forward requests and tunnels may not connect (`access.deny_destinations`);
    /// `None` when nothing is denied. Shared by this generation's forward targets.
    pub dest_acl: Option<Arc<crate::dest_acl::DestAcl>>,
    /// Checks the credentials of forward-proxy requests (`[proxy_auth]`), when configured.
    pub proxy_auth: Option<crate::proxy_auth::ProxyAuth>,
    /// Peers whose PROXY protocol headers are believed (`access.proxy_protocol_from`).
    pub proxy_protocol_acl: Acl,
    /// Peers whose `X-Forwarded-For` is believed (`access.forwarded_for_from`).
    pub forwarded_for_acl: Acl,
    pub purge_acl: Acl,
    /// Request rates allowed per client (`[[rate_limit]]`).
    pub rate_limits: crate::rate_limit::RateLimits,
    /// The requests each client has in progress (`client.max_requests_per_client`).
    pub(crate) in_flight: Arc<crate::in_flight::InFlight>,
    pub metrics: Arc<Metrics>,
    pub access_log: Option<AccessLog>,
    /// Every access log opened (this generation's and earlier ones'): shutdown closes them.
    pub(crate) access_logs: Arc<AccessLogs>,
    /// The module chain new transactions start with; swapped by `module_manager`.
    pub modules: ModuleList,
    /// Loads, reloads and unloads modules while the proxy runs (admin API, configuration
    /// reload). `None`: the list is fixed (set it before [`crate::start`]).
    pub module_manager: Option<Arc<ModuleManager>>,
    pub heuristic: Heuristic,
    /// `Cache-Status` / `Via` name.
    pub name: String,
    /// The TLS of each `[[listener]]` with `tls` (acceptor, certificate expiry), in
    /// configuration order.
    pub(crate) listener_tls: Vec<Option<crate::tls::ListenerTls>>,
    /// The identity of each `[[listener]]` across generations, in configuration order
    /// (`crate::listeners`).
    pub(crate) listener_ids: Vec<ListenerId>,
    via: [HeaderValue; 3],
    /// `Surrogate-Capability` announcing this cache, without and with ESI; `None` when
    /// `cache.surrogate_control` is off.
    surrogate_capability: Option<[HeaderValue; 2]>,
    next_txn: Arc<AtomicU64>,
    next_listener_id: Arc<AtomicU64>,
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

/// The parts of a [`State`] that outlive a configuration: every generation shares them.
struct Lasting {
    clock: SharedClock,
    store: Arc<Tiers>,
    content_impl: Arc<crate::content::Content>,
    cpu: CpuPool,
    collapser: Collapser,
    connection_limit: Arc<crate::conn_limit::ConnectionLimit>,
    hit_for_pass: Arc<crate::hit_for_pass::HitForPass>,
    in_flight: Arc<crate::in_flight::InFlight>,
    metrics: Arc<Metrics>,
    access_logs: Arc<AccessLogs>,
    modules: ModuleList,
    module_manager: Option<Arc<ModuleManager>>,
    next_txn: Arc<AtomicU64>,
    next_listener_id: Arc<AtomicU64>,
}

impl State {
    /// Builds the shared state. Fails on an unusable configuration (bad routes, log file,
    /// TLS files).
    pub fn new(config: Config, clock: SharedClock, modules: Vec<LoadedModule>) -> Result<Self, StateError> {
        let metrics = Arc::new(Metrics::default());
        let capacity = config.cache.memory.0;
        let policy = crate::policy::build(&config.cache.policy, capacity).map_err(StateError)?;
        let admission = config.cache.admission_rule().map_err(StateError)?;
        let memory = MemoryStore::new(capacity, config.cache.max_object.0, policy)
            .with_admission(admission)
            .with_suspend(config.cache.suspend_entries());
        let disk = crate::tiers_open::open_disk(&config.cache).map_err(StateError)?;
        let store = Arc::new(
            Tiers::new(memory, disk, config.cache.disk.promote_max.0)
                .with_promote_min_hits(config.cache.disk.promote_min_hits)
                .with_filling_memory(config.cache.filling_memory.0),
        );
        let hit_for_pass = Arc::new(crate::hit_for_pass::HitForPass::new(config.cache.hit_for_pass.0, 100_000));
        let content_impl = Arc::new(crate::content::Content::new(
            Arc::clone(&store),
            Arc::clone(&clock),
            Arc::clone(&hit_for_pass),
            heuristic(&config),
        ));
        let lasting = Lasting {
            clock,
            store,
            content_impl,
            cpu: config.cpu_pool.build(),
            collapser: Collapser::default(),
            connection_limit: Arc::new(crate::conn_limit::ConnectionLimit::new(config.client.max_connections)),
            hit_for_pass,
            in_flight: Arc::default(),
            metrics,
            access_logs: Arc::default(),
            modules: ModuleList::new(modules),
            module_manager: None,
            next_txn: Arc::new(AtomicU64::new(1)),
            next_listener_id: Arc::new(AtomicU64::new(config.listener.len() as u64)),
        };
        let access_log = open_access_log(&config.log, &lasting)?;
        let upstream = Upstream::new(config.upstream.clone(), Arc::clone(&lasting.metrics)).map_err(StateError)?;
        let listener_ids = (0..config.listener.len() as u64).collect();
        Self::assemble(config, lasting, access_log, upstream, listener_ids, None)
    }

    /// The next generation: `config` over this generation's lasting parts (see the module
    /// documentation). The access log and the upstream client (with its idle connections,
    /// but its TLS files read again) carry over when their sections are unchanged; origin
    /// pools take over their route's health state and counters; unchanged rate limits their
    /// clients; listeners keep their
    /// identity by address (`crate::listeners::carry_ids`). The caller keeps settings that
    /// need a restart as they run (`crate::generation::restart_only`).
    pub fn reconfigured(&self, config: Config) -> Result<Self, StateError> {
        let lasting = Lasting {
            clock: Arc::clone(&self.clock),
            store: Arc::clone(&self.store),
            content_impl: Arc::clone(&self.content_impl),
            cpu: self.cpu.clone(),
            collapser: self.collapser.clone(),
            connection_limit: Arc::clone(&self.connection_limit),
            hit_for_pass: Arc::clone(&self.hit_for_pass),
            in_flight: Arc::clone(&self.in_flight),
            metrics: Arc::clone(&self.metrics),
            access_logs: Arc::clone(&self.access_logs),
            modules: self.modules.clone(),
            module_manager: self.module_manager.clone(),
            next_txn: Arc::clone(&self.next_txn),
            next_listener_id: Arc::clone(&self.next_listener_id),
        };
        let access_log = if same(&self.config.log, &config.log) {
            self.access_log.clone()
        } else {
            open_access_log(&config.log, &lasting)?
        };
        let upstream = if same(&self.config.upstream, &config.upstream) {
            // Its TLS files are read again (a renewed client certificate or CA bundle).
            self.upstream.with_tls(crate::origin_tls::connector(&config.upstream.tls).map_err(StateError)?)
        } else {
            Upstream::new(config.upstream.clone(), Arc::clone(&lasting.metrics))
                .map_err(StateError)?
                .sharing_lasting(&self.upstream)
        };
        let listener_ids =
            crate::listeners::carry_ids(&self.config.listener, &self.listener_ids, &config.listener, || {
                self.next_listener_id.fetch_add(1, Ordering::Relaxed)
            });
        let mut next = Self::assemble(config, lasting, access_log, upstream, listener_ids, Some(self))?;
        next.routes.carry_pool_state(&self.routes);
        next.rate_limits.carry_over(&self.rate_limits);
        Ok(next)
    }

    /// What each generation builds from its configuration, over `lasting`; a listener that
    /// served TLS in the `previous` generation keeps its session resumption (unless its
    /// client certificate settings changed, `crate::tls::listener`).
    fn assemble(
        config: Config,
        lasting: Lasting,
        access_log: Option<AccessLog>,
        upstream: Upstream,
        listener_ids: Vec<ListenerId>,
        previous: Option<&Self>,
    ) -> Result<Self, StateError> {
        let Lasting {
            clock,
            store,
            content_impl,
            cpu,
            collapser,
            connection_limit,
            hit_for_pass,
            in_flight,
            metrics,
            access_logs,
            modules,
            module_manager,
            next_txn,
            next_listener_id,
        } = lasting;
        crate::tls::warn_if_expiring("upstream.tls client_cert", upstream.client_cert_not_after(), clock.now());
        let routes = Routes::new(&config.route, &clock).map_err(StateError)?;
        let proxy_auth = config
            .proxy_auth
            .as_ref()
            .map(|auth| crate::proxy_auth::ProxyAuth::load(auth, Arc::clone(&clock)))
            .transpose()
            .map_err(StateError)?;
        let resumed = |id: &ListenerId| {
            let previous = previous?;
            let at = previous.listener_ids.iter().position(|was| was == id)?;
            Some(previous.listener_tls[at].as_ref()?.resumption.clone())
        };
        let listener_tls = config
            .listener
            .iter()
            .zip(&listener_ids)
            .map(|(lc, id)| {
                lc.tls
                    .as_ref()
                    .map(|tls| {
                        let tls = crate::tls::listener(tls, resumed(id))
                            .map_err(|message| StateError(format!("TLS for {}: {message}", lc.addr)))?;
                        for certificate in &tls.certificates {
                            let whose = format!("listener {} ({})", lc.addr, certificate.path.display());
                            crate::tls::warn_if_expiring(&whose, certificate.not_after, clock.now());
                        }
                        Ok(tls)
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        routes.watch_files(&store).map_err(StateError)?;
        let name = config.cache.name.clone();
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
            collapser,
            connection_limit,
            hit_for_pass,
            upstream,
            routes,
            client_acl: Acl::new(&config.access.allow),
            dest_acl: crate::dest_acl::DestAcl::of(&config.access).map(Arc::new),
            proxy_auth,
            proxy_protocol_acl: Acl::new(&config.access.proxy_protocol_from),
            forwarded_for_acl: Acl::new(&config.access.forwarded_for_from),
            purge_acl: Acl::new(&config.access.purge_allow),
            rate_limits: crate::rate_limit::RateLimits::new(&config.rate_limit),
            in_flight,
            metrics,
            access_log,
            access_logs,
            modules,
            module_manager,
            heuristic: heuristic(&config),
            content: Arc::clone(&content_impl) as Arc<dyn CacheApi>,
            content_impl,
            cpu,
            name,
            listener_tls,
            listener_ids,
            via,
            surrogate_capability,
            next_txn,
            next_listener_id,
            config,
        })
    }

    /// A new transaction id (unique across generations).
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

fn heuristic(config: &Config) -> Heuristic {
    Heuristic {
        last_modified_fraction: config.cache.heuristic_fraction,
        max: config.cache.heuristic_max.0,
        fixed: None,
    }
}

fn open_access_log(log: &LogConfig, lasting: &Lasting) -> Result<Option<AccessLog>, StateError> {
    let Some(path) = &log.access_log else { return Ok(None) };
    lasting
        .access_logs
        .open(path, log.format, &lasting.metrics)
        .map(Some)
        .map_err(|e| StateError(format!("cannot open access log {}: {e}", path.display())))
}

/// Whether two configuration sections say the same (compared as serialised).
pub(crate) fn same<T: serde::Serialize>(a: &T, b: &T) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}
