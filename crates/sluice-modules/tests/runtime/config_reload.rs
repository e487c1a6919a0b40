//! A configuration reload (what SIGHUP does in `sluice serve`): unchanged entries keep their
//! modules, changed ones are rebuilt, removed ones unloaded, and a bad file changes nothing.

use crate::support::{add_headers_entry, Proxy};
use sluice_proxy::config::Config;
use sluice_testkit::Reply;
use std::sync::Arc;

fn entries(text: &str) -> Vec<sluice_proxy::config::ModuleConfig> {
    Config::parse(text).expect("valid configuration").module
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_reload_keeps_unchanged_modules_and_swaps_the_rest() {
    let builtin = |value: &str| {
        format!("[[module]]\nname = \"add-headers\"\nsettings = {{ headers = {{ x-a = \"{value}\" }} }}\n")
    };
    let first = format!("{}{}", builtin("1"), add_headers_entry("plugin"));
    let proxy = Proxy::start(&first).await;
    proxy.origin.on("/d", Reply::ok("d"));
    let reply = proxy.get("/d").await;
    assert_eq!((reply.header("x-a"), reply.header("x-wasm-1")), ("1", "one"));
    let before = proxy.running.state().modules.snapshot();

    // The same file again: nothing is rebuilt.
    let changes = proxy.manager.configure(&entries(&first)).unwrap();
    assert_eq!((changes.kept.len(), changes.built.len(), changes.removed.len()), (2, 0, 0));
    let after = proxy.running.state().modules.snapshot();
    assert!(before.iter().zip(after.iter()).all(|(a, b)| Arc::ptr_eq(&a.module, &b.module)));

    // Changed settings rebuild that entry; a removed plugin is unloaded.
    let changes = proxy.manager.configure(&entries(&builtin("2"))).unwrap();
    assert_eq!((changes.built, changes.removed), (vec!["add-headers".to_owned()], vec!["plugin".to_owned()]));
    let reply = proxy.get("/d").await;
    assert_eq!((reply.text().as_str(), reply.header("x-a"), reply.header("x-wasm-1")), ("d", "2", ""));
    let old_plugin = before.iter().find(|m| m.module.name() == "plugin").expect("plugin");
    assert!(old_plugin.module.new_txn(&txn_info(&proxy)).is_none(), "the unloaded plugin sits out new transactions");

    // A file with a bad entry changes nothing.
    let bad = format!(
        "{}[[module]]\nname = \"w\"\nkind = \"wasm\"\nsettings = {{ path = \"/nonexistent.wasm\" }}\n",
        builtin("3")
    );
    let err = proxy.manager.configure(&entries(&bad)).unwrap_err();
    assert!(err.to_string().contains("[[module]] w (wasm): settings.path: no plugin file"), "{err}");
    assert_eq!(proxy.get("/d").await.header("x-a"), "2");
    let names: Vec<_> = proxy.manager.statuses().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["add-headers"]);
}

fn txn_info(proxy: &Proxy) -> sluice_module::TxnInfo {
    sluice_module::TxnInfo {
        id: 1,
        client: "127.0.0.1:1".parse().unwrap(),
        cache: Arc::clone(&proxy.running.state().content),
        cpu: proxy.running.state().cpu.clone(),
        background: false,
    }
}
