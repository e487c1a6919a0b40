//! Request rate limits per client (`[[rate_limit]]`), as nginx's `limit_req` with `nodelay`:
//! each client may send `rate` requests a time unit, and `burst` more at once after a quiet
//! spell; a request beyond that gets `429 Too Many Requests` with `Retry-After`, before any
//! module, cache or origin work. Hits count like misses: the limit is on what clients ask.
//!
//! Each limit runs the generic cell rate algorithm (GCRA): per client, one timestamp, the
//! "theoretical arrival time" (TAT) of its next request were it to keep exactly to the rate.
//! A request at `now` is allowed when `TAT - now <= burst × interval` (`interval = 1/rate`),
//! and moves the TAT to `max(TAT, now) + interval`. A client is its address (after
//! `access.forwarded_for_from`), an IPv6 client its /64 (one subscriber's network, which it
//! may otherwise hop around in). Time is the proxy's clock.
//!
//! Memory: at most [`MAX_CLIENTS`] clients per limit, about 50 bytes each. A client whose TAT
//! has passed is as if unknown, so such entries are dropped when a shard fills; if a shard is
//! still full of active clients, one of them is forgotten (it starts afresh: a flood of new
//! addresses can let some requests of the forgotten through, never refuse a newcomer).
//!
//! A configuration reload keeps a limit's clients when the limit is unchanged (the same
//! name, rate, burst, host and prefix); otherwise they start afresh.

use crate::client_map::{ClientMap, SHARDS};
use crate::rate_limit_config::RateLimitConfig;
use std::collections::hash_map::Entry;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Clients tracked per limit, at most.
pub const MAX_CLIENTS: usize = 131_072;

/// The rate limits of a configuration generation.
#[derive(Debug, Default)]
pub struct RateLimits {
    limits: Vec<Limit>,
}

#[derive(Debug)]
struct Limit {
    config: RateLimitConfig,
    /// Lower-case.
    host: Option<String>,
    interval_ns: u64,
    /// `burst × interval`: how far ahead of now a client's TAT may be.
    tolerance_ns: u64,
    clients: Arc<Clients>,
}

/// The clients of one limit (each one's TAT) and its counter; shared with the next
/// generation when the limit is unchanged. A shard never holds more than its share of
/// [`MAX_CLIENTS`]. (foldhash, `crate::client_map`: SipHash took a third of a cache hit's
/// instructions, hashing three times.)
#[derive(Debug)]
struct Clients {
    tats: ClientMap<u64>,
    limited: AtomicU64,
}

/// One limit's counters (`/metrics`, `/stats`).
#[derive(Debug)]
pub struct LimitStats<'a> {
    pub config: &'a RateLimitConfig,
    /// Requests it refused.
    pub limited: u64,
    /// Clients it tracks.
    pub clients: usize,
}

/// A request a limit refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The limit's name.
    pub limit: String,
    /// How long until the client may send again.
    pub retry_after: Duration,
}

impl RateLimits {
    /// The limits of `configs` (validated).
    pub fn new(configs: &[RateLimitConfig]) -> Self {
        let limits = configs
            .iter()
            .map(|config| {
                let interval_ns = u64::try_from(config.rate.interval().as_nanos()).unwrap_or(u64::MAX).max(1);
                Limit {
                    config: config.clone(),
                    host: config.host.as_ref().map(|h| h.to_ascii_lowercase()),
                    interval_ns,
                    tolerance_ns: interval_ns.saturating_mul(u64::from(config.burst)),
                    clients: Arc::new(Clients { tats: ClientMap::default(), limited: AtomicU64::new(0) }),
                }
            })
            .collect();
        Self { limits }
    }

    /// No limit configured: nothing to check.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Some limit applies to one host only: [`RateLimits::check`] needs the request's host.
    pub fn by_host(&self) -> bool {
        self.limits.iter().any(|limit| limit.host.is_some())
    }

    /// Takes over the clients (and counters) of the limits of `previous` that are unchanged.
    pub fn carry_over(&mut self, previous: &RateLimits) {
        for limit in &mut self.limits {
            if let Some(was) = previous.limits.iter().find(|was| was.config == limit.config) {
                limit.clients = Arc::clone(&was.clients);
            }
        }
    }

    /// Counts a request from `client` for `host` (without port) and `path` at `now` against
    /// every limit that applies; `Err` names the first that refuses it.
    pub fn check(&self, now: SystemTime, client: IpAddr, host: Option<&str>, path: &str) -> Result<(), Refused> {
        let now_ns = now.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let client = ClientMap::<u64>::key(client);
        for limit in self.limits.iter().filter(|limit| limit.applies(host, path)) {
            if let Err(wait_ns) = limit.admit(client, now_ns) {
                limit.clients.limited.fetch_add(1, Relaxed);
                return Err(Refused { limit: limit.config.name.clone(), retry_after: Duration::from_nanos(wait_ns) });
            }
        }
        Ok(())
    }

    /// The counters of each limit.
    pub fn stats(&self) -> Vec<LimitStats<'_>> {
        self.limits
            .iter()
            .map(|l| LimitStats {
                config: &l.config,
                limited: l.clients.limited.load(Relaxed),
                clients: l.clients.tats.len(),
            })
            .collect()
    }
}

impl Limit {
    fn applies(&self, host: Option<&str>, path: &str) -> bool {
        let host_matches = match (&self.host, host) {
            (None, _) => true,
            (Some(wanted), Some(host)) => wanted.eq_ignore_ascii_case(host),
            (Some(_), None) => false,
        };
        host_matches && path.starts_with(&self.config.path_prefix)
    }

    /// GCRA: `Ok` and the client's TAT moved on, or `Err(nanoseconds to wait)`.
    fn admit(&self, client: IpAddr, now_ns: u64) -> Result<(), u64> {
        let mut shard = self.clients.tats.lock(client);
        if shard.len() >= MAX_CLIENTS / SHARDS && !shard.contains_key(&client) {
            // A newcomer and no room: clients whose allowance is full again go (they are as
            // if unknown), or else any one.
            shard.retain(|_, tat| *tat > now_ns);
            if shard.len() >= MAX_CLIENTS / SHARDS {
                let forgotten = shard.keys().next().copied();
                forgotten.map(|key| shard.remove(&key));
            }
        }
        let tat = match shard.entry(client) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => entry.insert(now_ns),
        };
        let ahead = (*tat).max(now_ns) - now_ns;
        if ahead > self.tolerance_ns {
            return Err(ahead - self.tolerance_ns);
        }
        *tat = (*tat).max(now_ns).saturating_add(self.interval_ns);
        Ok(())
    }
}

/// Prometheus text for the limits; empty without any.
pub fn prometheus(limits: &RateLimits) -> String {
    use std::fmt::Write;
    if limits.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# HELP sluice_rate_limited_total Requests refused by a rate limit (429).\n\
         # TYPE sluice_rate_limited_total counter\n",
    );
    let stats = limits.stats();
    for s in &stats {
        let _ = writeln!(out, "sluice_rate_limited_total{{limit=\"{}\"}} {}", s.config.name, s.limited);
    }
    out.push_str(
        "# HELP sluice_rate_limit_clients Clients a rate limit tracks.\n# TYPE sluice_rate_limit_clients gauge\n",
    );
    for s in &stats {
        let _ = writeln!(out, "sluice_rate_limit_clients{{limit=\"{}\"}} {}", s.config.name, s.clients);
    }
    out
}

/// The limits for `/stats`, `None` without any.
pub fn json(limits: &RateLimits) -> Option<serde_json::Value> {
    (!limits.is_empty()).then(|| {
        limits
            .stats()
            .into_iter()
            .map(|s| {
                let rate = s.config.rate.to_string();
                serde_json::json!({
                    "name": s.config.name, "rate": rate, "burst": s.config.burst, "limited": s.limited, "clients": s.clients,
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limit_config::Rate;

    fn limits(rate: &str, burst: u32) -> RateLimits {
        let config: RateLimitConfig =
            toml::from_str(&format!("name = \"t\"\nrate = \"{rate}\"\nburst = {burst}\npath_prefix = \"/api/\""))
                .unwrap();
        RateLimits::new(&[config])
    }

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(ms)
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn a_client_gets_its_burst_at_once_then_the_rate() {
        let l = limits("10/s", 2);
        for _ in 0..3 {
            assert!(l.check(at(0), A, None, "/api/x").is_ok(), "1 + burst at once");
        }
        let refused = l.check(at(0), A, None, "/api/x").unwrap_err();
        assert_eq!(refused, Refused { limit: "t".into(), retry_after: Duration::from_millis(100) });
        assert!(l.check(at(0), B, None, "/api/x").is_ok(), "another client has its own allowance");
        assert!(l.check(at(0), A, None, "/static/x").is_ok(), "another path is not limited");
        assert!(l.check(at(99), A, None, "/api/x").is_err());
        assert!(l.check(at(100), A, None, "/api/x").is_ok(), "one interval later, one more");
        assert!(l.check(at(100), A, None, "/api/x").is_err());
        for ms in [1000, 1000, 1000] {
            assert!(l.check(at(ms), A, None, "/api/x").is_ok(), "after a quiet spell, the burst again");
        }
        assert_eq!(l.stats()[0].limited, 3, "three refusals counted");
    }

    #[test]
    fn no_burst_spaces_requests_by_the_interval() {
        let l = limits("2/s", 0);
        assert!(l.check(at(0), A, None, "/api/").is_ok());
        assert_eq!(l.check(at(1), A, None, "/api/").unwrap_err().retry_after, Duration::from_millis(499));
        assert!(l.check(at(500), A, None, "/api/").is_ok());
    }

    #[test]
    fn hosts_match_without_case_and_ipv6_clients_are_their_64() {
        let config = RateLimitConfig {
            name: "h".into(),
            rate: Rate { requests: 1, per: Duration::from_secs(60) },
            burst: 0,
            host: Some("API.example".into()),
            path_prefix: "/".into(),
        };
        let l = RateLimits::new(&[config]);
        assert!(l.check(at(0), A, Some("www.example"), "/").is_ok());
        assert!(l.check(at(0), A, Some("www.example"), "/").is_ok(), "another host: not limited");
        assert!(l.check(at(0), A, None, "/").is_ok(), "no host: not limited");
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_net: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_net: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(l.check(at(0), one, Some("api.example"), "/").is_ok());
        assert!(l.check(at(0), same_net, Some("api.example"), "/").is_err(), "the same /64");
        assert!(l.check(at(0), other_net, Some("api.example"), "/").is_ok());
    }

    #[test]
    fn a_full_table_drops_idle_clients_first_and_never_refuses_a_newcomer() {
        let l = limits("1/s", 0);
        let client = |n: u32| IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        for n in 0..(MAX_CLIENTS as u32 + 1000) {
            assert!(l.check(at(0), client(n), None, "/api/").is_ok(), "newcomer {n}");
        }
        assert!(l.stats()[0].clients <= MAX_CLIENTS);
        // A second later every entry is idle: they go before anyone active is forgotten.
        assert!(l.check(at(1000), client(1), None, "/api/").is_ok());
        let busy = client(MAX_CLIENTS as u32 + 5000);
        assert!(l.check(at(1000), busy, None, "/api/").is_ok());
        assert!(l.check(at(1000), busy, None, "/api/").is_err(), "an active client stays tracked");
    }

    #[test]
    fn a_reload_keeps_the_clients_of_unchanged_limits_only() {
        let before = limits("1/s", 0);
        assert!(before.check(at(0), A, None, "/api/").is_ok());
        let mut same = limits("1/s", 0);
        same.carry_over(&before);
        assert!(same.check(at(0), A, None, "/api/").is_err(), "still limited");
        let mut changed = limits("2/s", 0);
        changed.carry_over(&before);
        assert!(changed.check(at(0), A, None, "/api/").is_ok(), "a changed limit starts afresh");
        assert_eq!(same.stats()[0].limited, 1, "the counter carried over too");
    }
}
