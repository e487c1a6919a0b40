//! `[[rate_limit]]` (`crate::rate_limit`): per client, a burst at once then the rate; past it
//! `429` with `Retry-After`, logged `TCP_DENIED/429`, counted in `/metrics` and `/stats`;
//! clients behind a trusted balancer limited one by one; the proxy's clock refills the
//! allowance; a reload keeps an unchanged limit's clients. Real sockets on 127.0.0.1.

mod common;

use common::admin::{admin, json};
use common::{Harness, LogFile};
use sluice_proxy::config::{Config, Mode};
use sluice_proxy::rate_limit_config::RateLimitConfig;
use sluice_testkit::{client, Reply};

fn api_limit(rate: &str, burst: u32) -> RateLimitConfig {
    toml::from_str(&format!("name = \"api\"\nrate = \"{rate}\"\nburst = {burst}\npath_prefix = \"/api/\"")).unwrap()
}

/// A reverse proxy limiting `/api/` to 2 requests a second with a burst of 1, believing
/// `X-Forwarded-For` from loopback (the test client), logging to `log`.
fn limited(c: &mut Config, log: std::path::PathBuf) {
    c.access.allow = vec!["0.0.0.0/0".parse().unwrap()];
    c.access.forwarded_for_from = vec!["127.0.0.0/8".parse().unwrap()];
    c.rate_limit = vec![api_limit("2/s", 1)];
    c.log.access_log = Some(log);
}

async fn get_as(h: &Harness, client_ip: &str, path: &str) -> client::Reply {
    client::send(h.addr(), "GET", path, &[("host", "a"), ("x-forwarded-for", client_ip)], None).await
}

#[tokio::test]
async fn each_client_gets_its_burst_then_429_until_the_rate_allows_more() {
    let log = LogFile::new();
    let path = log.path.clone();
    let h = Harness::build(Mode::Reverse, move |c| limited(c, path)).await;
    h.origin.on("/api/x", Reply::ok("api").header("Cache-Control", "max-age=600"));
    h.origin.on("/static/x", Reply::ok("static").header("Cache-Control", "max-age=600"));

    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200);
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200, "the burst (a hit counts too)");
    let refused = get_as(&h, "198.51.100.1", "/api/x").await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), "1");
    assert!(refused.text().contains("rate limit `api`"), "{}", refused.text());
    assert_eq!(get_as(&h, "198.51.100.2", "/api/x").await.status, 200, "another client behind the balancer");
    assert_eq!(get_as(&h, "198.51.100.1", "/static/x").await.status, 200, "another path");
    assert_eq!(h.origin.hits("/api/x"), 1, "a refused request costs the origin nothing");

    h.advance(1);
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200, "a second later, two more");
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200);
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 429);

    let lines = log.lines(&h, 8).await;
    let denied: Vec<&String> = lines.iter().filter(|l| l.contains(" TCP_DENIED/429 ")).collect();
    assert_eq!(denied.len(), 2, "{lines:#?}");
    assert!(denied[0].contains(" 198.51.100.1 "), "{}", denied[0]);

    let metrics = client::get(h.admin(), "/metrics", &[]).await.text();
    assert!(metrics.contains("sluice_rate_limited_total{limit=\"api\"} 2"), "{metrics}");
    assert!(metrics.contains("sluice_rate_limit_clients{limit=\"api\"} 2"), "{metrics}");
    let stats = json(&admin(&h, "GET", "/stats", &[], None).await);
    assert_eq!(stats["rate_limits"][0]["limited"], 2, "{stats}");
    assert_eq!(stats["rate_limits"][0]["rate"], "2/s");
}

#[tokio::test]
async fn a_reload_keeps_an_unchanged_limits_clients_and_resets_a_changed_one() {
    let log = LogFile::new();
    let path = log.path.clone();
    let h = Harness::build(Mode::Reverse, move |c| limited(c, path)).await;
    h.origin.on("/api/x", Reply::ok("api").header("Cache-Control", "max-age=600"));
    for _ in 0..2 {
        assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200);
    }
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 429);

    let mut same = h.proxy.state().config.clone();
    same.cache.collapse_wait = sluice_proxy::units::Dur(std::time::Duration::from_secs(3));
    h.proxy.generations().reload(same).await.expect("reloaded");
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 429, "still over the unchanged limit");

    let mut changed = h.proxy.state().config.clone();
    changed.rate_limit = vec![api_limit("10/s", 1)];
    h.proxy.generations().reload(changed).await.expect("reloaded");
    assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200, "a changed limit starts afresh");

    let mut none = h.proxy.state().config.clone();
    none.rate_limit.clear();
    h.proxy.generations().reload(none).await.expect("reloaded");
    for _ in 0..5 {
        assert_eq!(get_as(&h, "198.51.100.1", "/api/x").await.status, 200, "no limit any more");
    }
}

#[test]
fn the_configuration_checks_rates_and_names() {
    let check = |limits: &str| Config::parse(limits).map(|_| ()).map_err(|e| e.to_string());
    assert!(check("[[rate_limit]]\nname = \"a\"\nrate = \"5/s\"\nburst = 10\nhost = \"api.example\"\n").is_ok());
    let err = check("[[rate_limit]]\nname = \"a\"\nrate = \"5 per second\"\n").unwrap_err();
    assert!(err.contains("\"10/s\""), "{err}");
    let err = check("[[rate_limit]]\nname = \"a\"\nrate = \"5/s\"\n[[rate_limit]]\nname = \"a\"\nrate = \"1/m\"\n")
        .unwrap_err();
    assert!(err.contains("two [[rate_limit]] entries are named `a`"), "{err}");
    let err = check("[[rate_limit]]\nname = \"a b\"\nrate = \"5/s\"\n").unwrap_err();
    assert!(err.contains("letters, digits"), "{err}");
}

#[tokio::test]
async fn requests_without_a_path_count_as_the_root() {
    let h = Harness::build(Mode::Forward, |c| {
        c.rate_limit = vec![toml::from_str("name = \"all\"\nrate = \"1/m\"").unwrap()];
    })
    .await;
    h.origin.on("/p", Reply::ok("x"));
    assert_eq!(h.get("/p").await.status, 200);
    let answer =
        client::raw(h.addr(), b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\nConnection: close\r\n\r\n")
            .await;
    assert!(answer.starts_with("HTTP/1.1 429"), "a CONNECT counts too: {answer}");
    assert!(answer.contains("retry-after: 60"), "{answer}");
}
