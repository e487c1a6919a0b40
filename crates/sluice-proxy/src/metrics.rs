//! Process-wide counters, rendered for Prometheus (`/metrics`) and as JSON (`/stats`).

use crate::outcome::{ResultCode, ResultCounters};
use sluice_store::StoreStats;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Counters updated on the hot path with relaxed atomics.
#[derive(Debug, Default)]
pub struct Metrics {
    pub results: ResultCounters,
    pub status_classes: [AtomicU64; 6],
    pub client_body_bytes: AtomicU64,
    pub client_connections: AtomicU64,
    pub client_connections_open: AtomicI64,
    pub client_denied: AtomicU64,
    /// Requests refused for their client's requests in progress (`client.max_requests_per_client`).
    pub client_in_flight_refusals: AtomicU64,
    /// Connections closed for their PROXY protocol header: missing, malformed, late, or
    /// from a peer not in `access.proxy_protocol_from`.
    pub client_proxy_protocol_errors: AtomicU64,
    /// TLS handshakes completed on listeners: full, and resumed sessions (`tls::Resumption`).
    pub tls_handshakes_full: AtomicU64,
    pub tls_handshakes_resumed: AtomicU64,
    /// TLS handshakes that failed or timed out (a client certificate refused among them).
    pub tls_handshake_failures: AtomicU64,
    /// HTTP/2 connections closed for cancelling too many requests (`crate::cancels`).
    pub client_cancel_closes: AtomicU64,
    /// Origin connections that had to wait for a slot under `upstream.max_connections`, and
    /// requests that waited in vain (503).
    pub origin_connection_waits: AtomicU64,
    pub origin_connection_refusals: AtomicU64,
    pub origin_requests: AtomicU64,
    pub origin_connects: AtomicU64,
    /// Requests sent on pipelined connections (`upstream.pipeline`).
    pub origin_pipelined: AtomicU64,
    /// Writes of queued pipelined requests: each carries one or more.
    pub origin_pipeline_writes: AtomicU64,
    pub origin_errors: AtomicU64,
    pub origin_body_bytes: AtomicU64,
    pub collapsed: AtomicU64,
    pub tunnels_open: AtomicI64,
    pub aborted: AtomicU64,
    /// Expiry sweeps run (periodic and `POST /cache/sweep`).
    pub sweep_runs: AtomicU64,
    /// Objects removed by expiry sweeps from the memory tier (and suspended entries).
    pub sweep_removed: AtomicU64,
    /// Responses assembled from ESI templates (pages; nested fragments not counted).
    pub esi_pages: AtomicU64,
    /// ESI includes fetched (through the cache: hits count too), `alt` fetches included.
    pub esi_includes: AtomicU64,
    /// ESI includes that produced nothing (`src` and `alt` failed, or a limit was hit).
    pub esi_include_errors: AtomicU64,
    /// Objects removed by expiry sweeps from the disk tier.
    pub sweep_disk_removed: AtomicU64,
    /// Fills that stopped storing because fills together held `cache.filling_memory`.
    pub fills_over_budget: AtomicU64,
    /// Suspended entries the origin confirmed (304) for a conditional client.
    pub suspended_revalidations: AtomicU64,
    /// Conditional clients answered 304 from a fresh suspended entry, without the origin.
    pub suspended_hits: AtomicU64,
    /// Access log lines not written: their write failed (a full disk), or they came after
    /// the log was closed at shutdown.
    pub access_log_lines_dropped: AtomicU64,
    /// How long transactions took, per result code.
    pub durations: crate::latency::Durations,
}

impl Metrics {
    /// Counts one finished transaction, which took `elapsed`.
    pub fn record(&self, code: ResultCode, status: u16, body_bytes: u64, completed: bool, elapsed: Duration) {
        self.results.add(code);
        self.durations.record(code, elapsed);
        let class = (status / 100).min(5) as usize;
        self.status_classes[class].fetch_add(1, Relaxed);
        self.client_body_bytes.fetch_add(body_bytes, Relaxed);
        if !completed {
            self.aborted.fetch_add(1, Relaxed);
        }
    }

    /// Total requests answered from the cache and in all.
    pub fn hits_and_requests(&self) -> (u64, u64) {
        let all: u64 = ResultCode::ALL.iter().map(|c| self.results.get(*c)).sum();
        let hits: u64 = ResultCode::ALL.iter().filter(|c| c.is_hit()).map(|c| self.results.get(*c)).sum();
        (hits, all)
    }

    /// The Prometheus text exposition.
    pub fn prometheus(&self, store: &StoreStats, in_flight: usize) -> String {
        let mut out = String::with_capacity(4096);
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let one = |v: u64| vec![(String::new(), v as f64)];
        let results: Vec<_> = ResultCode::ALL
            .iter()
            .map(|c| (format!("{{result=\"{}\"}}", c.as_str()), self.results.get(*c) as f64))
            .collect();
        metric("sluice_requests_total", "counter", "Client requests by Squid result code.", &results);
        let classes: Vec<_> =
            (1..6).map(|i| (format!("{{class=\"{i}xx\"}}"), self.status_classes[i].load(Relaxed) as f64)).collect();
        metric("sluice_responses_total", "counter", "Responses by status class.", &classes);
        metric(
            "sluice_client_body_bytes_total",
            "counter",
            "Body bytes sent to clients.",
            &one(self.client_body_bytes.load(Relaxed)),
        );
        metric(
            "sluice_client_connections_total",
            "counter",
            "Client connections accepted.",
            &one(self.client_connections.load(Relaxed)),
        );
        metric(
            "sluice_client_connections_open",
            "gauge",
            "Client connections open.",
            &[(String::new(), self.client_connections_open.load(Relaxed) as f64)],
        );
        metric(
            "sluice_client_denied_total",
            "counter",
            "Requests refused by the client ACL.",
            &one(self.client_denied.load(Relaxed)),
        );
        metric(
            "sluice_client_in_flight_refusals_total",
            "counter",
            "Requests refused because their client had client.max_requests_per_client in progress.",
            &one(self.client_in_flight_refusals.load(Relaxed)),
        );
        metric(
            "sluice_client_proxy_protocol_errors_total",
            "counter",
            "Connections closed for their PROXY protocol header (missing, malformed, late, untrusted peer).",
            &one(self.client_proxy_protocol_errors.load(Relaxed)),
        );
        metric(
            "sluice_tls_handshakes_total",
            "counter",
            "TLS handshakes completed on listeners, by kind: full, or a resumed session.",
            &[
                ("{kind=\"full\"}".to_owned(), self.tls_handshakes_full.load(Relaxed) as f64),
                ("{kind=\"resumed\"}".to_owned(), self.tls_handshakes_resumed.load(Relaxed) as f64),
            ],
        );
        metric(
            "sluice_tls_handshake_failures_total",
            "counter",
            "TLS handshakes on listeners that failed (a refused client certificate among them) or timed out.",
            &one(self.tls_handshake_failures.load(Relaxed)),
        );
        metric(
            "sluice_client_cancel_closes_total",
            "counter",
            "HTTP/2 connections closed for cancelling too many requests (rapid reset).",
            &one(self.client_cancel_closes.load(Relaxed)),
        );
        metric(
            "sluice_origin_connection_waits_total",
            "counter",
            "Origin connections that waited for a slot under upstream.max_connections.",
            &one(self.origin_connection_waits.load(Relaxed)),
        );
        metric(
            "sluice_origin_connection_refusals_total",
            "counter",
            "Requests answered 503: no slot under upstream.max_connections within the connect timeout.",
            &one(self.origin_connection_refusals.load(Relaxed)),
        );
        metric(
            "sluice_client_aborted_total",
            "counter",
            "Responses not delivered in full.",
            &one(self.aborted.load(Relaxed)),
        );
        metric(
            "sluice_origin_requests_total",
            "counter",
            "Requests sent to origins.",
            &one(self.origin_requests.load(Relaxed)),
        );
        metric(
            "sluice_origin_connects_total",
            "counter",
            "Connections opened to origins.",
            &one(self.origin_connects.load(Relaxed)),
        );
        metric(
            "sluice_origin_pipelined_requests_total",
            "counter",
            "Requests sent on pipelined origin connections.",
            &one(self.origin_pipelined.load(Relaxed)),
        );
        metric(
            "sluice_origin_pipeline_writes_total",
            "counter",
            "Writes of queued pipelined requests (each carries one or more).",
            &one(self.origin_pipeline_writes.load(Relaxed)),
        );
        metric(
            "sluice_origin_errors_total",
            "counter",
            "Origin failures (connect, timeout, protocol).",
            &one(self.origin_errors.load(Relaxed)),
        );
        metric(
            "sluice_collapsed_total",
            "counter",
            "Requests collapsed onto another's fetch.",
            &one(self.collapsed.load(Relaxed)),
        );
        metric("sluice_fetches_in_flight", "gauge", "Cacheable fetches in flight.", &one(in_flight as u64));
        metric(
            "sluice_tunnels_open",
            "gauge",
            "CONNECT tunnels open.",
            &[(String::new(), self.tunnels_open.load(Relaxed) as f64)],
        );
        metric("sluice_sweep_runs_total", "counter", "Expiry sweeps run.", &one(self.sweep_runs.load(Relaxed)));
        metric(
            "sluice_sweep_removed_total",
            "counter",
            "Stale, idle objects removed from the memory tier by expiry sweeps.",
            &one(self.sweep_removed.load(Relaxed)),
        );
        metric(
            "sluice_esi_pages_total",
            "counter",
            "Responses assembled from ESI templates.",
            &one(self.esi_pages.load(Relaxed)),
        );
        metric(
            "sluice_esi_includes_total",
            "counter",
            "ESI includes fetched through the cache.",
            &one(self.esi_includes.load(Relaxed)),
        );
        metric(
            "sluice_esi_include_errors_total",
            "counter",
            "ESI includes that failed (src and alt) and were omitted.",
            &one(self.esi_include_errors.load(Relaxed)),
        );
        metric(
            "sluice_sweep_disk_removed_total",
            "counter",
            "Stale, idle objects removed from the disk tier by expiry sweeps.",
            &one(self.sweep_disk_removed.load(Relaxed)),
        );
        metric(
            "sluice_access_log_lines_dropped_total",
            "counter",
            "Access log lines not written: their write failed (a full disk, say), or the log was closed.",
            &one(self.access_log_lines_dropped.load(Relaxed)),
        );
        metric("sluice_cache_objects", "gauge", "Objects in the memory tier.", &one(store.objects));
        metric("sluice_cache_bytes", "gauge", "Bytes in the memory tier.", &one(store.bytes));
        metric("sluice_cache_capacity_bytes", "gauge", "Capacity of the memory tier.", &one(store.capacity));
        metric("sluice_cache_insertions_total", "counter", "Objects stored.", &one(store.insertions));
        metric("sluice_cache_evictions_total", "counter", "Objects evicted by the policy.", &one(store.evictions));
        metric(
            "sluice_cache_fills_over_budget_total",
            "counter",
            "Responses streamed but not stored because fills in flight held cache.filling_memory.",
            &one(self.fills_over_budget.load(Relaxed)),
        );
        metric(
            "sluice_cache_rejected_admission_total",
            "counter",
            "New objects the admission rule did not store.",
            &one(store.rejected_admission),
        );
        metric(
            "sluice_cache_suspended_objects",
            "gauge",
            "Suspended entries (metadata without a body) in the memory tier.",
            &one(store.suspended),
        );
        metric(
            "sluice_cache_suspended_bytes",
            "gauge",
            "Bytes charged for suspended entries (part of sluice_cache_bytes).",
            &one(store.suspended_bytes),
        );
        metric(
            "sluice_cache_suspensions_total",
            "counter",
            "Evictions that kept a suspended entry.",
            &one(store.suspensions),
        );
        metric(
            "sluice_cache_suspended_revalidations_total",
            "counter",
            "Suspended entries confirmed by the origin (304) for a conditional client.",
            &one(self.suspended_revalidations.load(Relaxed)),
        );
        metric(
            "sluice_cache_suspended_hits_total",
            "counter",
            "Conditional clients answered 304 from a fresh suspended entry, without the origin.",
            &one(self.suspended_hits.load(Relaxed)),
        );
        out
    }

    /// The JSON document served at `/stats`.
    pub fn json(&self, store: &StoreStats, in_flight: usize) -> serde_json::Value {
        let results: serde_json::Map<String, serde_json::Value> =
            ResultCode::ALL.iter().map(|c| (c.as_str().to_owned(), self.results.get(*c).into())).collect();
        let (hits, requests) = self.hits_and_requests();
        serde_json::json!({
            "requests": requests,
            "hits": hits,
            "hit_ratio": if requests == 0 { 0.0 } else { hits as f64 / requests as f64 },
            "results": results,
            "client": {
                "connections_total": self.client_connections.load(Relaxed),
                "connections_open": self.client_connections_open.load(Relaxed),
                "denied": self.client_denied.load(Relaxed),
                "in_flight_refusals": self.client_in_flight_refusals.load(Relaxed),
                "proxy_protocol_errors": self.client_proxy_protocol_errors.load(Relaxed),
                "tls_handshakes_full": self.tls_handshakes_full.load(Relaxed),
                "tls_handshakes_resumed": self.tls_handshakes_resumed.load(Relaxed),
                "tls_handshake_failures": self.tls_handshake_failures.load(Relaxed),
                "cancel_closes": self.client_cancel_closes.load(Relaxed),
                "aborted": self.aborted.load(Relaxed),
                "body_bytes": self.client_body_bytes.load(Relaxed),
            },
            "origin": {
                "requests": self.origin_requests.load(Relaxed),
                "connects": self.origin_connects.load(Relaxed),
                "connection_waits": self.origin_connection_waits.load(Relaxed),
                "connection_refusals": self.origin_connection_refusals.load(Relaxed),
                "pipelined": self.origin_pipelined.load(Relaxed),
                "pipeline_writes": self.origin_pipeline_writes.load(Relaxed),
                "errors": self.origin_errors.load(Relaxed),
            },
            "collapsed": self.collapsed.load(Relaxed),
            "fetches_in_flight": in_flight,
            "tunnels_open": self.tunnels_open.load(Relaxed),
            "sweep": {
                "runs": self.sweep_runs.load(Relaxed),
                "removed": self.sweep_removed.load(Relaxed),
                "disk_removed": self.sweep_disk_removed.load(Relaxed),
            },
            "esi": {
                "pages": self.esi_pages.load(Relaxed),
                "includes": self.esi_includes.load(Relaxed),
                "include_errors": self.esi_include_errors.load(Relaxed),
            },
            "access_log": {
                "lines_dropped": self.access_log_lines_dropped.load(Relaxed),
            },
            "cache": {
                "objects": store.objects,
                "bytes": store.bytes,
                "capacity": store.capacity,
                "insertions": store.insertions,
                "evictions": store.evictions,
                "rejected_too_large": store.rejected_too_large,
                "rejected_admission": store.rejected_admission,
                "fills_over_budget": self.fills_over_budget.load(Relaxed),
                "suspended": store.suspended,
                "suspended_bytes": store.suspended_bytes,
                "suspensions": store.suspensions,
                "suspended_revalidations": self.suspended_revalidations.load(Relaxed),
                "suspended_hits": self.suspended_hits.load(Relaxed),
            },
        })
    }
}
