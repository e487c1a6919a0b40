//! `Date` header values, formatted once per second.

use crate::clock::SharedClock;
use http::HeaderValue;
use parking_lot::Mutex;
use std::time::UNIX_EPOCH;

/// Caches the formatted current date; formatting an HTTP date per response is measurable.
#[derive(Debug)]
pub struct DateCache {
    clock: SharedClock,
    cached: Mutex<(u64, HeaderValue)>,
}

impl DateCache {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, cached: Mutex::new((u64::MAX, HeaderValue::from_static(""))) }
    }

    /// The current time as an IMF-fixdate value.
    pub fn value(&self) -> HeaderValue {
        let now = self.clock.now();
        let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let mut cached = self.cached.lock();
        if cached.0 != secs {
            *cached = (secs, sluice_http::dates::format_http_date(now));
        }
        cached.1.clone()
    }
}
