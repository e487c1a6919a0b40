//! Configuration reload while the proxy runs (`crate::generation`; `SIGHUP` and
//! `POST /config/reload`): every request that starts after it follows the new file, on new
//! connections and on those already open (which stay open), a request in flight finishes on
//! the old one, the cache and its objects stay, settings that need a restart are named and
//! kept, and a rejected file changes nothing.

mod common;

use common::admin::{admin, json, AUTH};
use common::raw::{get_on, read_response};
use common::Harness;
use sluice_proxy::config::{Config, Mode, TlsConfig};
use sluice_testkit::client;
use sluice_testkit::Reply;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// A reverse proxy routing to the first of two origins, which answer `/where` with their
/// names and store `/kept` for a minute.
async fn two_origins() -> Harness {
    let h = Harness::build_with_origins(Mode::Reverse, 1, |_, _| {}).await;
    for (origin, name) in [(&h.origin, "first"), (&h.others[0], "second")] {
        origin.on("/where", Reply::ok(name).header("Cache-Control", "no-store"));
        origin.on("/kept", Reply::ok(format!("kept by {name}")).header("Cache-Control", "max-age=60"));
    }
    h
}

/// The running configuration with loopback clients no longer allowed.
fn denying_loopback(h: &Harness) -> Config {
    let mut config = h.proxy.state().config.clone();
    config.access.allow = vec!["10.0.0.0/8".parse().unwrap()];
    config
}

/// The running configuration with every route sent to the second origin.
fn to_second(h: &Harness) -> Config {
    let mut config = h.proxy.state().config.clone();
    config.route[0].origin = Some(format!("http://{}", h.others[0].addr));
    config
}

#[tokio::test]
async fn a_reload_routes_new_connections_by_the_new_configuration() {
    let h = two_origins().await;
    assert_eq!(h.get("/where").await.text(), "first");
    let report = h.proxy.generations().reload(to_second(&h)).await.expect("reloaded");
    assert!(report.restart_needed.is_empty(), "{report:?}");
    assert_eq!(h.get("/where").await.text(), "second");
}

#[tokio::test]
async fn the_cache_and_transaction_ids_outlive_a_reload() {
    let h = two_origins().await;
    let stored = h.get("/kept").await;
    assert!(stored.header("via").contains("sluice"), "{:?}", stored.headers);
    let first_id = h.proxy.state().next_txn_id();

    let mut config = h.proxy.state().config.clone();
    config.headers.via = false;
    h.proxy.generations().reload(config).await.expect("reloaded");
    let kept = h.get("/kept").await;
    assert_eq!((kept.text().as_str(), kept.header("via")), ("kept by first", ""), "served by the new generation");
    assert!(common::cache_status(&kept).contains("hit"), "{}", common::cache_status(&kept));
    assert_eq!(h.origin.hits("/kept"), 1);
    assert!(h.proxy.state().next_txn_id() > first_id, "transaction ids go on counting");
}

#[tokio::test]
async fn a_connection_open_across_a_reload_serves_its_next_request_by_the_new_configuration() {
    let h = two_origins().await;
    let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let first = get_on(&mut conn, "/where").await;
    assert!(first.ends_with("first"), "{first}");

    h.proxy.generations().reload(to_second(&h)).await.expect("reloaded");
    let second = get_on(&mut conn, "/where").await;
    assert!(second.ends_with("second"), "the same connection, the new routes: {second}");

    h.proxy.generations().reload(denying_loopback(&h)).await.expect("reloaded");
    let denied = get_on(&mut conn, "/where").await;
    assert!(denied.starts_with("HTTP/1.1 403"), "the client is checked against the new rules: {denied}");
}

#[tokio::test]
async fn a_request_in_flight_during_a_reload_finishes_on_its_configuration() {
    let h = two_origins().await;
    h.origin.on("/slow", Reply::ok("slow first").header("Cache-Control", "no-store").delay(Duration::from_millis(300)));
    let mut conn = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    conn.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    h.eventually("the origin to receive /slow", |h| h.origin.hits("/slow") == 1).await;

    h.proxy.generations().reload(to_second(&h)).await.expect("reloaded");
    let slow = read_response(&mut conn).await;
    assert!(slow.starts_with("HTTP/1.1 200") && slow.ends_with("slow first"), "{slow}");
    let next = get_on(&mut conn, "/where").await;
    assert!(next.ends_with("second"), "the next request on the same connection: {next}");
}

#[tokio::test]
async fn access_rules_apply_to_the_next_connection() {
    let h = two_origins().await;
    assert_eq!(h.get("/where").await.status, 200);
    h.proxy.generations().reload(denying_loopback(&h)).await.expect("reloaded");
    assert_eq!(h.get("/where").await.status, 403, "loopback is no longer allowed");
}

#[tokio::test]
async fn settings_that_need_a_restart_are_named_and_keep_their_running_values() {
    let h = two_origins().await;
    let mut config = to_second(&h);
    let running_memory = config.cache.memory.0;
    config.cache.memory.0 *= 2;
    config.cache.policy = "lfu".into();
    config.cache.collapse_wait.0 = Duration::from_secs(7);
    let report = h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!(report.restart_needed, ["cache.memory", "cache.policy"]);
    let running = h.proxy.state();
    assert_eq!(running.config.cache.memory.0, running_memory);
    assert_eq!(running.config.cache.collapse_wait.0, Duration::from_secs(7), "reloadable: applied");
    assert_eq!(h.get("/where").await.text(), "second", "the rest applied");
}

#[tokio::test]
async fn a_rejected_configuration_changes_nothing() {
    let h = two_origins().await;
    let before = h.proxy.state();
    let mut config = to_second(&h);
    config.route[0].origin = Some("ftp://nowhere".into());
    let err = h.proxy.generations().reload(config).await.unwrap_err();
    assert!(err.to_string().contains("ftp://nowhere"), "{err}");

    let mut config = to_second(&h);
    let missing = TlsConfig::single("/nonexistent/cert.pem".into(), "/nonexistent/key.pem".into());
    config.listener[0].tls = Some(missing);
    let err = h.proxy.generations().reload(config).await.unwrap_err();
    assert!(err.to_string().contains("cannot read /nonexistent/cert.pem"), "{err}");

    assert!(Arc::ptr_eq(&before, &h.proxy.state()), "the same generation runs");
    assert_eq!(h.get("/where").await.text(), "first");
}

#[tokio::test]
async fn the_admin_api_reloads_the_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    let file = path.clone();
    let h = Harness::build_with_origins(Mode::Reverse, 1, move |c, _| c.source = Some(file)).await;
    h.others[0].on("/where", Reply::ok("second").header("Cache-Control", "no-store"));
    std::fs::write(&path, toml::to_string(&to_second(&h)).unwrap()).unwrap();

    let anonymous = client::send(h.admin(), "POST", "/config/reload", &[], None).await;
    assert_eq!(anonymous.status, 401);
    let wrong_method = admin(&h, "GET", "/config/reload", &[], None).await;
    assert_eq!((wrong_method.status.as_u16(), wrong_method.header("allow")), (405, "POST"));

    let reply = admin(&h, "POST", "/config/reload", &[], None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let report = json(&reply);
    assert_eq!(report["path"], path.display().to_string());
    assert_eq!(report["restart_needed"], serde_json::json!([]));
    assert_eq!(h.get("/where").await.text(), "second");

    // What runs now, as TOML, the token redacted.
    let running = admin(&h, "GET", "/config", &[], None).await;
    assert_eq!(running.header("content-type"), "application/toml");
    let running: Config = toml::from_str(&running.text()).unwrap();
    assert_eq!(running.route[0].origin, Some(format!("http://{}", h.others[0].addr)));
    assert_eq!(running.admin.token.as_deref(), Some("(redacted)"));
    assert_eq!(admin(&h, "POST", "/config", &[], None).await.status, 405);

    std::fs::write(&path, "[cache\nmemory = 1").unwrap();
    let reply = admin(&h, "POST", "/config/reload", &[], None).await;
    assert_eq!(reply.status, 400);
    assert!(reply.text().starts_with("configuration rejected, nothing changed: "), "{}", reply.text());
    assert_eq!(h.get("/where").await.text(), "second");

    // What to alert on: the last reload was rejected, the old configuration runs on.
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    for line in [
        "sluice_config_reloads_total{result=\"applied\"} 1",
        "sluice_config_reloads_total{result=\"rejected\"} 1",
        "sluice_config_last_reload_successful 0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    assert_eq!(stats["config"]["last_reload_successful"], false);
    assert_eq!(stats["config"]["reloads_applied"], 1);
    std::fs::write(&path, toml::to_string(&to_second(&h)).unwrap()).unwrap();
    assert_eq!(admin(&h, "POST", "/config/reload", &[], None).await.status, 200);
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("sluice_config_last_reload_successful 1"), "{metrics}");
}

#[tokio::test]
async fn without_a_configuration_file_there_is_nothing_to_reload() {
    let h = two_origins().await;
    let reply = client::send(h.admin(), "POST", "/config/reload", &[AUTH], None).await;
    assert_eq!(reply.status, 404);
    assert!(reply.text().contains("no --config file"), "{}", reply.text());
}

#[tokio::test]
async fn a_reload_serves_a_renewed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let write = |pair: &rcgen::CertifiedKey<rcgen::KeyPair>| {
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    };
    let old = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    write(&old);
    let tls = TlsConfig::single(cert.clone(), key.clone());
    let h = Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(tls)).await;
    assert!(handshake(h.addr(), &old.cert).await.is_ok());

    let renewed = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    write(&renewed);
    let config = h.proxy.state().config.clone();
    h.proxy.generations().reload(config).await.expect("reloaded");
    assert!(handshake(h.addr(), &renewed.cert).await.is_ok(), "the renewed certificate is served");
    assert!(handshake(h.addr(), &old.cert).await.is_err(), "the old one is not");

    // Its end is in /metrics, to alert on before it comes (rcgen's default: 4096-01-01).
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(
        metrics.contains(&format!(
            "sluice_tls_certificate_expiry_timestamp_seconds{{listener=\"127.0.0.1:0\",certificate=\"{}\"}} 67090118400\n",
            cert.display()
        )),
        "{metrics}"
    );
}

/// A TLS handshake with `addr` as `localhost`, trusting `cert` only.
async fn handshake(addr: std::net::SocketAddr, cert: &rcgen::Certificate) -> std::io::Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.map(drop)
}
