//! The disk tier under the proxy, continued: admin deletions and file change notification
//! remove disk copies (also across a restart), Vary on disk hits, and revalidation of a
//! stale object too large to promote. Real sockets, a temporary directory, the harness clock.

mod common;

use common::disk::*;
use common::{cache_status, Harness};
use sluice_proxy::config::{FilesConfig, Mode, RouteConfig};
use sluice_proxy::units::Size;
use sluice_testkit::{client, Reply};

fn enc(url: &str) -> String {
    url.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn delete(h: &Harness, query: &str) -> serde_json::Value {
    let reply =
        client::send(h.admin(), "DELETE", &format!("/cache?{query}"), &[("authorization", "Bearer test-token")], None)
            .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    serde_json::from_slice(&reply.body).expect("json")
}

#[tokio::test]
async fn admin_deletions_remove_disk_copies_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/d/a", Reply::ok("a").header("cache-control", FRESH).header("cache-tag", "red"));
    h.origin.on("/d/b", Reply::ok("b").header("cache-control", FRESH));
    h.origin.on("/e/c", Reply::ok("c").header("cache-control", FRESH));
    for path in ["/d/a", "/d/b", "/e/c"] {
        h.get(path).await;
    }
    on_disk(&h, 3).await;

    assert_eq!(delete(&h, "tag=red").await["removed"], 1);
    assert_eq!(disk(&h).objects, 2);
    assert_eq!(delete(&h, &format!("prefix={}", enc(&h.origin.url("/d/")))).await["removed"], 1);
    assert_eq!(disk(&h).objects, 1);
    assert_eq!(delete(&h, &format!("url={}", enc(&h.origin.url("/e/c")))).await["removed"], 1);
    assert_eq!(disk(&h).objects, 0);
    h.eventually("the files deleted", |_| object_files(dir.path()).is_empty()).await;

    let h = restart(h).await;
    assert_eq!(disk(&h).objects, 0, "nothing deleted came back");
    for path in ["/d/a", "/d/b", "/e/c"] {
        assert!(!cache_status(&h.get(path).await).contains("hit"));
        assert_eq!(h.origin.hits(path), 2, "{path}");
    }
}

#[tokio::test]
async fn a_changed_file_is_removed_from_disk_too() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (www, cache) = (base.join("www"), base.join("cache"));
    std::fs::create_dir_all(&www).unwrap();
    let file = www.join("f.txt");
    std::fs::write(&file, "first").unwrap();
    let files = FilesConfig {
        root: www.clone(),
        cache_control: "max-age=3600".into(),
        follow_outside_symlinks: false,
        watch: true,
    };
    let h = Harness::build(Mode::Reverse, |c| {
        c.cache.disk.dir = Some(cache.clone());
        c.route.push(RouteConfig { path_prefix: "/static/".into(), files: Some(files), ..RouteConfig::default() });
    })
    .await;
    assert_eq!(h.get("/static/f.txt").await.text(), "first");
    on_disk(&h, 1).await;
    std::fs::write(&file, "second").unwrap();
    h.eventually("the watcher to drop the disk copy", |h| disk(h).objects == 0).await;
    // The next read stores the new content (in both tiers), and that is what a restart finds.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let reply = h.get("/static/f.txt").await;
        if reply.text() == "second" && cache_status(&reply).contains("hit") && disk(&h).objects == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never settled on the new content");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    h.eventually("the write to finish", |h| h.proxy.state().store.pending_disk_jobs() == 0).await;
    let h = restart(h).await;
    let reply = h.get("/static/f.txt").await;
    assert_eq!(reply.text(), "second");
    assert!(cache_status(&reply).contains("detail=disk"), "{}", cache_status(&reply));
}

#[tokio::test]
async fn disk_hits_match_vary_like_memory_hits() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    let reply =
        |body: &str| Reply::ok(body.to_owned()).header("cache-control", FRESH).header("vary", "accept-language");
    h.origin.on_seq("/v", vec![reply("english"), reply("french"), reply("german")]);
    assert_eq!(h.get_with("/v", &[("accept-language", "en")]).await.text(), "english");
    assert_eq!(h.get_with("/v", &[("accept-language", "fr")]).await.text(), "french");
    on_disk(&h, 2).await;

    let h = restart(h).await;
    let fr = h.get_with("/v", &[("accept-language", "fr")]).await;
    assert_eq!(fr.text(), "french");
    assert!(cache_status(&fr).contains("detail=disk"), "{}", cache_status(&fr));
    let en = h.get_with("/v", &[("accept-language", "en")]).await;
    assert_eq!(en.text(), "english");
    assert!(cache_status(&en).contains("detail=disk"), "{}", cache_status(&en));
    assert_eq!(h.origin.hits("/v"), 2);
    let de = h.get_with("/v", &[("accept-language", "de")]).await;
    assert_eq!(de.text(), "german");
    assert!(cache_status(&de).contains("fwd=vary-miss"), "{}", cache_status(&de));
    assert_eq!(h.origin.hits("/v"), 3);
}

#[tokio::test]
async fn a_stale_object_too_large_to_promote_is_revalidated() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |c| c.cache.disk.promote_max = Size(0)).await;
    let body = "s".repeat(50_000);
    h.origin.on(
        "/big",
        Reply::ok(body.clone()).header("cache-control", "max-age=60").header("etag", "\"big1\"").validating(),
    );
    h.get("/big").await;
    on_disk(&h, 1).await;
    let h = restart(h).await;
    let fresh = h.get("/big").await;
    assert!(cache_status(&fresh).contains("detail=disk"), "streamed while fresh: {}", cache_status(&fresh));
    h.advance(120);
    let reply = h.get("/big").await;
    assert_eq!(reply.text(), body);
    assert!(cache_status(&reply).contains("fwd-status=304"), "{}", cache_status(&reply));
    assert_eq!(h.origin.last_request("/big").expect("a request").header("if-none-match"), Some("\"big1\""));
    assert_eq!(h.origin.hits("/big"), 2);
    h.eventually("the freshened copy on disk", |h| {
        disk(h).insertions == 1 && h.proxy.state().store.pending_disk_jobs() == 0
    })
    .await;
}

#[tokio::test]
async fn content_management_reads_and_expires_disk_only_objects() {
    let dir = tempfile::tempdir().unwrap();
    let h = proxy(dir.path(), |_| {}).await;
    h.origin.on("/q", Reply::ok("queried").header("cache-control", FRESH).header("etag", "\"q1\""));
    h.get("/q").await;
    on_disk(&h, 1).await;
    let h = restart(h).await;
    let auth = [("authorization", "Bearer test-token")];
    let url = enc(&h.origin.url("/q"));
    let query = client::send(h.admin(), "GET", &format!("/cache?url={url}"), &auth, None).await;
    assert_eq!(query.status, 200, "a disk-only object is listed: {}", query.text());
    let listed: serde_json::Value = serde_json::from_slice(&query.body).unwrap();
    assert_eq!(listed["variants"][0]["size"], 7, "{listed}");

    // Read back from its file (whole and a range), not promoted by the reading.
    let body = client::send(h.admin(), "GET", &format!("/cache/body?url={url}"), &auth, None).await;
    assert_eq!(body.status, 200);
    assert_eq!(body.text(), "queried");
    assert_eq!(body.header("etag"), "\"q1\"");
    let part = client::send(h.admin(), "GET", &format!("/cache/body?url={url}&range=bytes=1-3"), &auth, None).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.text(), "uer");
    assert_eq!(h.proxy.state().store.stats().objects, 0, "content reads do not promote");

    // Expiry rewrites the file with the new metadata: still stored, now stale, so the next
    // request revalidates it (304) instead of fetching it anew.
    let expired = client::send(h.admin(), "POST", &format!("/cache/expire?url={url}"), &auth, None).await;
    assert_eq!(expired.status, 200, "{}", expired.text());
    h.eventually("the rewritten copy on disk", |h| {
        disk(h).insertions == 1 && h.proxy.state().store.pending_disk_jobs() == 0
    })
    .await;
    assert_eq!(disk(&h).objects, 1);
    h.origin.on("/q", Reply::ok("queried").header("cache-control", FRESH).header("etag", "\"q1\"").validating());
    let reply = h.get("/q").await;
    assert_eq!(reply.text(), "queried");
    assert!(cache_status(&reply).contains("fwd=stale"), "{}", cache_status(&reply));
    assert_eq!(h.origin.hits("/q"), 2);
    let asked = h.origin.last_request("/q").unwrap();
    assert_eq!(asked.header("if-none-match"), Some("\"q1\""), "a conditional request");
}
