//! A simple access-time model, for the seed paper's "total access time" figure.

use super::RunResult;
use crate::trace::Trace;

/// Cost of serving requests: a fixed cost per hit; per miss, a fixed cost plus a cost per
/// KiB fetched from the origin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyModel {
    /// Milliseconds to serve a hit.
    pub hit_ms: f64,
    /// Milliseconds of fixed cost per miss (connection, origin think time).
    pub miss_ms: f64,
    /// Milliseconds per KiB fetched on a miss (transfer time).
    pub miss_ms_per_kib: f64,
}

impl Default for LatencyModel {
    /// 1 ms per hit; 100 ms plus 0.1 ms per KiB (about 80 Mbit/s) per miss.
    fn default() -> Self {
        Self { hit_ms: 1.0, miss_ms: 100.0, miss_ms_per_kib: 0.1 }
    }
}

impl LatencyModel {
    /// Estimated total seconds to serve the run's requests.
    pub fn access_time_s(&self, r: &RunResult) -> f64 {
        let ms = r.hits as f64 * self.hit_ms
            + r.misses() as f64 * self.miss_ms
            + r.missed_bytes() as f64 / 1024.0 * self.miss_ms_per_kib;
        ms / 1000.0
    }

    /// Estimated total seconds with no cache (every request a miss).
    pub fn no_cache_s(&self, trace: &Trace) -> f64 {
        let all_miss =
            RunResult { requests: trace.requests.len() as u64, bytes: trace.bytes(), ..RunResult::default() };
        self.access_time_s(&all_miss)
    }
}
