//! Shared harness: a scriptable origin and a Sluice instance on 127.0.0.1 ephemeral ports,
//! sharing one manual clock so freshness tests move time instead of sleeping.

#![allow(dead_code)]

pub mod admin;
pub mod disk;
pub mod raw;
pub mod recorder;

use sluice_proxy::clock::{Clock, ManualClock};
use sluice_proxy::config::{Config, ListenerConfig, Mode, RouteConfig};
use sluice_proxy::{Running, State};
use sluice_testkit::client::{self, Reply};
use sluice_testkit::Origin;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Harness {
    pub origin: Origin,
    /// More origins on the same clock ([`Harness::build_with_origins`]).
    pub others: Vec<Origin>,
    pub proxy: Running,
    pub clock: ManualClock,
    pub mode: Mode,
}

impl Harness {
    /// A forward proxy in front of a fresh origin.
    pub async fn forward() -> Self {
        Self::build(Mode::Forward, |_| {}).await
    }

    /// A reverse proxy routing everything to a fresh origin.
    pub async fn reverse() -> Self {
        Self::build(Mode::Reverse, |_| {}).await
    }

    /// A proxy of `mode` with `tweak` applied to its configuration.
    pub async fn build(mode: Mode, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::build_with_origin(mode, |c, _| tweak(c)).await
    }

    /// Like [`Harness::build`], with the origin's address given to `tweak`.
    pub async fn build_with_origin(mode: Mode, tweak: impl FnOnce(&mut Config, SocketAddr)) -> Self {
        Self::build_with_modules(mode, tweak, Vec::new()).await
    }

    /// A forward proxy with these modules.
    pub async fn forward_with(modules: Vec<sluice_proxy::LoadedModule>) -> Self {
        Self::build_with_modules(Mode::Forward, |_, _| {}, modules).await
    }

    /// Like [`Harness::build_with_origin`], with these modules.
    pub async fn build_with_modules(
        mode: Mode,
        tweak: impl FnOnce(&mut Config, SocketAddr),
        modules: Vec<sluice_proxy::LoadedModule>,
    ) -> Self {
        Self::build_full(mode, 0, |c, addrs| tweak(c, addrs[0]), modules).await
    }

    /// A proxy of `mode` with `extra` origins besides the first ([`Harness::others`]), all on
    /// the harness clock; `tweak` gets every origin's address, the first one first.
    pub async fn build_with_origins(mode: Mode, extra: usize, tweak: impl FnOnce(&mut Config, &[SocketAddr])) -> Self {
        Self::build_full(mode, extra, tweak, Vec::new()).await
    }

    async fn build_full(
        mode: Mode,
        extra: usize,
        tweak: impl FnOnce(&mut Config, &[SocketAddr]),
        modules: Vec<sluice_proxy::LoadedModule>,
    ) -> Self {
        let clock = ManualClock::default();
        let start_origin = || {
            let origin_clock = clock.clone();
            Origin::start(move || origin_clock.now())
        };
        let origin = start_origin().await;
        let mut others = Vec::with_capacity(extra);
        for _ in 0..extra {
            others.push(start_origin().await);
        }
        let addrs: Vec<SocketAddr> = std::iter::once(origin.addr).chain(others.iter().map(|o| o.addr)).collect();
        let mut config = Config {
            listener: vec![ListenerConfig { addr: "127.0.0.1:0".parse().unwrap(), mode, ..ListenerConfig::default() }],
            ..Config::default()
        };
        config.admin.addr = "127.0.0.1:0".parse().unwrap();
        // The origins listen on loopback, which the destination ACL denies forward requests by
        // default (`access.deny_destinations`): the tests' forward proxy may reach them.
        config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        config.admin.token = Some("test-token".into());
        // Tests look for this name in Via and Cache-Status (the default is the host's name).
        config.cache.name = "sluice".into();
        if mode.reverses() {
            config.route =
                vec![RouteConfig { origin: Some(format!("http://{}", origin.addr)), ..RouteConfig::default() }];
        }
        tweak(&mut config, &addrs);
        config.validate().expect("valid test config");
        let state = State::new(config, Arc::new(clock.clone()), modules).expect("state");
        let proxy = sluice_proxy::start(state).await.expect("start");
        Self { origin, others, proxy, clock, mode }
    }

    pub fn addr(&self) -> SocketAddr {
        self.proxy.listeners()[0]
    }

    pub fn admin(&self) -> SocketAddr {
        self.proxy.admin.expect("admin enabled")
    }

    /// The request target for `path`: absolute for a forward proxy, the path for a reverse one.
    pub fn target(&self, path: &str) -> String {
        if self.mode == Mode::Reverse {
            path.to_owned()
        } else {
            self.origin.url(path)
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.get_with(path, &[]).await
    }

    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        client::get(self.addr(), &self.target(path), headers).await
    }

    pub async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
        client::send(self.addr(), method, &self.target(path), headers, body).await
    }

    /// Moves the shared clock forward.
    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    /// Waits (up to 5 s of real time) until `done` holds; panics otherwise. For outcomes of
    /// background work (stale-while-revalidate) that no response signals.
    pub async fn eventually(&self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The `Cache-Status` value of a reply.
/// An access log file in a directory of its own, removed with this value.
pub struct LogFile {
    _dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

impl LogFile {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        Self { _dir: dir, path }
    }

    /// Waits until the proxy of `h` has written `n` lines (the log is written off the
    /// request path); returns them.
    pub async fn lines(&self, h: &Harness, n: usize) -> Vec<String> {
        let count = |_: &Harness| std::fs::read_to_string(&self.path).is_ok_and(|t| t.lines().count() == n);
        h.eventually(&format!("{n} access log lines"), count).await;
        std::fs::read_to_string(&self.path).unwrap().lines().map(str::to_owned).collect()
    }
}

pub fn cache_status(reply: &Reply) -> String {
    reply.header("cache-status").to_owned()
}

/// Checks a configuration of one reverse listener and one `[[route]]` made of `route` (TOML
/// lines), as `--check-config` would; `Err` holds the error's text.
pub fn check_route(route: &str) -> Result<(), String> {
    Config::parse(&format!("[[listener]]\nmode = \"reverse\"\n[[route]]\n{route}\n"))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Runs curl (`-s`, at most 10 s) with `args` and returns what it printed.
pub async fn curl(args: &[&str]) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10"])
        .args(args)
        .output()
        .await
        .expect("curl is installed (scripts/install-deps.sh)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
