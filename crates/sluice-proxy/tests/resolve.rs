//! The modules' `resolve` phase (docs/modules.md, "Resolving origins"): a module pins the
//! addresses an origin's host connects to (also after an asynchronous lookup with `Defer`),
//! or answers instead; pinned connections are pooled apart; hits never resolve. Real sockets
//! on 127.0.0.1; the origin is named by a host that no resolver knows.

mod common;

use common::Harness;
use http::StatusCode;
use sluice_module::{FailurePolicy, Flow, LocalResponse, Module, Resolution, Txn, TxnInfo};
use sluice_proxy::config::Mode;
use sluice_proxy::LoadedModule;
use sluice_testkit::{client, Reply};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A host name no resolver knows (RFC 6761 reserves `.invalid`).
const UNKNOWN_HOST: &str = "origin.sluice-test.invalid";

/// Resolves [`UNKNOWN_HOST`] to the test origin, blocks `blocked.invalid`, and records the
/// hosts it was asked about.
struct Pinner {
    /// The test origin's address, known once the harness has started it.
    origin: Arc<OnceLock<SocketAddr>>,
    deferred: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

struct PinnerTxn {
    origin: SocketAddr,
    deferred: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Module for Pinner {
    fn name(&self) -> &str {
        "pinner"
    }
    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        let origin = *self.origin.get().expect("the origin started before any request");
        Some(Box::new(PinnerTxn { origin, deferred: self.deferred, asked: Arc::clone(&self.asked) }))
    }
}

impl Txn for PinnerTxn {
    fn resolve(&mut self, _: &TxnInfo, resolution: &Resolution) -> Flow {
        self.asked.lock().unwrap().push(format!("{}:{}", resolution.host(), resolution.port()));
        if resolution.host() == "blocked.invalid" {
            return Flow::Respond(LocalResponse::text(StatusCode::FORBIDDEN, "blocked host\n"));
        }
        if resolution.host() != UNKNOWN_HOST {
            return Flow::Continue;
        }
        if !self.deferred {
            resolution.set(vec![self.origin]);
            return Flow::Continue;
        }
        // An asynchronous lookup: the answer is set on a clone, from the deferred work.
        let later = resolution.clone();
        let origin = self.origin;
        Flow::Defer {
            work: Box::pin(async move {
                tokio::task::yield_now().await;
                later.set(vec![origin]);
                Flow::Continue
            }),
            deadline: Duration::from_secs(5),
        }
    }
}

async fn proxy(deferred: bool) -> (Harness, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let origin = Arc::new(OnceLock::new());
    let module = Pinner { origin: Arc::clone(&origin), deferred, asked: Arc::clone(&asked) };
    let module = LoadedModule { module: Arc::new(module), on_error: FailurePolicy::Closed };
    let h = Harness::build_with_modules(
        Mode::Forward,
        |_, addr| {
            origin.set(addr).unwrap();
        },
        vec![module],
    )
    .await;
    (h, asked)
}

/// `path` on the unknown host, at the test origin's port.
fn unknown_url(h: &Harness, path: &str) -> String {
    format!("http://{UNKNOWN_HOST}:{}{path}", h.origin.addr.port())
}

#[tokio::test]
async fn a_module_pins_an_unknown_host_to_an_address() {
    for deferred in [false, true] {
        let (h, asked) = proxy(deferred).await;
        h.origin.on("/pinned", Reply::ok("reached").header("Cache-Control", "max-age=60"));
        let url = unknown_url(&h, "/pinned");
        let reply = client::get(h.addr(), &url, &[]).await;
        assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "reached"), "deferred: {deferred}");
        let sent = h.origin.last_request("/pinned").unwrap();
        assert_eq!(sent.header("host"), Some(format!("{UNKNOWN_HOST}:{}", h.origin.addr.port()).as_str()));
        assert_eq!(*asked.lock().unwrap(), vec![format!("{UNKNOWN_HOST}:{}", h.origin.addr.port())]);

        // A hit needs no origin, so no resolution.
        assert_eq!(client::get(h.addr(), &url, &[]).await.status, 200);
        assert_eq!(asked.lock().unwrap().len(), 1);
        assert_eq!(h.origin.hits("/pinned"), 1);
    }
}

#[tokio::test]
async fn without_a_pin_the_system_resolver_decides_and_pinned_connections_pool_apart() {
    let (h, asked) = proxy(false).await;
    h.origin.on("/plain", Reply::ok("plain"));
    h.origin.on("/pinned", Reply::ok("pinned"));
    // 127.0.0.1 needs no module: the phase runs and leaves it alone.
    assert_eq!(h.send("POST", "/plain", &[], Some("x")).await.status, 200);
    assert_eq!(client::send(h.addr(), "POST", &unknown_url(&h, "/pinned"), &[], Some("x")).await.status, 200);
    assert_eq!(h.send("POST", "/plain", &[], Some("x")).await.status, 200);
    assert_eq!(asked.lock().unwrap().len(), 3);
    assert_eq!(h.origin.connections(), 2, "one pooled connection each, the pinned one apart");

    // Unknown and not pinned: the system resolver fails it (502), or takes longer than the
    // connect timeout on a machine whose DNS does not answer (504).
    let reply = client::get(h.addr(), "http://unpinned.sluice-test.invalid/x", &[]).await;
    assert!(matches!(reply.status.as_u16(), 502 | 504), "{}", reply.status);
    assert_eq!(asked.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn a_module_answers_for_a_host_it_blocks() {
    let (h, _) = proxy(false).await;
    let reply = client::get(h.addr(), "http://blocked.invalid/anything", &[]).await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "blocked host\n");
    let reply = client::send(h.addr(), "POST", "http://blocked.invalid/form", &[], Some("x")).await;
    assert_eq!(reply.status, 403);
}

#[tokio::test]
async fn addresses_a_module_pins_pass_the_destination_acl() {
    // With loopback denied again (the harness allows it), a name pinned to the loopback
    // origin is refused as the address itself would be: the ACL judges the pinned addresses.
    let origin = Arc::new(OnceLock::new());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let module = Pinner { origin: Arc::clone(&origin), deferred: false, asked: Arc::clone(&asked) };
    let module = LoadedModule { module: Arc::new(module), on_error: FailurePolicy::Closed };
    let h = Harness::build_with_modules(
        Mode::Forward,
        |c, addr| {
            origin.set(addr).unwrap();
            c.access.allow_destinations = Vec::new();
        },
        vec![module],
    )
    .await;
    h.origin.on("/pinned", Reply::ok("reached"));
    let reply = client::get(h.addr(), &unknown_url(&h, "/pinned"), &[]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert!(reply.text().contains("denied by access.deny_destinations"), "{}", reply.text());
    assert_eq!(asked.lock().unwrap().len(), 1, "the module was asked");
    assert_eq!(h.origin.hits("/pinned"), 0);
}
