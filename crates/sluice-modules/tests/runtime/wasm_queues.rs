//! Proxy-Wasm shared queues on a real proxy (test plugin `queue`, two instances): HTTP
//! contexts enqueue, the root context that registered the queue last is told
//! (`proxy_on_queue_ready`, delivered to its instance whichever instance enqueued) and
//! dequeues; any context can dequeue; an unknown queue is not found; one plugin feeds
//! another's queue by its VM id. Queues are the process's: each test names its plugins
//! apart.

use crate::support::{plugin, Proxy};
use http::StatusCode;
use sluice_testkit::client;

/// A `[[module]]` entry for the `queue` plugin, named `name` (its VM id).
fn entry(name: &str) -> String {
    format!(
        "[[module]]\nname = {name:?}\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 2\n",
        plugin("queue").display().to_string()
    )
}

async fn ask(proxy: &Proxy, header: (&str, &str)) -> client::Reply {
    ask_with(proxy, &[header]).await
}

async fn ask_with(proxy: &Proxy, headers: &[(&str, &str)]) -> client::Reply {
    client::get(proxy.addr(), &proxy.origin.url("/"), headers).await
}

/// Waits (up to 10 s) until `plugin` answers `x-read` with `expected`.
async fn until_received(proxy: &Proxy, plugin: &str, expected: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let received = ask_with(proxy, &[("x-plugin", plugin), ("x-read", "1")]).await.text();
        if received == expected {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{plugin}'s root context took only {received:?}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_enqueued_by_requests_reach_the_owning_root_context_in_order() {
    let proxy = Proxy::start(&entry("in-order")).await;
    for value in ["a", "b", "c", "d"] {
        let reply = ask(&proxy, ("x-enqueue", value)).await;
        assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "enqueued"));
    }
    // Delivery runs on its own thread: wait for the root context's record of what it took.
    until_received(&proxy, "in-order", "a,b,c,d").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_feeds_another_plugins_queue_by_its_vm_id() {
    let proxy = Proxy::start(&format!("{}{}", entry("collector"), entry("feeder"))).await;
    for value in ["x", "y"] {
        let reply = ask_with(&proxy, &[("x-plugin", "feeder"), ("x-vm", "collector"), ("x-enqueue", value)]).await;
        assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "enqueued"));
    }
    until_received(&proxy, "collector", "x,y").await;
    // The feeder's own queue of that name is another one, and got nothing.
    assert_eq!(ask_with(&proxy, &[("x-plugin", "feeder"), ("x-read", "1")]).await.text(), "");
    // An unknown VM id has no queues.
    let reply = ask_with(&proxy, &[("x-plugin", "feeder"), ("x-vm", "nobody"), ("x-enqueue", "z")]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_context_dequeues_and_unknown_queues_are_not_found() {
    let proxy = Proxy::start(&entry("dequeuers")).await;
    // `parked` is left alone by its owner: requests take its items, oldest first.
    assert_eq!(ask(&proxy, ("x-park", "first")).await.status, StatusCode::OK);
    assert_eq!(ask(&proxy, ("x-park", "second")).await.status, StatusCode::OK);
    let reply = ask(&proxy, ("x-unpark", "1")).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "first"));
    assert_eq!(ask(&proxy, ("x-unpark", "1")).await.text(), "second");
    assert_eq!(ask(&proxy, ("x-unpark", "1")).await.status, StatusCode::NO_CONTENT);

    let reply = ask(&proxy, ("x-enqueue-to", "nowhere")).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::NOT_FOUND, "no such queue"));
    // The proxy passes requests the plugin leaves alone.
    proxy.origin.on("/", sluice_testkit::Reply::ok("origin"));
    assert_eq!(client::get(proxy.addr(), &proxy.origin.url("/"), &[]).await.text(), "origin");
}
