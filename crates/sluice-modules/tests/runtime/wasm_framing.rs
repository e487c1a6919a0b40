//! A Proxy-Wasm plugin that sets framing fields on responses (test plugin `set_headers`):
//! the host keeps its own (docs/modules.md, "Framing is the host's"), towards the client and
//! in what it stores.

use crate::support::{plugin, Proxy};
use sluice_testkit::Reply;

/// Framing fields a plugin sets: a length of its own, chunking, `Connection` naming a field.
const FRAMING: &str = "content-length=5; transfer-encoding=chunked; connection=close, x-listed; x-listed=1";

/// A `[[module]]` entry for `set_headers` with `plugin_config`, attached at `attach`.
fn entry(plugin_config: &str, attach: &str) -> String {
    format!(
        "[[module]]\nname = \"framing\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 1\n\
         plugin_config = {plugin_config:?}\nattach = {attach:?}\n",
        plugin("set_headers").display().to_string()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_fields_a_plugin_sets_towards_the_client_are_the_hosts() {
    // Field by field, and the whole map written back.
    for config in [FRAMING.to_owned(), format!("all:{FRAMING}")] {
        let proxy = Proxy::start(&entry(&config, "client")).await;
        proxy.origin.on("/k", Reply::ok("twenty-two bytes here!").header("cache-control", "max-age=60"));
        // A miss, then a hit; a wrong length would leave bytes in front of the second answer.
        let answers = sluice_testkit::client::two_on_one_connection(proxy.addr(), &proxy.origin.url("/k")).await;
        assert_eq!(answers.len(), 2, "{config}: {answers:?}");
        for answer in answers {
            sluice_testkit::client::assert_framed_by_the_proxy(&answer, "twenty-two bytes here!");
        }
        assert_eq!(proxy.origin.hits("/k"), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_fields_a_plugin_sets_before_the_store_are_not_stored() {
    let proxy = Proxy::start(&entry(FRAMING, "origin")).await;
    proxy.origin.on("/s", Reply::ok("stored whole").header("cache-control", "max-age=60"));
    assert_eq!(proxy.get("/s").await.text(), "stored whole");
    let hit = proxy.get("/s").await;
    assert_eq!(proxy.origin.hits("/s"), 1);
    assert_eq!((hit.text(), hit.header("content-length")), ("stored whole".to_owned(), "12"), "its true length");
    assert_eq!(hit.header("transfer-encoding"), "");
    assert_eq!(hit.header("x-listed"), "1");
}
