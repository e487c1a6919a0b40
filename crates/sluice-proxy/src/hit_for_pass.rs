//! Hit-for-pass: URLs whose last response could not be stored for a reason of the response's
//! own (`no-store`, `private`, `Set-Cookie`, too large, stale on arrival, ...) are remembered
//! for a while, and requests for them skip the cache and collapsing and stream straight from
//! the origin. Without it, concurrent requests for an uncacheable URL would queue behind one
//! fetch only to learn they cannot share it (Varnish's "hit-for-pass" solves the same).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Response-side reasons that make a URL hit-for-pass (tokens of
/// [`sluice_http::storable::NotStorable::token`] and the proxy's own).
const REMEMBERED: [&str; 7] =
    ["no-store", "private", "vary-star", "no-freshness-information", "set-cookie", "too-large", "stale-on-arrival"];

/// Remembered uncacheable URLs, by primary key.
#[derive(Debug)]
pub struct HitForPass {
    until: Mutex<HashMap<String, SystemTime>>,
    ttl: Duration,
    max_entries: usize,
}

impl HitForPass {
    /// Remembers for `ttl` (zero disables), at most `max_entries` URLs.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self { until: Mutex::default(), ttl, max_entries }
    }

    /// True when requests for `key` should bypass the cache at `now`.
    pub fn applies(&self, key: &str, now: SystemTime) -> bool {
        if self.ttl.is_zero() {
            return false;
        }
        let mut until = self.until.lock();
        match until.get(key) {
            Some(t) if *t > now => true,
            Some(_) => {
                until.remove(key);
                false
            }
            None => false,
        }
    }

    /// Records that the response for `key`, of `status`, was not stored because of `reason`;
    /// only reasons that belong to the response are remembered, and never for a server error
    /// (5xx): that says nothing about the URL's next answer, and bypassing the cache would
    /// send a whole herd to an origin that is recovering.
    pub fn remember(&self, key: &str, status: http::StatusCode, reason: &str, now: SystemTime) {
        if self.ttl.is_zero() || status.is_server_error() || !REMEMBERED.contains(&reason) {
            return;
        }
        let mut until = self.until.lock();
        if until.len() >= self.max_entries {
            // Drop what has expired; if that is not enough, start over (a bypass only costs
            // one more collapsed round for each URL forgotten).
            until.retain(|_, t| *t > now);
            if until.len() >= self.max_entries {
                until.clear();
            }
        }
        until.insert(key.to_owned(), now + self.ttl);
    }

    /// Forgets `key` (after a PURGE or an invalidation).
    pub fn forget(&self, key: &str) {
        if !self.ttl.is_zero() {
            self.until.lock().remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn only_response_reasons_are_remembered_until_the_ttl() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let h = HitForPass::new(Duration::from_secs(120), 10);
        h.remember("a", StatusCode::OK, "no-store", now);
        h.remember("b", StatusCode::OK, "request-no-store", now);
        h.remember("c", StatusCode::SERVICE_UNAVAILABLE, "no-freshness-information", now);
        assert!(h.applies("a", now + Duration::from_secs(119)));
        assert!(!h.applies("b", now));
        assert!(!h.applies("c", now), "a server error is no reason to bypass the cache");
        assert!(!h.applies("a", now + Duration::from_secs(121)));
    }

    #[test]
    fn the_table_stays_bounded() {
        let now = SystemTime::UNIX_EPOCH;
        let h = HitForPass::new(Duration::from_secs(120), 3);
        for i in 0..10 {
            h.remember(&format!("k{i}"), StatusCode::OK, "private", now);
        }
        assert!(h.until.lock().len() <= 3);
        assert!(h.applies("k9", now));
    }
}
