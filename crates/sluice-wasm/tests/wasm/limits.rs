//! Deadlines, traps, the memory limit, crash backoff and failure policies.

use crate::support::{compiled, info, play, request, response, Exchange, MemCache};
use bytes::Bytes;
use http::StatusCode;
use sluice_module::{BodyChunk, FailurePolicy, Flow, Module, TxnOutcome};
use sluice_wasm::{HostEnv, PluginFailure, WasmConfig, WasmError, WasmModule};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One instance, 50 ms deadline, no backoff (a crashed instance is recreated at once).
fn config() -> WasmConfig {
    let mut config = WasmConfig { instances: 1, ..WasmConfig::default() };
    config.limits.deadline_ms = 50;
    config.limits.backoff_base_ms = 0;
    config
}

fn module(plugin: &str, config: WasmConfig) -> WasmModule {
    WasmModule::start(plugin, compiled(plugin), config, 1, &HostEnv::default()).expect("start plugin")
}

fn cache() -> Arc<MemCache> {
    Arc::new(MemCache::default())
}

#[test]
fn an_infinite_loop_is_stopped_by_its_deadline_and_the_instance_recreated() {
    let module = module("infinite_loop", config());
    let info = info(1, cache());
    let mut txn = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/", &[("x-loop", "1")]);
    let started = Instant::now();
    let flow = txn.req_headers(&info, &mut req);
    let took = started.elapsed();
    assert!(matches!(flow, Flow::Done), "fails open: {flow:?}");
    assert!(took >= Duration::from_millis(50) && took < Duration::from_millis(500), "stopped after {took:?}");
    // The request head survived the fault.
    assert_eq!(req.headers["x-loop"], "1");
    drop(txn);
    let stats = module.stats();
    assert_eq!((stats.crashes, stats.deadline_kills, stats.failed_transactions), (1, 1, 1));

    // The next transaction gets a fresh instance.
    let run = play(&module, &info, Exchange::get("/", &[], &[]));
    assert!(run.started);
    assert_eq!(run.req_header("x-looped").as_deref(), Some("no"));
    assert_eq!(module.stats().instances_started, 2);
}

#[test]
fn a_start_up_callback_that_loops_is_stopped_and_the_load_fails() {
    let mut config = WasmConfig { plugin_config: "configure".into(), ..config() };
    config.limits.start_deadline_ms = 100;
    let started = Instant::now();
    let err =
        WasmModule::start("infinite_loop", compiled("infinite_loop"), config, 1, &HostEnv::default()).unwrap_err();
    assert!(matches!(err, WasmError::Start { .. }), "{err}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn a_tick_that_loops_is_stopped_by_the_callback_deadline() {
    let module = module("infinite_loop", WasmConfig { plugin_config: "tick".into(), ..config() });
    assert_eq!(module.tick_interval(), Some(Duration::from_millis(10)));
    let started = Instant::now();
    module.tick(cache().as_ref());
    assert!(started.elapsed() < Duration::from_millis(500), "took {:?}", started.elapsed());
    let stats = module.stats();
    assert_eq!((stats.deadline_kills, stats.crashes), (1, 1));
}

#[test]
fn a_deadline_fails_closed_with_a_500_when_configured() {
    let module = module("infinite_loop", WasmConfig { failure: FailurePolicy::Closed, ..config() });
    let run = play(&module, &info(1, cache()), Exchange::get("/", &[("x-loop", "1")], &["never"]));
    let response = run.responded.expect("a 500");
    assert_eq!(response.status, StatusCode::INTERNAL_SERVER_ERROR);
}

#[test]
fn a_trap_discards_the_instance_and_the_next_transaction_gets_a_new_one() {
    for kind in ["panic", "unreachable"] {
        let module = module("trap", config());
        let cache = cache();
        let run = play(&module, &info(1, cache.clone()), Exchange::get("/", &[], &[]));
        assert_eq!(run.req_header("x-served").as_deref(), Some("1"));
        let run = play(&module, &info(2, cache.clone()), Exchange::get("/", &[], &[]));
        assert_eq!(run.req_header("x-served").as_deref(), Some("2"));

        let run = play(&module, &info(3, cache.clone()), Exchange::get("/", &[("x-trap", kind)], &["body"]));
        assert_eq!(run.flows, ["req_headers:Done"], "{kind}");
        assert_eq!(run.resp_body, b"body");

        let run = play(&module, &info(4, cache), Exchange::get("/", &[], &[]));
        assert_eq!(run.req_header("x-served").as_deref(), Some("1"), "{kind}: a fresh instance counts from 1");
        let stats = module.stats();
        assert_eq!((stats.traps, stats.crashes, stats.instances_started), (1, 1, 2), "{kind}");
    }
}

#[test]
fn crashes_back_off_exponentially() {
    let mut config = config();
    config.limits.backoff_base_ms = 300;
    let module = module("trap", config);
    let cache = cache();
    let crash = |id| play(&module, &info(id, cache.clone()), Exchange::get("/", &[("x-trap", "panic")], &[]));
    let sleep = |ms| std::thread::sleep(Duration::from_millis(ms));

    crash(1);
    // Within the backoff (300 ms) the only slot has no instance: the module sits out.
    let run = play(&module, &info(2, cache.clone()), Exchange::get("/", &[], &[]));
    assert!(!run.started);
    let stats = module.stats();
    assert!(stats.backoff_waits >= 1 && stats.unavailable == 1, "{stats:?}");

    sleep(400);
    crash(3);
    // Second crash in a row: 600 ms.
    sleep(300);
    assert!(!play(&module, &info(4, cache.clone()), Exchange::get("/", &[], &[])).started);
    sleep(400);
    let run = play(&module, &info(5, cache.clone()), Exchange::get("/", &[], &[]));
    assert_eq!(run.req_header("x-served").as_deref(), Some("1"));

    // That clean transaction ended the run of crashes: the next backoff is the base again.
    crash(6);
    sleep(400);
    assert!(play(&module, &info(7, cache), Exchange::get("/", &[], &[])).started);
    let stats = module.stats();
    assert_eq!((stats.crashes, stats.instances_started), (3, 4), "{stats:?}");
}

#[test]
fn no_instance_fails_closed_transactions_with_a_500() {
    let mut config = WasmConfig { failure: FailurePolicy::Closed, ..config() };
    config.limits.backoff_base_ms = 10_000;
    let module = module("trap", config);
    let cache = cache();
    play(&module, &info(1, cache.clone()), Exchange::get("/", &[("x-trap", "panic")], &[]));
    let run = play(&module, &info(2, cache), Exchange::get("/", &[], &[]));
    assert_eq!(run.responded.expect("a 500").status, StatusCode::INTERNAL_SERVER_ERROR);
}

#[test]
fn exceeding_the_memory_limit_traps_and_is_counted() {
    let mut config = config();
    config.limits.memory_mib = 8;
    let module = module("trap", config);
    let cache = cache();
    let run = play(&module, &info(1, cache.clone()), Exchange::get("/", &[("x-trap", "oom")], &[]));
    assert_eq!(run.flows, ["req_headers:Done"]);
    let stats = module.stats();
    assert_eq!((stats.memory_kills, stats.crashes), (1, 1), "{stats:?}");
    let run = play(&module, &info(2, cache), Exchange::get("/", &[], &[]));
    assert_eq!(run.req_header("x-served").as_deref(), Some("1"));
}

#[test]
fn a_closed_failure_in_a_response_phase_unwinds_with_a_plugin_failure() {
    let module = module("trap", WasmConfig { failure: FailurePolicy::Closed, ..config() });
    let info = info(1, cache());
    let mut txn = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/", &[("x-trap", "response")]);
    assert!(matches!(txn.req_headers(&info, &mut req), Flow::Continue));
    let mut resp = response(200, &[]);
    let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| txn.client_resp_headers(&info, &mut resp)));
    let payload = unwound.expect_err("the transaction is failed");
    let failure = payload.downcast_ref::<PluginFailure>().expect("a PluginFailure payload");
    assert!(failure.reason.contains("trap"), "{failure}");
    drop(txn);
    assert_eq!(module.stats().traps, 1);
}

#[test]
fn a_trap_at_the_end_of_a_transaction_fails_it_and_discards_the_instance() {
    let module = module("trap", config());
    let info = info(1, cache());
    let mut txn = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/", &[("x-trap", "log")]);
    assert!(matches!(txn.req_headers(&info, &mut req), Flow::Continue));
    // proxy_on_done, proxy_on_log (which panics) and proxy_on_delete are one call.
    let outcome = TxnOutcome { status: StatusCode::OK, body_bytes: 0, result: "TCP_MISS", completed: true };
    txn.resp_done(&info, &outcome);
    txn.log(&info, &outcome, &mut Default::default());
    drop(txn);
    let stats = module.stats();
    assert_eq!((stats.crashes, stats.traps, stats.failed_transactions), (1, 1, 1));
    assert_eq!((stats.contexts_created, stats.contexts_deleted), (1, 0), "the instance went with the context");

    // The next transaction gets a fresh instance.
    let run = play(&module, &info, Exchange::get("/", &[], &[]));
    assert!(run.started);
    assert_eq!(module.stats().instances_started, 2);
}

#[test]
fn transactions_sharing_a_crashed_instance_fail_too() {
    let module = module("trap", config());
    let info = info(1, cache());
    let mut first = module.new_txn(&info).expect("state");
    let mut second = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/", &[]);
    assert!(matches!(first.req_headers(&info, &mut req), Flow::Continue));
    let mut bad = request("GET", "/", &[("x-trap", "panic")]);
    assert!(matches!(second.req_headers(&info, &mut bad), Flow::Done));
    // The first transaction's context died with the instance.
    let mut resp = response(200, &[]);
    assert!(matches!(first.client_resp_headers(&info, &mut resp), Flow::Done));
    drop((first, second));
    let stats = module.stats();
    assert_eq!((stats.crashes, stats.failed_transactions), (1, 2));
    assert_eq!((stats.contexts_created, stats.contexts_deleted), (2, 0));
}

#[test]
fn pausing_past_the_buffer_limit_fails_open_and_passes_the_data_on() {
    let mut config = WasmConfig { plugin_config: "buffer".into(), edits_response_body: true, ..config() };
    config.limits.max_buffer_bytes = 4;
    let module = module("body_transform", config);
    let info = info(1, cache());
    let mut txn = module.new_txn(&info).expect("state");
    let mut first = BodyChunk::new(Bytes::from_static(b"abc"), false);
    assert!(matches!(txn.client_resp_body(&info, &mut first), Flow::Continue));
    assert!(first.data().is_empty(), "held for the plugin");
    let mut second = BodyChunk::new(Bytes::from_static(b"def"), false);
    // The failure unwinds to the host's chain, which fails the plugin open (its policy) and
    // so knows that the body went on unedited from here.
    let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| txn.client_resp_body(&info, &mut second)));
    assert!(unwound.expect_err("unwound").is::<PluginFailure>());
    assert_eq!(second.data().as_ref(), b"abcdef", "held data goes on unchanged");
    drop(txn);
    let stats = module.stats();
    assert_eq!((stats.failed_transactions, stats.crashes, stats.contexts_deleted), (1, 0, 1));
}

#[test]
fn a_hostile_flood_of_traps_leaves_the_host_working() {
    let module = module("trap", WasmConfig { instances: 2, ..config() });
    let cache = cache();
    for id in 0..20 {
        let kind = ["panic", "unreachable", "oom-free"][id % 3];
        play(&module, &info(id as u64, cache.clone()), Exchange::get("/", &[("x-trap", kind)], &["x"]));
    }
    let run = play(&module, &info(99, cache), Exchange::get("/", &[], &[]));
    assert!(run.req_header("x-served").is_some());
    let stats = module.stats();
    assert_eq!(stats.traps, 14, "{stats:?}");
}

#[test]
fn bad_pointers_and_arguments_get_error_statuses_and_the_instance_carries_on() {
    let module = module("hostile", config());
    let cache = cache();
    for id in 0..2 {
        let run = play(&module, &info(id, cache.clone()), Exchange::get("/", &[("host", "h.example")], &["x"]));
        assert!(run.flows.iter().all(|flow| flow.ends_with(":Continue")), "{:?}", run.flows);
    }
    let expected = "hostile log_far=6 log_negative=6 get_value_far_key=6 get_value_far_return=6 \
                    get_value_bad_map=2 add_bad_name=2 add_far_value=6 add_response_header_now=2 set_pairs_malformed=4 \
                    get_buffer_unknown=2 set_buffer_no_body=1 property_far=6 local_response_bad_status=2 \
                    foreign_far_name=6 time_far=6 fd_write_far_iov=21 fd_write_far_list=21";
    let logs = module.recent_logs();
    let lines: Vec<&String> = logs.iter().filter(|line| line.starts_with("info hostile")).collect();
    assert_eq!(lines.len(), 2, "{logs:?}");
    assert_eq!(lines[0].strip_prefix("info "), Some(expected));
    // Past the host's size limits: statuses outside 200-599, long keys, names and paths, an
    // item larger than a queue holds; all refused with BadArgument, nothing kept.
    let bounds = "bounds local_response_101=2 local_response_600=2 shared_key_long=2 metric_name_long=2 \
                  queue_name_long=2 queue_register=0 queue_item_long=2 property_path_long=2";
    let lines: Vec<&String> = logs.iter().filter(|line| line.starts_with("info bounds")).collect();
    assert_eq!(lines.len(), 2, "{logs:?}");
    assert_eq!(lines[0].strip_prefix("info "), Some(bounds));
    assert!(module.metrics().is_empty(), "{:?}", module.metrics());
    // A local response where the response is on its way is refused too.
    let late: Vec<&String> = logs.iter().filter(|line| line.starts_with("info late")).collect();
    assert_eq!(late, ["info late done=2", "info late log=2", "info late done=2", "info late log=2"], "{logs:?}");
    let stats = module.stats();
    assert_eq!((stats.crashes, stats.instances_started, stats.contexts_deleted), (0, 1, 2));
}

#[test]
fn crashed_instances_are_restarted_in_the_background_while_others_serve() {
    let mut config = WasmConfig { instances: 2, ..config() };
    config.limits.backoff_base_ms = 300;
    let module = module("trap", config);
    let cache = cache();
    play(&module, &info(1, cache.clone()), Exchange::get("/", &[("x-trap", "panic")], &[]));
    // The other instance serves at once; no transaction waits for the restart.
    for id in 2..6 {
        assert!(play(&module, &info(id, cache.clone()), Exchange::get("/", &[], &[])).started);
    }
    assert_eq!(module.stats().instances_started, 2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while module.stats().instances_started < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = module.stats();
    assert_eq!((stats.instances_started, stats.crashes, stats.backoff_waits, stats.unavailable), (3, 1, 0, 0));
}

#[test]
fn heads_lent_to_a_trapping_callback_come_back_intact() {
    let module = module("trap", config());
    let info = info(1, cache());
    let mut txn = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/path?q", &[("x-trap", "response"), ("x-keep", "1")]);
    assert!(matches!(txn.req_headers(&info, &mut req), Flow::Continue));
    let mut resp = response(203, &[("x-origin", "o"), ("content-length", "4")]);
    assert!(matches!(txn.client_resp_headers(&info, &mut resp), Flow::Done), "fails open");
    drop(txn);
    assert_eq!(resp.status, StatusCode::NON_AUTHORITATIVE_INFORMATION);
    assert_eq!((resp.headers.len(), resp.headers["x-origin"].as_bytes()), (2, &b"o"[..]));
    assert_eq!(req.uri, "/path?q");
    assert_eq!(req.headers["x-keep"], "1");
    assert_eq!(req.headers["x-served"], "1");
    // The new instance serves (and ticks) without seeing anything of the lost callback.
    module.tick(cache().as_ref());
    let run = play(&module, &info, Exchange::get("/", &[], &["body"]));
    assert_eq!(run.req_header("x-served").as_deref(), Some("1"), "a fresh instance");
    assert_eq!(module.stats().traps, 1);
}
