//! A route with `cache = false`: its requests go to the origin every time and nothing of
//! theirs is stored, whatever the responses allow (`Cache-Status: fwd=bypass;
//! detail=route`); other routes to the same origin cache as usual.

mod common;

use common::{cache_status, Harness};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_testkit::Reply;

#[tokio::test]
async fn a_route_with_cache_off_passes_every_request() {
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        let route = |prefix: &str, cache: bool| RouteConfig {
            path_prefix: prefix.into(),
            origin: Some(format!("http://{origin}")),
            cache,
            ..RouteConfig::default()
        };
        c.route = vec![route("/", true), route("/live/", false)];
    })
    .await;
    for path in ["/live/score", "/page"] {
        h.origin.on(path, Reply::ok("x").header("Cache-Control", "max-age=600"));
    }
    for _ in 0..3 {
        let live = h.get("/live/score").await;
        assert_eq!(live.status, 200);
        assert!(
            cache_status(&live).contains("fwd=bypass") && cache_status(&live).contains("detail=route"),
            "{}",
            cache_status(&live)
        );
        h.get("/page").await;
    }
    assert_eq!(h.origin.hits("/live/score"), 3, "every request went to the origin");
    assert_eq!(h.origin.hits("/page"), 1, "the other route caches");
    assert_eq!(h.proxy.state().store.stats().objects, 1, "nothing of the bypassed route was stored");
}
