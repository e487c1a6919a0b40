//! Loading, reloading and unloading plugins at run time.

use crate::support::{compiled, info, play, request, response, wasm, Exchange, MemCache};
use sluice_module::{Flow, Module, TxnOutcome};
use sluice_wasm::{WasmConfig, WasmError, WasmRegistry};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn has_wasm_headers(run: &crate::support::Run) -> bool {
    run.header("x-wasm-1").is_some()
}

#[test]
fn a_reload_swaps_versions_while_an_old_transaction_finishes_on_the_old_one() {
    let registry = WasmRegistry::new();
    let handle = registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap();
    let module: Arc<dyn Module> = handle.clone();
    let info = info(1, Arc::new(MemCache::default()));

    // A transaction starts on version 1 ...
    let mut old = module.new_txn(&info).expect("state");
    let mut req = request("GET", "/", &[]);
    assert!(matches!(old.req_headers(&info, &mut req), Flow::Continue));
    let v1 = handle.current().unwrap();

    // ... the plugin is replaced (same handle) ...
    let again = registry.load("p", wasm("empty"), WasmConfig::default()).unwrap();
    assert!(Arc::ptr_eq(&handle, &again));
    assert_eq!(handle.stats().unwrap().version, 2);

    // ... new transactions get version 2 ...
    let run = play(module.as_ref(), &info, Exchange::get("/", &[], &[]));
    assert!(run.started && !has_wasm_headers(&run));

    // ... and the old one completes on version 1.
    let mut resp = response(200, &[]);
    assert!(matches!(old.client_resp_headers(&info, &mut resp), Flow::Continue));
    assert_eq!(resp.headers["x-wasm-1"], "one");
    let outcome = TxnOutcome { status: http::StatusCode::OK, body_bytes: 0, result: "TCP_MISS", completed: true };
    old.resp_done(&info, &outcome);
    drop(old);
    let stats = v1.stats();
    assert_eq!((stats.version, stats.contexts_created, stats.contexts_deleted), (1, 1, 1));
}

#[test]
fn unloading_sits_out_new_transactions_and_lets_running_ones_finish() {
    let registry = WasmRegistry::new();
    let handle = registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap();
    let info = info(1, Arc::new(MemCache::default()));
    let mut running = handle.new_txn(&info).expect("state");
    let v1 = handle.current().unwrap();

    registry.unload("p").unwrap();
    assert!(!handle.is_loaded());
    assert!(registry.names().is_empty());
    assert!(handle.new_txn(&info).is_none());
    assert!(matches!(registry.unload("p"), Err(WasmError::NotLoaded(_))));

    let mut resp = response(200, &[]);
    running.client_resp_headers(&info, &mut resp);
    assert_eq!(resp.headers["x-wasm-4"], "four");
    drop(running);
    assert_eq!(v1.stats().contexts_deleted, 1);

    // Loading the name again revives the same handle.
    let again = registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap();
    assert!(Arc::ptr_eq(&handle, &again));
    assert_eq!(handle.stats().unwrap().version, 2);
    assert!(has_wasm_headers(&play(handle.as_ref(), &info, Exchange::get("/", &[], &[]))));
}

#[test]
fn a_failed_reload_keeps_the_old_version() {
    let registry = WasmRegistry::new();
    let handle = registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap();
    assert!(matches!(registry.load("p", b"junk".to_vec(), WasmConfig::default()), Err(WasmError::Compile { .. })));
    let rejected = WasmConfig { plugin_config: "reject".into(), ..WasmConfig::default() };
    assert!(matches!(registry.load("p", compiled("phases"), rejected), Err(WasmError::Start { .. })));
    assert!(matches!(
        registry.load("p", std::path::PathBuf::from("/nonexistent.wasm"), WasmConfig::default()),
        Err(WasmError::Io { .. })
    ));
    let info = info(1, Arc::new(MemCache::default()));
    assert!(has_wasm_headers(&play(handle.as_ref(), &info, Exchange::get("/", &[], &[]))));
    assert_eq!(registry.names(), ["p"]);
    // A name that never loaded is not registered.
    assert!(registry.load("q", b"junk".to_vec(), WasmConfig::default()).is_err());
    assert!(registry.get("q").is_none());
}

#[test]
fn loading_and_unloading_under_load_loses_no_transaction() {
    let registry = Arc::new(WasmRegistry::new());
    let handle = registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..3)
        .map(|worker| {
            let handle = handle.clone();
            let (stop, completed) = (stop.clone(), completed.clone());
            std::thread::spawn(move || {
                let cache = Arc::new(MemCache::default());
                let mut problems = Vec::new();
                let mut id = 0;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let run = play(
                        handle.as_ref(),
                        &info(worker * 1_000_000 + id, cache.clone()),
                        Exchange::get("/", &[], &["x"]),
                    );
                    // Every transaction completes: on a version with the headers, a version
                    // without, or (unloaded) without the module; never failed half-way.
                    let failed = run.flows.iter().any(|flow| !flow.ends_with(":Continue")) || run.resp_body != b"x";
                    if failed {
                        problems.push(format!("{:?}", run.flows));
                    }
                    completed.fetch_add(1, Ordering::Relaxed);
                }
                problems
            })
        })
        .collect();
    for round in 0..12 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        match round % 4 {
            0 => drop(registry.load("p", compiled("empty"), WasmConfig::default()).unwrap()),
            1 => drop(registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap()),
            2 => registry.unload("p").unwrap(),
            _ => drop(registry.load("p", compiled("add_headers"), WasmConfig::default()).unwrap()),
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let problems: Vec<String> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(completed.load(Ordering::Relaxed) > 100, "too few transactions ran");
    assert_eq!(handle.stats().unwrap().failed_transactions, 0);
}

/// The status of the local response the `queue` plugin gives `headers`.
fn queue_answer(module: &dyn Module, headers: &[(&str, &str)]) -> Option<u16> {
    let run = play(module, &info(1, Arc::new(MemCache::default())), Exchange::get("/", headers, &[]));
    run.responded.map(|response| response.status.as_u16())
}

#[test]
fn unloading_a_plugin_frees_its_shared_queues() {
    let registry = WasmRegistry::new();
    let owner = registry.load("queue-owner", compiled("queue"), WasmConfig::default()).unwrap();
    let feeder = registry.load("queue-feeder", compiled("queue"), WasmConfig::default()).unwrap();
    let to_owner = [("x-vm", "queue-owner"), ("x-enqueue-to", "parked"), ("x-plugin", "queue-feeder")];
    assert_eq!(queue_answer(feeder.as_ref(), &to_owner), Some(200), "the owner's queue takes items");
    // A reload keeps the queues (and their items) ...
    registry.load("queue-owner", compiled("queue"), WasmConfig::default()).unwrap();
    assert_eq!(queue_answer(owner.as_ref(), &[("x-unpark", "1")]), Some(200));
    // ... an unload frees them: they are gone for everyone.
    registry.unload("queue-owner").unwrap();
    assert_eq!(queue_answer(feeder.as_ref(), &to_owner), Some(404));
    // Another plugin registers its queues as before, and they work.
    let other = registry.load("queue-other", compiled("queue"), WasmConfig::default()).unwrap();
    let to_other = [("x-vm", "queue-other"), ("x-enqueue-to", "parked"), ("x-plugin", "queue-feeder")];
    assert_eq!(queue_answer(feeder.as_ref(), &to_other), Some(200));
    assert_eq!(queue_answer(other.as_ref(), &[("x-unpark", "1")]), Some(200));
    // Loaded again, the name starts with new, empty queues.
    registry.load("queue-owner", compiled("queue"), WasmConfig::default()).unwrap();
    assert_eq!(queue_answer(owner.as_ref(), &[("x-unpark", "1")]), Some(204));
}
