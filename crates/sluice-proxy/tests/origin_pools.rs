//! Routes with several origins (`origins`): balancing (round-robin, least connections, URL
//! hash), failover when an origin cannot be reached, passive and active health, one cache
//! for all the origins of a route, and their figures in `/stats` and `/metrics`.

mod common;

use common::admin::{admin, json};
use common::{cache_status, Harness};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_proxy::pool_config::{Balance, HealthCheckConfig};
use sluice_proxy::units::Dur;
use sluice_testkit::Reply;
use std::net::SocketAddr;
use std::time::Duration;

/// A reverse proxy whose one route has `n` origins (the harness origin first, then
/// `h.others`), with `tweak` applied to the route.
async fn pool(n: usize, tweak: impl FnOnce(&mut RouteConfig)) -> Harness {
    pool_with(n, None, tweak).await
}

/// As [`pool`], with `dead` (an address nothing listens on) as the first origin.
async fn pool_with(n: usize, dead: Option<SocketAddr>, tweak: impl FnOnce(&mut RouteConfig)) -> Harness {
    Harness::build_with_origins(Mode::Reverse, n - 1, |c, addrs| {
        let mut route = RouteConfig {
            origins: dead.iter().chain(addrs).map(|a| format!("http://{a}")).collect(),
            ..RouteConfig::default()
        };
        tweak(&mut route);
        c.route = vec![route];
    })
    .await
}

/// An address on 127.0.0.1 where connections are refused.
async fn refusing() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// Serves `path` as `name`, never stored, on every origin of `h`.
fn answer_everywhere(h: &Harness, path: &str) {
    for (i, origin) in std::iter::once(&h.origin).chain(&h.others).enumerate() {
        origin.on(path, Reply::ok(format!("origin {i}")).header("Cache-Control", "no-store"));
    }
}

/// Each origin's hits on `path`, the harness origin first.
fn hits(h: &Harness, path: &str) -> Vec<usize> {
    std::iter::once(&h.origin).chain(&h.others).map(|o| o.hits(path)).collect()
}

/// The route's origins as `/stats` shows them.
async fn pool_stats(h: &Harness) -> Vec<serde_json::Value> {
    let stats = json(&admin(h, "GET", "/stats", &[], None).await);
    stats["pools"][0]["origins"].as_array().expect("the pool in /stats").clone()
}

#[tokio::test]
async fn round_robin_spreads_requests_in_turn_with_each_origins_own_host() {
    let h = pool(3, |_| {}).await;
    answer_everywhere(&h, "/p");
    for _ in 0..6 {
        assert_eq!(h.get("/p").await.status, 200);
    }
    assert_eq!(hits(&h, "/p"), [2, 2, 2]);
    for origin in std::iter::once(&h.origin).chain(&h.others) {
        let host = origin.last_request("/p").unwrap().header("host").unwrap().to_owned();
        assert_eq!(host, origin.addr.to_string(), "each origin gets its own authority as Host");
    }
}

#[tokio::test]
async fn preserve_host_sends_the_clients_host_to_every_origin() {
    let h = pool(2, |r| r.preserve_host = true).await;
    answer_everywhere(&h, "/p");
    for _ in 0..2 {
        h.get_with("/p", &[("Host", "www.example")]).await;
    }
    for origin in std::iter::once(&h.origin).chain(&h.others) {
        assert_eq!(origin.last_request("/p").unwrap().header("host"), Some("www.example"));
    }
}

#[tokio::test]
async fn the_origins_of_a_route_share_its_cached_responses() {
    let h = pool(2, |_| {}).await;
    for origin in std::iter::once(&h.origin).chain(&h.others) {
        origin.on("/c", Reply::ok("cached once").header("Cache-Control", "max-age=60"));
    }
    assert_eq!(h.get("/c").await.text(), "cached once");
    let second = h.get("/c").await;
    assert!(cache_status(&second).contains("hit"), "{}", cache_status(&second));
    assert_eq!(hits(&h, "/c").iter().sum::<usize>(), 1, "the other origin is not asked again");
}

#[tokio::test]
async fn a_refused_origin_is_failed_over_and_leaves_rotation_for_fail_timeout() {
    let dead = refusing().await;
    let h = pool_with(1, Some(dead), |_| {}).await;
    h.origin.on("/p", Reply::ok("alive").header("Cache-Control", "no-store"));
    let reply = h.send("POST", "/p", &[], Some("a body")).await;
    assert_eq!(
        (reply.status.as_u16(), reply.text().as_str()),
        (200, "alive"),
        "nothing reached the dead origin: any method moves on"
    );
    assert_eq!(h.origin.last_request("/p").unwrap().body, b"a body");
    let stats = pool_stats(&h).await;
    assert_eq!(stats[0]["up"], false, "max_fails = 1 by default");
    assert_eq!(stats[0]["failures"], 1);
    for _ in 0..3 {
        assert_eq!(h.get("/p").await.text(), "alive");
    }
    assert_eq!(pool_stats(&h).await[0]["requests"], 1, "out of rotation: not tried");
    h.advance(10);
    assert_eq!(pool_stats(&h).await[0]["up"], true, "back after fail_timeout (10 s)");
    for _ in 0..2 {
        assert_eq!(h.get("/p").await.text(), "alive");
    }
    let stats = pool_stats(&h).await;
    assert_eq!((stats[0]["requests"].clone(), stats[0]["up"].clone()), (2.into(), false.into()), "tried again once");
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(
        metrics.contains(&format!("sluice_pool_origin_up{{route=\"*/\",origin=\"http://{dead}\"}} 0")),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("sluice_pool_origin_failures_total{{route=\"*/\",origin=\"http://{dead}\"}} 2")));
}

#[tokio::test]
async fn a_request_cut_off_is_repeated_elsewhere_only_when_it_may_be() {
    let h = pool(2, |r| r.max_fails = 0).await;
    h.origin.on("/cut", Reply::ok("").close_before_head());
    h.others[0].on("/cut", Reply::ok("second").header("Cache-Control", "no-store"));
    // Round robin starts with the harness origin, which cuts the connection; the failover
    // took the second origin's turn, so the next request starts with the first again.
    let get = h.get("/cut").await;
    assert_eq!((get.status.as_u16(), get.text().as_str()), (200, "second"), "a GET is idempotent: sent again");
    assert_eq!(hits(&h, "/cut"), [1, 1]);
    let post = h.send("POST", "/cut", &[], Some("once")).await;
    assert_eq!(post.status, 502, "a POST that may have reached the origin is not repeated");
    assert_eq!(h.origin.requests("/cut").last().unwrap().method, "POST");
    assert!(h.others[0].requests("/cut").iter().all(|r| r.method == "GET"), "the second origin never saw the POST");
    assert!(pool_stats(&h).await.iter().all(|m| m["up"] == true), "max_fails = 0 never takes an origin out");
}

#[tokio::test]
async fn a_server_error_is_an_answer_not_a_failure() {
    let h = pool(2, |_| {}).await;
    h.origin.on("/e", Reply::status(503, "busy").header("Cache-Control", "no-store"));
    h.others[0].on("/e", Reply::ok("fine").header("Cache-Control", "no-store"));
    assert_eq!(h.get("/e").await.status, 503);
    assert_eq!(hits(&h, "/e"), [1, 0]);
    assert!(pool_stats(&h).await.iter().all(|m| m["up"] == true && m["failures"] == 0));
}

#[tokio::test]
async fn when_every_origin_is_out_they_are_still_asked() {
    let dead = refusing().await;
    let h = pool_with(1, Some(dead), |r| r.fail_timeout = Dur(Duration::from_secs(3600))).await;
    h.origin.on("/p", Reply::ok("").close_before_head());
    assert_eq!(h.get("/p").await.status, 502, "both failed");
    assert!(pool_stats(&h).await.iter().all(|m| m["up"] == false));
    h.origin.on("/p", Reply::ok("recovered").header("Cache-Control", "no-store"));
    assert_eq!(h.get("/p").await.text(), "recovered", "a pool that looks down is asked, not refused");
    assert_eq!(pool_stats(&h).await[1]["up"], true, "and a success brings its origin back");
}

#[tokio::test]
async fn url_hash_keeps_each_url_on_one_origin() {
    let h = pool(2, |r| r.balance = Balance::UrlHash).await;
    let paths: Vec<String> = (0..16).map(|i| format!("/u/{i}")).collect();
    for path in &paths {
        answer_everywhere(&h, path);
    }
    let first: Vec<String> =
        futures_util::future::join_all(paths.iter().map(|p| h.get(p))).await.iter().map(|r| r.text()).collect();
    let again: Vec<String> =
        futures_util::future::join_all(paths.iter().map(|p| h.get(p))).await.iter().map(|r| r.text()).collect();
    assert_eq!(first, again, "every URL answered by the same origin twice");
    assert!(first.contains(&"origin 0".to_owned()) && first.contains(&"origin 1".to_owned()), "{first:?}");
}

#[tokio::test]
async fn least_connections_avoids_the_origin_still_answering() {
    let h = pool(2, |r| r.balance = Balance::LeastConnections).await;
    answer_everywhere(&h, "/p");
    h.origin.on("/slow", Reply::ok("slow").header("Cache-Control", "no-store").delay(Duration::from_secs(2)));
    let addr = h.addr();
    let slow = tokio::spawn(async move { sluice_testkit::client::get(addr, "/slow", &[]).await });
    h.eventually("the slow request at the first origin", |h| h.origin.hits("/slow") == 1).await;
    for _ in 0..3 {
        assert_eq!(h.get("/p").await.text(), "origin 1", "the first origin has a request in flight");
    }
    assert_eq!(slow.await.unwrap().text(), "slow");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while pool_stats(&h).await[0]["in_flight"] != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the slow request is still counted in flight");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_failing_health_check_takes_an_origin_out_and_a_passing_one_brings_it_back() {
    let h = pool(2, |r| {
        r.health_check = Some(HealthCheckConfig {
            path: "/health".into(),
            interval: Dur(Duration::from_millis(20)),
            ..HealthCheckConfig::default()
        })
    })
    .await;
    answer_everywhere(&h, "/p");
    h.origin.on("/health", Reply::status(503, "sick"));
    h.others[0].on("/health", Reply::ok("ok"));
    h.eventually("the first origin's failed check", |h| {
        h.origin.hits("/health") >= 1 && h.others[0].hits("/health") >= 1
    })
    .await;
    // A check's result is recorded after its response; the next check starts after it.
    h.eventually("a second round of checks", |h| h.origin.hits("/health") >= 2).await;
    assert_eq!(pool_stats(&h).await[0]["up"], false);
    for _ in 0..4 {
        assert_eq!(h.get("/p").await.text(), "origin 1");
    }
    let checks = h.origin.last_request("/health").unwrap();
    assert_eq!((checks.method.as_str(), checks.header("user-agent")), ("GET", Some("sluice-health-check")));
    assert_eq!(checks.header("host"), Some(h.origin.addr.to_string().as_str()), "each origin's own authority");
    h.origin.on("/health", Reply::ok("better"));
    let seen = h.origin.hits("/health");
    h.eventually("a passing check", |h| h.origin.hits("/health") >= seen + 2).await;
    assert_eq!(pool_stats(&h).await[0]["up"], true);
    let texts: Vec<String> =
        futures_util::future::join_all((0..4).map(|_| h.get("/p"))).await.iter().map(|r| r.text()).collect();
    assert!(texts.contains(&"origin 0".to_owned()), "{texts:?}");
}

#[tokio::test]
async fn a_silent_origin_is_failed_over_after_the_response_timeout() {
    let h = Harness::build_with_origins(Mode::Reverse, 1, |c, addrs| {
        c.upstream.response_timeout = Dur(Duration::from_millis(200));
        c.route = vec![RouteConfig {
            origins: addrs.iter().map(|a| format!("http://{a}")).collect(),
            ..RouteConfig::default()
        }];
    })
    .await;
    h.origin.on("/p", Reply::ok("late").header("Cache-Control", "no-store").delay(Duration::from_secs(5)));
    h.others[0].on("/p", Reply::ok("prompt").header("Cache-Control", "no-store"));
    let reply = h.get("/p").await;
    assert_eq!(reply.text(), "prompt", "no response head within the timeout: a GET goes to the next origin");
    assert_eq!(pool_stats(&h).await[0]["up"], false);
}

#[tokio::test]
async fn health_checks_name_the_routes_site_when_the_route_preserves_host() {
    let checks = |host: Option<&str>| HealthCheckConfig {
        path: "/health".into(),
        interval: Dur(Duration::from_millis(20)),
        host: host.map(str::to_owned),
        ..HealthCheckConfig::default()
    };
    let h = pool(2, |r| {
        r.host = Some("www.example".into());
        r.preserve_host = true;
        r.health_check = Some(checks(None));
    })
    .await;
    h.eventually("a health check", |h| h.origin.hits("/health") >= 1).await;
    assert_eq!(h.origin.last_request("/health").unwrap().header("host"), Some("www.example"));
    let h = pool(2, |r| r.health_check = Some(checks(Some("status.internal")))).await;
    h.eventually("a health check", |h| h.others[0].hits("/health") >= 1).await;
    assert_eq!(h.others[0].last_request("/health").unwrap().header("host"), Some("status.internal"));
}

#[tokio::test]
async fn a_drained_origin_gets_no_new_requests_until_undrained() {
    let h = pool(2, |_| {}).await;
    answer_everywhere(&h, "/p");
    let first = h.origin.url("");
    let drain = format!("/pools/drain?origin={}", common::admin::enc(&first));
    let drained = admin(&h, "POST", &drain, &[], None).await;
    assert_eq!(json(&drained), serde_json::json!({ "drained": true, "routes": ["*/"] }));
    for _ in 0..4 {
        assert_eq!(h.get("/p").await.text(), "origin 1");
    }
    let stats = pool_stats(&h).await;
    assert_eq!((stats[0]["drained"].clone(), stats[0]["up"].clone()), (true.into(), false.into()));
    let undrain = format!("/pools/undrain?origin={}&route=*/", common::admin::enc(&first));
    assert_eq!(admin(&h, "POST", &undrain, &[], None).await.status, 200);
    let texts: Vec<String> =
        futures_util::future::join_all((0..4).map(|_| h.get("/p"))).await.iter().map(|r| r.text()).collect();
    assert!(texts.contains(&"origin 0".to_owned()), "{texts:?}");
    assert_eq!(admin(&h, "POST", "/pools/drain?origin=http://127.0.0.1:1", &[], None).await.status, 404);
    assert_eq!(admin(&h, "POST", "/pools/drain", &[], None).await.status, 400);
    assert_eq!(admin(&h, "GET", "/pools/drain", &[], None).await.status, 405);
    let listed = json(&admin(&h, "GET", "/pools", &[], None).await);
    assert_eq!(listed[0]["origins"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_backup_origin_answers_only_while_no_origin_can() {
    let dead = refusing().await;
    let h = Harness::build_with_origins(Mode::Reverse, 1, |c, addrs| {
        c.route = vec![RouteConfig {
            origins: vec![format!("http://{}", addrs[0])],
            backup_origins: vec![format!("http://{}", addrs[1])],
            ..RouteConfig::default()
        }];
    })
    .await;
    answer_everywhere(&h, "/p");
    for _ in 0..4 {
        assert_eq!(h.get("/p").await.text(), "origin 0");
    }
    assert_eq!(hits(&h, "/p"), [4, 0], "the backup stands by");
    let stats = pool_stats(&h).await;
    assert_eq!((stats[0]["backup"].clone(), stats[1]["backup"].clone()), (false.into(), true.into()));
    let drain = format!("/pools/drain?origin={}", common::admin::enc(&h.origin.url("")));
    assert_eq!(admin(&h, "POST", &drain, &[], None).await.status, 200);
    assert_eq!(h.get("/p").await.text(), "origin 1", "the origin drained: the backup answers");

    let h = Harness::build_with_origins(Mode::Reverse, 0, |c, addrs| {
        c.route = vec![RouteConfig {
            origins: vec![format!("http://{dead}")],
            backup_origins: vec![format!("http://{}", addrs[0])],
            ..RouteConfig::default()
        }];
    })
    .await;
    h.origin.on("/p", Reply::ok("standby").header("Cache-Control", "no-store"));
    assert_eq!(h.get("/p").await.text(), "standby", "the origin refused: failed over to the backup");
}

#[tokio::test]
async fn a_configuration_reload_keeps_what_the_pool_knows_of_its_origins() {
    let dead = refusing().await;
    let h = pool_with(3, Some(dead), |r| r.fail_timeout = Dur(Duration::from_secs(600))).await;
    answer_everywhere(&h, "/p");
    assert_eq!(h.get("/p").await.status, 200, "failed over from the dead origin");
    let drain = format!("/pools/drain?origin={}", common::admin::enc(&h.others[1].url("")));
    assert_eq!(admin(&h, "POST", &drain, &[], None).await.status, 200);

    let mut config = h.proxy.state().config.clone();
    config.route[0].balance = Balance::LeastConnections;
    config.route[0].origins.push("http://127.0.0.1:1".into());
    h.proxy.generations().reload(config).await.expect("reloaded");

    let stats = pool_stats(&h).await;
    let field = |i: usize, name: &str| stats[i][name].clone();
    assert_eq!((field(0, "up"), field(0, "failures"), field(0, "requests")), (false.into(), 1.into(), 1.into()));
    assert_eq!((field(3, "drained"), field(3, "up")), (true.into(), false.into()), "still drained");
    assert_eq!((field(4, "up"), field(4, "requests")), (true.into(), 0.into()), "a new origin starts healthy");
    for _ in 0..4 {
        assert_eq!(h.get("/p").await.status, 200);
    }
    let stats = pool_stats(&h).await;
    assert_eq!(stats[0]["requests"], 1, "the dead origin is not tried again after the reload");
    assert_eq!(hits(&h, "/p")[2], 0, "nor is the drained one");
}
