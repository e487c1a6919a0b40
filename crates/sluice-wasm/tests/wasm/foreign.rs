//! Sluice's foreign functions and ticks.

use crate::support::{compiled, info, play, request, Exchange, MemCache};
use sluice_module::{Flow, Module};
use sluice_wasm::{HostEnv, WasmConfig, WasmModule, WasmRegistry};
use std::sync::Arc;
use std::time::Duration;

fn module() -> WasmModule {
    WasmModule::start("foreign", compiled("foreign"), WasmConfig::default(), 1, &HostEnv::default()).unwrap()
}

/// Calls foreign function `name` with `arg` through the plugin; the local response it makes.
fn call(module: &WasmModule, cache: &Arc<MemCache>, name: &str, arg: Option<&str>) -> (u16, Option<String>, String) {
    let mut headers = vec![("x-call", name)];
    if let Some(arg) = arg {
        headers.push(("x-arg", arg));
    }
    let run = play(module, &info(1, cache.clone()), Exchange::get("/", &headers, &[]));
    let response = run.responded.expect("the plugin answers");
    let status = response.headers.get("x-status").map(|v| v.to_str().unwrap().to_string());
    (response.status.as_u16(), status, String::from_utf8(response.body.to_vec()).unwrap())
}

#[test]
fn cache_functions_reach_the_cache() {
    let module = module();
    let cache = Arc::new(MemCache::with(&["http://a.example/1", "http://a.example/2", "http://b.example/"]));
    assert_eq!(call(&module, &cache, "sluice.cache_expire", Some("http://a.example/1")), (200, None, "1".into()));
    assert_eq!(call(&module, &cache, "sluice.cache_delete", Some("http://b.example/")), (200, None, "1".into()));
    assert_eq!(call(&module, &cache, "sluice.cache_delete", Some("http://b.example/")), (200, None, "0".into()));
    let (status, _, json) = call(&module, &cache, "sluice.cache_query", Some("http://a.example/1"));
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list[0]["key"], "http://a.example/1");
    assert_eq!(list[0]["fresh"], false, "expired above");
    assert_eq!(list[0]["hits"], 3);
    assert_eq!(list[0]["size"], 6);
    assert_eq!(call(&module, &cache, "sluice.cache_delete_prefix", Some("http://a.example/")), (200, None, "2".into()));
    let tagged = (
        http::StatusCode::OK,
        [(http::header::HeaderName::from_static("surrogate-key"), http::HeaderValue::from_static("red blue"))]
            .into_iter()
            .collect(),
        bytes::Bytes::new(),
        true,
    );
    cache.objects.lock().unwrap().insert("http://c.example/".into(), tagged);
    assert_eq!(call(&module, &cache, "sluice.cache_delete_tag", Some("blue")), (200, None, "1".into()));
    assert_eq!(
        cache.calls(),
        [
            "expire http://a.example/1",
            "delete http://b.example/",
            "delete http://b.example/",
            "query http://a.example/1",
            "delete_prefix http://a.example/",
            "delete_tag blue"
        ]
    );
}

#[test]
fn foreign_function_errors_have_abi_statuses() {
    let module = module();
    let cache = Arc::new(MemCache::default());
    // Unknown function: NotFound (1).
    assert_eq!(call(&module, &cache, "sluice.nope", None), (500, Some("1".into()), String::new()));
    // Not an absolute URL: BadArgument (2).
    assert_eq!(
        call(&module, &cache, "sluice.cache_delete", Some("relative/path")),
        (500, Some("2".into()), String::new())
    );
}

#[test]
fn cache_validate_starts_a_revalidation_on_the_runtime_and_returns_at_once() {
    let module = module();
    let cache = Arc::new(MemCache::with(&["http://v.example/"]));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        assert_eq!(call(&module, &cache, "sluice.cache_validate", Some("http://v.example/")), (200, None, "1".into()));
        // Nothing stored: nothing to validate.
        assert_eq!(call(&module, &cache, "sluice.cache_validate", Some("http://w.example/")), (200, None, "0".into()));
        // Not an absolute URL: BadArgument (2).
        assert_eq!(
            call(&module, &cache, "sluice.cache_validate", Some("nope")),
            (500, Some("2".into()), String::new())
        );
    });
    assert_eq!(
        cache.calls(),
        ["query http://v.example/", "validate http://v.example/", "query http://w.example/", "query nope"]
    );
    // Outside a Tokio runtime there is nothing to run it on: InternalFailure (10).
    assert_eq!(
        call(&module, &cache, "sluice.cache_validate", Some("http://v.example/")),
        (500, Some("10".into()), String::new())
    );
}

#[test]
fn log_field_adds_to_the_access_log_line_from_any_callback() {
    let module = module();
    let info = info(1, Arc::new(MemCache::default()));
    let run = play(&module, &info, Exchange::get("/", &[("x-log", "plugin=yes")], &["body"]));
    let fields: Vec<(&str, &str)> = run.log_fields.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(fields, [("plugin", "yes"), ("phase", "log")], "the second from proxy_on_log");

    // Malformed fields are refused with BadArgument (2); the request goes on.
    for bad in ["no-equals-sign", "=empty-name", "bad name=v", "tab=a\tb"] {
        let run = play(&module, &info, Exchange::get("/", &[("x-log", bad)], &[]));
        let names: Vec<&str> = run.log_fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["phase"], "{bad:?} refused");
    }
    assert!(module.recent_logs().iter().any(|line| line == "info log_field err 2"), "{:?}", module.recent_logs());
}

#[test]
fn no_more_callbacks_ends_the_plugins_part_but_still_deletes_its_context() {
    let module = module();
    let info = info(1, Arc::new(MemCache::default()));
    let run = play(&module, &info, Exchange::get("/", &[("x-done", "1")], &["body"]));
    assert_eq!(run.flows, ["req_headers:Done"]);
    assert!(run.header("x-after-done").is_none());
    let stats = module.stats();
    assert_eq!((stats.contexts_created, stats.contexts_deleted, stats.failed_transactions), (1, 1, 0));

    // Without it the response callback runs.
    let run = play(&module, &info, Exchange::get("/", &[], &[]));
    assert_eq!(run.header("x-after-done").as_deref(), Some("yes"));
}

#[test]
fn ticks_call_every_instance_with_the_cache_at_hand() {
    let cache = Arc::new(MemCache::with(&["http://tick.example/"]));
    let registry = WasmRegistry::with_cache(cache.clone());
    let config = WasmConfig { plugin_config: "tick=100".into(), instances: 2, ..WasmConfig::default() };
    let handle = registry.load("ticker", compiled("foreign"), config).unwrap();
    assert_eq!(handle.tick_interval(), Some(Duration::from_millis(100)));
    handle.tick(cache.as_ref());
    assert_eq!(cache.calls(), ["expire http://tick.example/", "expire http://tick.example/"]);
    let logs = handle.current().unwrap().recent_logs();
    assert_eq!(logs.iter().filter(|line| line.starts_with("info tick expire ok 1")).count(), 2, "{logs:?}");

    // A plugin without ticks has no interval.
    let plain = registry.load("plain", compiled("empty"), WasmConfig::default()).unwrap();
    assert_eq!(plain.tick_interval(), None);
}

#[test]
fn without_a_cache_ticks_get_an_error_status() {
    let module = WasmModule::start(
        "foreign",
        compiled("foreign"),
        WasmConfig { plugin_config: "tick=5".into(), instances: 1, ..WasmConfig::default() },
        1,
        &HostEnv::default(),
    )
    .unwrap();
    module.tick(&MemCache::default());
    // InternalFailure (10): no cache was given at load and no transaction brought one.
    assert!(module.recent_logs().iter().any(|line| line == "info tick expire err 10"), "{:?}", module.recent_logs());
}

#[test]
fn shared_data_is_shared_by_the_instances_and_metrics_are_counted() {
    let config = WasmConfig { instances: 2, ..WasmConfig::default() };
    let module = WasmModule::start("foreign", compiled("foreign"), config, 1, &HostEnv::default()).unwrap();
    let cache = Arc::new(MemCache::default());
    let values: Vec<String> = (0..4)
        .map(|id| {
            let run = play(&module, &info(id, cache.clone()), Exchange::get("/", &[("x-shared", "hits")], &[]));
            String::from_utf8(run.responded.expect("answered").body.to_vec()).unwrap()
        })
        .collect();
    // Round robin over two instances: both see and update the one counter.
    assert_eq!(values, ["1", "2", "3", "4"]);
    let metrics = module.metrics();
    assert_eq!(metrics.len(), 1);
    assert_eq!((metrics[0].name.as_str(), metrics[0].kind, metrics[0].value), ("foreign_requests", "counter", 4));
}

#[test]
fn the_admin_endpoint_reports_stats_and_logs() {
    let module = module();
    let info = info(1, Arc::new(MemCache::default()));
    let mut txn = module.new_txn(&info).unwrap();
    assert!(matches!(txn.req_headers(&info, &mut request("GET", "/", &[])), Flow::Continue));
    drop(txn);
    let stats = module.admin(&http::Method::GET, "stats", b"").expect("stats");
    let json: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert_eq!(json["stats"]["contexts_created"], 1);
    assert_eq!(json["stats"]["contexts_deleted"], 1);
    assert!(module.admin(&http::Method::GET, "logs", b"").is_some());
    assert!(module.admin(&http::Method::GET, "nope", b"").is_none());
}
