//! A Proxy-Wasm plugin's gRPC streams (`open_grpc_stream`) on a real proxy, against a real
//! gRPC server (tonic's `grpc.health.v1.Health`), opened by the root context (test plugin
//! `grpc_stream`, cluster `health`, one instance): `Watch` (server streaming) delivers its
//! initial metadata and a message per change of the service's status, in order, until
//! cancelled; `Check` its message, trailing metadata and `OK`; an unknown method ends at
//! once with the server's status.

use crate::support::{plugin, Proxy};
use crate::wasm_grpc_call::health_server;
use sluice_testkit::client;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tonic_health::ServingStatus;

/// The plugin's recorded events, once `done` holds for them (up to 10 s).
async fn events_once(proxy: &Proxy, what: &str, done: impl Fn(&[&str]) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let events = client::get(proxy.addr(), &proxy.origin.url("/"), &[("x-read", "1")]).await.text();
        if done(&events.split(',').collect::<Vec<_>>()) {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "waiting for {what}: the plugin recorded {events:?}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_context_asks_a_service_through_streams() {
    let (health, reporter) = health_server(Arc::new(AtomicUsize::new(0))).await;
    let entry = format!(
        "[[module]]\nname = \"watcher\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 1\nclusters = {{ health = \"http://{health}\" }}\n",
        plugin("grpc_stream").display().to_string()
    );
    let proxy = Proxy::start(&entry).await;

    // Check: metadata, its one message, trailers, OK; an unknown method: UNIMPLEMENTED (12),
    // trailers-only.
    let events = events_once(&proxy, "the check's end and the unknown method's", |events| {
        events.contains(&"check-close:0:") && events.iter().any(|event| event.starts_with("nope-close:12"))
    })
    .await;
    let check: Vec<&str> = events.split(',').filter(|event| event.starts_with("check-")).collect();
    assert_eq!(check, ["check-meta:application/grpc", "check-status:1", "check-trailers", "check-close:0:"]);

    // Watch: metadata, then each change of status as a message on the stream, in order.
    events_once(&proxy, "the first status", |events| events.contains(&"watch-status:1")).await;
    reporter.set_service_status("shop", ServingStatus::NotServing).await;
    let events = events_once(&proxy, "the second status", |events| events.contains(&"watch-status:2")).await;
    let watch: Vec<&str> = events.split(',').filter(|event| event.starts_with("watch-")).collect();
    assert_eq!(watch, ["watch-meta:application/grpc", "watch-status:1", "watch-status:2"]);

    // Cancelled: the stream is gone (a second cancel finds nothing).
    let url = proxy.origin.url("/");
    let cancel = || client::get(proxy.addr(), &url, &[("x-cancel-watch", "1")]);
    assert_eq!(cancel().await.text(), "ok");
    assert_eq!(cancel().await.text(), "NotFound");
}
