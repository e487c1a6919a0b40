//! HTTP/2 to origins (a route's `http2 = true`, `upstream/h2.rs`): a real gRPC service and
//! client (grpc-go) through Sluice, and gRPC health checks of that service; and, against an HTTP/2 origin made with hyper's server on
//! 127.0.0.1 (plain text with prior knowledge, or TLS with ALPN `h2`): requests multiplexed
//! on one connection, more connections when streams reach the origin's limit, trailers passed on to HTTP/2 clients, `Host` sent as `:authority`,
//! responses cached, a stream reset mid-body never stored, a lost connection replaced, the
//! requests waiting for a connect that fails failing with it, a pool of such origins failed
//! over and balanced, and origins that do not speak HTTP/2 answered
//! with `502`.

mod common;

use bytes::Bytes;
use common::Harness;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_proxy::pool_config::HealthCheckConfig;
use sluice_proxy::units::Dur;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Concurrent requests to `/together`: each is answered only once all of them have come.
const TOGETHER: usize = 8;

/// What the origin saw of a request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    version: Version,
    authority: Option<String>,
    host: Option<String>,
    te: Option<String>,
}

/// An HTTP/2 origin (hyper's server) on 127.0.0.1: `/grpc-like` (a body, then gRPC trailers),
/// `/cached` (fresh for a minute), `/together` (see [`TOGETHER`]), `/broken` (a stream reset
/// after part of a body that would be stored), anything else `404`.
struct H2Origin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The tasks serving its connections, to break them off.
    serving: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl H2Origin {
    /// Plain text (prior knowledge), or TLS with `tls`.
    async fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        Self::serve(tls, None, TOGETHER).await
    }

    /// Plain text, allowing `max_streams` streams at once on a connection, `/together`
    /// answered once `together` requests are there.
    async fn limited(max_streams: u32, together: usize) -> Self {
        Self::serve(None, Some(max_streams), together).await
    }

    async fn serve(tls: Option<tokio_rustls::TlsAcceptor>, max_streams: Option<u32>, together: usize) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = Self {
            addr: listener.local_addr().unwrap(),
            connections: Arc::default(),
            seen: Arc::default(),
            serving: Arc::default(),
        };
        let (connections, seen, serving) = (origin.connections.clone(), origin.seen.clone(), origin.serving.clone());
        let together = Arc::new(tokio::sync::Barrier::new(together));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                connections.fetch_add(1, SeqCst);
                let (seen, together, tls) = (seen.clone(), together.clone(), tls.clone());
                let task = tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(req, seen.clone(), together.clone()));
                    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    builder.max_concurrent_streams(max_streams);
                    let _ = match tls {
                        Some(tls) => {
                            let Ok(stream) = tls.accept(tcp).await else { return };
                            builder.serve_connection(TokioIo::new(stream), service).await
                        }
                        None => builder.serve_connection(TokioIo::new(tcp), service).await,
                    };
                });
                serving.lock().push(task.abort_handle());
            }
        });
        origin
    }

    fn requests(&self, path: &str) -> Vec<Seen> {
        self.seen.lock().iter().filter(|seen| seen.path == path).cloned().collect()
    }

    /// Breaks off every connection it has (closes their sockets, no `GOAWAY`).
    fn break_connections(&self) {
        for task in self.serving.lock().drain(..) {
            task.abort();
        }
    }
}

async fn answer(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    together: Arc<tokio::sync::Barrier>,
) -> Result<Response<BoxBody<Bytes, BoxError>>, BoxError> {
    let field = |name| req.headers().get(name).map(|v: &HeaderValue| v.to_str().unwrap().to_owned());
    seen.lock().push(Seen {
        path: req.uri().path().to_owned(),
        version: req.version(),
        authority: req.uri().authority().map(|a| a.to_string()),
        host: field("host"),
        te: field("te"),
    });
    // Each frame after a yield: the head goes out before the body fails.
    let frames = |frames: Vec<Result<Frame<Bytes>, BoxError>>| {
        let frames = futures_util::StreamExt::then(futures_util::stream::iter(frames), |frame| async {
            tokio::task::yield_now().await;
            frame
        });
        StreamBody::new(frames).boxed()
    };
    let data = |text: &'static str| Ok(Frame::data(Bytes::from_static(text.as_bytes())));
    let response = Response::builder();
    Ok(match req.uri().path() {
        "/grpc-like" => {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            trailers.insert("grpc-message", HeaderValue::from_static("fine"));
            response
                .header("content-type", "application/grpc")
                .body(frames(vec![data("payload"), Ok(Frame::trailers(trailers))]))?
        }
        "/cached" => response.header("cache-control", "max-age=60").body(frames(vec![data("cached over h2")]))?,
        "/together" => {
            together.wait().await;
            response.header("cache-control", "no-store").body(frames(vec![data("together")]))?
        }
        "/broken" => response
            .header("cache-control", "max-age=60")
            .body(frames(vec![data("part of it"), Err("the origin broke off".into())]))?,
        _ => response.status(404).body(frames(vec![data("not here")]))?,
    })
}

/// A reverse proxy whose one route goes to `origin` over HTTP/2, with `tweak` applied to the
/// route.
async fn proxy_to(origin: &str, tweak: impl FnOnce(&mut RouteConfig)) -> Harness {
    let origin = origin.to_owned();
    Harness::build(Mode::Reverse, move |c| {
        c.route[0].origin = Some(origin);
        c.route[0].http2 = true;
        tweak(&mut c.route[0]);
        c.upstream.tls.verify = false;
    })
    .await
}

/// `n` GETs of `path` through `h` at once, each with a query of its own (the cache would
/// otherwise hold all but one back, to collapse them).
async fn get_at_once(h: &Harness, path: &str, n: usize) -> Vec<sluice_testkit::client::Reply> {
    let paths: Vec<String> = (0..n).map(|i| format!("{path}?{i}")).collect();
    futures_util::future::join_all(paths.iter().map(|path| h.get(path))).await
}

/// A response as an HTTP/2 client (prior knowledge) gets it through `proxy`: status, body
/// and trailers.
async fn h2_get(proxy: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Bytes, Option<HeaderMap>) {
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(connection);
    let mut req = Request::builder().uri(format!("http://{proxy}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    let status = response.status();
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    (status, collected.to_bytes(), trailers)
}

/// The interoperability peer, grpc-go's health service server and client
/// (`interop/grpc-health`), built once per test binary.
fn grpc_peer() -> &'static std::path::Path {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        sluice_testkit::go::build(
            &manifest.join("interop/grpc-health"),
            &manifest.join("../.."),
            "sluice-proxy-interop/grpc-health",
        )
    })
}

/// A running gRPC health server (`sluice.Test` serving, `sluice.Down` not), stopped when
/// dropped, and its address.
async fn grpc_server() -> (tokio::process::Child, String) {
    let mut server = tokio::process::Command::new(grpc_peer())
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gRPC server");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stdout.take().unwrap()));
    let listening = lines.next_line().await.unwrap().expect("the server's address");
    let addr = listening.strip_prefix("listening ").expect("listening ADDR").to_owned();
    (server, addr)
}

#[tokio::test]
async fn grpc_calls_pass_through_an_http2_route() {
    let (mut server, addr) = grpc_server().await;
    let peer = grpc_peer();
    let h = proxy_to(&format!("http://{addr}"), |_| {}).await;
    let out = tokio::process::Command::new(peer).args(["check", &h.addr().to_string()]).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        concat!(
            "check \"\" SERVING\n",
            "check \"sluice.Test\" SERVING\n",
            "check \"sluice.Down\" NOT_SERVING\n",
            // A trailers-only response: the status in the response head.
            "check \"sluice.Unknown\" NotFound\n",
            // A server stream, then the client's cancellation.
            "watch SERVING\n",
            "watch-end Canceled\n",
            // A bidirectional stream, each answer back before the next message goes: both
            // directions flow at once through the proxy, neither body held back.
            "chat echo ping 1\n",
            "chat echo ping 2\n",
            "chat echo ping 3\n",
            "chat end\n",
        )
    );
    drop(server.stdin.take());
    server.wait().await.unwrap();
}

#[tokio::test]
async fn grpc_health_checks_take_an_origin_out_and_bring_it_back() {
    let (_server, addr) = grpc_server().await;
    let check = |service: &str| HealthCheckConfig {
        grpc_service: Some(service.to_owned()),
        interval: Dur(std::time::Duration::from_millis(20)),
        ..HealthCheckConfig::default()
    };
    let first = check("sluice.Down");
    let origins = vec![format!("http://{addr}")];
    let h = Harness::build(Mode::Reverse, move |c| {
        c.route[0] = RouteConfig { origins, http2: true, health_check: Some(first), ..RouteConfig::default() };
    })
    .await;
    origin_up(&h, false, "NOT_SERVING takes it out").await;
    let mut config = h.proxy.state().config.clone();
    config.route[0].health_check = Some(check("sluice.Test"));
    h.proxy.generations().reload(config).await.expect("reloaded");
    origin_up(&h, true, "SERVING brings it back").await;
}

/// Waits (5 s at most) until the pool's one origin is `up` or not, as `/stats` says.
async fn origin_up(h: &Harness, up: bool, why: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stats = common::admin::json(&common::admin::admin(h, "GET", "/stats", &[], None).await);
        if stats["pools"][0]["origins"][0]["up"] == up {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{why}: {stats}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn concurrent_requests_share_one_connection() {
    let origin = H2Origin::start(None).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |_| {}).await;
    // Each is answered only when all are at the origin at once: in flight together.
    let replies = get_at_once(&h, "/together", TOGETHER).await;
    for reply in &replies {
        assert_eq!((reply.status.as_u16(), reply.text().as_str()), (200, "together"));
    }
    assert_eq!(origin.connections.load(SeqCst), 1, "one connection carried all {TOGETHER}");
    assert!(origin.requests("/together").iter().all(|seen| seen.version == Version::HTTP_2));
}

#[tokio::test]
async fn streams_beyond_an_origins_limit_go_on_another_connection() {
    // Each of six is answered only when all six are at the origin, which takes two streams
    // at once on a connection: they need three. (The first request, alone, opens the first
    // connection and brings the origin's SETTINGS; until then a connection is taken to allow
    // 100, hyper's default.)
    let origin = H2Origin::limited(2, 6).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |_| {}).await;
    assert_eq!(h.get("/cached").await.status, 200);
    let replies = get_at_once(&h, "/together", 6).await;
    assert!(replies.iter().all(|reply| reply.text() == "together"), "{replies:?}");
    assert_eq!(origin.connections.load(SeqCst), 3);
    // Their streams ended with their bodies: one connection has room again.
    assert_eq!(h.get("/cached").await.status, 200);
    assert_eq!(origin.connections.load(SeqCst), 3);
}

#[tokio::test]
async fn trailers_reach_http2_clients() {
    let origin = H2Origin::start(None).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |_| {}).await;
    let (status, body, trailers) = h2_get(h.addr(), "/grpc-like", &[("te", "trailers")]).await;
    assert_eq!((status.as_u16(), &body[..]), (200, &b"payload"[..]));
    let trailers = trailers.expect("trailers");
    assert_eq!((trailers["grpc-status"].to_str().unwrap(), trailers["grpc-message"].to_str().unwrap()), ("0", "fine"));
    // An HTTP/1.1 client gets the body whole, without them (HTTP/1.1 sends only trailers
    // announced in the head, which gRPC origins do not announce), whether it asked for them
    // or not; the origin is not told that trailers are welcome on its behalf.
    let reply = h.get("/grpc-like").await;
    assert_eq!((reply.status.as_u16(), reply.text().as_str()), (200, "payload"));
    let raw = sluice_testkit::client::raw(
        h.addr(),
        b"GET /grpc-like HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(raw.ends_with("\r\n7\r\npayload\r\n0\r\n\r\n"), "{raw}");
    let te: Vec<_> = origin.requests("/grpc-like").into_iter().map(|seen| seen.te).collect();
    assert_eq!(te, [Some("trailers".to_owned()), None, None]);
}

#[tokio::test]
async fn host_goes_as_the_authority() {
    let origin = H2Origin::start(None).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |_| {}).await;
    assert_eq!(h.get("/cached").await.status, 200);
    let preserving = proxy_to(&format!("http://{}", origin.addr), |route| route.preserve_host = true).await;
    assert_eq!(preserving.get_with("/cached", &[("host", "www.example")]).await.status, 200);
    let seen = origin.requests("/cached");
    let authorities: Vec<_> = seen.iter().map(|seen| (seen.authority.clone(), seen.host.clone())).collect();
    assert_eq!(authorities, [(Some(origin.addr.to_string()), None), (Some("www.example".to_owned()), None)]);
}

#[tokio::test]
async fn responses_are_cached_and_a_reset_stream_is_not() {
    let origin = H2Origin::start(None).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |_| {}).await;
    assert_eq!(h.get("/cached").await.text(), "cached over h2");
    let hit = h.get("/cached").await;
    assert_eq!(hit.text(), "cached over h2");
    assert!(common::cache_status(&hit).contains("hit"), "{}", common::cache_status(&hit));
    assert_eq!(origin.requests("/cached").len(), 1);

    let broken = h.get("/broken").await;
    assert_eq!(broken.status, 200, "the head came before the reset");
    assert_ne!(broken.text(), "part of it", "the body was cut short, not ended");
    h.get("/broken").await;
    assert_eq!(origin.requests("/broken").len(), 2, "the cut body was not stored");
}

#[tokio::test]
async fn a_broken_connection_is_replaced() {
    let origin = H2Origin::start(None).await;
    let h = proxy_to(&format!("http://{}", origin.addr), |route| route.cache = false).await;
    assert_eq!(h.get("/cached").await.status, 200);
    origin.break_connections();
    let again = h.get("/cached").await;
    assert_eq!((again.status.as_u16(), again.text().as_str()), (200, "cached over h2"));
    assert_eq!(origin.connections.load(SeqCst), 2);
}

#[tokio::test]
async fn a_pool_of_http2_origins_fails_over_and_balances() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (a, b) = (H2Origin::start(None).await, H2Origin::start(None).await);
    let origins = [dead, a.addr, b.addr].map(|addr| format!("http://{addr}")).to_vec();
    let h = Harness::build(Mode::Reverse, move |c| {
        c.route[0] = RouteConfig { origins, http2: true, cache: false, ..RouteConfig::default() };
    })
    .await;
    for _ in 0..4 {
        let reply = h.get("/cached").await;
        assert_eq!((reply.status.as_u16(), reply.text().as_str()), (200, "cached over h2"));
    }
    let served = (a.requests("/cached").len(), b.requests("/cached").len());
    assert!(served.0 >= 1 && served.1 >= 1 && served.0 + served.1 == 4, "{served:?}");
}

#[tokio::test]
async fn requests_waiting_for_a_connect_that_fails_fail_with_it() {
    // A TLS origin that accepts and then says nothing: its handshake never ends.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            counted.fetch_add(1, SeqCst);
            held.push(tcp);
        }
    });
    let h = proxy_to(&format!("https://{addr}"), |route| {
        route.connect_timeout = Some(Dur(std::time::Duration::from_millis(300)));
    })
    .await;
    let replies = get_at_once(&h, "/s", 5).await;
    assert!(replies.iter().all(|reply| reply.status == 504), "{replies:?}");
    assert_eq!(accepted.load(SeqCst), 1, "one connect tried, not one after another");
}

#[tokio::test]
async fn an_origin_that_speaks_only_http1_gets_a_502() {
    // hyper's HTTP/1.1 server, which closes a connection that opens with HTTP/2's preface.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let counted = counted.clone();
            let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                counted.fetch_add(1, SeqCst);
                async { Ok::<_, BoxError>(Response::new(Empty::<Bytes>::new())) }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service));
        }
    });
    let h = proxy_to(&format!("http://{addr}"), |_| {}).await;
    let reply = h.get("/s").await;
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert_eq!(requests.load(SeqCst), 0);
}

#[tokio::test]
async fn tls_origins_are_asked_for_h2_by_alpn() {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let acceptor = |alpn: &[u8]| {
        let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = vec![alpn.to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    };
    let origin = H2Origin::start(Some(acceptor(b"h2"))).await;
    let h = proxy_to(&format!("https://{}", origin.addr), |_| {}).await;
    let reply = h.get("/cached").await;
    assert_eq!((reply.status.as_u16(), reply.text().as_str()), (200, "cached over h2"));
    assert_eq!(origin.requests("/cached")[0].version, Version::HTTP_2);

    // A TLS server that offers only HTTP/1.1 refuses the handshake (no common protocol).
    let http1_only = H2Origin::start(Some(acceptor(b"http/1.1"))).await;
    let h = proxy_to(&format!("https://{}", http1_only.addr), |_| {}).await;
    let reply = h.get("/cached").await;
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(http1_only.requests("/cached").is_empty());
}

#[test]
fn http2_does_not_apply_to_files() {
    let err = common::check_route("path_prefix = \"/f\"\nhttp2 = true\nfiles = { root = \"/tmp\" }\n").unwrap_err();
    assert!(err.contains("http2 does not apply"), "{err}");
    common::check_route("path_prefix = \"/g\"\nhttp2 = true\norigin = \"http://127.0.0.1:9\"\n").unwrap();
}
