//! Loading, reloading and unloading a Proxy-Wasm plugin through the admin API while client
//! tasks keep requesting through the proxy, each on one kept-alive connection: no request is
//! lost or broken, no connection dropped, and the plugin's header is on exactly the responses
//! to requests made while it was loaded (a request under way during a load or an unload may
//! see either).

use crate::support::{plugin, Proxy};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use sluice_testkit::Reply;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;

const CLIENTS: usize = 4;
/// The most requests one client makes; the clients stop earlier, when the swaps are done.
const MAX_REQUESTS: usize = 100_000;
/// Load, reload, unload: this many times.
const ROUNDS: usize = 3;
/// Requests checked in each stable period before the next change.
const CHECKS: u64 = 20;
const PATHS: usize = 4;

/// `phase`: the generation times 4 plus one of these. A request is checked when it saw the
/// same stable phase before it was sent and after its response was read.
const UNLOADED: u64 = 0;
const LOADED: u64 = 1;
const CHANGING: u64 = 2;

#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    with_header: u64,
    without_header: u64,
    either: u64,
    clients_done: usize,
}

struct Shared {
    phase: AtomicU64,
    stop: AtomicU64,
    progress: watch::Sender<Progress>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_reloading_and_unloading_under_load_loses_no_request() {
    tokio::time::timeout(Duration::from_secs(300), run()).await.expect("the test finishes");
}

async fn run() {
    let proxy = Proxy::start("").await;
    for client in 0..CLIENTS {
        for path in 0..PATHS {
            let reply = Reply::ok(format!("body {client}/{path}"));
            // Half the paths are cached (hits run the plugin too), half go to the origin.
            let reply = if path % 2 == 0 {
                reply.header("cache-control", "max-age=600")
            } else {
                reply.header("cache-control", "no-store")
            };
            proxy.origin.on(&format!("/load/{client}/{path}"), reply);
        }
    }
    let shared = Arc::new(Shared {
        phase: AtomicU64::new(UNLOADED),
        stop: AtomicU64::new(0),
        progress: watch::channel(Progress::default()).0,
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(client(proxy.addr(), proxy.origin.url(""), i, Arc::clone(&shared))))
        .collect();

    let spec = serde_json::json!({ "kind": "wasm", "settings": { "path": plugin("add_headers"), "instances": 2 } })
        .to_string();
    let mut progress = shared.progress.subscribe();
    let mut generation = 0;
    for round in 0..ROUNDS {
        generation += 1;
        change(&shared, generation, LOADED, async {
            let put = proxy.admin("PUT", "/modules/plugin", Some("application/json"), Some(&spec)).await;
            assert_eq!(put.status, StatusCode::CREATED, "round {round}: {}", put.text());
        })
        .await;
        checked(&mut progress, |p| p.with_header).await;
        // A reload while loaded leaves no gap: the phase stays "loaded" throughout.
        let reload = proxy.admin("PUT", "/modules/plugin", None, None).await;
        assert_eq!(reload.status, StatusCode::OK, "round {round}: {}", reload.text());
        checked(&mut progress, |p| p.with_header).await;
        change(&shared, generation, UNLOADED, async {
            let delete = proxy.admin("DELETE", "/modules/plugin", None, None).await;
            assert_eq!(delete.status, StatusCode::OK, "round {round}: {}", delete.text());
        })
        .await;
        checked(&mut progress, |p| p.without_header).await;
    }
    shared.stop.store(1, SeqCst);
    let mut requests = 0;
    for client in clients {
        requests += client.await.expect("client task");
    }
    let p = *shared.progress.borrow();
    assert_eq!(p.clients_done, CLIENTS);
    assert!(requests < CLIENTS * MAX_REQUESTS, "the clients ran out of requests before the swaps were done");
    assert!(p.with_header >= ROUNDS as u64 * 2 * CHECKS && p.without_header >= ROUNDS as u64 * CHECKS, "{p:?}");
    assert_eq!(p.with_header + p.without_header + p.either, requests as u64);
    eprintln!("{requests} requests: {p:?}");
}

/// Marks the phase as changing while `admin` runs, then sets the new stable phase.
async fn change(shared: &Shared, generation: u64, to: u64, admin: impl std::future::Future<Output = ()>) {
    shared.phase.store(generation * 4 + CHANGING, SeqCst);
    admin.await;
    shared.phase.store(generation * 4 + to, SeqCst);
}

/// Waits until `CHECKS` more requests were checked in the current stable phase (counted by
/// `count`), or every client stopped.
async fn checked(progress: &mut watch::Receiver<Progress>, count: impl Fn(&Progress) -> u64) {
    let start = count(&progress.borrow_and_update());
    progress.wait_for(|p| count(p) >= start + CHECKS || p.clients_done == CLIENTS).await.expect("progress");
}

/// Requests the client's paths in turn on one connection until told to stop; returns how
/// many it made.
async fn client(proxy: std::net::SocketAddr, origin: String, i: usize, shared: Arc<Shared>) -> usize {
    let _done = Done(Arc::clone(&shared));
    let stream = TcpStream::connect(proxy).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    let conn = tokio::spawn(conn);
    let host = origin.trim_start_matches("http://").to_owned();
    let mut made = 0;
    while made < MAX_REQUESTS && shared.stop.load(SeqCst) == 0 {
        let path = made % PATHS;
        let request = Request::get(format!("{origin}/load/{i}/{path}"))
            .header("host", &host)
            .body(Empty::<Bytes>::new())
            .expect("request");
        sender.ready().await.expect("the connection stays open");
        let before = shared.phase.load(SeqCst);
        let response = sender.send_request(request).await.expect("a response to every request");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the whole body").to_bytes();
        let after = shared.phase.load(SeqCst);
        made += 1;
        assert_eq!(parts.status, StatusCode::OK, "request {made} of client {i}");
        assert_eq!(body, format!("body {i}/{path}").as_bytes(), "request {made} of client {i}");
        let header = parts.headers.get("x-wasm-1").map(|v| v.as_bytes().to_vec());
        assert!(header.is_none() || header.as_deref() == Some(b"one".as_slice()));
        if before == after && before % 4 != CHANGING {
            let loaded = before % 4 == LOADED;
            assert_eq!(
                header.is_some(),
                loaded,
                "request {made} of client {i}, made while the plugin was {}",
                if loaded { "loaded" } else { "unloaded" }
            );
            shared.progress.send_modify(|p| if loaded { p.with_header += 1 } else { p.without_header += 1 });
        } else {
            shared.progress.send_modify(|p| p.either += 1);
        }
    }
    drop(sender);
    conn.await.expect("connection task").expect("the connection closed cleanly");
    made
}

/// Counts a client as done when it ends, also by a failed assertion (so that the controller
/// stops waiting for it).
struct Done(Arc<Shared>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.progress.send_modify(|p| p.clients_done += 1);
    }
}
