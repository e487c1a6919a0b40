//! The phase mapping, header and body edits, local responses and context lifetimes, with
//! real plugins on a real wasmtime.

use crate::support::{compiled, info, play, request, response, Exchange, MemCache};
use bytes::Bytes;
use http::StatusCode;
use sluice_module::{BodyChunk, Flow, Module, TxnOutcome};
use sluice_wasm::{Attach, HostEnv, WallClock, WasmConfig, WasmError, WasmModule};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

fn module(plugin: &str, config: WasmConfig) -> WasmModule {
    WasmModule::start(plugin, compiled(plugin), config, 1, &HostEnv::default()).expect("start plugin")
}

fn one_instance() -> WasmConfig {
    WasmConfig { instances: 1, ..WasmConfig::default() }
}

/// The plugin log lines about context `ctx`, without the `info ctx=N ` prefix.
fn events(module: &WasmModule, ctx: u32) -> Vec<String> {
    let prefix = format!("info ctx={ctx} ");
    module.recent_logs().iter().filter_map(|line| line.strip_prefix(&prefix).map(str::to_string)).collect()
}

fn event_names(module: &WasmModule, ctx: u32) -> Vec<String> {
    events(module, ctx).iter().map(|e| e.split(' ').next().unwrap().to_string()).collect()
}

#[test]
fn start_up_runs_vm_start_and_configure_with_their_configurations_and_the_hosts_clock() {
    let config = WasmConfig { vm_config: "vm-conf".into(), plugin_config: "plugin-conf".into(), ..one_instance() };
    let fixed: WallClock = Arc::new(|| UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let env = HostEnv { clock: fixed, ..HostEnv::default() };
    let module = WasmModule::start("phases", compiled("phases"), config, 1, &env).unwrap();
    assert_eq!(events(&module, 1), ["vm_start config=vm-conf now=1700000000", "configure config=plugin-conf"]);
    assert_eq!(module.stats().instances_started, 1);
}

#[test]
fn client_attach_maps_every_phase_in_order() {
    let module = module("phases", one_instance());
    let cache = Arc::new(MemCache::default());
    let exchange = Exchange::get("http://example.com/a?b=c", &[("x-in", "1")], &["hello ", "world"]);
    let run = play(&module, &info(77, cache), exchange);

    assert_eq!(
        run.flows,
        [
            "req_headers:Continue",
            "cache_lookup:Continue",
            "req_out:Continue",
            "origin_resp_headers:Continue",
            "origin_resp_body:Continue",
            "origin_resp_body:Continue",
            "client_resp_headers:Continue",
            "client_resp_body:Continue",
            "client_resp_body:Continue",
        ]
    );
    // Context 2 is the first HTTP context of the instance (1 is the root).
    assert_eq!(
        event_names(&module, 2),
        ["create", "request_headers", "response_headers", "response_body", "response_body", "done", "log", "delete"]
    );
    let events = events(&module, 2);
    assert_eq!(
        events[1],
        "request_headers n=5 eos=true method=GET path=/a?b=c authority=example.com prop_path=/a?b=c \
         prop_method=GET prop_host=example.com source=192.0.2.7:4242 plugin=phases txn=77"
    );
    assert_eq!(events[2], "response_headers n=1 eos=false status=200 code=200 request_path=/a?b=c marker=m2");
    // The response head (with the plugin's own addition) is readable in the body callbacks.
    assert_eq!(events[3], "response_body size=6 eos=false data=hello  status=200 added=1");
    assert_eq!(events[4], "response_body size=5 eos=true data=world status=200 added=1");
    // Both heads are readable in done, log and delete too.
    for (event, name) in events[5..].iter().zip(["done", "log", "delete"]) {
        assert_eq!(*event, format!("{name} path=/a?b=c x-in=1 status=200 code=200"));
    }
    assert_eq!(run.req_header("x-phase-req").as_deref(), Some("1"));
    assert_eq!(run.header("x-phase-resp").as_deref(), Some("1"));
    assert_eq!(run.resp_body, b"hello world");
    let stats = module.stats();
    assert_eq!((stats.contexts_created, stats.contexts_deleted), (1, 1));
}

#[test]
fn origin_attach_runs_response_callbacks_before_the_store_only() {
    let module = module("phases", WasmConfig { attach: Attach::Origin, ..one_instance() });
    let cache = Arc::new(MemCache::default());
    let mut exchange = Exchange::get("/x", &[("host", "h.example"), ("content-length", "4")], &["body"]);
    exchange.req.method = http::Method::POST;
    exchange.req_body = vec![Bytes::from_static(b"pa"), Bytes::from_static(b"ss")];
    let run = play(&module, &info(1, cache), exchange);
    assert_eq!(
        event_names(&module, 2),
        [
            "create",
            "request_headers",
            "request_body",
            "request_body",
            "response_headers",
            "response_body",
            "done",
            "log",
            "delete"
        ]
    );
    let events = events(&module, 2);
    assert!(
        events[1].starts_with("request_headers n=6 eos=false method=POST path=/x authority=h.example"),
        "{}",
        events[1]
    );
    assert_eq!(events[2], "request_body size=2 eos=false data=pa path=/x");
    assert_eq!(events[3], "request_body size=2 eos=true data=ss path=/x");
    assert_eq!(run.req_body, b"pass");
    // The response header the plugin added is what gets stored (and so served).
    assert_eq!(run.header("x-phase-resp").as_deref(), Some("1"));
}

#[test]
fn heads_are_not_kept_for_later_callbacks_when_switched_off() {
    let config = WasmConfig { request_headers_in_response: false, response_headers_in_body: false, ..one_instance() };
    let module = module("phases", config);
    play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/quiet", &[], &["x"]));
    let events = events(&module, 2);
    assert!(events[2].ends_with("request_path= marker=m2"), "{}", events[2]);
    assert_eq!(events[3], "response_body size=1 eos=true data=x status= added=");
    assert_eq!(
        events[4..],
        ["done path= x-in= status= code=-", "log path= x-in= status= code=-", "delete path= x-in= status= code=-"]
    );
}

#[test]
fn a_path_rewrite_through_the_path_pseudo_header_changes_the_url() {
    let module = module("phases", one_instance());
    let run = play(
        &module,
        &info(1, Arc::new(MemCache::default())),
        Exchange::get("http://example.com/old?q=1", &[("x-rewrite-path", "/new?q=2")], &[]),
    );
    assert_eq!(run.req.unwrap().uri, "http://example.com/new?q=2");
}

#[test]
fn pause_from_response_headers_asks_the_host_to_buffer_the_body() {
    let module = module("phases", one_instance());
    let run = play(
        &module,
        &info(1, Arc::new(MemCache::default())),
        Exchange::get("/p", &[("x-pause-headers", "1")], &["a", "b", "c"]),
    );
    assert!(run.flows.contains(&"client_resp_headers:Buffer { max: 1048576 }".to_string()), "{:?}", run.flows);
    let events = events(&module, 2);
    let bodies: Vec<&String> = events.iter().filter(|e| e.starts_with("response_body")).collect();
    assert_eq!(bodies, ["response_body size=3 eos=true data=abc status=200 added=1"]);
    assert_eq!(run.resp_body, b"abc");
}

#[test]
fn add_headers_adds_four_response_headers() {
    let module = module("add_headers", WasmConfig::default());
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[], &["x"]));
    let values: Vec<Option<String>> = (1..=4).map(|n| run.header(&format!("x-wasm-{n}"))).collect();
    assert_eq!(values, [Some("one".into()), Some("two".into()), Some("three".into()), Some("four".into())]);
}

#[test]
fn empty_callbacks_change_nothing() {
    let module = module("empty", WasmConfig::default());
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[("a", "b")], &["x", "y"]));
    assert!(run.flows.iter().all(|flow| flow.ends_with(":Continue")), "{:?}", run.flows);
    assert_eq!(run.resp.unwrap().headers.len(), 0);
    assert_eq!(run.resp_chunks, [Bytes::from_static(b"x"), Bytes::from_static(b"y")]);
}

#[test]
fn body_transform_edits_chunks_and_appends_at_end_of_stream() {
    let config = WasmConfig { edits_response_body: true, ..WasmConfig::default() };
    let module = module("body_transform", config);
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[], &["hello ", "world"]));
    assert_eq!(run.resp_chunks, [Bytes::from_static(b"HELLO "), Bytes::from_static(b"WORLD<!--wasm-->")]);
}

#[test]
fn body_copy_keeps_the_body() {
    let config = WasmConfig { plugin_config: "copy".into(), ..WasmConfig::default() };
    let module = module("body_transform", config);
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[], &["same ", "bytes"]));
    assert_eq!(run.resp_body, b"same bytes");
}

#[test]
fn request_bodies_are_transformed_too() {
    let config = WasmConfig { edits_request_body: true, ..WasmConfig::default() };
    let module = module("body_transform", config);
    let mut exchange = Exchange::get("/", &[("content-length", "6")], &[]);
    exchange.req_body = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"def")];
    let run = play(&module, &info(1, Arc::new(MemCache::default())), exchange);
    assert_eq!(run.req_body, b"ABCDEF<!--wasm-->");
}

#[test]
fn a_length_change_without_edits_declared_is_refused() {
    // Upper-casing keeps the length and works; the end-of-stream append is refused, which the
    // Rust SDK turns into a panic: the instance traps and the transaction fails open with the
    // last chunk passed on unchanged (the failure unwinds to the host's chain, which fails
    // the plugin open: the driver plays it so).
    let module = module("body_transform", one_instance());
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[], &["hello ", "world"]));
    assert_eq!(run.resp_chunks, [Bytes::from_static(b"HELLO "), Bytes::from_static(b"world")]);
    assert_eq!(run.flows.last().unwrap(), "client_resp_body:Failed");
    assert!(module.recent_logs().iter().any(|l| l.contains("refused a response body change of length")));
    let stats = module.stats();
    assert_eq!((stats.traps, stats.failed_transactions), (1, 1));
}

#[test]
fn pause_in_body_callbacks_holds_data_until_the_plugin_continues() {
    let config = WasmConfig { plugin_config: "buffer".into(), edits_response_body: true, ..WasmConfig::default() };
    let module = module("body_transform", config);
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", &[], &["ab", "cd", "ef"]));
    assert_eq!(run.resp_chunks, [Bytes::new(), Bytes::new(), Bytes::from_static(b"ABCDEF<!--wasm:3-->")]);
}

#[test]
fn a_local_response_answers_the_request() {
    let module = module("local_response", WasmConfig::default());
    let cache: Arc<MemCache> = Arc::new(MemCache::default());
    let run = play(&module, &info(1, cache.clone()), Exchange::get("/blocked/x", &[], &["origin"]));
    let response = run.responded.expect("a local response");
    assert_eq!(response.status, StatusCode::FORBIDDEN);
    assert_eq!(response.headers["x-blocked-by"], "wasm");
    assert_eq!(response.headers["content-type"], "text/plain", "as Envoy's local replies");
    assert_eq!(response.body.as_ref(), b"blocked by plugin");
    assert_eq!(run.flows, ["req_headers:Respond(403 Forbidden)"]);

    let run = play(&module, &info(2, cache), Exchange::get("/open", &[], &["origin"]));
    assert!(run.responded.is_none());
    assert_eq!(run.resp_body, b"origin");
}

#[test]
fn contexts_are_deleted_exactly_once_also_when_dropped_mid_way() {
    let module = module("phases", one_instance());
    let info = info(5, Arc::new(MemCache::default()));
    let mut txn = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/mid", &[]);
    assert!(matches!(txn.req_headers(&info, &mut req), Flow::Continue));
    drop(txn);
    assert_eq!(event_names(&module, 2), ["create", "request_headers", "done", "delete"]);

    // Completed normally: done and log once, delete once.
    let mut txn = module.new_txn(&info).expect("state");
    let mut resp = response(204, &[]);
    txn.client_resp_headers(&info, &mut resp);
    let outcome = TxnOutcome { status: StatusCode::NO_CONTENT, body_bytes: 0, result: "TCP_MISS", completed: true };
    txn.resp_done(&info, &outcome);
    txn.log(&info, &outcome, &mut Default::default());
    drop(txn);
    assert_eq!(event_names(&module, 3), ["create", "response_headers", "done", "log", "delete"]);
    assert!(events(&module, 3)[1].starts_with("response_headers n=1 eos=true status=204"));
    // A response without a body keeps its head for done, log and delete too; no request
    // headers callback ran, so there is no request head.
    assert_eq!(events(&module, 3)[3], "log path= x-in= status=204 code=204");

    // Dropped before any callback: its context is still created (contexts are created by
    // their first callback), then ended.
    drop(module.new_txn(&info).expect("state"));
    assert_eq!(event_names(&module, 4), ["create", "done", "delete"]);
    let stats = module.stats();
    assert_eq!((stats.contexts_created, stats.contexts_deleted), (3, 3));
}

#[test]
fn body_chunks_after_done_are_left_alone() {
    let module = module("body_transform", WasmConfig { edits_response_body: true, ..one_instance() });
    let info = info(1, Arc::new(MemCache::default()));
    let mut txn = module.new_txn(&info).unwrap();
    let mut chunk = BodyChunk::new(Bytes::from_static(b"abc"), false);
    assert!(matches!(txn.client_resp_body(&info, &mut chunk), Flow::Continue));
    assert_eq!(chunk.data().as_ref(), b"ABC");
    assert!(txn.edits_body().client_response);
    assert!(!txn.edits_body().origin_response);
}

#[test]
fn bad_modules_are_refused_with_clear_errors() {
    let err = WasmModule::load("garbage", b"not wasm at all", WasmConfig::default()).unwrap_err();
    assert!(matches!(err, WasmError::Compile { .. }), "{err}");
    // A valid module that is no Proxy-Wasm plugin (the empty module).
    let err = WasmModule::load("empty-module", b"\0asm\x01\0\0\0", WasmConfig::default()).unwrap_err();
    assert!(matches!(err, WasmError::Abi { .. }), "{err}");
    assert!(err.to_string().contains("proxy_abi_version_0_2_1"), "{err}");
}

#[test]
fn a_plugin_that_rejects_its_configuration_does_not_load() {
    let config = WasmConfig { plugin_config: "reject".into(), ..WasmConfig::default() };
    let err = WasmModule::start("phases", compiled("phases"), config, 1, &HostEnv::default()).unwrap_err();
    assert!(matches!(err, WasmError::Start { .. }), "{err}");
    assert!(err.to_string().contains("proxy_on_configure returned false"), "{err}");
}

#[test]
fn heads_are_kept_only_for_plugins_that_can_read_them() {
    // `phases` reads headers and properties (and sees both heads in every later callback:
    // `client_attach_maps_every_phase_in_order`); so may any plugin built on the SDK, which
    // imports every host function. `empty_abi` imports no reader: nothing is copied for it.
    assert!(compiled("phases").reads_heads());
    assert!(compiled("empty").reads_heads());
    assert!(!compiled("empty_abi").reads_heads());
    let module = module("empty_abi", one_instance());
    let run = play(&module, &info(1, Arc::new(MemCache::default())), Exchange::get("/e", &[("x-a", "1")], &["body"]));
    assert_eq!(run.resp_body, b"body");
    let stats = module.stats();
    assert_eq!((stats.contexts_created, stats.contexts_deleted, stats.failed_transactions), (1, 1, 0));
}
