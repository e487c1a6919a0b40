//! A Proxy-Wasm plugin's gRPC streams (`open_grpc_stream`) on a real proxy, against a real
//! gRPC server (tonic's `grpc.health.v1.Health`), opened by the root context (test plugin
//! `grpc_stream`, cluster `health`, one instance): `Watch` (server streaming) delivers its
//! initial metadata and a message per change of the service's status, in order, until
//! cancelled; `Check` its message, trailing metadata and `OK`; an unknown method ends at
//! once with the server's status.

use crate::support::{plugin, until, Proxy};
use crate::wasm_grpc_call::health_server;
use http::StatusCode;
use sluice_testkit::client;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tonic_health::ServingStatus;

/// The `[[module]]` entry of the `grpc_stream` plugin, named `watcher`, its cluster `health`
/// at `health`.
fn entry(health: SocketAddr) -> String {
    format!(
        "[[module]]\nname = \"watcher\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 1\nclusters = {{ health = \"http://{health}\" }}\n",
        plugin("grpc_stream").display().to_string()
    )
}

/// An HTTP/2 server that answers every request as a gRPC stream that sends nothing and
/// never ends, counting in `open` the streams whose answer it still holds (the count drops
/// when the client resets the stream or the connection goes).
async fn endless_server(open: Arc<AtomicUsize>) -> SocketAddr {
    /// Counts one open answer for as long as it lives.
    struct Held(Arc<AtomicUsize>);
    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let open = Arc::clone(&open);
            let answer = hyper::service::service_fn(move |_| {
                open.fetch_add(1, Ordering::SeqCst);
                let held = Held(Arc::clone(&open));
                let frames = futures_util::stream::unfold(held, |held| async move {
                    std::future::pending::<()>().await;
                    Some((Ok::<_, std::convert::Infallible>(http_body::Frame::data(bytes::Bytes::new())), held))
                });
                let body = http_body_util::StreamBody::new(frames);
                async move {
                    Ok::<_, std::convert::Infallible>(
                        http::Response::builder().header("content-type", "application/grpc").body(body).unwrap(),
                    )
                }
            });
            let builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            tokio::spawn(async move { builder.serve_connection(hyper_util::rt::TokioIo::new(stream), answer).await });
        }
    });
    addr
}

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
    let proxy = Proxy::start(&entry(health)).await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_a_plugin_cancels_its_streams() {
    let open = Arc::new(AtomicUsize::new(0));
    let proxy = Proxy::start(&entry(endless_server(Arc::clone(&open)).await)).await;
    until("the plugin's three streams to be open at the server", || open.load(Ordering::SeqCst) == 3).await;
    let delete = proxy.admin("DELETE", "/modules/watcher", None, None).await;
    assert_eq!(delete.status, StatusCode::OK, "{}", delete.text());
    until("the server to see the streams go", || open.load(Ordering::SeqCst) == 0).await;
}
