//! Proxy authentication (`[proxy_auth]`): forward-proxy requests and CONNECT need
//! `Proxy-Authorization: Basic` of a user in an htpasswd file (written here by the real
//! `htpasswd -B` of apache2-utils), else `407` with a challenge; reverse routes are not
//! proxy requests. Real clients: our own and curl (`--proxy-user`).

mod common;

use common::{curl, Harness};
use sluice_proxy::config::{Config, Mode, RouteConfig};
use sluice_proxy::proxy_auth::ProxyAuthConfig;
use sluice_proxy::units::Dur;
use sluice_testkit::Reply;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Writes `users` (name, password) with `htpasswd -B` (bcrypt, low cost for speed).
fn htpasswd(dir: &Path, users: &[(&str, &str)]) -> PathBuf {
    let file = dir.join("users");
    for (i, (user, password)) in users.iter().enumerate() {
        let create = if i == 0 { "-cbB" } else { "-bB" };
        let status = std::process::Command::new("htpasswd")
            .args([create, "-C", "4"])
            .arg(&file)
            .args([user, password])
            .output()
            .expect("htpasswd is installed (apache2-utils, scripts/install-deps.sh)")
            .status;
        assert!(status.success(), "htpasswd {user}");
    }
    file
}

fn auth_of(file: PathBuf) -> ProxyAuthConfig {
    ProxyAuthConfig { users_file: file, realm: "Sluice test".into(), cache_ttl: Dur(Duration::from_secs(3600)) }
}

/// A proxy in `mode` needing the users of `dir`'s file (ann:secret, bob:other).
async fn guarded(mode: Mode, dir: &Path, tweak: impl FnOnce(&mut Config, std::net::SocketAddr)) -> Harness {
    let file = htpasswd(dir, &[("ann", "secret"), ("bob", "other")]);
    Harness::build_with_origin(mode, move |c, origin| {
        c.proxy_auth = Some(auth_of(file));
        tweak(c, origin);
    })
    .await
}

fn basic(user_password: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password))
}

#[tokio::test]
async fn rfc9110_11_7_forward_requests_need_valid_proxy_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let h = guarded(Mode::Forward, dir.path(), |_, _| {}).await;
    h.origin.on("/p", Reply::ok("behind auth").header("Cache-Control", "max-age=60"));
    let none = h.get("/p").await;
    assert_eq!(none.status, 407);
    assert_eq!(none.header("proxy-authenticate"), "Basic realm=\"Sluice test\", charset=\"UTF-8\"");
    for wrong in ["ann:wrong", "carol:secret", "ann"] {
        assert_eq!(h.get_with("/p", &[("Proxy-Authorization", &basic(wrong))]).await.status, 407, "{wrong}");
    }
    assert_eq!(h.origin.hits("/p"), 0);
    let ann = h.get_with("/p", &[("Proxy-Authorization", &basic("ann:secret"))]).await;
    assert_eq!((ann.status.as_u16(), ann.text().as_str()), (200, "behind auth"));
    assert_eq!(h.origin.last_request("/p").unwrap().header("proxy-authorization"), None, "the credential stops here");
    let bob = h.get_with("/p", &[("Proxy-Authorization", &basic("bob:other"))]).await;
    assert_eq!(bob.status, 200, "a hit needs credentials too, and gets them checked");
    assert_eq!(h.get("/p").await.status, 407, "so does a request for a stored response");
}

#[tokio::test]
async fn curl_authenticates_for_requests_and_connect_tunnels() {
    let dir = tempfile::tempdir().unwrap();
    let h = guarded(Mode::Forward, dir.path(), |c, origin| c.access.connect_ports = vec![origin.port()]).await;
    h.origin.on("/c", Reply::ok("through"));
    let proxy = format!("http://{}", h.addr());
    let url = h.origin.url("/c");
    assert_eq!(curl(&["-x", &proxy, "-w", "%{http_code}", "-o", "/dev/null", &url]).await, "407");
    assert_eq!(curl(&["-x", &proxy, "--proxy-user", "ann:secret", &url]).await, "through");
    assert_eq!(curl(&["-p", "-x", &proxy, "--proxy-user", "bob:other", &url]).await, "through", "CONNECT");
    let refused = curl(&["-p", "-x", &proxy, "-w", "%{http_connect}", "-o", "/dev/null", &url]).await;
    assert_eq!(refused, "407", "CONNECT without credentials");
    assert_eq!(h.origin.hits("/c"), 2);
}

#[tokio::test]
async fn reverse_routes_are_not_proxy_requests() {
    let dir = tempfile::tempdir().unwrap();
    let h = guarded(Mode::Both, dir.path(), |c, origin| {
        c.route = vec![RouteConfig {
            host: Some("site.example".into()),
            origin: Some(format!("http://{origin}")),
            ..RouteConfig::default()
        }];
    })
    .await;
    h.origin.on("/r", Reply::ok("public site").header("Cache-Control", "no-store"));
    let routed = sluice_testkit::client::get(h.addr(), "/r", &[("Host", "site.example")]).await;
    assert_eq!((routed.status.as_u16(), routed.text().as_str()), (200, "public site"));
    assert_eq!(h.get("/r").await.status, 407, "forwarding the same listener's absolute URIs still needs them");
}

#[tokio::test]
async fn the_access_log_names_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let log = common::LogFile::new();
    let log_path = log.path.clone();
    let h = guarded(Mode::Forward, dir.path(), move |c, _| c.log.access_log = Some(log_path)).await;
    h.origin.on("/l", Reply::ok("x").header("Cache-Control", "no-store"));
    h.get_with("/l", &[("Proxy-Authorization", &basic("ann:secret"))]).await;
    h.get("/l").await;
    let lines = log.lines(&h, 2).await;
    assert!(lines[0].contains(" TCP_MISS/200 ") && lines[0].contains("/l ann HIER_DIRECT/"), "{}", lines[0]);
    assert!(lines[1].contains(" TCP_DENIED/407 ") && lines[1].contains("/l - HIER_NONE/"), "{}", lines[1]);
}

#[test]
fn a_users_file_that_is_not_bcrypt_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users");
    let status = std::process::Command::new("htpasswd").args(["-cbs"]).arg(&file).args(["ann", "secret"]).output();
    assert!(status.expect("htpasswd is installed").status.success());
    let config = Config { proxy_auth: Some(auth_of(file)), ..Config::default() };
    let clock = std::sync::Arc::new(sluice_proxy::clock::ManualClock::default());
    let err = sluice_proxy::State::new(config, clock, Vec::new()).unwrap_err();
    assert!(err.to_string().contains("htpasswd -B"), "{err}");
}
