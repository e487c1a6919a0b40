//! `[[rate_limit]]`: request rates allowed per client (docs/config.md; the limiter is
//! `crate::rate_limit`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;

/// One limit: requests matching `host` and `path_prefix`, per client.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Its name in `/metrics`, `/stats` and the log; unique.
    pub name: String,
    /// The sustained rate each client may send: `"10/s"`, `"300/m"`, `"1000/h"`.
    pub rate: Rate,
    /// Requests a client may send at once beyond the rate, after a quiet spell. Default 0:
    /// none (requests are spaced by `1/rate`).
    #[serde(default)]
    pub burst: u32,
    /// `Host` the limit applies to (port ignored, case-insensitive). Default: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Path prefix the limit applies to. Default `/`: every path.
    #[serde(default = "root")]
    pub path_prefix: String,
}

fn root() -> String {
    "/".to_owned()
}

impl RateLimitConfig {
    /// Checks what the types cannot.
    pub fn validate(&self) -> Result<(), String> {
        let valid_name =
            !self.name.is_empty() && self.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid_name {
            return Err(format!("rate_limit name `{}`: letters, digits, `-`, `_` and `.` only", self.name));
        }
        if !self.path_prefix.starts_with('/') {
            return Err(format!("rate_limit `{}`: path_prefix must start with `/`", self.name));
        }
        Ok(())
    }
}

/// Requests per time unit, written `N/s`, `N/m` or `N/h` with N ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub requests: u32,
    pub per: Duration,
}

impl Rate {
    /// The time one request takes of the allowance: `per / requests`.
    pub fn interval(&self) -> Duration {
        self.per / self.requests
    }

    fn parse(text: &str) -> Result<Self, String> {
        let invalid = || format!("rate `{text}`: expected requests per unit, like \"10/s\", \"300/m\" or \"1000/h\"");
        let (n, unit) = text.trim().split_once('/').ok_or_else(invalid)?;
        let requests: u32 = n.trim().parse().map_err(|_| invalid())?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(invalid()),
        };
        if requests == 0 {
            return Err(format!("rate `{text}`: at least 1 request"));
        }
        Ok(Self { requests, per })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.requests)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Rate::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_requests_per_second_minute_or_hour() {
        let rate = Rate::parse("10/s").unwrap();
        assert_eq!((rate.requests, rate.interval()), (10, Duration::from_millis(100)));
        assert_eq!(Rate::parse(" 300 / m ").unwrap().interval(), Duration::from_millis(200));
        assert_eq!(Rate::parse("1000/h").unwrap().to_string(), "1000/h");
        for bad in ["0/s", "10", "10/d", "x/s", "-1/s"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }
}
