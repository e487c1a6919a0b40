//! How long transactions take, as a Prometheus histogram per Squid result code
//! (`sluice_request_duration_seconds`): from the request head read to the end of the
//! response (its last byte handed to the connection, or the client gone), as the access
//! log's elapsed time. A `CONNECT` tunnel's is its lifetime.
//!
//! Lock-free: one relaxed atomic add for the bucket, one for the sum, per transaction.
//! Buckets are kept apart and made cumulative when rendered.

use crate::outcome::ResultCode;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: from a memory hit (tens of microseconds) to an
/// origin that takes its time. A last, unbounded bucket follows.
const BOUNDS: [f64; 14] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// The histogram of every result code.
#[derive(Debug, Default)]
pub struct Durations {
    /// Per code, per bucket (the last one unbounded): transactions that ended in it.
    buckets: [[AtomicU64; BOUNDS.len() + 1]; ResultCode::ALL.len()],
    /// Per code: the sum of the durations, in nanoseconds.
    sum_ns: [AtomicU64; ResultCode::ALL.len()],
}

impl Durations {
    /// Counts a transaction of `code` that took `elapsed`.
    pub fn record(&self, code: ResultCode, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let bucket = BOUNDS.iter().position(|&bound| secs <= bound).unwrap_or(BOUNDS.len());
        let code = code.index();
        self.buckets[code][bucket].fetch_add(1, Relaxed);
        self.sum_ns[code].fetch_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// The Prometheus text: for each code that has had a transaction, its cumulative
    /// buckets, sum and count.
    pub fn prometheus(&self) -> String {
        let name = "sluice_request_duration_seconds";
        let mut out = format!(
            "# HELP {name} Time from a request's head to the end of its response, by Squid result code.\n\
             # TYPE {name} histogram\n"
        );
        for (i, code) in ResultCode::ALL.iter().enumerate() {
            let counts: Vec<u64> = self.buckets[i].iter().map(|b| b.load(Relaxed)).collect();
            let total: u64 = counts.iter().sum();
            if total == 0 {
                continue;
            }
            let code = code.as_str();
            let mut cumulative = 0;
            for (bound, count) in BOUNDS.iter().zip(&counts) {
                cumulative += count;
                let _ = writeln!(out, "{name}_bucket{{result=\"{code}\",le=\"{bound}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_bucket{{result=\"{code}\",le=\"+Inf\"}} {total}");
            let sum = self.sum_ns[i].load(Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{name}_sum{{result=\"{code}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{result=\"{code}\"}} {total}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_cumulative_buckets_per_code() {
        let d = Durations::default();
        d.record(ResultCode::MemHit, Duration::from_micros(80));
        d.record(ResultCode::MemHit, Duration::from_micros(100));
        d.record(ResultCode::MemHit, Duration::from_millis(3));
        d.record(ResultCode::Miss, Duration::from_secs(60));
        let text = d.prometheus();
        assert!(text.contains("# TYPE sluice_request_duration_seconds histogram"), "{text}");
        assert!(text.contains("_bucket{result=\"TCP_MEM_HIT\",le=\"0.0001\"} 2\n"), "on the bound counts: {text}");
        assert!(text.contains("_bucket{result=\"TCP_MEM_HIT\",le=\"0.0025\"} 2\n"), "{text}");
        assert!(text.contains("_bucket{result=\"TCP_MEM_HIT\",le=\"0.005\"} 3\n"), "{text}");
        assert!(text.contains("_bucket{result=\"TCP_MEM_HIT\",le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("_count{result=\"TCP_MEM_HIT\"} 3\n"), "{text}");
        assert!(text.contains("_sum{result=\"TCP_MEM_HIT\"} 0.00318\n"), "{text}");
        assert!(text.contains("_bucket{result=\"TCP_MISS\",le=\"30\"} 0\n"), "{text}");
        assert!(text.contains("_bucket{result=\"TCP_MISS\",le=\"+Inf\"} 1\n"), "{text}");
        assert!(!text.contains("TCP_DENIED"), "codes never seen are left out");
    }
}
