//! `sluice serve` with `[[module]]` entries of every kind: `--check-config` names the bad
//! entry, and SIGHUP re-reads the entries while the proxy runs (a bad file changes nothing).
//! Waits poll a condition with a deadline; nothing sleeps as synchronisation.

mod common;

use common::{exchange, free_port, serve_configured, signal, sluice, until, Configured};
use std::net::SocketAddr;
use std::path::Path;

fn check(dir: &Path, name: &str, text: &str) -> (bool, String) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&path).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn check_config_names_bad_wasm_and_extproc_entries() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = check(
        dir.path(),
        "wasm.toml",
        "[[module]]\nname = \"w\"\nkind = \"wasm\"\nsettings = { path = \"/nonexistent/w.wasm\" }\n",
    );
    assert!(!ok);
    assert!(
        err.contains("wasm.toml")
            && err.contains("[[module]] w (wasm): settings.path: no plugin file /nonexistent/w.wasm"),
        "{err}"
    );

    let not_wasm = dir.path().join("not.wasm");
    std::fs::write(&not_wasm, b"not a wasm module").unwrap();
    let text = format!(
        "[[module]]\nname = \"w\"\nkind = \"wasm\"\nsettings = {{ path = {:?} }}\n",
        not_wasm.display().to_string()
    );
    let (ok, err) = check(dir.path(), "garbage.toml", &text);
    assert!(!ok);
    assert!(err.contains("[[module]] w (wasm)"), "{err}");

    let (ok, err) = check(dir.path(), "extproc.toml", "[[module]]\nname = \"e\"\nkind = \"extproc\"\nsettings = { command = \"/nonexistent/helper\", socket = \"/tmp/e.sock\" }\n");
    assert!(!ok);
    assert!(err.contains("[[module]] e (extproc): settings.command: no executable /nonexistent/helper"), "{err}");

    let (ok, err) = check(dir.path(), "kind.toml", "[[module]]\nname = \"k\"\nkind = \"lua\"\n");
    assert!(!ok);
    assert!(err.contains("lua") && err.contains("wasm") && err.contains("extproc"), "{err}");

    let (ok, err) = check(dir.path(), "twice.toml", "[[module]]\nname = \"noop\"\n[[module]]\nname = \"noop\"\n");
    assert!(!ok);
    assert!(err.contains("the name is used by another entry"), "{err}");

    let (ok, err) = check(dir.path(), "fine.toml", "[[module]]\nname = \"e\"\nkind = \"extproc\"\non_error = \"closed\"\nsettings = { command = \"sh\", socket = \"/tmp/e.sock\" }\n");
    assert!(ok, "{err}");
}

fn modules(admin: SocketAddr) -> String {
    exchange(admin, "GET /modules HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n")
        .unwrap_or_default()
}

/// One worker: a current-thread runtime, where loading modules, signals, the admin API and
/// the proxy share one thread.
#[test]
fn sighup_reloads_the_module_entries_with_one_worker() {
    sighup_reloads_the_module_entries("1");
}

/// More workers: a multi-thread runtime.
#[test]
fn sighup_reloads_the_module_entries_with_two_workers() {
    sighup_reloads_the_module_entries("2");
}

fn sighup_reloads_the_module_entries(threads: &str) {
    let Configured { dir: _dir, proxy, admin, base, config, log, mut server } = serve_configured(threads);
    until("the admin API", || modules(admin).contains("200 OK"));
    assert!(modules(admin).ends_with("[]"), "{}", modules(admin));

    // An origin that refuses connections: the proxy answers 502, and modules see that
    // response towards the client like any other.
    let refused = free_port();
    let get =
        format!("GET http://127.0.0.1:{refused}/x HTTP/1.1\r\nHost: 127.0.0.1:{refused}\r\nConnection: close\r\n\r\n");
    assert!(!exchange(proxy, &get).unwrap().to_ascii_lowercase().contains("x-reloaded"));

    let entry = "[[module]]\nname = \"add-headers\"\nsettings = { headers = { x-reloaded = \"yes\" } }\n";
    std::fs::write(&config, format!("{base}{entry}")).unwrap();
    signal(&server.0, "HUP");
    until("the module to be listed", || modules(admin).contains("\"add-headers\""));
    assert!(exchange(proxy, &get).unwrap().to_ascii_lowercase().contains("x-reloaded: yes"));

    // A bad file: logged, nothing changes.
    std::fs::write(
        &config,
        format!(
            "{base}{entry}[[module]]\nname = \"w\"\nkind = \"wasm\"\nsettings = {{ path = \"/nonexistent.wasm\" }}\n"
        ),
    )
    .unwrap();
    signal(&server.0, "HUP");
    until("the reload error in the log", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("the running configuration is unchanged"))
    });
    let listed = modules(admin);
    assert!(listed.contains("\"add-headers\"") && !listed.contains("\"w\""), "{listed}");
    assert!(exchange(proxy, &get).unwrap().to_ascii_lowercase().contains("x-reloaded: yes"));

    // An empty module list unloads it.
    std::fs::write(&config, &base).unwrap();
    signal(&server.0, "HUP");
    until("the module to be gone", || modules(admin).ends_with("[]"));
    assert!(!exchange(proxy, &get).unwrap().to_ascii_lowercase().contains("x-reloaded"));

    signal(&server.0, "TERM");
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&log).unwrap_or_default());
}
