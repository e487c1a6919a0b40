//! A route's `request_headers` and `response_headers` (`crate::header_rules`): fields removed,
//! set and added on what goes to the origin and on every response of the route (misses,
//! hits, the proxy's own errors), never on what is stored; the configuration check refuses
//! framing fields. Real sockets on 127.0.0.1.

mod common;

use common::{cache_status, Harness};
use sluice_proxy::config::{Mode, RouteConfig};
use sluice_proxy::header_rules::HeaderRulesConfig;
use sluice_testkit::Reply;

fn rules(remove: &[&str], set: &[(&str, &str)], add: &[(&str, &str)]) -> HeaderRulesConfig {
    let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    HeaderRulesConfig { remove: remove.iter().map(|n| n.to_string()).collect(), set: map(set), add: map(add) }
}

#[tokio::test]
async fn a_routes_rules_shape_its_origin_requests_and_every_response_but_not_what_is_stored() {
    let h = Harness::build_with_origin(Mode::Reverse, |c, origin| {
        c.route = vec![
            RouteConfig {
                host: Some("www.example".into()),
                origin: Some(format!("http://{origin}")),
                request_headers: rules(&["Cookie"], &[("X-Env", "prod"), ("Host", "app.internal")], &[]),
                response_headers: rules(
                    &["Server", "X-Powered-By"],
                    &[("Strict-Transport-Security", "max-age=31536000")],
                    &[("X-Served-By", "edge-1")],
                ),
                ..RouteConfig::default()
            },
            // The same origin without rules: the same cache entries, seen as stored.
            RouteConfig {
                host: Some("plain.example".into()),
                origin: Some(format!("http://{origin}")),
                ..RouteConfig::default()
            },
        ];
    })
    .await;
    h.origin.on(
        "/page",
        Reply::ok("page")
            .header("Cache-Control", "max-age=600")
            .header("Server", "apache")
            .header("X-Powered-By", "php"),
    );
    let h = &h;
    let get = |host: &'static str| async move {
        h.send("GET", "/page", &[("host", host), ("cookie", "session=1")], None).await
    };

    let miss = get("www.example").await;
    assert_eq!(miss.status, 200);
    assert_eq!(miss.header("server"), "", "removed");
    assert_eq!(miss.header("x-powered-by"), "");
    assert_eq!(miss.header("strict-transport-security"), "max-age=31536000");
    assert_eq!(miss.header("x-served-by"), "edge-1");
    let sent = h.origin.last_request("/page").unwrap();
    assert_eq!(sent.header("x-env"), Some("prod"));
    assert_eq!(sent.header("cookie"), None);
    assert_eq!(sent.header("host"), Some("app.internal"), "a rule may replace the proxy's own fields");

    let hit = get("www.example").await;
    assert!(cache_status(&hit).contains("hit"), "{}", cache_status(&hit));
    assert_eq!((hit.header("server"), hit.header("x-served-by")), ("", "edge-1"), "hits too");
    let plain = get("plain.example").await;
    assert!(cache_status(&plain).contains("hit"), "{}", cache_status(&plain));
    assert_eq!(plain.header("server"), "apache", "what is stored is the origin's response");
    assert_eq!(plain.header("x-served-by"), "");
    assert_eq!(h.origin.hits("/page"), 1);

    // The proxy's own answers on the route get them too.
    h.origin.on("/broken", Reply::ok("").close_before_head());
    let broken = h.send("GET", "/broken", &[("host", "www.example")], None).await;
    assert_eq!(broken.status, 502);
    assert_eq!(broken.header("x-served-by"), "edge-1");
}

#[test]
fn the_configuration_check_refuses_framing_fields_and_request_rules_on_files() {
    let check = common::check_route;
    assert!(check(
        "origin = \"http://10.0.0.5\"\nresponse_headers = { remove = [\"Server\"], add = { \"X-A\" = \"1\" } }"
    )
    .is_ok());
    let framing =
        check("origin = \"http://10.0.0.5\"\nresponse_headers = { set = { \"Content-Length\" = \"5\" } }").unwrap_err();
    assert!(framing.contains("response_headers: `Content-Length` frames or routes the message"), "{framing}");
    let files = check("files = { root = \"/tmp\" }\nrequest_headers = { set = { \"X-A\" = \"1\" } }").unwrap_err();
    assert!(files.contains("request_headers do not apply"), "{files}");
    let unknown =
        check("origin = \"http://10.0.0.5\"\nresponse_headers = { append = { \"X-A\" = \"1\" } }").unwrap_err();
    assert!(unknown.contains("append"), "{unknown}");
}
