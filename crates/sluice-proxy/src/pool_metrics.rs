//! The origin pools' gauges and counters in `/metrics` and `/stats` (absent without a route
//! with `origins`): per origin, labelled with its route (`host/prefix`, `*` for any host) and
//! its URL.

use crate::route::Routes;
use std::fmt::Write;

/// Prometheus text for the origin pools; empty without any.
pub fn prometheus(routes: &Routes) -> String {
    let pools: Vec<_> = routes.pools().map(|pool| (pool.label.clone(), pool.stats())).collect();
    if pools.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(1024);
    let mut metric = |name: &str, kind: &str, help: &str, value: &dyn Fn(&crate::origin_pool::MemberStats) -> u64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (route, members) in &pools {
            for member in members {
                let _ = writeln!(
                    out,
                    "{name}{{route=\"{}\",origin=\"{}\"}} {}",
                    escape(route),
                    escape(&member.origin),
                    value(member)
                );
            }
        }
    };
    metric("sluice_pool_origin_up", "gauge", "1 while the origin is in its pool's rotation.", &|m| u64::from(m.up));
    metric("sluice_pool_origin_drained", "gauge", "1 while an operator keeps the origin out.", &|m| {
        u64::from(m.drained)
    });
    metric("sluice_pool_origin_in_flight", "gauge", "Requests to the origin not finished yet.", &|m| m.in_flight);
    metric("sluice_pool_origin_requests_total", "counter", "Requests sent to the origin (tries).", &|m| m.requests);
    metric(
        "sluice_pool_origin_failures_total",
        "counter",
        "Tries that got no response from the origin (refused, reset, timed out).",
        &|m| m.failures,
    );
    out
}

/// The pools for `/stats`, `None` without any.
pub fn json(routes: &Routes) -> Option<serde_json::Value> {
    let pools: Vec<_> = routes
        .pools()
        .map(|pool| {
            let members: Vec<_> = pool
                .stats()
                .into_iter()
                .map(|m| {
                    serde_json::json!({
                        "origin": m.origin, "backup": m.backup, "up": m.up, "drained": m.drained, "in_flight": m.in_flight,
                        "requests": m.requests, "failures": m.failures,
                    })
                })
                .collect();
            serde_json::json!({ "route": pool.label, "origins": members })
        })
        .collect();
    (!pools.is_empty()).then_some(serde_json::Value::Array(pools))
}

/// A Prometheus label value: backslash, quote and newline escaped.
pub(crate) fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
