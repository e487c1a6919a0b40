//! Per-transaction overhead of Proxy-Wasm modules on the phases of a 1 KiB cache hit.
//!
//! ```text
//! cargo bench -p sluice-wasm --bench overhead
//! ```
//!
//! Every variant runs the same transaction (`new_txn`, `req_headers`, `cache_lookup`,
//! `client_resp_headers`, one 1 KiB `client_resp_body` with end of stream, `resp_done`, `log`,
//! drop) on one thread and prints the mean wall time per transaction and the difference to
//! a native module whose phases all continue. Not a test: numbers only. `ITERATIONS=N` sets
//! the transactions per round, `VARIANT=text` runs only the variants whose name contains it
//! (the first one printed is then the reference).

#[path = "../tests/wasm/support/plugins.rs"]
mod plugins;

use bytes::Bytes;
use http::StatusCode;
use sluice_module::{
    BodyChunk, CpuPool, EmptyCache, LogFields, LookupOutcome, LookupOverride, Module, Txn, TxnInfo, TxnOutcome,
};
use sluice_wasm::{HostEnv, WasmConfig, WasmModule};
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A native module whose state overrides nothing.
struct Noop;
struct NoopTxn;
impl Txn for NoopTxn {}
impl Module for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(NoopTxn))
    }
}

fn transaction(
    module: &dyn Module,
    info: &TxnInfo,
    req: &http::request::Parts,
    resp: &http::response::Parts,
    body: &Bytes,
) {
    let mut req = req.clone();
    let mut resp = resp.clone();
    let Some(mut txn) = module.new_txn(info) else { return };
    black_box(txn.req_headers(info, &mut req));
    black_box(txn.cache_lookup(info, LookupOutcome::Hit, &mut LookupOverride::Keep));
    black_box(txn.client_resp_headers(info, &mut resp));
    let mut chunk = BodyChunk::new(body.clone(), true);
    black_box(txn.client_resp_body(info, &mut chunk));
    let outcome =
        TxnOutcome { status: StatusCode::OK, body_bytes: body.len() as u64, result: "TCP_MEM_HIT", completed: true };
    txn.resp_done(info, &outcome);
    txn.log(info, &outcome, &mut LogFields::default());
    black_box((req, resp, chunk));
}

/// Mean time per transaction over one run of `iterations`.
fn measure(module: &dyn Module, iterations: u32) -> Duration {
    let info = TxnInfo {
        id: 1,
        client: SocketAddr::from(([127, 0, 0, 1], 5000)),
        cache: Arc::new(EmptyCache),
        cpu: CpuPool::default(),
        background: false,
    };
    let (req, ()) = http::Request::get("http://origin.example/static/app.js?v=3")
        .header("host", "origin.example")
        .header("user-agent", "Mozilla/5.0 (X11; Linux x86_64) bench")
        .header("accept", "*/*")
        .header("accept-encoding", "gzip, br")
        .header("accept-language", "en-US,en;q=0.9")
        .header("cookie", "session=abcdef0123456789")
        .header("referer", "http://origin.example/")
        .header("x-forwarded-for", "192.0.2.1")
        .body(())
        .unwrap()
        .into_parts();
    let (resp, ()) = http::Response::builder()
        .status(200)
        .header("content-type", "application/javascript")
        .header("content-length", "1024")
        .header("cache-control", "public, max-age=3600")
        .header("etag", "\"abc123\"")
        .header("last-modified", "Tue, 01 Jul 2025 10:00:00 GMT")
        .header("age", "12")
        .body(())
        .unwrap()
        .into_parts();
    let body = Bytes::from(vec![b'x'; 1024]);
    let start = Instant::now();
    for _ in 0..iterations {
        transaction(module, &info, &req, &resp, &body);
    }
    start.elapsed() / iterations
}

fn wasm(plugin: &str, config: WasmConfig) -> WasmModule {
    let config = WasmConfig { instances: 1, ..config };
    WasmModule::start(plugin, plugins::compiled(plugin), config, 1, &HostEnv::default()).expect("start plugin")
}

fn main() {
    let iterations = std::env::var("ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(50_000);
    let only = std::env::var("VARIANT").ok();
    let variants: Vec<(&str, Box<dyn Module>)> = vec![
        ("native no-op module", Box::new(Noop)),
        ("wasm empty callbacks", Box::new(wasm("empty", WasmConfig::default()))),
        (
            "wasm empty, heads not kept for later phases",
            Box::new(wasm(
                "empty",
                WasmConfig {
                    request_headers_in_response: false,
                    response_headers_in_body: false,
                    ..WasmConfig::default()
                },
            )),
        ),
        ("wasm add four headers", Box::new(wasm("add_headers", WasmConfig::default()))),
        (
            "wasm copy every response body",
            Box::new(wasm("body_transform", WasmConfig { plugin_config: "copy".into(), ..WasmConfig::default() })),
        ),
    ];
    let variants: Vec<_> =
        variants.into_iter().filter(|(name, _)| only.as_deref().is_none_or(|o| name.contains(o))).collect();
    // Rounds interleave the variants so that load from elsewhere hits them alike; the best
    // round of each counts.
    const ROUNDS: usize = 7;
    let mut best = vec![Duration::MAX; variants.len()];
    for round in 0..=ROUNDS {
        for (n, (_, module)) in variants.iter().enumerate() {
            let per_txn = measure(module.as_ref(), if round == 0 { iterations / 10 } else { iterations });
            if round > 0 {
                best[n] = best[n].min(per_txn);
            }
        }
    }
    println!("{iterations} transactions per round, best of {ROUNDS} interleaved rounds, 1 KiB hit phases");
    let baseline = best[0];
    for ((name, _), per_txn) in variants.iter().zip(&best) {
        let extra = per_txn.as_nanos() as i128 - baseline.as_nanos() as i128;
        println!("{name:<46} {:>8} ns/txn   {:>+8} ns vs first", per_txn.as_nanos(), extra);
    }
}
