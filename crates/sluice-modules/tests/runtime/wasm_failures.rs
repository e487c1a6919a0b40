//! A plugin's faults through the real proxy: a callback that loops forever is stopped by its
//! deadline and one that traps loses its instance; the client gets the entry's `on_error`
//! answer and the next request is served by a fresh instance.

use crate::support::{strict_entry, Proxy};
use http::StatusCode;
use sluice_testkit::{client, Reply};
use std::time::{Duration, Instant};

/// GET `path` through `proxy` with `headers`.
async fn get(proxy: &Proxy, path: &str, headers: &[(&str, &str)]) -> client::Reply {
    client::get(proxy.addr(), &proxy.origin.url(path), headers).await
}

/// The plugin's counters from its admin endpoint.
async fn stats(proxy: &Proxy, name: &str) -> serde_json::Value {
    let reply = proxy.admin("GET", &format!("/modules/{name}/stats"), None, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()["stats"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_plugin_failing_closed_is_stopped_by_its_deadline_and_the_next_request_works() {
    let proxy = Proxy::start(&strict_entry("looper", "infinite_loop", "closed")).await;
    proxy.origin.on("/l", Reply::ok("origin"));

    let started = Instant::now();
    let stopped = get(&proxy, "/l", &[("x-loop", "1")]).await;
    assert_eq!(stopped.status, StatusCode::INTERNAL_SERVER_ERROR, "on_error = closed: {}", stopped.text());
    assert!(started.elapsed() < Duration::from_secs(5), "stopped after {:?}", started.elapsed());
    assert_eq!(proxy.origin.hits("/l"), 0, "a closed failure in a request phase never reaches the origin");

    let next = get(&proxy, "/l", &[]).await;
    assert_eq!((next.status, next.text().as_str()), (StatusCode::OK, "origin"));
    let seen = proxy.origin.last_request("/l").expect("reached the origin");
    assert_eq!(seen.header("x-looped"), Some("no"), "a fresh instance ran the callback");
    let stats = stats(&proxy, "looper").await;
    assert_eq!((stats["deadline_kills"].as_u64(), stats["instances_started"].as_u64()), (Some(1), Some(2)), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_plugin_failing_open_is_skipped_for_that_request_only() {
    let proxy = Proxy::start(&strict_entry("looper", "infinite_loop", "open")).await;
    proxy.origin.on("/o", Reply::ok("origin"));

    let skipped = get(&proxy, "/o", &[("x-loop", "1")]).await;
    assert_eq!((skipped.status, skipped.text().as_str()), (StatusCode::OK, "origin"), "on_error = open");
    let seen = proxy.origin.last_request("/o").unwrap();
    assert_eq!(seen.header("x-looped"), None, "the plugin was skipped");

    get(&proxy, "/o", &[]).await;
    assert_eq!(proxy.origin.last_request("/o").unwrap().header("x-looped"), Some("no"));
    assert_eq!(stats(&proxy, "looper").await["deadline_kills"].as_u64(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_plugin_is_recreated_and_the_next_request_gets_a_fresh_instance() {
    let proxy = Proxy::start(&strict_entry("crasher", "trap", "open")).await;
    proxy.origin.on("/t", Reply::ok("origin"));
    let served = |proxy: &Proxy| proxy.origin.last_request("/t").unwrap().header("x-served").map(str::to_owned);

    // The instance counts the requests it served.
    get(&proxy, "/t", &[]).await;
    get(&proxy, "/t", &[]).await;
    assert_eq!(served(&proxy).as_deref(), Some("2"));

    let trapped = get(&proxy, "/t", &[("x-trap", "unreachable")]).await;
    assert_eq!((trapped.status, trapped.text().as_str()), (StatusCode::OK, "origin"), "on_error = open");
    assert_eq!(served(&proxy), None, "the trapped callback changed nothing");

    get(&proxy, "/t", &[]).await;
    assert_eq!(served(&proxy).as_deref(), Some("1"), "a fresh instance, counting from one");
    let stats = stats(&proxy, "crasher").await;
    assert_eq!((stats["crashes"].as_u64(), stats["instances_started"].as_u64()), (Some(1), Some(2)), "{stats}");
}
