//! The modules' CPU pool (`[cpu_pool]`, `TxnInfo::cpu`) through the proxy: deferred CPU work
//! reaches the response, a saturated pool refuses at once so the module can answer, and the
//! job of a client that went away while it was queued never runs.

mod common;

use common::Harness;
use http::{HeaderValue, StatusCode};
use sluice_module::{CpuError, FailurePolicy, Flow, LocalResponse, Module, Txn, TxnInfo};
use sluice_proxy::config::{Config, CpuPoolConfig, Mode};
use sluice_proxy::LoadedModule;
use sluice_testkit::Reply;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A fixed amount of CPU work: FNV-1a over `seed`, `rounds` times over.
fn digest(seed: &str, rounds: u32) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for _ in 0..rounds {
        for byte in seed.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

const ROUNDS: u32 = 200_000;

/// Hashes the request path on the pool at `req_headers` and puts the digest in the
/// response's `x-digest`.
struct Digest;

struct DigestTxn {
    digest: Arc<Mutex<Option<u64>>>,
}

impl Module for Digest {
    fn name(&self) -> &str {
        "digest"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(DigestTxn { digest: Arc::default() }))
    }
}

impl Txn for DigestTxn {
    fn req_headers(&mut self, info: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        let path = req.uri.path().to_owned();
        let job = match info.cpu.spawn(move || digest(&path, ROUNDS)) {
            Ok(job) => job,
            Err(e) => return Flow::Respond(LocalResponse::text(StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
        };
        let slot = Arc::clone(&self.digest);
        Flow::Defer {
            work: Box::pin(async move {
                match job.await {
                    Ok(value) => {
                        *slot.lock().unwrap() = Some(value);
                        Flow::Continue
                    }
                    Err(e) => Flow::Respond(LocalResponse::text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
                }
            }),
            deadline: Duration::from_secs(30),
        }
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        if let Some(value) = *self.digest.lock().unwrap() {
            resp.headers.insert("x-digest", HeaderValue::from_str(&format!("{value:016x}")).unwrap());
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn cpu_work_deferred_to_the_pool_reaches_the_response() {
    let module = LoadedModule { module: Arc::new(Digest), on_error: FailurePolicy::Closed };
    let h = Harness::forward_with(vec![module]).await;
    h.origin.on("/hash/me", Reply::ok("origin body"));
    let reply = h.get("/hash/me").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "origin body");
    assert_eq!(reply.header("x-digest"), format!("{:016x}", digest("/hash/me", ROUNDS)));
}

/// Runs every request's job on the pool; the job of `/block` tells `started` it runs and
/// waits for `release`. A refused job answers 503 (the module's choice: fail closed).
struct Gate {
    started: Mutex<mpsc::Sender<()>>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

struct GateTxn {
    started: mpsc::Sender<()>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl Module for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(GateTxn { started: self.started.lock().unwrap().clone(), release: Arc::clone(&self.release) }))
    }
}

impl Txn for GateTxn {
    fn req_headers(&mut self, info: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        let blocks = req.uri.path() == "/block";
        let (started, release) = (self.started.clone(), Arc::clone(&self.release));
        let spawned = info.cpu.spawn(move || {
            if blocks {
                started.send(()).unwrap();
                release.lock().unwrap().recv().unwrap();
            }
        });
        match spawned {
            Ok(job) => Flow::Defer {
                work: Box::pin(async move {
                    job.await.unwrap();
                    Flow::Continue
                }),
                deadline: Duration::from_secs(30),
            },
            Err(CpuError::Full) => Flow::Respond(LocalResponse::text(StatusCode::SERVICE_UNAVAILABLE, "busy")),
            Err(e) => panic!("unexpected {e}"),
        }
    }
}

#[tokio::test]
async fn a_full_pool_refuses_at_once_and_serves_again_when_a_thread_frees() {
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let gate = Gate { started: Mutex::new(started_tx), release: Arc::new(Mutex::new(release_rx)) };
    let module = LoadedModule { module: Arc::new(gate), on_error: FailurePolicy::Closed };
    let one_thread_no_queue = |c: &mut Config, _| c.cpu_pool = CpuPoolConfig { threads: 1, queue: 0 };
    let h = Arc::new(Harness::build_with_modules(Mode::Forward, one_thread_no_queue, vec![module]).await);
    h.origin.on("/block", Reply::ok("blocked, then served"));
    h.origin.on("/other", Reply::ok("other"));

    let blocked = tokio::spawn({
        let h = Arc::clone(&h);
        async move { h.get("/block").await }
    });
    tokio::task::spawn_blocking(move || started.recv().unwrap()).await.unwrap();
    // The only thread is taken and there is no queue: refused without waiting for it.
    let refused = tokio::time::timeout(Duration::from_secs(10), h.get("/other")).await.expect("refused at once");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.text(), "busy");
    assert_eq!(h.origin.hits("/other"), 0);

    release.send(()).unwrap();
    let served = blocked.await.unwrap();
    assert_eq!(served.status, 200);
    assert_eq!(served.text(), "blocked, then served");
    let after = h.get("/other").await;
    assert_eq!(after.status, 200, "the thread is free again");
    assert_eq!(after.text(), "other");
}

#[test]
fn the_pool_is_configured_from_the_file() {
    let config = Config::parse("[cpu_pool]\nthreads = 3\nqueue = 7\n").unwrap();
    let pool = config.cpu_pool.build();
    assert_eq!((pool.threads(), pool.queue()), (3, 7));
    let defaults = Config::parse("").unwrap().cpu_pool.build();
    assert_eq!(defaults.threads(), std::thread::available_parallelism().unwrap().get());
    assert_eq!(defaults.queue(), sluice_module::CpuPool::DEFAULT_QUEUE);
}

/// Reports what happens to every request's job on `events`: `admitted PATH` (the pool took
/// it), `run PATH` (it started), `drop PATH` (the transaction's state went). The job of
/// `/block` then waits for `release`.
struct Lane {
    events: Mutex<mpsc::Sender<String>>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

struct LaneTxn {
    path: String,
    events: mpsc::Sender<String>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl Module for Lane {
    fn name(&self) -> &str {
        "lane"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        let events = self.events.lock().unwrap().clone();
        Some(Box::new(LaneTxn { path: String::new(), events, release: Arc::clone(&self.release) }))
    }
}

impl Txn for LaneTxn {
    fn req_headers(&mut self, info: &TxnInfo, req: &mut http::request::Parts) -> Flow {
        self.path = req.uri.path().to_owned();
        let (path, events, release) = (self.path.clone(), self.events.clone(), Arc::clone(&self.release));
        let job = info.cpu.spawn(move || {
            events.send(format!("run {path}")).unwrap();
            if path == "/block" {
                release.lock().unwrap().recv().unwrap();
            }
        });
        let Ok(job) = job else { return Flow::Respond(LocalResponse::text(StatusCode::SERVICE_UNAVAILABLE, "busy")) };
        self.events.send(format!("admitted {}", self.path)).unwrap();
        Flow::Defer {
            work: Box::pin(async move {
                job.await.unwrap();
                Flow::Continue
            }),
            deadline: Duration::from_secs(30),
        }
    }
}

impl Drop for LaneTxn {
    fn drop(&mut self) {
        let _ = self.events.send(format!("drop {}", self.path));
    }
}

/// Receives events into `seen` until `wanted` is among them (10 s at most).
async fn wait_for(events: &Arc<Mutex<mpsc::Receiver<String>>>, seen: &mut Vec<String>, wanted: &str) {
    while !seen.iter().any(|event| event == wanted) {
        let events = Arc::clone(events);
        let event = tokio::task::spawn_blocking(move || events.lock().unwrap().recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap()
            .unwrap_or_else(|_| panic!("no {wanted:?} after {seen:?}"));
        seen.push(event);
    }
}

#[tokio::test]
async fn a_queued_job_whose_client_went_away_never_runs_and_frees_its_place() {
    let (events_tx, events) = mpsc::channel();
    let events = Arc::new(Mutex::new(events));
    let (release, release_rx) = mpsc::channel();
    let lane = Lane { events: Mutex::new(events_tx), release: Arc::new(Mutex::new(release_rx)) };
    let module = LoadedModule { module: Arc::new(lane), on_error: FailurePolicy::Closed };
    let one_thread_one_queued = |c: &mut Config, _| c.cpu_pool = CpuPoolConfig { threads: 1, queue: 1 };
    let h = Arc::new(Harness::build_with_modules(Mode::Forward, one_thread_one_queued, vec![module]).await);
    for path in ["/block", "/queued", "/after"] {
        h.origin.on(path, Reply::ok(path));
    }
    let mut seen = Vec::new();

    let blocked = tokio::spawn({
        let h = Arc::clone(&h);
        async move { h.get("/block").await }
    });
    wait_for(&events, &mut seen, "run /block").await;

    // A client whose job waits in the queue behind /block, and who then leaves.
    {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
        let request = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", h.origin.url("/queued"));
        stream.write_all(request.as_bytes()).await.unwrap();
        wait_for(&events, &mut seen, "admitted /queued").await;
    }
    wait_for(&events, &mut seen, "drop /queued").await;

    // Its place in the queue is free again: /after is admitted while /block still runs.
    let after = tokio::spawn({
        let h = Arc::clone(&h);
        async move { h.get("/after").await }
    });
    wait_for(&events, &mut seen, "admitted /after").await;
    release.send(()).unwrap();
    assert_eq!(blocked.await.unwrap().text(), "/block");
    assert_eq!(after.await.unwrap().text(), "/after");
    // /queued asked for the thread before /after did: had it not been cancelled, it would have run first.
    seen.extend(events.lock().unwrap().try_iter());
    assert!(seen.iter().any(|event| event == "run /after"), "{seen:?}");
    assert!(!seen.iter().any(|event| event == "run /queued"), "the abandoned job never ran: {seen:?}");
    assert_eq!(h.origin.hits("/queued"), 0);
}
