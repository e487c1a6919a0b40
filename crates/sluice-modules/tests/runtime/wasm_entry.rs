//! A Proxy-Wasm plugin configured through `[[module]]`, and one loaded and unloaded through
//! the admin API.

use crate::support::{add_headers_entry, plugin, Proxy};
use http::StatusCode;
use sluice_testkit::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_plugin_configured_in_a_module_entry_edits_proxied_responses() {
    let proxy = Proxy::start(&add_headers_entry("headers")).await;
    proxy.origin.on("/a", Reply::ok("hello").header("cache-control", "max-age=60"));
    for _ in 0..2 {
        // A miss, then a hit: the plugin sees the response towards the client both times.
        let reply = proxy.get("/a").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "hello");
        assert_eq!(reply.header("x-wasm-1"), "one");
        assert_eq!(reply.header("x-wasm-4"), "four");
    }
    assert_eq!(proxy.origin.hits("/a"), 1);

    let list = proxy.admin("GET", "/modules", None, None).await;
    assert_eq!(list.status, StatusCode::OK);
    let list: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(
        list,
        serde_json::json!([{
            "name": "headers", "kind": "wasm", "order": 0, "state": "loaded", "on_error": "open",
            "modules": ["headers"],
            "settings": { "path": plugin("add_headers").display().to_string(), "instances": 2 },
        }])
    );
    let stats = proxy.admin("GET", "/modules/headers/stats", None, None).await;
    assert_eq!(stats.status, StatusCode::OK, "the plugin's own admin endpoint: {}", stats.text());
    assert!(stats.text().contains("\"stats\""), "{}", stats.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_loaded_through_the_admin_api_runs_until_it_is_unloaded() {
    let proxy = Proxy::start("[[module]]\nname = \"noop\"\n").await;
    proxy.origin.on("/b", Reply::ok("plain"));
    assert_eq!(proxy.get("/b").await.header("x-wasm-1"), "");

    let spec = serde_json::json!({
        "kind": "wasm",
        "on_error": "closed",
        "settings": { "path": plugin("add_headers"), "instances": 2 },
        "position": 0,
    });
    let put = proxy.admin("PUT", "/modules/late", Some("application/json"), Some(&spec.to_string())).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text());
    let entry: serde_json::Value = serde_json::from_slice(&put.body).unwrap();
    assert_eq!((entry["kind"].as_str(), entry["order"].as_u64()), (Some("wasm"), Some(0)));
    let reply = proxy.get("/b").await;
    assert_eq!((reply.text().as_str(), reply.header("x-wasm-2")), ("plain", "two"));
    // The running configuration shows the entry as loaded, before the file's.
    let running = proxy.admin("GET", "/config", None, None).await;
    let running: toml::Table = running.text().parse().unwrap();
    let entries = running["module"].as_array().unwrap();
    let names: Vec<_> = entries.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["late", "noop"]);
    assert_eq!(entries[0]["settings"]["path"].as_str(), Some(plugin("add_headers").display().to_string().as_str()));

    // Reload from the path alone (text/plain): the other settings stay.
    let path = plugin("add_headers").display().to_string();
    let put = proxy.admin("PUT", "/modules/late", Some("text/plain"), Some(&path)).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text());
    let entry: serde_json::Value = serde_json::from_slice(&put.body).unwrap();
    assert_eq!((entry["on_error"].as_str(), entry["order"].as_u64()), (Some("closed"), Some(0)));
    assert_eq!(proxy.get("/b").await.header("x-wasm-2"), "two");

    // A TOML entry, as in the configuration file, reloads it too.
    let toml = format!("kind = \"wasm\"\n[settings]\npath = {path:?}\n");
    let put = proxy.admin("PUT", "/modules/late", Some("application/toml"), Some(&toml)).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text());

    let delete = proxy.admin("DELETE", "/modules/late", None, None).await;
    assert_eq!(delete.status, StatusCode::OK, "{}", delete.text());
    let reply = proxy.get("/b").await;
    assert_eq!((reply.status, reply.header("x-wasm-2")), (StatusCode::OK, ""));
    assert_eq!(proxy.admin("GET", "/modules/late", None, None).await.status, StatusCode::NOT_FOUND);
    let names: Vec<_> = proxy.manager.statuses().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["noop"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_under_way_finishes_on_the_plugin_it_started_with() {
    let proxy = Proxy::start(&add_headers_entry("headers")).await;
    // The origin holds its answer long enough for the unload to complete first (checked
    // below, so a slow machine fails loudly instead of proving nothing).
    proxy.origin.on("/slow", Reply::ok("slow").delay(std::time::Duration::from_secs(3)));
    let (addr, url) = (proxy.addr(), proxy.origin.url("/slow"));
    let slow = tokio::spawn(async move { sluice_testkit::client::get(addr, &url, &[]).await });
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while proxy.origin.hits("/slow") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the request never reached the origin");
        tokio::task::yield_now().await;
    }
    let delete = proxy.admin("DELETE", "/modules/headers", None, None).await;
    assert_eq!(delete.status, StatusCode::OK);
    assert!(!slow.is_finished(), "the response came before the unload finished; the test proves nothing");
    assert_eq!(proxy.get("/fast").await.header("x-wasm-1"), "", "a new request sits the plugin out");
    let reply = slow.await.unwrap();
    assert_eq!((reply.text().as_str(), reply.header("x-wasm-1")), ("slow", "one"), "the old request kept it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_holds_bodies_back_unchanged_needs_no_declared_edits() {
    // The Rust SDK's http_body example pauses every body until its end; a body it has
    // nothing to redact keeps its length and its Content-Length.
    let entry = format!(
        "[[module]]\nname = \"hold\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\nplugin_config = \"hold\"\n",
        plugin("body_transform").display().to_string()
    );
    let proxy = Proxy::start(&entry).await;
    let body: String = (0..300_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    proxy.origin.on("/large", Reply::ok(body.clone()).header("cache-control", "no-store"));
    let reply = proxy.get("/large").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-length"), "300000");
    assert!(reply.text() == body, "the whole body, unchanged");
    // A request body held back the same way reaches the origin whole.
    proxy.origin.on("/upload", Reply::ok("stored"));
    let target = proxy.origin.url("/upload");
    let sent = sluice_testkit::client::send(proxy.addr(), "POST", &target, &[], Some(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text());
    assert_eq!(proxy.origin.last_request("/upload").unwrap().body.len(), 300_000);
}
