//! The configuration file (TOML). Every option has a default; `docs/config.md` documents
//! each one. With no file at all, Sluice is a forward caching proxy on 127.0.0.1:3128 with a
//! 256 MiB memory cache and its admin API on 127.0.0.1:3129.

use crate::units::{Dur, Size};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub listener: Vec<ListenerConfig>,
    pub access: AccessConfig,
    pub route: Vec<RouteConfig>,
    pub cache: CacheConfig,
    pub upstream: UpstreamConfig,
    pub client: ClientConfig,
    pub headers: HeadersConfig,
    pub log: LogConfig,
    pub admin: AdminConfig,
    pub shutdown: ShutdownConfig,
    pub cpu_pool: CpuPoolConfig,
    pub module: Vec<ModuleConfig>,
    /// Request rates allowed per client; none by default.
    pub rate_limit: Vec<crate::rate_limit_config::RateLimitConfig>,
    /// Proxy authentication of forward-proxy requests; none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_auth: Option<crate::proxy_auth::ProxyAuthConfig>,
    /// The file this configuration was read from ([`Config::load`]); what a reload re-reads.
    /// Not a setting.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listener: vec![ListenerConfig::default()],
            access: AccessConfig::default(),
            route: Vec::new(),
            cache: CacheConfig::default(),
            upstream: UpstreamConfig::default(),
            client: ClientConfig::default(),
            headers: HeadersConfig::default(),
            log: LogConfig::default(),
            admin: AdminConfig::default(),
            shutdown: ShutdownConfig::default(),
            cpu_pool: CpuPoolConfig::default(),
            module: Vec::new(),
            rate_limit: Vec::new(),
            proxy_auth: None,
            source: None,
        }
    }
}

/// What a listener does with requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Forward proxy: absolute-form requests and CONNECT.
    Forward,
    /// Reverse proxy (accelerator): requests are mapped to origins by `[[route]]`.
    Reverse,
    /// Both: a request matching a route is reverse-proxied, any other absolute-form request
    /// or CONNECT is forwarded.
    Both,
}

impl Mode {
    pub fn forwards(self) -> bool {
        matches!(self, Mode::Forward | Mode::Both)
    }
    pub fn reverses(self) -> bool {
        matches!(self, Mode::Reverse | Mode::Both)
    }
}

/// One listening socket.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerConfig {
    pub addr: SocketAddr,
    pub mode: Mode,
    /// Serve TLS with this certificate chain and key (PEM files); ALPN offers h2 and http/1.1.
    pub tls: Option<TlsConfig>,
    /// Accept HTTP/2 with prior knowledge (h2c) on a plain-text listener.
    pub h2c: bool,
    /// Every connection starts with a PROXY protocol header (version 1 or 2) from a load
    /// balancer in `access.proxy_protocol_from`, naming the client (`crate::proxy_protocol`).
    pub proxy_protocol: bool,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 3128)),
            mode: Mode::Forward,
            tls: None,
            h2c: true,
            proxy_protocol: false,
        }
    }
}

/// PEM files for a TLS listener.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain served to clients that ask for no name (SNI) or for one that no
    /// `sni` certificate lists.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// More certificates, each served to the clients that ask for a DNS name it lists.
    #[serde(default)]
    pub sni: Vec<CertKeyConfig>,
    /// A PEM file of the certificate authorities whose client certificates the listener asks
    /// for and checks (mutual TLS). Default: none, no client certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: refuse clients without a valid certificate (`true`, the default), or
    /// let them in without one (`false`; a certificate presented must still be valid).
    #[serde(default = "default_true")]
    pub client_cert_required: bool,
}

impl TlsConfig {
    /// One certificate for every client, no client certificates.
    pub fn single(cert: PathBuf, key: PathBuf) -> Self {
        Self { cert, key, sni: Vec::new(), client_ca: None, client_cert_required: true }
    }
}

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CertKeyConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Who may use the proxy, and for what.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Client networks allowed to use the proxy listeners. Others get 403.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub allow: Vec<IpNet>,
    /// Ports CONNECT may open tunnels to.
    pub connect_ports: Vec<u16>,
    /// Networks forward requests and CONNECT tunnels may not connect to (judged on the
    /// resolved addresses; `crate::dest_acl`). Reverse routes' origins are not subject to it.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub deny_destinations: Vec<IpNet>,
    /// Exceptions to `deny_destinations`.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub allow_destinations: Vec<IpNet>,
    /// Protocols an HTTP/1.1 `Upgrade` request may switch to through the proxy (compared
    /// without case and without a `/version`); other `Upgrade` requests go on as plain ones.
    pub upgrade_protocols: Vec<String>,
    /// Client networks allowed to send `PURGE`.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub purge_allow: Vec<IpNet>,
    /// Peers (load balancers) allowed to name the client with a PROXY protocol header on
    /// listeners with `proxy_protocol`; connections from others are closed.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub proxy_protocol_from: Vec<IpNet>,
    /// Peers (HTTP load balancers, CDNs) whose `X-Forwarded-For` (or `Forwarded`, per
    /// `forwarded_for_header`) names the client of each of their requests
    /// (`crate::forwarded`). Empty: the header names nobody.
    #[serde(deserialize_with = "crate::acl::deserialize_nets")]
    pub forwarded_for_from: Vec<IpNet>,
    /// Which header of those peers' requests names the client.
    pub forwarded_for_header: ForwardedForHeader,
}

/// The header in which trusted balancers name a request's client (`access.forwarded_for_header`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardedForHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`: the de facto standard.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`: the `for` node of each element.
    Forwarded,
}

fn loopback_nets() -> Vec<IpNet> {
    vec!["127.0.0.0/8".parse().expect("valid net"), "::1/128".parse().expect("valid net")]
}

/// What forward requests may not reach by default: the proxy host's loopback (and the
/// unspecified addresses, which reach it too) and link-local addresses (a cloud's metadata
/// service), as Squid's `http_access deny to_localhost` and `to_linklocal`.
fn local_destinations() -> Vec<IpNet> {
    ["127.0.0.0/8", "::1/128", "0.0.0.0/32", "::/128", "169.254.0.0/16", "fe80::/10"]
        .iter()
        .map(|net| net.parse().expect("valid net"))
        .collect()
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            allow: loopback_nets(),
            connect_ports: vec![443],
            deny_destinations: local_destinations(),
            allow_destinations: Vec::new(),
            upgrade_protocols: vec!["websocket".to_owned()],
            purge_allow: loopback_nets(),
            proxy_protocol_from: loopback_nets(),
            forwarded_for_from: Vec::new(),
            forwarded_for_header: ForwardedForHeader::default(),
        }
    }
}

/// A reverse-proxy mapping from (Host, path prefix) to an origin or a local directory.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Host to match (without port, case-insensitive). Absent: any host.
    pub host: Option<String>,
    /// Path prefix to match. Default `/`.
    #[serde(default = "default_prefix")]
    pub path_prefix: String,
    /// Origin base URL, `http://host:port` or `https://host:port`, optionally with a path
    /// that replaces the matched prefix. Exactly one of `origin`, `origins` and `files` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Several equivalent origins (one scheme and base path), balanced and failed over:
    /// an origin pool (docs/config.md, "Origin pools").
    #[serde(default)]
    pub origins: Vec<String>,
    /// Origins of the pool asked only while none of `origins` is in rotation (a standby
    /// site, a static fallback).
    #[serde(default)]
    pub backup_origins: Vec<String>,
    /// How requests are spread over `origins`.
    #[serde(default)]
    pub balance: crate::pool_config::Balance,
    /// Consecutive failures to reach one of `origins` (refused, reset, timed out) that take
    /// it out of rotation for `fail_timeout`; 0 never does.
    #[serde(default = "crate::pool_config::default_max_fails")]
    pub max_fails: u32,
    /// How long an origin of `origins` taken out of rotation stays out.
    #[serde(default = "crate::pool_config::default_fail_timeout")]
    pub fail_timeout: crate::units::Dur,
    /// An active health check of each of `origins`. Default: none (failures of requests
    /// alone take origins out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<crate::pool_config::HealthCheckConfig>,
    /// Keep the client's `Host` header towards the origin instead of the origin's authority.
    #[serde(default)]
    pub preserve_host: bool,
    /// Serve a local directory instead of an origin (the file data source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesConfig>,
    /// Assemble ESI templates (responses with `Surrogate-Control: content="ESI/1.0"`) on
    /// this route (docs/esi.md). Default `false`; there is no global switch.
    #[serde(default)]
    pub esi: bool,
    /// Hosts (no port) that `<esi:include>` on this route may name besides the page's own
    /// host. Default: none.
    #[serde(default)]
    pub esi_hosts: Vec<String>,
    /// Sort the query parameters of this route's requests by name (stable: repeated
    /// parameters keep their order) before they are cached and sent on. Default `false`.
    #[serde(default)]
    pub query_sort: bool,
    /// Query parameters dropped from this route's requests before they are cached and sent
    /// on: names, or prefixes followed by `*` (`"utm_*"`). Default: none.
    #[serde(default)]
    pub query_drop: Vec<String>,
    /// How long a response of this route's origins that has no explicit lifetime stays
    /// fresh, in place of the `Last-Modified` heuristic (`cache.heuristic_fraction`), for
    /// the statuses a heuristic may apply to. Default: none (the heuristic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<crate::units::Dur>,
    /// Largest request body this route accepts, in place of `client.max_body_size` (`0`: no
    /// limit). Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_size: Option<Size>,
    /// Serve stale objects when their revalidation gets a server error, in place of
    /// `cache.stale_if_server_error`. Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_if_server_error: Option<bool>,
    /// The `stale-while-revalidate` window of this route's responses that carry none, in
    /// place of `cache.stale_while_revalidate` (0: none). Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_while_revalidate: Option<Dur>,
    /// The name TLS asks the route's `https://` origins for (SNI) and checks their
    /// certificates against, in place of each origin's host. Default: the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_name: Option<String>,
    /// Speak HTTP/2 to this route's origins (prior knowledge to `http://` ones, ALPN `h2`
    /// with `https://` ones), one multiplexed connection per origin: gRPC services, and
    /// origins that serve HTTP/2 only. Default `false` (HTTP/1.1).
    #[serde(default)]
    pub http2: bool,
    /// The route's own `upstream.connect_timeout`. Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<Dur>,
    /// The route's own `upstream.response_timeout`. Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_timeout: Option<Dur>,
    /// The route's own `upstream.read_timeout`. Default: that setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_timeout: Option<Dur>,
    /// Look this route's requests up in the cache and store their responses. `false`: every
    /// request goes to the origin and nothing is stored (`Cache-Status: fwd=bypass;
    /// detail=route`), whatever the responses allow. Default `true`.
    #[serde(default = "default_true")]
    pub cache: bool,
    /// Fields removed, set and added on the requests this route sends to its origins.
    #[serde(default, skip_serializing_if = "crate::header_rules::HeaderRulesConfig::is_empty")]
    pub request_headers: crate::header_rules::HeaderRulesConfig,
    /// Fields removed, set and added on the responses this route gives clients.
    #[serde(default, skip_serializing_if = "crate::header_rules::HeaderRulesConfig::is_empty")]
    pub response_headers: crate::header_rules::HeaderRulesConfig,
}

impl Default for RouteConfig {
    /// What an empty `[[route]]` table means: any host, prefix `/`, nothing else set (so
    /// neither `origin` nor `files` yet: add one).
    fn default() -> Self {
        Self {
            host: None,
            path_prefix: default_prefix(),
            origin: None,
            origins: Vec::new(),
            backup_origins: Vec::new(),
            balance: crate::pool_config::Balance::default(),
            max_fails: crate::pool_config::default_max_fails(),
            fail_timeout: crate::pool_config::default_fail_timeout(),
            health_check: None,
            preserve_host: false,
            files: None,
            esi: false,
            esi_hosts: Vec::new(),
            query_sort: false,
            query_drop: Vec::new(),
            default_ttl: None,
            max_body_size: None,
            stale_if_server_error: None,
            stale_while_revalidate: None,
            tls_name: None,
            http2: false,
            connect_timeout: None,
            response_timeout: None,
            read_timeout: None,
            cache: true,
            request_headers: Default::default(),
            response_headers: Default::default(),
        }
    }
}

impl RouteConfig {
    /// True when this route and `later` match the same requests: the same host (or both
    /// any) and the same prefix. Routes are tried by host, then longest prefix, and among
    /// equals in file order, so `later` would never be used.
    fn shadows(&self, later: &RouteConfig) -> bool {
        let host = match (&self.host, &later.host) {
            (None, None) => true,
            (Some(mine), Some(theirs)) => mine.eq_ignore_ascii_case(theirs),
            _ => false,
        };
        host && later.path_prefix == self.path_prefix
    }

    /// How errors and the admin API name the route: its host (`*` for any) and path prefix,
    /// e.g. `www.example.com/api/`.
    pub fn label(&self) -> String {
        format!("{}{}", self.host.as_deref().unwrap_or("*"), self.path_prefix)
    }

    /// Checks what the types cannot, for this route; `cache_enabled` is `cache.enabled`.
    pub fn validate(&self, cache_enabled: bool) -> Result<(), String> {
        let route_err = |e: String| format!("route `{}`: {e}", self.label());
        match (&self.origin, self.origins.is_empty(), &self.files) {
            (Some(origin), true, None) => {
                crate::route::Origin::parse(origin)?;
            }
            (None, false, None) => {
                crate::pool_config::validate_origins(&self.origins, &self.backup_origins).map_err(route_err)?;
            }
            (None, true, Some(files)) => {
                files.validate(self.preserve_host)?;
            }
            _ => {
                return Err(format!("route `{}` needs exactly one of `origin`, `origins` and `files`", self.label()));
            }
        }
        if let Some(name) = &self.tls_name {
            let https = self
                .origin
                .iter()
                .chain(&self.origins)
                .all(|o| crate::route::Origin::parse(o).is_ok_and(|o| o.target.https));
            if self.files.is_some() || !https {
                return Err(format!("route `{}` has a tls_name but no https:// origin", self.label()));
            }
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                return Err(format!("route `{}`: tls_name `{name}` is not a DNS name or an IP address", self.label()));
            }
        }
        if self.http2 && self.files.is_some() {
            return Err(format!("route `{}` serves files: http2 does not apply", self.label()));
        }
        let timeouts = [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("read_timeout", self.read_timeout),
        ];
        for (name, timeout) in timeouts.iter().filter_map(|(name, t)| t.map(|t| (name, t))) {
            if self.files.is_some() {
                return Err(format!("route `{}` serves files: {name} does not apply", self.label()));
            }
            if timeout.0.is_zero() {
                return Err(format!("route `{}`: {name} must be more than 0", self.label()));
            }
        }
        crate::header_rules::RouteHeaders::of(&self.request_headers, &self.response_headers).map_err(route_err)?;
        if self.files.is_some() && !self.request_headers.is_empty() {
            return Err(format!("route `{}` serves files: request_headers do not apply", self.label()));
        }
        if !self.backup_origins.is_empty() && self.origins.is_empty() {
            return Err(format!("route `{}` has backup_origins but no `origins`", self.label()));
        }
        if let Some(check) = &self.health_check {
            if self.origins.is_empty() {
                return Err(format!("route `{}` has a health_check but no `origins`", self.label()));
            }
            check.validate().map_err(route_err)?;
            if check.grpc_service.is_some() && !self.http2 {
                return Err(format!("route `{}`: a gRPC health_check needs http2 = true", self.label()));
            }
        }
        if self.esi && !cache_enabled {
            return Err(format!(
                "route `{}` has esi = true, which needs the cache (cache.enabled = true): includes are fetched through it",
                self.label()
            ));
        }
        if self.files.is_some() && self.default_ttl.is_some() {
            return Err(format!(
                "route `{}` serves files, whose lifetime is their cache_control: default_ttl does not apply",
                self.label()
            ));
        }
        if self.files.is_some() && (self.query_sort || !self.query_drop.is_empty()) {
            return Err(format!(
                "route `{}` serves files, which ignore the query: query_sort and query_drop do not apply",
                self.label()
            ));
        }
        sluice_http::query::QueryRules::new(self.query_sort, &self.query_drop).map_err(route_err)?;
        if !self.esi_hosts.is_empty() && !self.esi {
            return Err(format!("route `{}` sets esi_hosts without esi = true", self.label()));
        }
        if let Some(host) = self.esi_hosts.iter().find(|h| h.is_empty() || h.contains([':', '/', '*'])) {
            return Err(format!("route `{}`: esi_hosts entry {host:?} must be a plain host name", self.label()));
        }
        if !self.path_prefix.starts_with('/') {
            return Err(format!("route path_prefix `{}` must start with /", self.path_prefix));
        }
        Ok(())
    }
}

/// A route's file data source: the files under `root`, named by the request path after the
/// route's prefix.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FilesConfig {
    /// The directory served (absolute). Opened once at start-up.
    pub root: PathBuf,
    /// `Cache-Control` of every response from these files (200, 304 and 404). Default
    /// `max-age=60`: short, so that even a change the watcher cannot see is picked up by
    /// validation within a minute.
    #[serde(default = "default_files_cache_control")]
    pub cache_control: String,
    /// Follow symbolic links that lead out of `root`. Default `false`: a link is followed only
    /// while it stays inside `root`; one that leaves it gets 403.
    #[serde(default)]
    pub follow_outside_symlinks: bool,
    /// Watch `root` (inotify) and drop a file's cached response as soon as the file changes.
    /// Default `true`.
    #[serde(default = "default_true")]
    pub watch: bool,
}

fn default_files_cache_control() -> String {
    "max-age=60".to_owned()
}

fn default_true() -> bool {
    true
}

fn default_prefix() -> String {
    "/".to_owned()
}

/// The shared cache.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub enabled: bool,
    /// Memory tier capacity.
    pub memory: Size,
    /// Largest object stored.
    pub max_object: Size,
    /// Memory the responses being stored may hold together while they arrive
    /// (`crate::fill_budget`); past it, a response is streamed and not stored. 0: the larger
    /// of `memory` and the largest object a tier stores, so that one such object can always
    /// be stored.
    pub filling_memory: Size,
    /// A miss whose `Range` starts further into the object than this is forwarded with its
    /// `Range` and not stored, instead of fetching the whole object first (Squid's
    /// `range_offset_limit`).
    pub range_offset_limit: Size,
    /// Replacement policy of the memory tier.
    pub policy: String,
    /// Name in `Cache-Status` and `Via`, and what loop detection looks for: by default this
    /// host's name ([`host_name`]).
    pub name: String,
    /// Heuristic freshness: fraction of the time since `Last-Modified`.
    pub heuristic_fraction: f64,
    /// Heuristic freshness: upper bound.
    pub heuristic_max: Dur,
    /// How long a request collapsed onto another's fetch waits for its response head
    /// before fetching on its own.
    pub collapse_wait: Dur,
    /// Store responses carrying `Set-Cookie` (off: they are passed, as Varnish does).
    pub store_set_cookie: bool,
    /// Obey `CDN-Cache-Control` (RFC 9213) for reverse-proxied responses.
    pub cdn_cache_control: bool,
    /// Obey `Surrogate-Control` (W3C Edge Architecture 1.0) for reverse-proxied responses,
    /// announce this cache with `Surrogate-Capability` to their origins, and remove
    /// `Surrogate-Control` from what clients get.
    pub surrogate_control: bool,
    /// How long a URL whose response could not be stored (`no-store`, `private`,
    /// `Set-Cookie`, ...) is passed straight to the origin, skipping collapsing; 0 disables.
    pub hit_for_pass: Dur,
    /// When revalidating a stale object cannot reach its origin (refused, reset, or timed out
    /// before a response head), serve the object if it has been stale for at most this long
    /// and no directive forbids it (RFC 9111 §4.2.4, "disconnected"); 0 disables.
    /// `stale-if-error` applies regardless.
    pub stale_if_unreachable: Dur,
    /// On reverse routes: a revalidation answered with 500, 502, 503 or 504 serves the stale
    /// object as an unreachable origin would (`stale_if_unreachable`'s window and conditions),
    /// instead of passing the error on. A route's `stale_if_server_error` replaces it.
    pub stale_if_server_error: bool,
    /// On reverse routes: the `stale-while-revalidate` window (RFC 5861) of responses that
    /// carry none; 0: none. A route's `stale_while_revalidate` replaces it.
    pub stale_while_revalidate: Dur,
    /// Expiry processing: how often the memory tier is swept for stale, idle objects;
    /// 0 disables the periodic sweep (`POST /cache/sweep` still runs one).
    pub sweep_interval: Dur,
    /// How long a stale object is kept, at least, before a sweep may remove it (its own
    /// `stale-while-revalidate` / `stale-if-error` windows extend this).
    pub sweep_grace: Dur,
    /// A stale object past grace with fewer hits per hour than this is removed; busier
    /// ones are kept for revalidation. 0 keeps every object that had a hit.
    pub sweep_min_hits_per_hour: f64,
    /// Suspend evicted objects that have validators (`ETag`, `Last-Modified`) and no disk
    /// copy: keep their metadata without the body, so a conditional client request
    /// revalidates with the origin (a 304) instead of fetching the body again.
    pub suspend: bool,
    /// Most suspended entries kept (oldest dropped first); each costs its metadata, a few
    /// hundred bytes, charged to `memory`.
    pub suspend_max_entries: u64,
    /// Which new objects the memory tier stores: `always`, `second-hit` (on the second
    /// miss within `admission_window` first misses) or `tinylfu` (when requested more often
    /// than the object it would evict).
    pub admission: String,
    /// Keys the `second-hit` doorkeeper remembers (and the TinyLFU sketch's initial size).
    pub admission_window: u64,
    /// The disk tier (`[cache.disk]`); none unless `dir` is set.
    pub disk: crate::disk_config::DiskCacheConfig,
}

impl CacheConfig {
    /// The admission rule `admission` names; `Err` names the valid values.
    pub fn admission_rule(&self) -> Result<sluice_store::AdmissionRule, String> {
        let window = usize::try_from(self.admission_window).unwrap_or(usize::MAX);
        match self.admission.as_str() {
            "always" => Ok(sluice_store::AdmissionRule::Always),
            "second-hit" => Ok(sluice_store::AdmissionRule::SecondHit { window }),
            "tinylfu" => Ok(sluice_store::AdmissionRule::TinyLfu { expected: window }),
            other => Err(format!("cache.admission: unknown rule {other:?}; valid: always, second-hit, tinylfu")),
        }
    }

    /// Suspended entries the memory tier may keep (0 when `suspend` is off).
    pub fn suspend_entries(&self) -> usize {
        if self.suspend {
            usize::try_from(self.suspend_max_entries).unwrap_or(usize::MAX)
        } else {
            0
        }
    }
}

/// This host's name as a `cache.name` token (like Squid's `visible_hostname`), so that two
/// Sluice instances on different hosts do not take each other for a forwarding loop; `sluice`
/// when the host's name is unknown or not a token.
pub fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name = raw.trim();
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
        name.to_owned()
    } else {
        "sluice".to_owned()
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            memory: Size(256 << 20),
            max_object: Size(64 << 20),
            filling_memory: Size(0),
            range_offset_limit: Size(4 << 20),
            policy: "lru".to_owned(),
            name: host_name(),
            heuristic_fraction: 0.1,
            heuristic_max: Dur(Duration::from_secs(86400)),
            collapse_wait: Dur(Duration::from_secs(10)),
            store_set_cookie: false,
            cdn_cache_control: true,
            surrogate_control: true,
            hit_for_pass: Dur(Duration::from_secs(120)),
            stale_if_unreachable: Dur(Duration::from_secs(86400)),
            stale_if_server_error: false,
            stale_while_revalidate: Dur(Duration::ZERO),
            sweep_interval: Dur(Duration::from_secs(60)),
            sweep_grace: Dur(Duration::from_secs(600)),
            sweep_min_hits_per_hour: 1.0,
            suspend: true,
            suspend_max_entries: 10_000,
            admission: "always".to_owned(),
            admission_window: 100_000,
            disk: crate::disk_config::DiskCacheConfig::default(),
        }
    }
}

/// Connections to origins.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    pub connect_timeout: Dur,
    /// Time from sending a request to the origin's response head; past it the client gets 504.
    pub response_timeout: Dur,
    /// Longest silence while reading an origin's body.
    pub read_timeout: Dur,
    /// How long an idle pooled connection is kept.
    pub idle_timeout: Dur,
    /// Idle connections kept per origin.
    pub max_idle_per_host: usize,
    /// Open connections per origin; 0 means no limit. Requests beyond it wait for one.
    pub max_connections_per_host: usize,
    /// Open connections to origins, over all of them (`crate::upstream`); 0: automatic, as
    /// `client.max_connections`.
    pub max_connections: usize,
    /// Most GET and HEAD requests in flight on one connection (HTTP/1.1 pipelining, RFC 9112
    /// §9.3.2); 1 sends one at a time.
    pub pipeline: usize,
    /// TLS towards `https://` origins.
    pub tls: OriginTlsConfig,
}

/// TLS towards origins (`crate::origin_tls`): whom to trust, and what to present.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OriginTlsConfig {
    /// A PEM file of more trust anchors for origin certificates (a private CA).
    pub ca_file: Option<PathBuf>,
    /// Trust Mozilla's root certificates (built in); false: only `ca_file`.
    pub builtin_roots: bool,
    /// Check origin certificates; false accepts any (for testing only).
    pub verify: bool,
    /// A PEM certificate chain to present to origins that ask for one (mutual TLS).
    pub client_cert: Option<PathBuf>,
    /// The private key of `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl Default for OriginTlsConfig {
    fn default() -> Self {
        Self { ca_file: None, builtin_roots: true, verify: true, client_cert: None, client_key: None }
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Dur(Duration::from_secs(5)),
            response_timeout: Dur(Duration::from_secs(30)),
            read_timeout: Dur(Duration::from_secs(30)),
            idle_timeout: Dur(Duration::from_secs(60)),
            max_idle_per_host: 64,
            max_connections_per_host: 0,
            max_connections: 0,
            pipeline: 1,
            tls: OriginTlsConfig::default(),
        }
    }
}

/// Client connections.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Time a client has to send a complete request head, and the longest a keep-alive
    /// connection may sit idle between requests.
    pub header_read_timeout: Dur,
    /// Largest request head accepted; larger gets 431.
    pub max_header_bytes: Size,
    /// Longest a whole transaction may take to produce its response head (504 past it).
    pub transaction_timeout: Dur,
    /// A CONNECT tunnel through which no byte went either way for this long is closed.
    pub tunnel_idle_timeout: Dur,
    /// Most header field lines an HTTP/1 request head may have (431 past it).
    pub max_header_fields: usize,
    /// Most client connections open at once, over all listeners; past it the listeners stop
    /// accepting (`crate::conn_limit`). 0: automatic, from the process's open-descriptor
    /// limit.
    pub max_connections: usize,
    /// Largest request body accepted (`crate::client_body`); larger gets 413. 0: no limit.
    /// A route's `max_body_size` replaces it for that route's requests.
    pub max_body_size: Size,
    /// Most requests one client may have in progress at once, over all its connections and
    /// HTTP/2 streams (`crate::in_flight`); more get 429. 0: no limit.
    pub max_requests_per_client: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Dur(Duration::from_secs(30)),
            max_header_bytes: Size(64 * 1024),
            transaction_timeout: Dur(Duration::from_secs(60)),
            tunnel_idle_timeout: Dur(Duration::from_secs(300)),
            max_header_fields: crate::framing::HYPER_MAX_HEADERS,
            max_connections: 0,
            max_body_size: Size(0),
            max_requests_per_client: 0,
        }
    }
}

/// Headers Sluice adds.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeadersConfig {
    /// Add `Via` to requests and responses (also used for loop detection).
    pub via: bool,
    /// Append the client address to `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Append an RFC 7239 `Forwarded` element (`for`, `host`, `proto`).
    pub forwarded: bool,
    /// Add `Cache-Status` (RFC 9211) to responses.
    pub cache_status: bool,
    /// Replace `X-Forwarded-Client-Cert` on requests to origins with the client certificate
    /// the connection's TLS listener verified (`tls.client_ca`), or remove it without one.
    pub forward_client_cert: bool,
}

impl Default for HeadersConfig {
    fn default() -> Self {
        Self { via: true, x_forwarded_for: true, forwarded: false, cache_status: true, forward_client_cert: false }
    }
}

/// Access log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Squid's native `access.log` format.
    Squid,
    /// Apache/NCSA Combined, with Squid's result code appended.
    Combined,
    /// One JSON object per line (`crate::access_log`).
    Json,
}

/// Logging.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Access log path; `-` is standard output; absent: no access log.
    pub access_log: Option<PathBuf>,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { access_log: None, format: LogFormat::Squid }
    }
}

/// The admin listener (`/metrics`, `/stats`, management).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    /// Must be a loopback address unless `allow_non_loopback` is set.
    pub addr: SocketAddr,
    pub allow_non_loopback: bool,
    /// Bearer token required by every admin endpoint but `/metrics` and `/healthz`. Absent: a
    /// random token is generated at start and written to `token_file`.
    pub token: Option<String>,
    /// Where the generated token is written (mode 0600). Default: `sluice-admin-<port>.token`
    /// in the system temporary directory ([`AdminConfig::token_path`]).
    pub token_file: Option<PathBuf>,
}

impl AdminConfig {
    /// Where a generated token goes for an admin listener on `port` (the bound one, when
    /// `addr` asks for any): `token_file`, else `$TMPDIR/sluice-admin-<port>.token`, so that
    /// proxies on one machine keep their own, and `sluice ctl` finds the one of the admin
    /// address it calls.
    pub fn token_path(&self, port: u16) -> PathBuf {
        self.token_file.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("sluice-admin-{port}.token")))
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            addr: SocketAddr::from(([127, 0, 0, 1], 3129)),
            allow_non_loopback: false,
            token: None,
            token_file: None,
        }
    }
}

/// Graceful shutdown.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// After SIGTERM, how long in-flight requests may take to finish.
    pub drain: Dur,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self { drain: Dur(Duration::from_secs(30)) }
    }
}

/// The bounded pool modules run CPU work on (`sluice_module::CpuPool`, reached through
/// `TxnInfo::cpu`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuPoolConfig {
    /// Jobs running at once at most; 0: one per core.
    pub threads: usize,
    /// Jobs waiting for a thread at most; a job past that is refused at once.
    pub queue: usize,
}

impl Default for CpuPoolConfig {
    fn default() -> Self {
        Self { threads: 0, queue: sluice_module::CpuPool::DEFAULT_QUEUE }
    }
}

impl CpuPoolConfig {
    /// The pool this configures.
    pub fn build(&self) -> sluice_module::CpuPool {
        sluice_module::CpuPool::new(self.threads, self.queue)
    }
}

/// What a module's failure (panic, trap, missed deadline) does to a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Skip the module for the rest of the transaction and go on.
    #[default]
    Open,
    /// Fail the transaction (500, or the connection is cut mid-body).
    Closed,
}

impl From<OnError> for sluice_module::FailurePolicy {
    fn from(on_error: OnError) -> Self {
        match on_error {
            OnError::Open => sluice_module::FailurePolicy::Open,
            OnError::Closed => sluice_module::FailurePolicy::Closed,
        }
    }
}

/// What kind of module a `[[module]]` entry is (see `docs/modules.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    /// A module compiled into Sluice, named by `name` (the `sluice-modules` table).
    #[default]
    Builtin,
    /// A Proxy-Wasm plugin: `settings` is its spec (`path` to the `.wasm`, configuration,
    /// limits); see `docs/modules-wasm.md`.
    Wasm,
    /// An Envoy ext_proc helper process: `settings` is its configuration; see
    /// `docs/modules-extproc.md`.
    Extproc,
}

impl ModuleKind {
    /// The kind's name as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleKind::Builtin => "builtin",
            ModuleKind::Wasm => "wasm",
            ModuleKind::Extproc => "extproc",
        }
    }
}

/// One module, in the order modules run.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleConfig {
    /// The module's name: a built-in module's name for `kind = "builtin"`, any name (unique
    /// among the entries) otherwise. The admin API addresses the module by it.
    pub name: String,
    /// What builds the module (default: a built-in module).
    #[serde(default)]
    pub kind: ModuleKind,
    #[serde(default)]
    pub on_error: OnError,
    /// Module-specific settings.
    #[serde(default)]
    pub settings: toml::Table,
}

/// A configuration error, with the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The OS error is in the message, not a `source()`: reports that print the error chain
    /// (`{:#}`) would otherwise say it twice.
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// What [`Config::redacted`] shows for a secret.
pub const REDACTED: &str = "(redacted)";

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { path: path.into(), error })?;
        let mut config = Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.into(), message },
            ConfigError::Invalid(message) => {
                ConfigError::Parse { path: path.into(), message: format!("invalid configuration: {message}") }
            }
            other => other,
        })?;
        config.source = Some(path.to_owned());
        Ok(config)
    }

    /// Parses and validates configuration text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let mut message = e.to_string();
            if message.contains("invalid type: map, expected a sequence") {
                message.push_str(
                    "hint: listener, route, module and rate_limit are lists: write each entry as [[listener]] (two brackets)\n",
                );
            }
            ConfigError::Parse { path: PathBuf::from("<config>"), message }
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what the types cannot: cross-field rules and values in range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if self.listener.is_empty() {
            return invalid("at least one [[listener]] is needed".into());
        }
        for l in &self.listener {
            if l.mode.reverses() && self.route.is_empty() {
                return invalid(format!("listener {} is a reverse proxy but no [[route]] is configured", l.addr));
            }
        }
        for (i, limit) in self.rate_limit.iter().enumerate() {
            limit.validate().map_err(ConfigError::Invalid)?;
            if self.rate_limit[..i].iter().any(|earlier| earlier.name == limit.name) {
                return invalid(format!("two [[rate_limit]] entries are named `{}`", limit.name));
            }
        }
        // Port 0 (any free port) is never a clash.
        for (i, l) in self.listener.iter().enumerate().filter(|(_, l)| l.addr.port() != 0) {
            if let Some(earlier) = self.listener[..i].iter().find(|earlier| takes_the_same_port(earlier.addr, l.addr)) {
                return invalid(if earlier.addr == l.addr {
                    format!("two [[listener]] entries listen on {}", l.addr)
                } else {
                    format!(
                        "listeners {} and {} overlap: an unspecified address takes its port on every address",
                        earlier.addr, l.addr
                    )
                });
            }
            if self.admin.enabled && takes_the_same_port(l.addr, self.admin.addr) {
                return invalid(format!("listener {} is also admin.addr ({})", l.addr, self.admin.addr));
            }
        }
        if let Some(token) = &self.admin.token {
            if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return invalid(
                    "admin.token must be visible ASCII characters, at least one (leave it out to have one generated)"
                        .into(),
                );
            }
        }
        for (i, route) in self.route.iter().enumerate() {
            route.validate(self.cache.enabled).map_err(ConfigError::Invalid)?;
            if self.route[..i].iter().any(|earlier| earlier.shadows(route)) {
                return invalid(format!(
                    "route `{}` is never used: an earlier route has the same host and path_prefix",
                    route.label()
                ));
            }
        }
        let origin_tls = &self.upstream.tls;
        if origin_tls.client_cert.is_some() != origin_tls.client_key.is_some() {
            return invalid("upstream.tls: client_cert and client_key go together".into());
        }
        if origin_tls.verify && !origin_tls.builtin_roots && origin_tls.ca_file.is_none() {
            return invalid(
                "upstream.tls: builtin_roots = false needs a ca_file (or no origin could be trusted)".into(),
            );
        }
        if let Some(bad) = self.access.upgrade_protocols.iter().find(|p| !crate::upgrade::is_protocol_name(p)) {
            return invalid(format!(
                "access.upgrade_protocols entry {bad:?} is not a protocol name (a token such as \"websocket\", no version)"
            ));
        }
        if self.admin.enabled && !self.admin.addr.ip().is_loopback() && !self.admin.allow_non_loopback {
            return invalid(format!(
                "admin.addr {} is not a loopback address; set admin.allow_non_loopback = true to allow it",
                self.admin.addr
            ));
        }
        if self.client.max_header_bytes.0 < 8192 {
            // hyper's read buffer cannot be smaller: a lower limit would silently be 8 KiB.
            return invalid("client.max_header_bytes must be at least 8KiB".into());
        }
        if !(1..=1024).contains(&self.client.max_header_fields) {
            return invalid("client.max_header_fields must be between 1 and 1024".into());
        }
        if self.client.tunnel_idle_timeout.0.is_zero() {
            return invalid("client.tunnel_idle_timeout must be more than 0".into());
        }
        if !(0.0..=1.0).contains(&self.cache.heuristic_fraction) {
            return invalid("cache.heuristic_fraction must be between 0 and 1".into());
        }
        if !(self.cache.sweep_min_hits_per_hour.is_finite() && self.cache.sweep_min_hits_per_hour >= 0.0) {
            return invalid("cache.sweep_min_hits_per_hour must be a number of at least 0".into());
        }
        if sluice_policy::describe(&self.cache.policy).is_none() {
            let valid: Vec<_> = sluice_policy::names().collect();
            return invalid(format!(
                "cache.policy: unknown policy {:?}; valid names: {}",
                self.cache.policy,
                valid.join(", ")
            ));
        }
        self.cache.disk.validate().map_err(ConfigError::Invalid)?;
        self.cache.admission_rule().map_err(ConfigError::Invalid)?;
        if self.cache.admission_window == 0 {
            return invalid("cache.admission_window must be more than 0".into());
        }
        if self.cache.name.is_empty()
            || !self.cache.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        {
            return invalid("cache.name must be a non-empty token of letters, digits, '-', '.', '_'".into());
        }
        Ok(())
    }

    /// This configuration with its secrets replaced by `"(redacted)"`, for showing it
    /// (`GET /config`, `sluice serve --print-config`): the admin token, when one is set.
    pub fn redacted(&self) -> Config {
        let mut config = self.clone();
        if config.admin.token.is_some() {
            config.admin.token = Some(REDACTED.to_owned());
        }
        config
    }

    /// What is valid but likely not what was meant, one sentence each (printed by
    /// `--check-config`, logged at start-up and on reloads).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.route.is_empty() && !self.listener.iter().any(|l| l.mode.reverses()) {
            warnings.push(
                "[[route]] entries are configured but no [[listener]] has mode \"reverse\" or \"both\": \
                 no request will use them"
                    .to_owned(),
            );
        }
        warnings
    }
}

/// Whether sockets bound to `a` and `b` would want the same port: the same address, or an
/// unspecified one (`0.0.0.0`, `[::]`) and any address of its family, which the system
/// refuses to bind both of. Port 0 (any free port) never clashes.
fn takes_the_same_port(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified())))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_loopback_forward_proxy() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.listener[0].addr, "127.0.0.1:3128".parse().unwrap());
        assert_eq!(c.listener[0].mode, Mode::Forward);
        assert_eq!(c.cache.memory, Size(256 << 20));
        assert_eq!(c.admin.addr, "127.0.0.1:3129".parse().unwrap());
        assert!(c.access.allow.iter().all(|n| n.addr().is_loopback()));
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let err = Config::parse("[cache]\nmemroy = \"1GiB\"\n").unwrap_err().to_string();
        assert!(err.contains("memroy"), "{err}");
    }

    #[test]
    fn generated_tokens_go_to_a_file_per_admin_port_unless_one_is_named() {
        let admin = Config::parse("").unwrap().admin;
        assert_eq!(admin.token_path(3129), std::env::temp_dir().join("sluice-admin-3129.token"));
        let named = Config::parse("[admin]\ntoken_file = \"/run/sluice/token\"\n").unwrap().admin;
        assert_eq!(named.token_path(3129), Path::new("/run/sluice/token"));
    }

    #[test]
    fn a_single_bracket_list_entry_gets_a_hint() {
        let err = Config::parse("[listener]\naddr = \"127.0.0.1:8080\"\n").unwrap_err().to_string();
        assert!(err.contains("write each entry as [[listener]]"), "{err}");
    }

    #[test]
    fn listeners_need_their_own_addresses() {
        let two = "[[listener]]\naddr = \"127.0.0.1:8080\"\n[[listener]]\naddr = \"127.0.0.1:8080\"\n";
        let err = Config::parse(two).unwrap_err().to_string();
        assert!(err.contains("two [[listener]] entries listen on 127.0.0.1:8080"), "{err}");
        let admin = "[[listener]]\naddr = \"127.0.0.1:3129\"\n";
        assert!(Config::parse(admin).unwrap_err().to_string().contains("is also admin.addr"));
        let any_port = "[[listener]]\naddr = \"127.0.0.1:0\"\n[[listener]]\naddr = \"127.0.0.1:0\"\n[admin]\naddr = \"127.0.0.1:0\"\n";
        assert!(Config::parse(any_port).is_ok(), "port 0 is any free port");
        let wildcard = "[[listener]]\naddr = \"0.0.0.0:8080\"\n[[listener]]\naddr = \"127.0.0.1:8080\"\n";
        let err = Config::parse(wildcard).unwrap_err().to_string();
        assert!(err.contains("listeners 0.0.0.0:8080 and 127.0.0.1:8080 overlap"), "{err}");
        let admin_any =
            "[[listener]]\naddr = \"127.0.0.1:8080\"\n[admin]\naddr = \"0.0.0.0:8080\"\nallow_non_loopback = true\n";
        assert!(Config::parse(admin_any).unwrap_err().to_string().contains("is also admin.addr"));
        let families = "[[listener]]\naddr = \"0.0.0.0:8080\"\n[[listener]]\naddr = \"[::1]:8080\"\n";
        assert!(Config::parse(families).is_ok(), "another family's address is another socket");
        let two_hosts = "[[listener]]\naddr = \"127.0.0.1:8080\"\n[[listener]]\naddr = \"127.0.0.2:8080\"\n";
        assert!(Config::parse(two_hosts).is_ok());
    }

    #[test]
    fn an_admin_token_is_visible_characters() {
        for bad in ["", " ", "a b", "tok\\u00e9"] {
            let err = Config::parse(&format!("[admin]\ntoken = \"{bad}\"\n")).unwrap_err().to_string();
            assert!(err.contains("admin.token must be visible ASCII"), "{bad:?}: {err}");
        }
        assert!(Config::parse("[admin]\ntoken = \"s3cret-token\"\n").is_ok());
    }

    #[test]
    fn a_second_route_for_the_same_host_and_prefix_is_refused_by_name() {
        let route = |host: &str, prefix: &str| {
            format!("[[route]]\n{host}path_prefix = \"{prefix}\"\norigin = \"http://127.0.0.1:9\"\n")
        };
        let twice = format!("{}{}", route("host = \"A.test\"\n", "/api/"), route("host = \"a.test\"\n", "/api/"));
        let err = Config::parse(&twice).unwrap_err().to_string();
        assert!(err.contains("route `a.test/api/` is never used: an earlier route has the same host"), "{err}");
        let nested = format!("{}{}", route("", "/"), route("", "/api/"));
        assert!(Config::parse(&nested).is_ok(), "the longer prefix is tried first");
        let other_host = format!("{}{}", route("host = \"a.test\"\n", "/"), route("", "/"));
        assert!(Config::parse(&other_host).is_ok(), "the second takes other hosts");
    }

    #[test]
    fn routes_no_listener_uses_are_a_warning() {
        let routes = "[[route]]\norigin = \"http://127.0.0.1:9\"\n";
        let forward_only = Config::parse(routes).unwrap();
        assert_eq!(forward_only.warnings().len(), 1, "{:?}", forward_only.warnings());
        let both =
            Config::parse(&format!("{routes}[[listener]]\naddr = \"127.0.0.1:8080\"\nmode = \"both\"\n")).unwrap();
        assert!(both.warnings().is_empty());
    }

    #[test]
    fn validation_errors_name_the_file_and_the_route() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.toml");
        let text = "[[route]]\nhost = \"bad.test\"\norigin = \"http://a\"\ntls_name = \"x\"\n";
        std::fs::write(&path, text).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: invalid configuration: ", path.display())), "{err}");
        assert!(err.contains("route `bad.test/`"), "{err}");
    }

    #[test]
    fn reverse_listener_needs_a_route() {
        let err = Config::parse("[[listener]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\n").unwrap_err();
        assert!(err.to_string().contains("no [[route]]"));
    }

    #[test]
    fn sweep_keys_have_defaults_and_are_validated() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.cache.sweep_interval, Dur(Duration::from_secs(60)));
        assert_eq!(c.cache.sweep_grace, Dur(Duration::from_secs(600)));
        assert_eq!(c.cache.sweep_min_hits_per_hour, 1.0);
        let c =
            Config::parse("[cache]\nsweep_interval = \"0s\"\nsweep_grace = \"1h\"\nsweep_min_hits_per_hour = 0.5\n")
                .unwrap();
        assert!(c.cache.sweep_interval.0.is_zero());
        assert_eq!(c.cache.sweep_grace, Dur(Duration::from_secs(3600)));
        let err = Config::parse("[cache]\nsweep_min_hits_per_hour = -1\n").unwrap_err();
        assert!(err.to_string().contains("sweep_min_hits_per_hour"), "{err}");
    }

    #[test]
    fn a_route_has_one_of_origin_origins_and_files() {
        let pool = "[[route]]\norigins = [\"http://127.0.0.1:8080\", \"http://127.0.0.1:8081\"]\n";
        let c = Config::parse(pool).unwrap();
        assert_eq!(c.route[0].origins.len(), 2);
        assert_eq!(c.route[0].balance, crate::pool_config::Balance::RoundRobin);
        let both = format!("{pool}origin = \"http://127.0.0.1:8080\"\n");
        assert!(Config::parse(&both)
            .unwrap_err()
            .to_string()
            .contains("exactly one of `origin`, `origins` and `files`"));
        let hashed =
            Config::parse(&format!("{pool}balance = \"url-hash\"\nhealth_check = {{ path = \"/up\" }}\n")).unwrap();
        assert_eq!(hashed.route[0].balance, crate::pool_config::Balance::UrlHash);
        assert_eq!(hashed.route[0].health_check.as_ref().unwrap().interval.0, Duration::from_secs(5));
        let lonely = "[[route]]\norigin = \"http://127.0.0.1:8080\"\nhealth_check = {}\n";
        assert!(Config::parse(lonely).unwrap_err().to_string().contains("health_check but no `origins`"));
        let mixed = "[[route]]\norigins = [\"http://a:1\", \"https://b:2\"]\n";
        assert!(Config::parse(mixed).unwrap_err().to_string().contains("scheme"));
    }

    #[test]
    fn esi_is_opt_in_per_route() {
        let route = "[[route]]\norigin = \"http://127.0.0.1:8080\"\n";
        let c = Config::parse(route).unwrap();
        assert!(!c.route[0].esi && c.route[0].esi_hosts.is_empty());
        let c = Config::parse(&format!("{route}esi = true\nesi_hosts = [\"static.example.com\"]\n")).unwrap();
        assert!(c.route[0].esi);
        assert_eq!(c.route[0].esi_hosts, ["static.example.com"]);
        let err = Config::parse(&format!("{route}esi_hosts = [\"x\"]\n")).unwrap_err();
        assert!(err.to_string().contains("esi_hosts without esi"), "{err}");
        let err = Config::parse(&format!("{route}esi = true\nesi_hosts = [\"x:80\"]\n")).unwrap_err();
        assert!(err.to_string().contains("plain host name"), "{err}");
    }

    #[test]
    fn query_rules_and_default_ttl_are_for_origin_routes() {
        let route = "[[route]]\norigin = \"http://127.0.0.1:8080\"\n";
        let c = Config::parse(route).unwrap();
        assert!(!c.route[0].query_sort && c.route[0].query_drop.is_empty() && c.route[0].default_ttl.is_none());
        let c = Config::parse(&format!(
            "{route}query_sort = true\nquery_drop = [\"utm_*\", \"fbclid\"]\ndefault_ttl = \"10m\"\n"
        ))
        .unwrap();
        assert_eq!(c.route[0].default_ttl, Some(Dur(Duration::from_secs(600))));
        let err = Config::parse(&format!("{route}query_drop = [\"a*b\"]\n")).unwrap_err();
        assert!(err.to_string().contains("query_drop pattern \"a*b\""), "{err}");
        let files = "[[route]]\nfiles = { root = \"/tmp\" }\n";
        let err = Config::parse(&format!("{files}query_sort = true\n")).unwrap_err();
        assert!(err.to_string().contains("ignore the query"), "{err}");
        let err = Config::parse(&format!("{files}default_ttl = \"1m\"\n")).unwrap_err();
        assert!(err.to_string().contains("default_ttl does not apply"), "{err}");
    }

    #[test]
    fn origin_tls_trusts_the_builtin_roots_by_default_and_its_settings_are_checked() {
        let c = Config::parse("").unwrap();
        let tls = &c.upstream.tls;
        assert!(tls.builtin_roots && tls.verify && tls.ca_file.is_none() && tls.client_cert.is_none());
        let err = Config::parse("[upstream.tls]\nclient_cert = \"/c.pem\"\n").unwrap_err();
        assert!(err.to_string().contains("client_cert and client_key go together"), "{err}");
        let err = Config::parse("[upstream.tls]\nbuiltin_roots = false\n").unwrap_err();
        assert!(err.to_string().contains("needs a ca_file"), "{err}");
        let c = Config::parse("[upstream.tls]\nbuiltin_roots = false\nca_file = \"/ca.pem\"\n").unwrap();
        assert_eq!(c.upstream.tls.ca_file.as_deref(), Some(std::path::Path::new("/ca.pem")));
    }

    #[test]
    fn suspend_and_admission_keys_have_defaults_and_are_validated() {
        let c = Config::parse("").unwrap();
        assert!(c.cache.suspend);
        assert_eq!(c.cache.suspend_entries(), 10_000);
        assert_eq!(c.cache.admission_rule(), Ok(sluice_store::AdmissionRule::Always));
        let c = Config::parse("[cache]\nsuspend = false\nadmission = \"second-hit\"\nadmission_window = 10\n").unwrap();
        assert_eq!(c.cache.suspend_entries(), 0);
        assert_eq!(c.cache.admission_rule(), Ok(sluice_store::AdmissionRule::SecondHit { window: 10 }));
        let err = Config::parse("[cache]\nadmission = \"sometimes\"\n").unwrap_err();
        assert!(err.to_string().contains("cache.admission"), "{err}");
        let err = Config::parse("[cache]\nadmission_window = 0\n").unwrap_err();
        assert!(err.to_string().contains("admission_window"), "{err}");
    }

    #[test]
    fn non_loopback_admin_needs_explicit_consent() {
        let err = Config::parse("[admin]\naddr = \"0.0.0.0:3129\"\n").unwrap_err();
        assert!(err.to_string().contains("allow_non_loopback"));
    }
    #[test]
    fn an_unreadable_file_names_the_os_error_once() {
        let err = Config::load(Path::new("/nonexistent/sluice.toml")).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("cannot read /nonexistent/sluice.toml: "), "{text}");
        // Not a source as well: `{:#}` and error chains would print it twice.
        assert!(std::error::Error::source(&err).is_none());
    }
}
