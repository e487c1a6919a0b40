//! Origin pools: a route's several equivalent origins (`origins`), balanced and failed over,
//! as nginx's `upstream` blocks, Varnish's directors and HAProxy's backends do.
//!
//! - **Choice** ([`OriginPool::pick`]): among the origins in rotation, by the route's
//!   [`Balance`]: in turn, fewest requests in flight, or by URL (rendezvous hashing with a
//!   hash that is the same in every process, so that several proxies send a URL to the same
//!   origin). `backup_origins` are chosen only while none of `origins` is in rotation. When
//!   none at all is, all are tried anyway (`origins` first): a pool whose origins all look
//!   down is asked rather than refused.
//! - **Failover** ([`OriginPool::send`]): a request that could not reach its origin (no
//!   connection could be made) goes to the next origin; so does one that may be sent again
//!   (idempotent, without a body) and got nothing back (the connection was cut, or no
//!   response head came within `upstream.response_timeout`). Each origin is tried once. An
//!   answer, 5xx included, is an answer: it is passed on.
//! - **Passive health**: `max_fails` consecutive failures take an origin out of rotation for
//!   `fail_timeout` (by the proxy's clock); then it is tried again, and one success brings it
//!   back. **Active health** (`health_check`, [`spawn_checks`]): a `GET` of a path at an
//!   interval; an origin whose check fails (no 2xx or 3xx within the timeout) is out until a
//!   check passes.
//! - **Draining** ([`OriginPool::drain`], the admin API's `/pools`): an operator takes an
//!   origin out of rotation (for maintenance or a deploy) until told otherwise; requests in
//!   flight to it finish.
//! - **Reloads** ([`OriginPool::carry_over`]): a configuration reload builds new pools; each
//!   takes over what its route's previous pool knew of the origins they share (health,
//!   drains, counters), so a reload neither sends requests to an origin known to be down nor
//!   puts a drained one back.
//!
//! Every request of a route shares one cache key whichever origin answers (the first
//! origin's URL): the origins are copies of one site.

use crate::body::OutBody;
use crate::clock::SharedClock;
use crate::config::RouteConfig;
use crate::error::ProxyError;
use crate::pool_config::{Balance, HealthCheckConfig};
use crate::route::Origin;
use crate::upstream::{OriginResponse, SendFailure, Upstream};
use http::Request;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// One origin of a pool, with its health and load.
#[derive(Debug)]
pub struct Member {
    pub origin: Origin,
    /// One of `backup_origins`.
    pub backup: bool,
    /// Failures since its last success.
    fails: AtomicU32,
    /// Out of rotation until then (milliseconds since the epoch, by the proxy's clock);
    /// 0: in rotation.
    out_until_ms: AtomicU64,
    /// Its last active health check failed.
    check_failed: AtomicBool,
    /// An operator took it out of rotation.
    drained: AtomicBool,
    in_flight: AtomicU64,
    requests: AtomicU64,
    failures: AtomicU64,
    /// Its identity in URL hashing: a hash of its authority.
    seed: u64,
}

impl Member {
    /// Its URL as configured, normalised: `scheme://authority` and the base path.
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.origin.scheme, self.origin.authority, self.origin.base_path)
    }
}

/// A route's origins.
#[derive(Debug)]
pub struct OriginPool {
    members: Box<[Member]>,
    balance: Balance,
    max_fails: u32,
    fail_timeout: Duration,
    health_check: Option<HealthCheckConfig>,
    /// `Host` of the health checks when not each origin's own authority.
    check_host: Option<http::HeaderValue>,
    preserve_host: bool,
    /// The route, as `host/prefix` (any host: `*`), for metrics and logs.
    pub label: String,
    /// Where round-robin goes next.
    turn: AtomicUsize,
    clock: SharedClock,
}

/// A request in flight to one member: counted until dropped (with the response body).
#[derive(Debug)]
pub struct MemberLoad {
    pool: Arc<OriginPool>,
    member: usize,
}

impl Drop for MemberLoad {
    fn drop(&mut self) {
        self.pool.members[self.member].in_flight.fetch_sub(1, Relaxed);
    }
}

/// What `/metrics` and `/stats` show of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStats {
    pub origin: String,
    pub backup: bool,
    /// In rotation: not drained, not failing.
    pub up: bool,
    pub drained: bool,
    pub in_flight: u64,
    pub requests: u64,
    pub failures: u64,
}

impl OriginPool {
    /// The pool of a route with `origins` (and `backup_origins`), checked as the
    /// configuration checks them.
    pub fn new(config: &RouteConfig, clock: SharedClock) -> Result<Self, String> {
        crate::pool_config::validate_origins(&config.origins, &config.backup_origins)
            .map_err(|e| format!("route `{}`: {e}", config.label()))?;
        let listed = config.origins.iter().map(|url| (url, false));
        let members = listed
            .chain(config.backup_origins.iter().map(|url| (url, true)))
            .map(|(url, backup)| {
                let origin = Origin::parse(url)?.for_route(config);
                let seed = stable_hash(origin.authority.as_str().to_ascii_lowercase().as_bytes(), 0);
                Ok(Member {
                    origin,
                    backup,
                    fails: AtomicU32::new(0),
                    out_until_ms: AtomicU64::new(0),
                    check_failed: AtomicBool::new(false),
                    drained: AtomicBool::new(false),
                    in_flight: AtomicU64::new(0),
                    requests: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    seed,
                })
            })
            .collect::<Result<Box<[_]>, String>>()?;
        Ok(Self {
            members,
            balance: config.balance,
            max_fails: config.max_fails,
            fail_timeout: config.fail_timeout.0,
            health_check: config.health_check.clone(),
            check_host: check_host(config)?,
            preserve_host: config.preserve_host,
            label: config.label(),
            turn: AtomicUsize::new(0),
            clock,
        })
    }

    /// The members, in configuration order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The origin whose URLs key the route's cached responses (the first of `origins`).
    pub fn canonical(&self) -> &Origin {
        &self.members[0].origin
    }

    /// The member a request for `path_and_query` goes to first.
    pub fn pick(&self, path_and_query: &str) -> usize {
        self.choose(path_and_query, 0).expect("a pool has members")
    }

    /// Sends `req` to member `first`, and on a failure that allows it to the others in turn
    /// (module docs). Returns the response and the load it puts on its member, to keep with
    /// its body.
    pub async fn send(
        self: &Arc<Self>,
        upstream: &Upstream,
        first: usize,
        mut req: Request<OutBody>,
    ) -> Result<(OriginResponse, MemberLoad), ProxyError> {
        let mut member = first;
        let mut tried = 0u64;
        loop {
            tried |= 1 << member;
            let load = self.load(member);
            let failure = match upstream.send(&self.members[member].origin.target, req).await {
                Ok(response) => {
                    self.succeeded(member);
                    return Ok((response, load));
                }
                Err(failure) => failure,
            };
            drop(load);
            let SendFailure { error, request } = *failure;
            if error.is_origin_failure() {
                self.failed(member);
            }
            let Some(mut again) = request else { return Err(error) };
            let key = again.uri().path_and_query().map_or("/", |pq| pq.as_str());
            let Some(next) = self.choose(key, tried) else { return Err(error) };
            tracing::info!(
                "origin {} of route {} failed ({error}); trying {}",
                self.members[member].origin.authority,
                self.label,
                self.members[next].origin.authority
            );
            if !self.preserve_host {
                again.headers_mut().insert(http::header::HOST, self.members[next].origin.host.clone());
            }
            req = again;
            member = next;
        }
    }

    /// The members' figures, in configuration order.
    pub fn stats(&self) -> Vec<MemberStats> {
        let now = self.now_ms();
        (0..self.members.len())
            .map(|i| {
                let m = &self.members[i];
                MemberStats {
                    origin: m.url(),
                    backup: m.backup,
                    up: self.in_rotation(i, now),
                    drained: m.drained.load(Relaxed),
                    in_flight: m.in_flight.load(Relaxed),
                    requests: m.requests.load(Relaxed),
                    failures: m.failures.load(Relaxed),
                }
            })
            .collect()
    }

    /// The member to try among those not in `tried` (a bit per member), from the first of
    /// these that has any: `origins` in rotation, `backup_origins` in rotation, `origins`,
    /// `backup_origins`. `None` when all were tried.
    fn choose(&self, key: &str, tried: u64) -> Option<usize> {
        let now = self.now_ms();
        // No allocation for pools of up to 8 origins.
        type Members = smallvec::SmallVec<[usize; 8]>;
        let tier = |backup: bool, rotating: bool| -> Members {
            (0..self.members.len())
                .filter(|&i| tried & (1 << i) == 0 && self.members[i].backup == backup)
                .filter(|&i| !rotating || self.in_rotation(i, now))
                .collect()
        };
        let tiers = [(false, true), (true, true), (false, false), (true, false)];
        let candidates = tiers.into_iter().map(|(backup, rotating)| tier(backup, rotating)).find(|t| !t.is_empty())?;
        Some(match self.balance {
            Balance::RoundRobin => candidates[self.turn.fetch_add(1, Relaxed) % candidates.len()],
            Balance::LeastConnections => {
                let start = self.turn.fetch_add(1, Relaxed) % candidates.len();
                let in_turn = candidates[start..].iter().chain(&candidates[..start]);
                *in_turn.min_by_key(|&&i| self.members[i].in_flight.load(Relaxed)).expect("not empty")
            }
            Balance::UrlHash => *candidates
                .iter()
                .max_by_key(|&&i| stable_hash(key.as_bytes(), self.members[i].seed))
                .expect("not empty"),
        })
    }

    /// Takes `origin` out of rotation (`drain`), or puts it back. False when the pool has no
    /// such origin.
    pub fn drain(&self, origin: &Origin, drain: bool) -> bool {
        let Some(member) = self.members.iter().find(|m| m.origin.same_place(origin)) else { return false };
        if member.drained.swap(drain, Relaxed) != drain {
            let what = if drain { "drained: out of rotation" } else { "undrained: back in rotation" };
            tracing::info!("origin {} of route {} {what}", member.origin.authority, self.label);
        }
        true
    }

    /// Takes over what `previous` (the same route's pool in the generation before a
    /// configuration reload) knows of the origins both pools have: failures counting towards
    /// `max_fails`, time out of rotation, a failed health check, a drain, and the request and
    /// failure counters (so `/metrics` counters do not restart). Origins are matched by URL;
    /// new ones start healthy. Requests in flight stay counted by the pool that sent them.
    pub fn carry_over(&self, previous: &OriginPool) {
        for member in self.members.iter() {
            let Some(was) = previous.members.iter().find(|m| m.origin.same_place(&member.origin)) else { continue };
            member.fails.store(was.fails.load(Relaxed), Relaxed);
            member.out_until_ms.store(was.out_until_ms.load(Relaxed), Relaxed);
            member.check_failed.store(was.check_failed.load(Relaxed), Relaxed);
            member.drained.store(was.drained.load(Relaxed), Relaxed);
            member.requests.store(was.requests.load(Relaxed), Relaxed);
            member.failures.store(was.failures.load(Relaxed), Relaxed);
        }
    }

    fn in_rotation(&self, member: usize, now_ms: u64) -> bool {
        let m = &self.members[member];
        !m.drained.load(Relaxed) && !m.check_failed.load(Relaxed) && m.out_until_ms.load(Relaxed) <= now_ms
    }

    fn load(self: &Arc<Self>, member: usize) -> MemberLoad {
        let m = &self.members[member];
        m.in_flight.fetch_add(1, Relaxed);
        m.requests.fetch_add(1, Relaxed);
        MemberLoad { pool: Arc::clone(self), member }
    }

    fn succeeded(&self, member: usize) {
        let m = &self.members[member];
        // Loads first: a success is the common case, and a store would dirty a shared line.
        if m.fails.load(Relaxed) != 0 {
            m.fails.store(0, Relaxed);
        }
        if m.out_until_ms.load(Relaxed) != 0 {
            m.out_until_ms.store(0, Relaxed);
        }
    }

    fn failed(&self, member: usize) {
        let m = &self.members[member];
        m.failures.fetch_add(1, Relaxed);
        let fails = m.fails.fetch_add(1, Relaxed) + 1;
        if self.max_fails > 0 && fails >= self.max_fails {
            m.fails.store(0, Relaxed);
            let until = self.now_ms().saturating_add(self.fail_timeout.as_millis() as u64);
            m.out_until_ms.store(until.max(1), Relaxed);
            tracing::warn!(
                "origin {} of route {} out of rotation for {:?} after {fails} failure(s)",
                m.origin.authority,
                self.label,
                self.fail_timeout
            );
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    }
}

/// The `Host` of a route's health checks, when set or implied (see
/// [`HealthCheckConfig::host`]); `None`: each origin's authority.
fn check_host(config: &RouteConfig) -> Result<Option<http::HeaderValue>, String> {
    let check = config.health_check.as_ref();
    let named = check.and_then(|c| c.host.clone()).or_else(|| config.host.clone().filter(|_| config.preserve_host));
    named.map(|host| http::HeaderValue::try_from(host).map_err(|e| format!("health check host: {e}"))).transpose()
}

/// FNV-1a over `bytes` from `seed`, then SplitMix64's finalizer: the same in every process
/// and on every platform, unlike the standard library's hashers, so proxies that share a
/// pool agree on each URL's origin.
fn stable_hash(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Runs the active health checks of every pool of the current generation that has one,
/// until `shutdown`. A reload's new generation has pools of its own (built from its routes,
/// with the health state of the pools they replace): its checks replace the previous
/// generation's.
pub fn spawn_checks(
    mut generations: tokio::sync::watch::Receiver<Arc<crate::State>>,
    shutdown: &tokio::sync::watch::Receiver<bool>,
    tasks: &mut tokio::task::JoinSet<()>,
) {
    let mut shutdown = shutdown.clone();
    tasks.spawn(async move {
        loop {
            let state = Arc::clone(&generations.borrow_and_update());
            // Dropped (so aborted) when the generation changes.
            let mut checks = tokio::task::JoinSet::new();
            for pool in state.routes.pools() {
                let Some(check) = pool.health_check.clone() else { continue };
                let (pool, upstream) = (Arc::clone(pool), state.upstream.clone());
                checks.spawn(async move {
                    let mut ticks = tokio::time::interval(check.interval.0);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        ticks.tick().await;
                        let checks = (0..pool.members.len()).map(|i| check_member(&upstream, &pool, i, &check));
                        futures_util::future::join_all(checks).await;
                    }
                });
            }
            drop(state);
            tokio::select! {
                changed = generations.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
        }
    });
}

/// One health check of member `i`: a `GET` of the check's path, a 2xx or 3xx head within
/// the timeout and its body read to the end (so that its connection is reused); or, with
/// `grpc_service`, gRPC's health `Check` call for it answered `SERVING` ([`grpc_health`]).
async fn check_member(upstream: &Upstream, pool: &OriginPool, i: usize, check: &HealthCheckConfig) {
    use http_body_util::BodyExt;
    let member = &pool.members[i];
    let host = pool.check_host.clone().unwrap_or_else(|| member.origin.host.clone());
    let (request, body) = match &check.grpc_service {
        None => (Request::get(format!("{}{}", member.origin.base_path, check.path)), OutBody::Empty),
        // A gRPC service's path is its own, whatever the origin's base path.
        Some(service) => (
            Request::post(crate::grpc_health::PATH)
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header(http::header::TE, "trailers"),
            OutBody::Full(Some(crate::grpc_health::request_body(service))),
        ),
    };
    let request =
        request.header(http::header::HOST, host).header(http::header::USER_AGENT, "sluice-health-check").body(body);
    let Ok(request) = request else { return };
    let exchange = async {
        let (head, body) = upstream.send(&member.origin.target, request).await.ok()?.response.into_parts();
        let body = body.collect().await.ok()?;
        Some(match check.grpc_service {
            None => head.status.is_success() || head.status.is_redirection(),
            Some(_) => {
                let trailers = body.trailers().cloned();
                crate::grpc_health::serving(head.status, &head.headers, &body.to_bytes(), trailers.as_ref())
            }
        })
    };
    let passed = tokio::time::timeout(check.timeout.0, exchange).await.ok().flatten().unwrap_or(false);
    let was_failed = member.check_failed.swap(!passed, Relaxed);
    if passed && was_failed {
        tracing::info!(
            "origin {} of route {} passed its health check: back in rotation",
            member.origin.authority,
            pool.label
        );
    } else if !passed && !was_failed {
        tracing::warn!(
            "origin {} of route {} failed its health check: out of rotation",
            member.origin.authority,
            pool.label
        );
    }
    if passed {
        pool.succeeded(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn pool(balance: Balance, n: usize) -> (Arc<OriginPool>, ManualClock) {
        let clock = ManualClock::default();
        let config = RouteConfig {
            origins: (0..n).map(|i| format!("http://10.0.0.{}:80", i + 1)).collect(),
            balance,
            max_fails: 2,
            ..RouteConfig::default()
        };
        (Arc::new(OriginPool::new(&config, Arc::new(clock.clone())).unwrap()), clock)
    }

    #[test]
    fn round_robin_takes_each_in_turn_and_skips_those_out_of_rotation() {
        let (pool, clock) = pool(Balance::RoundRobin, 3);
        let picks: Vec<_> = (0..6).map(|_| pool.pick("/")).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        pool.failed(1);
        assert!(pool.stats()[1].up, "one failure of max_fails = 2 keeps it in");
        pool.failed(1);
        assert!(!pool.stats()[1].up);
        assert!((0..6).all(|_| pool.pick("/") != 1));
        clock.advance(Duration::from_secs(10));
        assert!(pool.stats()[1].up, "back after fail_timeout");
        pool.failed(1);
        pool.succeeded(1);
        pool.failed(1);
        assert!(pool.stats()[1].up, "a success resets the count");
    }

    #[test]
    fn backups_are_chosen_only_while_no_origin_is_in_rotation() {
        let clock = ManualClock::default();
        let config = RouteConfig {
            origins: vec!["http://10.0.0.1".into(), "http://10.0.0.2".into()],
            backup_origins: vec!["http://10.0.0.9".into()],
            ..RouteConfig::default()
        };
        let pool = Arc::new(OriginPool::new(&config, Arc::new(clock.clone())).unwrap());
        assert!((0..6).all(|_| pool.pick("/") != 2));
        assert_eq!(pool.canonical().authority, "10.0.0.1");
        pool.failed(0);
        assert!((0..6).all(|_| pool.pick("/") == 1), "one origin left: no backup yet");
        pool.failed(1);
        assert!((0..6).all(|_| pool.pick("/") == 2), "every origin out: the backup");
        pool.failed(2);
        assert!((0..6).all(|_| pool.pick("/") != 2), "everything out: the origins are asked first");
        assert!(pool.stats()[2].backup);
    }

    #[test]
    fn a_drained_origin_is_out_of_rotation_until_undrained() {
        let (pool, _clock) = pool(Balance::RoundRobin, 3);
        let origin = |url: &str| Origin::parse(url).unwrap();
        assert!(pool.drain(&origin("http://10.0.0.2"), true), "the same origin as http://10.0.0.2:80");
        assert!(!pool.drain(&origin("http://10.0.0.9:80"), true), "no such origin");
        let stats = pool.stats();
        assert!(stats[1].drained && !stats[1].up);
        assert!((0..6).all(|_| pool.pick("/") != 1));
        assert!(pool.drain(&origin("http://10.0.0.2:80"), false));
        assert!((0..6).any(|_| pool.pick("/") == 1));
    }

    #[test]
    fn with_every_origin_out_all_are_tried_and_failover_tries_each_once() {
        let (pool, _clock) = pool(Balance::RoundRobin, 3);
        for i in 0..3 {
            pool.failed(i);
            pool.failed(i);
        }
        assert!(pool.stats().iter().all(|m| !m.up));
        let first = pool.pick("/");
        let mut tried = 1u64 << first;
        let mut seen = vec![first];
        while let Some(next) = pool.choose("/", tried) {
            tried |= 1 << next;
            seen.push(next);
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);
    }

    #[test]
    fn least_connections_prefers_the_idlest() {
        let (pool, _clock) = pool(Balance::LeastConnections, 3);
        let busy = [pool.load(0), pool.load(0), pool.load(2)];
        assert_eq!(pool.pick("/"), 1);
        let also = pool.load(1);
        assert_eq!(pool.pick("/"), 1, "1 and 2 have one in flight each, 0 two: ties go in turn");
        drop(busy);
        drop(also);
        assert!(pool.stats().iter().all(|m| m.in_flight == 0));
        assert_eq!(pool.stats().iter().map(|m| m.requests).sum::<u64>(), 4);
    }

    #[test]
    fn url_hash_keeps_each_url_on_one_origin_and_moves_only_the_lost_origins_urls() {
        let (pool, _clock) = pool(Balance::UrlHash, 4);
        let urls: Vec<String> = (0..400).map(|i| format!("/object/{i}")).collect();
        let before: Vec<usize> = urls.iter().map(|u| pool.pick(u)).collect();
        assert_eq!(before, urls.iter().map(|u| pool.pick(u)).collect::<Vec<_>>(), "stable");
        for member in 0..4 {
            let share = before.iter().filter(|&&m| m == member).count();
            assert!((60..140).contains(&share), "member {member} has {share} of 400");
        }
        pool.failed(2);
        pool.failed(2);
        for (url, &was) in urls.iter().zip(&before) {
            let now = pool.pick(url);
            if was == 2 {
                assert_ne!(now, 2);
            } else {
                assert_eq!(now, was, "{url} stays where it was");
            }
        }
    }

    #[test]
    fn a_pool_carries_over_the_state_of_the_origins_it_shares_with_its_predecessor() {
        let (was, clock) = pool(Balance::RoundRobin, 3);
        was.failed(0);
        was.failed(0);
        assert!(was.drain(&Origin::parse("http://10.0.0.2").unwrap(), true));
        was.failed(2);
        let config = RouteConfig {
            origins: vec!["http://10.0.0.3:80".into(), "http://10.0.0.1".into(), "http://10.0.0.7".into()],
            max_fails: 2,
            ..RouteConfig::default()
        };
        let next = OriginPool::new(&config, Arc::new(clock.clone())).unwrap();
        next.carry_over(&was);
        let stats = next.stats();
        assert!(stats[0].up && stats[0].failures == 1, "10.0.0.3: one failure, counted");
        assert!(!stats[1].up && stats[1].failures == 2, "10.0.0.1: still out of rotation");
        assert!(stats[2].up && stats[2].failures == 0, "10.0.0.7: new");
        next.failed(0);
        assert!(!next.stats()[0].up, "its failure count went on: max_fails reached");
        clock.advance(Duration::from_secs(10));
        assert!(next.stats()[1].up, "the carried fail_timeout ends as it would have");
    }

    #[test]
    fn the_url_hash_is_the_same_in_every_process() {
        // Fixed values (computed apart, from the algorithm as documented): a change here
        // moves every URL of every deployed pool.
        assert_eq!(stable_hash(b"", 0), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(stable_hash(b"/index.html", 42), 0x13c3_05db_192c_2c04);
        assert_ne!(stable_hash(b"/a", 1), stable_hash(b"/a", 2));
    }
}
