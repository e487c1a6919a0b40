//! A Proxy-Wasm plugin's HTTP calls (`dispatch_http_call`) on a real proxy: the transaction
//! waits for the call, the plugin reads the answer in `on_http_call_response` and edits the
//! head it paused on or answers locally (test plugin `http_call`, cluster `auth`).

use crate::support::{plugin, Proxy};
use http::StatusCode;
use sluice_proxy::clock::{Clock, ManualClock};
use sluice_testkit::{client, Origin, Reply};

/// A `[[module]]` entry for the `http_call` plugin, its cluster `auth` at `auth` (none: no
/// clusters).
fn entry(auth: Option<&str>) -> String {
    let clusters = auth.map(|url| format!("clusters = {{ auth = {url:?} }}\n")).unwrap_or_default();
    format!(
        "[[module]]\nname = \"asker\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 1\n{clusters}",
        plugin("http_call").display().to_string()
    )
}

async fn get(proxy: &Proxy, path: &str, headers: &[(&str, &str)]) -> client::Reply {
    client::get(proxy.addr(), &proxy.origin.url(path), headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_waits_for_its_http_call_and_acts_on_the_answer() {
    let clock = ManualClock::default();
    let auth = Origin::start(move || clock.now()).await;
    auth.on("/check/ann", Reply::ok("ann-ok"));
    auth.on("/check/bob", Reply::status(401, "unknown user"));
    auth.on("/annotate/k1", Reply::ok("note for k1"));
    auth.on("/check/cy", Reply::ok("again"));
    auth.on("/check/cy-again", Reply::ok("cy-ok"));
    let proxy = Proxy::start(&entry(Some(&auth.url("")))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    proxy.origin.on("/annotated", Reply::ok("annotated").header("x-annotate", "k1"));

    // Allowed: the request goes on with what the call answered.
    let reply = get(&proxy, "/page", &[("x-user", "ann")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "page"));
    let seen = proxy.origin.last_request("/page").expect("the origin got the request");
    assert_eq!(seen.header("x-auth"), Some("ann-ok"));
    let call = auth.last_request("/check/ann").expect("the plugin's call");
    assert_eq!((call.method.as_str(), call.header("host")), ("GET", Some("auth.local")));
    assert_eq!(call.header("x-asked-by"), Some("wasm"));

    // A call made from the answer to another: the request waits for both.
    let reply = get(&proxy, "/page", &[("x-user", "cy")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(proxy.origin.last_request("/page").unwrap().header("x-auth"), Some("cy-ok"));
    assert_eq!((auth.hits("/check/cy"), auth.hits("/check/cy-again")), (1, 1));

    // Denied: answered locally, the origin not asked.
    let reply = get(&proxy, "/page", &[("x-user", "bob")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::FORBIDDEN, "denied: unknown user"));
    assert_eq!(proxy.origin.hits("/page"), 2);

    // No call asked for: the request goes straight through.
    assert_eq!(get(&proxy, "/page", &[]).await.status, StatusCode::OK);
    assert_eq!(auth.hits("/check/ann") + auth.hits("/check/bob"), 2);

    // A call from the response headers: the response waits and gets the answer.
    let reply = get(&proxy, "/annotated", &[]).await;
    assert_eq!((reply.status, reply.header("x-annotation")), (StatusCode::OK, "note for k1"));
    assert_eq!(reply.text(), "annotated");
    // The plugin's five calls, one after the other, went over one kept connection.
    assert_eq!(auth.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_answers_gets_envoys_503_and_an_unknown_cluster_an_error() {
    // Nothing listens on the cluster's port: the plugin gets the 503 Envoy's HTTP client
    // makes up (plugins written for Envoy read its `:status`), and denies the request.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let proxy = Proxy::start(&entry(Some(&format!("http://{closed}")))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, "/page", &[("x-user", "ann")]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.text(),
        "denied: upstream connect error or disconnect/reset before headers. reset reason: connection failure"
    );
    assert_eq!(proxy.origin.hits("/page"), 0);

    // No cluster `auth`: dispatch_http_call fails at once (the SDK gives BadArgument).
    let proxy = Proxy::start(&entry(None)).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, "/page", &[("x-user", "ann")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::INTERNAL_SERVER_ERROR, "call failed: BadArgument"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_asked_for_together_are_made_at_once_and_answered_in_turn() {
    let clock = ManualClock::default();
    let auth = Origin::start(move || clock.now()).await;
    // The first answer is the slowest: the calls run at the same time, and the answers still
    // come to the plugin in the order it asked.
    auth.on("/check/ann", Reply::ok("ann-ok").delay(std::time::Duration::from_millis(300)));
    auth.on("/check/cy", Reply::ok("cy-ok"));
    auth.on("/check/dee", Reply::ok("dee-ok"));
    auth.on("/check/bob", Reply::status(401, "unknown user"));
    let proxy = Proxy::start(&entry(Some(&auth.url("")))).await;
    proxy.origin.on("/page", Reply::ok("page"));
    let reply = get(&proxy, "/page", &[("x-users", "ann,cy,dee")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "page"));
    assert_eq!(proxy.origin.last_request("/page").unwrap().header("x-auth"), Some("ann-ok,cy-ok,dee-ok"));
    assert_eq!(auth.connections(), 3, "three calls at once, on three connections");
    // One refused: answered locally once every answer is in.
    let reply = get(&proxy, "/page", &[("x-users", "cy,bob")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::FORBIDDEN, "denied: bob"));
    assert_eq!(proxy.origin.hits("/page"), 1);
}
