//! The module admin endpoints refuse bad requests with clear 4xx answers and change nothing.

use crate::support::{add_headers_entry, plugin, Proxy};
use http::StatusCode;
use sluice_testkit::client;
use sluice_testkit::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_admin_errors_are_clear_and_change_nothing() {
    let proxy = Proxy::start(&add_headers_entry("headers")).await;
    proxy.origin.on("/c", Reply::ok("still served"));
    let admin = proxy.admin_addr();

    // No token, or a wrong one: 401, for reading and for changing.
    assert_eq!(client::send(admin, "GET", "/modules", &[], None).await.status, StatusCode::UNAUTHORIZED);
    let wrong = [("authorization", "Bearer nope")];
    assert_eq!(client::send(admin, "DELETE", "/modules/headers", &wrong, None).await.status, StatusCode::UNAUTHORIZED);
    let body = Some("{\"kind\": \"wasm\"}");
    assert_eq!(client::send(admin, "PUT", "/modules/x", &[], body).await.status, StatusCode::UNAUTHORIZED);

    // Unknown modules: 404.
    for (method, path) in [("GET", "/modules/nope"), ("DELETE", "/modules/nope"), ("GET", "/modules/nope/stats")] {
        let reply = proxy.admin(method, path, None, None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {path}: {}", reply.text());
        assert!(reply.text().contains("no module nope"), "{}", reply.text());
    }
    let reload = proxy.admin("PUT", "/modules/nope", None, None).await;
    assert_eq!(reload.status, StatusCode::BAD_REQUEST, "nothing to reload: {}", reload.text());

    // Bad specs: 400, saying what is wrong.
    let real = plugin("add_headers").display().to_string();
    let not_wasm = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let cases = [
        (r#"{"kind": "wasm", "settings": {"path": "/nonexistent/p.wasm"}}"#.to_owned(), "no plugin file"),
        (format!(r#"{{"kind": "wasm", "settings": {{"path": {real:?}, "atach": "origin"}}}}"#), "atach"),
        (format!(r#"{{"kind": "wasm", "settings": {{"path": {not_wasm:?}}}}}"#), "[[module]] headers (wasm)"),
        (r#"{"kind": "wsm"}"#.to_owned(), "wsm"),
        (r#"{"kind": "wasm", "settings": "#.to_owned(), "bad JSON"),
        (r#"{"name": "other", "kind": "wasm"}"#.to_owned(), "names module"),
        (
            r#"{"kind": "extproc", "settings": {"command": "/nonexistent/helper", "socket": "/tmp/s"}}"#.to_owned(),
            "no executable",
        ),
        (r#"{"kind": "builtin"}"#.to_owned(), "unknown module"),
    ];
    for (body, expected) in cases {
        let reply = proxy.admin("PUT", "/modules/headers", Some("application/json"), Some(&body)).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text());
        assert!(reply.text().contains(expected), "{body}: expected {expected:?} in {:?}", reply.text());
    }
    let toml = proxy.admin("PUT", "/modules/headers", Some("application/toml"), Some("kind = [")).await;
    assert_eq!(toml.status, StatusCode::BAD_REQUEST);
    let png = proxy.admin("PUT", "/modules/headers", Some("image/png"), Some("x")).await;
    assert_eq!(png.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let post = proxy.admin("POST", "/modules/headers", None, None).await;
    assert_eq!((post.status, post.header("allow")), (StatusCode::METHOD_NOT_ALLOWED, "GET, PUT, DELETE"));
    let bad_name = proxy.admin("PUT", "/modules/a%20b", Some("application/json"), Some(r#"{"kind": "builtin"}"#)).await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);

    // Nothing changed: the plugin still serves, once.
    let list: serde_json::Value =
        serde_json::from_slice(&proxy.admin("GET", "/modules", None, None).await.body).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["state"], "loaded");
    let reply = proxy.get("/c").await;
    assert_eq!((reply.text().as_str(), reply.header("x-wasm-1")), ("still served", "one"));
}
