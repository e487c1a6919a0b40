//! Latency histograms for Prometheus:
//!
//! - `sluice_request_duration_seconds{result}`: how long transactions take, per Squid result
//!   code, from the request head read to the end of the response (its last byte handed to
//!   the connection, or the client gone), as the access log's elapsed time. A `CONNECT`
//!   tunnel's is its lifetime.
//! - `sluice_origin_response_seconds`: how long origins take to answer, from sending a
//!   request (a connection opened for it included) to its response head.
//!
//! Lock-free: one relaxed atomic add for the bucket, one for the sum, per observation.
//! Buckets are kept apart and made cumulative when rendered.

use crate::outcome::ResultCode;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: from a memory hit (tens of microseconds) to an
/// origin that takes its time. A last, unbounded bucket follows.
const BOUNDS: [f64; 14] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// One histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (the last one unbounded).
    buckets: [AtomicU64; BOUNDS.len() + 1],
    /// The sum of the observations, in nanoseconds.
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Counts one observation.
    pub fn record(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let bucket = BOUNDS.iter().position(|&bound| secs <= bound).unwrap_or(BOUNDS.len());
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Appends the series of `name` with `labels` (`key="value"` pairs, or empty) to `out`:
    /// cumulative buckets, sum and count; nothing without an observation yet.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return;
        }
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, count) in BOUNDS.iter().zip(&counts) {
            cumulative += count;
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {total}");
        let sum = self.sum_ns.load(Relaxed) as f64 / 1e9;
        let braces = |labels: &str| if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {total}", braces(labels));
    }
}

/// The duration histograms: transactions by result code, and origin responses.
#[derive(Debug, Default)]
pub struct Durations {
    by_result: [Histogram; ResultCode::ALL.len()],
    origin: Histogram,
}

impl Durations {
    /// Counts a transaction of `code` that took `elapsed`.
    pub fn record(&self, code: ResultCode, elapsed: Duration) {
        self.by_result[code.index()].record(elapsed);
    }

    /// Counts an origin response head that came `elapsed` after its request was sent.
    pub fn record_origin(&self, elapsed: Duration) {
        self.origin.record(elapsed);
    }

    /// The Prometheus text of both (result codes never seen are left out).
    pub fn prometheus(&self) -> String {
        let name = "sluice_request_duration_seconds";
        let mut out = format!(
            "# HELP {name} Time from a request's head to the end of its response, by Squid result code.\n\
             # TYPE {name} histogram\n"
        );
        for (code, histogram) in ResultCode::ALL.iter().zip(&self.by_result) {
            histogram.render(&mut out, name, &format!("result=\"{}\"", code.as_str()));
        }
        let name = "sluice_origin_response_seconds";
        let _ = write!(
            out,
            "# HELP {name} Time from sending a request to an origin (connecting included) to its response head.\n\
             # TYPE {name} histogram\n"
        );
        self.origin.render(&mut out, name, "");
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
        d.record_origin(Duration::from_millis(20));
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
        assert!(text.contains("sluice_origin_response_seconds_bucket{le=\"0.025\"} 1\n"), "{text}");
        assert!(text.contains("sluice_origin_response_seconds_count 1\n"), "{text}");
    }
}
