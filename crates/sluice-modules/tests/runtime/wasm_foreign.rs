//! Sluice's foreign functions through the real proxy: `sluice.cache_validate` revalidates a
//! stored response with its origin, `sluice.log_field` adds to the access log line.

use crate::support::{plugin, until, Proxy};
use http::StatusCode;
use sluice_testkit::{client, Reply};

/// A `[[module]]` entry for the foreign-function test plugin.
fn foreign_entry() -> String {
    format!(
        "[[module]]\nname = \"foreign\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\n",
        plugin("foreign").display().to_string()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_validate_sends_a_conditional_request_to_the_origin() {
    let proxy = Proxy::start(&foreign_entry()).await;
    proxy
        .origin
        .on("/v", Reply::ok("stored").header("cache-control", "max-age=600").header("etag", "\"v1\"").validating());
    assert_eq!(proxy.get("/v").await.text(), "stored");
    assert_eq!(proxy.origin.hits("/v"), 1);

    let url = proxy.origin.url("/v");
    let headers = [("x-call", "sluice.cache_validate"), ("x-arg", url.as_str())];
    let reply = client::get(proxy.addr(), &proxy.origin.url("/call"), &headers).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "1"), "one revalidation started");
    // It runs in the background: the plugin's call returned before the origin answered.
    until("the revalidation to reach the origin", || proxy.origin.hits("/v") == 2).await;
    let conditional = proxy.origin.last_request("/v").unwrap();
    assert_eq!(conditional.header("if-none-match"), Some("\"v1\""));

    let nothing = proxy.origin.url("/never-stored");
    let headers = [("x-call", "sluice.cache_validate"), ("x-arg", nothing.as_str())];
    let reply = client::get(proxy.addr(), &proxy.origin.url("/call"), &headers).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "0"), "nothing stored, nothing started");
    assert_eq!(proxy.origin.hits("/never-stored"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_field_reaches_the_access_log_line() {
    let dir = std::env::temp_dir().join(format!("sluice-wasm-log-field-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let _ = std::fs::remove_file(&log);
    let proxy =
        Proxy::start(&format!("[log]\naccess_log = {:?}\n\n{}", log.display().to_string(), foreign_entry())).await;
    proxy.origin.on("/f", Reply::ok("fine"));

    let reply = client::get(proxy.addr(), &proxy.origin.url("/f"), &[("x-log", "plugin=wasm")]).await;
    assert_eq!((reply.status, reply.text().as_str()), (StatusCode::OK, "fine"));
    let line_of = |log: &std::path::Path| {
        std::fs::read_to_string(log).ok()?.lines().find(|line| line.contains("/f")).map(str::to_owned)
    };
    until("the access log line", || line_of(&log).is_some()).await;
    let line = line_of(&log).unwrap();
    assert!(line.ends_with(" plugin=wasm phase=log"), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}
