//! Expiry processing (NICache): which stale objects a periodic sweep deletes.
//!
//! An object is **removable** when all of these hold at `now`:
//! 1. it is stale (`age(now) >= lifetime`);
//! 2. it has been stale for longer than its *stale window*: the larger of the rule's
//!    `grace` and the response's own `stale-while-revalidate` / `stale-if-error` seconds
//!    (RFC 5861), so nothing that could still be served stale is removed;
//! 3. it is **idle**: it has no hit, or fewer than `min_hits_per_hour` hits per hour.
//!
//! The access rate is the object's hit count divided by the hours since its response
//! arrived (`response_time`: stored, or last validated by a 304), counting at least one
//! hour so a young object is not judged on a few seconds. Hits survive a 304, so after a
//! validation the rate leans high: the rule errs towards keeping. A busy stale object is
//! kept (validators or not): its next request revalidates it.

use crate::{Object, ObjectMeta};
use std::time::{Duration, SystemTime};

/// What makes a stale object removable. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepRule {
    /// How long an object stays after it went stale, at least.
    pub grace: Duration,
    /// Hits per hour below which a stale object is idle; 0 keeps any object with a hit.
    pub min_hits_per_hour: f64,
}

/// Why the sweep keeps or removes one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Still fresh.
    Fresh,
    /// Stale, but within the grace period or its stale-serving windows.
    InGrace,
    /// Stale past grace, but accessed often enough to be worth revalidating.
    Busy,
    /// Stale past grace and idle.
    Remove,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Objects looked at.
    pub examined: u64,
    /// Objects removed.
    pub removed: u64,
    /// Bytes (body and metadata) freed by the removals.
    pub removed_bytes: u64,
    /// Objects kept because they are fresh.
    pub kept_fresh: u64,
    /// Objects kept because they are stale within their grace or stale-serving windows.
    pub kept_grace: u64,
    /// Objects kept because they are stale but busy.
    pub kept_busy: u64,
}

impl SweepReport {
    /// Counts one verdict (and, for a removal, the bytes it freed).
    pub fn count(&mut self, verdict: Verdict, bytes: u64) {
        self.examined += 1;
        match verdict {
            Verdict::Fresh => self.kept_fresh += 1,
            Verdict::InGrace => self.kept_grace += 1,
            Verdict::Busy => self.kept_busy += 1,
            Verdict::Remove => {
                self.removed += 1;
                self.removed_bytes += bytes;
            }
        }
    }
}

impl SweepRule {
    /// Judges `object` at `now`.
    pub fn judge(&self, object: &Object, now: SystemTime) -> Verdict {
        self.judge_meta(&object.meta, object.hits(), now)
    }

    /// Judges an object known by its metadata and hit count (a suspended entry, a disk
    /// entry) at `now`.
    pub fn judge_meta(&self, meta: &ObjectMeta, hits: u64, now: SystemTime) -> Verdict {
        let age = meta.age(now);
        if age < meta.lifetime {
            return Verdict::Fresh;
        }
        let stale_for = age - meta.lifetime;
        let serve_stale = meta.cc.stale_while_revalidate.max(meta.cc.stale_if_error).unwrap_or(0);
        let window = self.grace.max(Duration::from_secs(serve_stale));
        if stale_for <= window {
            return Verdict::InGrace;
        }
        let since = now.duration_since(meta.response_time).unwrap_or_default();
        let hours = since.as_secs_f64().max(3600.0) / 3600.0;
        if hits > 0 && hits as f64 / hours >= self.min_hits_per_hour {
            Verdict::Busy
        } else {
            Verdict::Remove
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectMeta, StoredBody};
    use http::{HeaderMap, StatusCode};
    use sluice_http::freshness::LifetimeSource;
    use std::sync::Arc;

    const T0: u64 = 1_000_000;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// An object stored at `T0` with `max-age=60`.
    fn object(swr: Option<u64>, sie: Option<u64>) -> Object {
        let mut meta = ObjectMeta {
            key: "http://a/x".to_owned(),
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            vary: Vec::new(),
            vary_key: Vec::new(),
            request_time: at(T0),
            response_time: at(T0),
            initial_age: Duration::ZERO,
            lifetime: Duration::from_secs(60),
            lifetime_source: LifetimeSource::MaxAge,
            cc: Default::default(),
        };
        meta.cc.stale_while_revalidate = swr;
        meta.cc.stale_if_error = sie;
        Object::new(Arc::new(meta), StoredBody::new(Vec::new()))
    }

    fn rule() -> SweepRule {
        SweepRule { grace: Duration::from_secs(300), min_hits_per_hour: 2.0 }
    }

    #[test]
    fn fresh_objects_are_kept() {
        assert_eq!(rule().judge(&object(None, None), at(T0 + 59)), Verdict::Fresh);
    }

    #[test]
    fn stale_objects_within_grace_are_kept() {
        let o = object(None, None);
        assert_eq!(rule().judge(&o, at(T0 + 60)), Verdict::InGrace);
        assert_eq!(rule().judge(&o, at(T0 + 360)), Verdict::InGrace);
    }

    #[test]
    fn stale_idle_objects_past_grace_are_removed() {
        let o = object(None, None);
        assert_eq!(rule().judge(&o, at(T0 + 361)), Verdict::Remove);
        // One hit in the first hour is below two per hour.
        o.record_hit();
        assert_eq!(rule().judge(&o, at(T0 + 361)), Verdict::Remove);
    }

    #[test]
    fn stale_busy_objects_are_kept_until_their_rate_falls() {
        let o = object(None, None);
        for _ in 0..4 {
            o.record_hit();
        }
        assert_eq!(rule().judge(&o, at(T0 + 361)), Verdict::Busy);
        // Four hits over three hours is below two per hour.
        assert_eq!(rule().judge(&o, at(T0 + 3 * 3600)), Verdict::Remove);
    }

    #[test]
    fn zero_rate_keeps_any_object_with_a_hit() {
        let rule = SweepRule { min_hits_per_hour: 0.0, ..rule() };
        let o = object(None, None);
        assert_eq!(rule.judge(&o, at(T0 + 86400)), Verdict::Remove);
        o.record_hit();
        assert_eq!(rule.judge(&o, at(T0 + 86400)), Verdict::Busy);
    }

    #[test]
    fn stale_serving_windows_extend_the_grace() {
        let swr = object(Some(1000), None);
        assert_eq!(rule().judge(&swr, at(T0 + 60 + 1000)), Verdict::InGrace);
        assert_eq!(rule().judge(&swr, at(T0 + 60 + 1001)), Verdict::Remove);
        let sie = object(None, Some(2000));
        assert_eq!(rule().judge(&sie, at(T0 + 60 + 2000)), Verdict::InGrace);
        assert_eq!(rule().judge(&sie, at(T0 + 60 + 2001)), Verdict::Remove);
    }
}
