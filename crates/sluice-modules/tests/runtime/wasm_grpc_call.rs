//! A Proxy-Wasm plugin's gRPC calls (`dispatch_grpc_call`) on a real proxy, against a real
//! gRPC server (tonic's `grpc.health.v1.Health`): the transaction waits for the call, the
//! plugin reads the answer in `on_grpc_call_response` (`proxy_on_grpc_receive` or
//! `proxy_on_grpc_close` and `proxy_get_status`) and edits the request or answers locally
//! (test plugin `grpc_call`, cluster `health`).

use crate::support::{plugin, Proxy};
use http::StatusCode;
use sluice_proxy::clock::{Clock, ManualClock};
use sluice_testkit::{client, Origin, Reply};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio_stream::StreamExt;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// A `[[module]]` entry for the `grpc_call` plugin, its cluster `health` at `health` (none:
/// no clusters).
fn entry(health: Option<SocketAddr>) -> String {
    let clusters = health.map(|addr| format!("clusters = {{ health = \"http://{addr}\" }}\n")).unwrap_or_default();
    format!(
        "[[module]]\nname = \"checker\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 1\n{clusters}",
        plugin("grpc_call").display().to_string()
    )
}

/// Starts the health service on 127.0.0.1: `shop` serving, `basket` not; calls without the
/// metadata `x-asked-by: wasm` are refused (`UNAUTHENTICATED`). Serves until the test ends;
/// counts the connections it accepts in `accepted`. Its reporter changes the statuses.
pub(crate) async fn health_server(accepted: Arc<AtomicUsize>) -> (SocketAddr, HealthReporter) {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter.set_service_status("shop", ServingStatus::Serving).await;
    reporter.set_service_status("basket", ServingStatus::NotServing).await;
    let checked = tonic::service::interceptor::InterceptedService::new(service, |request: tonic::Request<()>| {
        match request.metadata().get("x-asked-by").map(|v| v.as_bytes()) {
            Some(b"wasm") => Ok(request),
            _ => Err(tonic::Status::unauthenticated("who asks?")),
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(move |connection| {
        accepted.fetch_add(1, Ordering::Relaxed);
        connection
    });
    tokio::spawn(tonic::transport::Server::builder().add_service(checked).serve_with_incoming(incoming));
    (addr, reporter)
}

/// An HTTP/2 (cleartext) server answering every request with `status` and a text body.
async fn plain_http2_server(status: StatusCode) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = hyper::service::service_fn(move |_| async move {
                let body = http_body_util::Full::new(bytes::Bytes::from_static(b"not grpc"));
                Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(body).unwrap())
            });
            let builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            tokio::spawn(async move { builder.serve_connection(hyper_util::rt::TokioIo::new(stream), answer).await });
        }
    });
    addr
}

async fn get(proxy: &Proxy, headers: &[(&str, &str)]) -> client::Reply {
    client::get(proxy.addr(), &proxy.origin.url("/page"), headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_waits_for_its_grpc_call_and_acts_on_the_answer() {
    let accepted = Arc::new(AtomicUsize::new(0));
    let proxy = Proxy::start(&entry(Some(health_server(Arc::clone(&accepted)).await.0))).await;
    proxy.origin.on("/page", Reply::ok("page"));

    // The answer's message, decoded by the plugin, goes on with the request.
    let reply = get(&proxy, &[("x-check", "shop")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "page"));
    assert_eq!(proxy.origin.last_request("/page").unwrap().header("x-health"), Some("1"));
    get(&proxy, &[("x-check", "basket")]).await;
    assert_eq!(proxy.origin.last_request("/page").unwrap().header("x-health"), Some("2"));

    // The server's error status and message reach the plugin (proxy_on_grpc_close,
    // proxy_get_status); the origin is not asked.
    let reply = get(&proxy, &[("x-check", "gone")]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.text(), "grpc 5: service not registered");
    assert_eq!(proxy.origin.hits("/page"), 2);

    // A call cancelled in the callback that asked for it is not made.
    let reply = get(&proxy, &[("x-check", "shop"), ("x-cancel", "1")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = proxy.origin.last_request("/page").unwrap();
    assert_eq!((seen.header("x-cancelled"), seen.header("x-health")), (Some("ok"), None));
    // The three calls made went over one kept HTTP/2 connection.
    assert_eq!(accepted.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_grpc_calls_end_in_the_status_the_specification_gives() {
    // Nothing listens: UNAVAILABLE.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let proxy = Proxy::start(&entry(Some(closed))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, &[("x-check", "shop")]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let text = reply.text();
    assert!(text.starts_with("grpc 14: client error (Connect)") && text.contains("refused"), "{text}");

    // A server that never answers (the HTTP/1.1 test origin waits for a request it can
    // read): DEADLINE_EXCEEDED when the plugin's timeout is up.
    let clock = ManualClock::default();
    let http1_only = Origin::start(move || clock.now()).await;
    let proxy = Proxy::start(&entry(Some(http1_only.addr))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, &[("x-check", "shop"), ("x-timeout-ms", "300")]).await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "grpc 4: no answer within 300ms")
    );

    // An HTTP/2 server that does not speak gRPC: its HTTP status maps (404: UNIMPLEMENTED).
    let proxy = Proxy::start(&entry(Some(plain_http2_server(StatusCode::NOT_FOUND).await))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, &[("x-check", "shop")]).await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "grpc 12: HTTP status 404 Not Found")
    );

    // No cluster `health`: dispatch_grpc_call fails at once (InternalFailure, which the SDK
    // hands to the plugin).
    let proxy = Proxy::start(&entry(None)).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, &[("x-check", "shop")]).await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, "call failed: InternalFailure")
    );
    assert_eq!(proxy.origin.hits("/page"), 0);
}
