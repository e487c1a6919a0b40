//! A reverse route's `query_sort` and `query_drop`: URLs that differ only in tracking
//! parameters or in the order of the others share one cache entry, the origin gets the
//! normalised URL, and every way of writing a URL reaches that entry (hits, PURGE, and
//! invalidation by an unsafe method's `Location` and `Content-Location`).

mod common;

use common::Harness;
use sluice_proxy::config::Mode;
use sluice_testkit::Reply;

/// The origin answers these targets (path and query, as the test origin keys them).
const TARGETS: &[&str] = &["/p", "/p?a=1&b=2", "/p?a=1&b=3", "/p?a=2&a=1", "/p?a=1&a=2", "/p?b=2&a=1&utm_source=news"];

async fn harness(sort_and_drop: bool) -> Harness {
    let h = Harness::build(Mode::Reverse, |c| {
        if sort_and_drop {
            c.route[0].query_sort = true;
            c.route[0].query_drop = vec!["utm_*".into(), "fbclid".into()];
        }
    })
    .await;
    for target in TARGETS {
        h.origin.on(target, Reply::ok("page").header("Cache-Control", "max-age=600"));
    }
    h
}

/// How many requests for each of [`TARGETS`] reached the origin (the others' requests get
/// the test origin's 404 and are not counted here).
fn fetched(h: &Harness) -> Vec<(&'static str, usize)> {
    TARGETS.iter().map(|t| (*t, h.origin.hits(t))).filter(|(_, n)| *n > 0).collect()
}

#[tokio::test]
async fn spellings_of_one_url_share_an_entry_and_the_origin_gets_it_normalised() {
    let h = harness(true).await;
    for query in ["b=2&a=1&utm_source=news", "a=1&b=2", "fbclid=x&a=1&utm_medium=mail&b=2"] {
        let reply = h.get(&format!("/p?{query}")).await;
        assert_eq!((reply.status.as_u16(), &reply.body[..]), (200, &b"page"[..]), "{query}");
    }
    assert_eq!(fetched(&h), [("/p?a=1&b=2", 1)], "one fetch, of the normalised URL");

    // Another value is another entry; repeated parameters keep their order.
    for target in ["/p?b=3&a=1", "/p?a=2&a=1", "/p?a=1&a=2", "/p?a=1&a=2"] {
        assert_eq!(h.get(target).await.status, 200, "{target}");
    }
    assert_eq!(fetched(&h), [("/p?a=1&b=2", 1), ("/p?a=1&b=3", 1), ("/p?a=2&a=1", 1), ("/p?a=1&a=2", 1)]);

    // Nothing left but tracking parameters: the URL without its query.
    assert_eq!(h.get("/p?utm_campaign=z").await.status, 200);
    assert_eq!(h.get("/p").await.status, 200);
    assert_eq!(h.origin.hits("/p"), 1);
}

#[tokio::test]
async fn purge_in_any_spelling_removes_the_entry() {
    let h = harness(true).await;
    h.get("/p?a=1&b=2").await;
    assert_eq!(h.send("PURGE", "/p?utm_campaign=z&b=2&a=1", &[], None).await.status, 200);
    h.get("/p?b=2&a=1").await;
    assert_eq!(fetched(&h), [("/p?a=1&b=2", 2)], "purged, fetched again");
}

#[tokio::test]
async fn rfc9111_4_4_location_urls_as_the_origin_writes_them_invalidate_the_normalised_entries() {
    let h = harness(true).await;
    h.get("/p?a=1&b=2").await;
    h.get("/p?a=1&b=3").await;
    // The origin names the pages in its own spelling: parameters out of order, a tag; one
    // URL relative, one absolute.
    let content_location = h.origin.url("/p?b=3&a=1");
    h.origin.on(
        "/cart",
        Reply::status(201, "made")
            .header("Location", "/p?b=2&a=1&utm_source=cart")
            .header("Content-Location", &content_location),
    );
    assert_eq!(h.send("POST", "/cart", &[], Some("item")).await.status, 201);
    h.get("/p?a=1&b=2").await;
    h.get("/p?a=1&b=3").await;
    assert_eq!(fetched(&h), [("/p?a=1&b=2", 2), ("/p?a=1&b=3", 2)], "both invalidated, fetched again");
}

#[tokio::test]
async fn routes_without_the_settings_leave_queries_alone() {
    let h = harness(false).await;
    h.get("/p?b=2&a=1&utm_source=news").await;
    h.get("/p?a=1&b=2").await;
    assert_eq!(fetched(&h), [("/p?a=1&b=2", 1), ("/p?b=2&a=1&utm_source=news", 1)]);
}
