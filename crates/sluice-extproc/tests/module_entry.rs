//! An ext_proc helper configured through a `[[module]]` entry (`kind = "extproc"`), built by
//! `sluice_modules::Factory` as `sluice serve` does: both modules in the chain, end to end
//! with the demo processor, listed and unloaded through the admin API.

use sluice_modules::Factory;
use sluice_proxy::clock::{Clock, ManualClock};
use sluice_proxy::config::Config;
use sluice_proxy::State;
use sluice_testkit::client;
use sluice_testkit::{Origin, Reply};
use std::sync::Arc;
use std::time::Duration;

const DEMO: &str = env!("CARGO_BIN_EXE_sluice-extproc-demo");
const AUTH: (&str, &str) = ("authorization", "Bearer test-token");

/// Polls `done` every few milliseconds for up to 20 s; panics with `what` otherwise.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helper_configured_in_a_module_entry_works_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("helper.sock");
    let text = format!(
        r#"
[[listener]]
addr = "127.0.0.1:0"

[access]
allow_destinations = ["127.0.0.0/8"]

[admin]
addr = "127.0.0.1:0"
token = "test-token"

[[module]]
name = "helper"
kind = "extproc"
on_error = "closed"
[module.settings]
command = {DEMO:?}
args = ["--socket", "{{socket}}"]
socket = {:?}
backoff_initial_ms = 50
message_timeout_ms = 5000
"#,
        socket.display().to_string()
    );
    let config = Config::parse(&text).expect("valid configuration");
    let clock = ManualClock::default();
    let origin_clock = clock.clone();
    let origin = Origin::start(move || origin_clock.now()).await;
    let mut state = State::new(config, Arc::new(clock), Vec::new()).expect("state");
    let manager = Factory::attach(&mut state).expect("the entry builds");
    let proxy = sluice_proxy::start(state).await.expect("start");
    let admin = proxy.admin.expect("admin");

    let list = || async {
        let reply = client::send(admin, "GET", "/modules", &[AUTH], None).await;
        serde_json::from_slice::<serde_json::Value>(&reply.body).expect("JSON")
    };
    let listed = list().await;
    assert_eq!(listed[0]["kind"], "extproc");
    assert_eq!(listed[0]["modules"], serde_json::json!(["helper"]));
    until("the helper to be up", || manager.statuses().first().is_some_and(|s| s.state == "up")).await;
    assert_eq!(list().await[0]["state"], "up");

    origin.on("/a", Reply::ok("from the origin"));
    let reply = client::get(proxy.listeners()[0], &origin.url("/a"), &[("x-demo-remove", "1")]).await;
    assert_eq!(reply.text(), "from the origin");
    assert_eq!(reply.header("x-extproc-demo"), "response", "the helper's response mutation, applied");
    let seen = origin.last_request("/a").expect("the origin was asked");
    assert_eq!(seen.header("x-extproc-demo"), Some("request"), "the helper's request mutation, applied");
    assert!(seen.header("x-demo-remove").is_none());
    let blocked = client::get(proxy.listeners()[0], &origin.url("/blocked/x"), &[]).await;
    assert_eq!(blocked.status, 403);
    let status = client::send(admin, "GET", "/modules/helper/status", &[AUTH], None).await;
    assert_eq!(status.status, 200, "the helper's own admin endpoint: {}", status.text());

    let deleted = client::send(admin, "DELETE", "/modules/helper", &[AUTH], None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let reply = client::get(proxy.listeners()[0], &origin.url("/a"), &[]).await;
    assert_eq!((reply.text().as_str(), reply.header("x-extproc-demo")), ("from the origin", ""));
    // Once no transaction holds its modules, the helper is stopped and its socket removed.
    until("the helper's socket to be removed", || !socket.exists()).await;
    assert_eq!(list().await, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_helper_entry_replaces_the_helper_on_the_same_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("helper.sock");
    let config = Config::parse(
        "[[listener]]\naddr = \"127.0.0.1:0\"\n\n[access]\nallow_destinations = [\"127.0.0.0/8\"]\n\n[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"test-token\"\n",
    )
    .unwrap();
    let clock = ManualClock::default();
    let origin_clock = clock.clone();
    let origin = Origin::start(move || origin_clock.now()).await;
    origin.on("/r", Reply::ok("r"));
    let mut state = State::new(config, Arc::new(clock), Vec::new()).expect("state");
    let manager = Factory::attach(&mut state).expect("no entries");
    let proxy = sluice_proxy::start(state).await.expect("start");
    let admin = proxy.admin.expect("admin");
    let json = |timeout: u64| {
        serde_json::json!({
            "kind": "extproc",
            "settings": {
                "command": DEMO, "args": ["--socket", "{socket}"], "socket": socket,
                "backoff_initial_ms": 50, "message_timeout_ms": timeout,
            },
        })
        .to_string()
    };
    let put = |body: String| async move {
        let headers = [AUTH, ("content-type", "application/json")];
        client::send(admin, "PUT", "/modules/helper", &headers, Some(&body)).await
    };
    let pid = || async {
        let reply = client::send(admin, "GET", "/modules/helper/status", &[AUTH], None).await;
        serde_json::from_slice::<serde_json::Value>(&reply.body).ok().and_then(|s| s["pid"].as_u64())
    };

    assert_eq!(put(json(5000)).await.status, 201);
    until("the helper to be up", || manager.statuses().first().is_some_and(|s| s.state == "up")).await;
    let first = pid().await.expect("the first helper's pid");
    assert_eq!(client::get(proxy.listeners()[0], &origin.url("/r"), &[]).await.header("x-extproc-demo"), "response");

    // A request the old helper holds (until `release` exists) keeps the old modules alive
    // across the change.
    let release = dir.path().join("release");
    let held = {
        let (addr, url, hold) = (proxy.listeners()[0], origin.url("/r"), release.display().to_string());
        tokio::spawn(async move { client::get(addr, &url, &[("x-demo-hold", &hold)]).await })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let reply = client::send(admin, "GET", "/modules/helper/status", &[AUTH], None).await;
        let status: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        if status["in_flight"].as_u64() >= Some(1) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the request never reached the helper: {status}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Changed settings: a new helper on the same socket path; the old one is stopped once no
    // transaction holds it, and must leave the new helper's socket in place.
    assert_eq!(put(json(4000)).await.status, 200);
    until("the new helper to be up", || manager.statuses().first().is_some_and(|s| s.state == "up")).await;
    let second = pid().await.expect("the second helper's pid");
    assert_ne!(first, second);
    assert!(!held.is_finished(), "the held request is still under way on the old helper");
    std::fs::write(&release, b"go").unwrap();
    let reply = held.await.unwrap();
    assert_eq!(
        (reply.text().as_str(), reply.header("x-extproc-demo")),
        ("r", "response"),
        "finished on the old helper"
    );
    until("the old helper to exit", || !std::path::Path::new(&format!("/proc/{first}")).exists()).await;
    assert!(socket.exists(), "the old supervisor removed the new helper's socket");
    let reply = client::get(proxy.listeners()[0], &origin.url("/r"), &[]).await;
    assert_eq!((reply.text().as_str(), reply.header("x-extproc-demo")), ("r", "response"));
    assert_eq!(origin.last_request("/r").unwrap().header("x-extproc-demo"), Some("request"));
}

/// Two ext_proc entries on one socket would talk to one helper: refused when checked
/// (`--check-config`) and when configured, naming both entries.
#[test]
fn two_helper_entries_on_one_socket_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("shared.sock");
    let entry = |name: &str| {
        format!(
            "[[module]]\nname = \"{name}\"\nkind = \"extproc\"\n[module.settings]\ncommand = {DEMO:?}\nsocket = {:?}\n",
            socket.display().to_string()
        )
    };
    let listener = "[[listener]]\naddr = \"127.0.0.1:0\"\n";
    let config = Config::parse(&format!("{listener}{}{}", entry("one"), entry("two"))).expect("parses");
    let error = sluice_proxy::module_manager::check_entries(&Factory::default(), &config.module).unwrap_err();
    assert!(error.contains("[[module]] one") && error.contains("[[module]] two"), "{error}");
    assert!(error.contains("shared.sock"), "{error}");
    let mut state = State::new(config, Arc::new(ManualClock::default()), Vec::new()).expect("state");
    let error = Factory::attach(&mut state).unwrap_err().to_string();
    assert!(error.contains("[[module]] one") && error.contains("[[module]] two"), "{error}");

    // A socket in a directory that does not exist is reported too.
    let text = format!("{listener}{}", entry("one").replace("shared.sock", "missing/h.sock"));
    let config = Config::parse(&text).expect("parses");
    let error = sluice_proxy::module_manager::check_entries(&Factory::default(), &config.module).unwrap_err();
    assert!(error.contains("does not exist"), "{error}");
}
