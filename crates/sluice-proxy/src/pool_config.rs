//! The origin-pool settings of a `[[route]]` with several `origins` (see `docs/config.md`,
//! "Origin pools"): how requests are spread over them, when one is taken out of rotation,
//! and its active health check.

use crate::units::Dur;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most origins one route may have.
pub const MAX_ORIGINS: usize = 64;

/// How a route spreads its requests over its origins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each in turn.
    #[default]
    RoundRobin,
    /// The one with the fewest requests in flight (from sending until its response body
    /// ends), ties in turn.
    LeastConnections,
    /// By the request's path and query (rendezvous hashing): each URL goes to one origin
    /// while it is in rotation, and when one leaves, only its URLs move. For origins that
    /// cache, so that each object is cached once among them.
    UrlHash,
}

/// An active health check of each origin of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthCheckConfig {
    /// Path requested with `GET` (under the origin's base path, as requests are).
    pub path: String,
    /// Time between checks of one origin.
    pub interval: Dur,
    /// Longest wait for the whole response; past it the check failed.
    pub timeout: Dur,
    /// `Host` of the checks. Default: the route's `host` when it sets `preserve_host` (the
    /// origins then serve that site by name), else the origin's authority, as requests get.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Check with gRPC's health service instead (`grpc.health.v1.Health/Check` for this
    /// service, "" for the server as a whole): passed when it answers `SERVING`. Needs the
    /// route's `http2`. Default: none, a `GET` of `path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_service: Option<String>,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            path: "/".into(),
            interval: Dur(Duration::from_secs(5)),
            timeout: Dur(Duration::from_secs(2)),
            host: None,
            grpc_service: None,
        }
    }
}

impl HealthCheckConfig {
    /// Checks the values the types cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !self.path.starts_with('/') || self.path.parse::<http::uri::PathAndQuery>().is_err() {
            return Err(format!("health_check.path {:?} must be a path starting with /", self.path));
        }
        if let Some(host) = &self.host {
            if http::HeaderValue::from_str(host).is_err() || host.parse::<http::uri::Authority>().is_err() {
                return Err(format!("health_check.host {host:?} is not a host name"));
            }
        }
        if self.interval.0.is_zero() || self.timeout.0.is_zero() {
            return Err("health_check.interval and health_check.timeout must be more than 0".into());
        }
        Ok(())
    }
}

pub(crate) fn default_max_fails() -> u32 {
    1
}

pub(crate) fn default_fail_timeout() -> Dur {
    Dur(Duration::from_secs(10))
}

/// Checks a route's `origins` and `backup_origins`: 1 to [`MAX_ORIGINS`] distinct URLs in
/// all, at least one of them in `origins`, that parse, with one scheme and one base path (a
/// request's path is mapped the same way for each, so they share cached responses).
pub fn validate_origins(origins: &[String], backups: &[String]) -> Result<(), String> {
    let all: Vec<&String> = origins.iter().chain(backups).collect();
    if origins.is_empty() || all.len() > MAX_ORIGINS {
        return Err(format!("`origins` and `backup_origins` need 1 to {MAX_ORIGINS} URLs, not {}", all.len()));
    }
    let parsed = all.iter().map(|o| crate::route::Origin::parse(o)).collect::<Result<Vec<_>, String>>()?;
    let first = &parsed[0];
    for (i, origin) in parsed.iter().enumerate().skip(1) {
        if origin.scheme != first.scheme || origin.base_path != first.base_path {
            return Err(format!(
                "`origins` and `backup_origins` must share their scheme and base path: `{}` differs from `{}`",
                all[i], all[0]
            ));
        }
        if parsed[..i].iter().any(|earlier| earlier.target == origin.target) {
            return Err(format!("`{}` is listed twice", all[i]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn origins_share_scheme_and_base_path_and_appear_once() {
        let none = [];
        assert!(validate_origins(&urls(&["http://a:1/app", "http://b:2/app/"]), &none).is_ok());
        assert!(validate_origins(&urls(&["http://a:1", "https://b:2"]), &none).unwrap_err().contains("scheme"));
        assert!(validate_origins(&urls(&["http://a:1/x", "http://b:2/y"]), &none).unwrap_err().contains("base path"));
        assert!(validate_origins(&urls(&["http://a:1", "http://A:1/"]), &none).unwrap_err().contains("twice"));
        assert!(validate_origins(&[], &none).is_err());
        assert!(validate_origins(&[], &urls(&["http://a:1"])).is_err(), "backups alone");
        assert!(validate_origins(&urls(&["ftp://a"]), &none).is_err());
        assert!(validate_origins(&urls(&["http://a:1"]), &urls(&["http://b:1"])).is_ok());
        assert!(validate_origins(&urls(&["http://a:1"]), &urls(&["https://b:1"])).unwrap_err().contains("scheme"));
        assert!(validate_origins(&urls(&["http://a:1"]), &urls(&["http://a:1"])).unwrap_err().contains("twice"));
    }

    #[test]
    fn health_checks_need_a_path_and_positive_times() {
        assert!(HealthCheckConfig::default().validate().is_ok());
        let bad_path = HealthCheckConfig { path: "healthz".into(), ..Default::default() };
        assert!(bad_path.validate().is_err());
        let no_interval = HealthCheckConfig { interval: Dur(Duration::ZERO), ..Default::default() };
        assert!(no_interval.validate().is_err());
    }
}
