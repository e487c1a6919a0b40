//! The file data source: a `[[route]]` with `files` serves a directory through the cache.
//! Real files in a temporary directory, real sockets on 127.0.0.1, the harness clock.

mod common;

use common::{cache_status, Harness};
use sluice_proxy::config::{Config, FilesConfig, Mode, RouteConfig};
use sluice_proxy::units::Size;
use std::path::{Path, PathBuf};

/// A reverse proxy whose `/static/` route serves `dir` (any other path goes to the harness
/// origin), with `tweak` applied to the files route and the configuration.
async fn serving(dir: &Path, tweak: impl FnOnce(&mut FilesConfig, &mut Config)) -> Harness {
    let mut files = FilesConfig {
        root: dir.to_path_buf(),
        cache_control: "max-age=60".into(),
        follow_outside_symlinks: false,
        watch: true,
    };
    Harness::build(Mode::Reverse, |config| {
        tweak(&mut files, config);
        config.route.push(RouteConfig { path_prefix: "/static/".into(), files: Some(files), ..RouteConfig::default() });
    })
    .await
}

/// A temporary directory holding the served root `www/` (canonical) and a sibling
/// `outside/` for escape attempts.
struct Tree {
    _dir: tempfile::TempDir,
    www: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let www = base.join("www");
    let outside = base.join("outside");
    std::fs::create_dir_all(www.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    Tree { _dir: dir, www, outside }
}

/// The cache key of a served file (temporary paths need no percent-encoding).
fn key(path: &Path) -> String {
    let text = path.to_str().unwrap();
    assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b)), "{text}");
    format!("file://localhost{text}")
}

fn stored(h: &Harness, path: &Path) -> usize {
    h.proxy.state().store.variants(&key(path)).len()
}

/// Waits (up to 5 s) until `path` answers `body` from the cache: a write is several inotify
/// events (truncate, write, close), and a late one may drop an object stored after the first.
async fn settled(h: &Harness, path: &str, body: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let r = h.get(path).await;
        if r.text() == body && cache_status(&r).contains("hit") {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{path} never settled on {body:?}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_file_is_a_miss_then_a_hit_with_validators() {
    let t = tree();
    std::fs::write(t.www.join("a.css"), "body { color: red }").unwrap();
    let h = serving(&t.www, |_, _| {}).await;

    let first = h.get("/static/a.css").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "body { color: red }");
    assert_eq!(first.header("content-type"), "text/css; charset=utf-8");
    assert_eq!(first.header("content-length"), "19");
    assert_eq!(first.header("cache-control"), "max-age=60");
    assert!(first.header("etag").starts_with('"'), "strong ETag: {}", first.header("etag"));
    assert!(!first.header("last-modified").is_empty());
    assert!(cache_status(&first).contains("fwd=uri-miss") && cache_status(&first).contains("stored"));

    let second = h.get("/static/a.css").await;
    assert_eq!(second.text(), "body { color: red }");
    assert!(cache_status(&second).contains("hit"), "{}", cache_status(&second));
    assert_eq!(second.header("etag"), first.header("etag"));
    // A file has one representation: the query does not make another object.
    let queried = h.get("/static/a.css?v=2").await;
    assert!(cache_status(&queried).contains("hit"), "{}", cache_status(&queried));
    assert_eq!(stored(&h, &t.www.join("a.css")), 1);
    // PURGE through the route removes the file's object.
    assert_eq!(h.send("PURGE", "/static/a.css", &[], None).await.status, 200);
    assert_eq!(stored(&h, &t.www.join("a.css")), 0);
    assert!(cache_status(&h.get("/static/a.css").await).contains("fwd=uri-miss"));
    // Other paths still go to the origin.
    h.origin.on("/other", sluice_testkit::Reply::ok("from origin"));
    assert_eq!(h.get("/other").await.text(), "from origin");
}

#[tokio::test]
async fn revalidation_after_expiry_is_answered_304_by_the_file() {
    let t = tree();
    std::fs::write(t.www.join("v.txt"), "version one").unwrap();
    let h = serving(&t.www, |files, _| {
        files.cache_control = "max-age=10".into();
        files.watch = false;
    })
    .await;
    let first = h.get("/static/v.txt").await;
    assert_eq!(first.text(), "version one");

    h.advance(11);
    let revalidated = h.get("/static/v.txt").await;
    assert_eq!(revalidated.status, 200);
    assert_eq!(revalidated.text(), "version one");
    // fwd-status=304: the file source answered the cache's conditional request without a
    // body; the object was freshened, not fetched again.
    let cs = cache_status(&revalidated);
    assert!(cs.contains("fwd=stale") && cs.contains("fwd-status=304"), "{cs}");
    assert!(cache_status(&h.get("/static/v.txt").await).contains("hit"));

    // A client's own conditional is answered from the cache.
    let etag = first.header("etag").to_owned();
    let not_modified = h.get_with("/static/v.txt", &[("If-None-Match", &etag)]).await;
    assert_eq!(not_modified.status, 304);
}

#[tokio::test]
async fn without_a_watcher_a_changed_file_is_picked_up_by_validation() {
    let t = tree();
    let file = t.www.join("w.txt");
    std::fs::write(&file, "old").unwrap();
    let h = serving(&t.www, |files, _| {
        files.cache_control = "max-age=10".into();
        files.watch = false;
    })
    .await;
    assert_eq!(h.get("/static/w.txt").await.text(), "old");
    std::fs::write(&file, "newer").unwrap();
    // Fresh: still the stored copy (nothing watches the directory).
    assert_eq!(h.get("/static/w.txt").await.text(), "old");
    h.advance(11);
    let changed = h.get("/static/w.txt").await;
    assert_eq!(changed.text(), "newer");
    assert!(cache_status(&changed).contains("fwd-status=200"), "{}", cache_status(&changed));
}

#[tokio::test]
async fn a_modified_file_is_dropped_from_the_cache_at_once() {
    let t = tree();
    let file = t.www.join("m.html");
    std::fs::write(&file, "<p>one</p>").unwrap();
    let h = serving(&t.www, |files, _| files.cache_control = "max-age=3600".into()).await;
    assert_eq!(h.get("/static/m.html").await.text(), "<p>one</p>");
    assert_eq!(stored(&h, &file), 1);

    std::fs::write(&file, "<p>two!</p>").unwrap();
    h.eventually("the watcher to drop the modified file", |h| stored(h, &file) == 0).await;
    let next = h.get("/static/m.html").await;
    assert_eq!(next.text(), "<p>two!</p>");
    assert!(cache_status(&next).contains("fwd=uri-miss"), "{}", cache_status(&next));

    // Replaced by rename (how editors and deploy tools write), same length.
    settled(&h, "/static/m.html", "<p>two!</p>").await;
    let tmp = t.www.join(".m.html.tmp");
    std::fs::write(&tmp, "<p>3ree</p>").unwrap();
    assert_eq!(stored(&h, &file), 1);
    std::fs::rename(&tmp, &file).unwrap();
    h.eventually("the watcher to drop the replaced file", |h| stored(h, &file) == 0).await;
    assert_eq!(h.get("/static/m.html").await.text(), "<p>3ree</p>");
}

#[tokio::test]
async fn a_deleted_file_is_404_next_and_a_created_one_replaces_a_cached_404() {
    let t = tree();
    let file = t.www.join("sub/d.txt");
    std::fs::write(&file, "here").unwrap();
    let h = serving(&t.www, |files, _| files.cache_control = "max-age=3600".into()).await;
    assert_eq!(h.get("/static/sub/d.txt").await.text(), "here");

    std::fs::remove_file(&file).unwrap();
    h.eventually("the watcher to drop the deleted file", |h| stored(h, &file) == 0).await;
    let gone = h.get("/static/sub/d.txt").await;
    assert_eq!(gone.status, 404);
    // The 404 is cached under the route's policy ...
    assert!(cache_status(&h.get("/static/sub/d.txt").await).contains("hit"));
    assert_eq!(stored(&h, &file), 1);
    // ... until the file appears.
    std::fs::write(&file, "back").unwrap();
    h.eventually("the watcher to drop the cached 404", |h| stored(h, &file) == 0).await;
    let back = h.get("/static/sub/d.txt").await;
    assert_eq!((back.status.as_u16(), back.text().as_str()), (200, "back"));
}

#[tokio::test]
async fn a_removed_directory_drops_the_files_below_it() {
    let t = tree();
    let dir = t.www.join("gone");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("x.txt"), "x").unwrap();
    let h = serving(&t.www, |files, _| files.cache_control = "max-age=3600".into()).await;
    assert_eq!(h.get("/static/gone/x.txt").await.text(), "x");
    // Renaming the directory away sends no event for the file itself.
    std::fs::rename(&dir, t.www.join("moved")).unwrap();
    h.eventually("the watcher to drop files below a moved directory", |h| stored(h, &dir.join("x.txt")) == 0).await;
    assert_eq!(h.get("/static/gone/x.txt").await.status, 404);
    assert_eq!(h.get("/static/moved/x.txt").await.text(), "x");
}

#[tokio::test]
async fn paths_leaving_the_root_are_refused() {
    let t = tree();
    std::fs::write(t.www.join("ok.txt"), "ok").unwrap();
    std::os::unix::fs::symlink(t.outside.join("secret.txt"), t.www.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(&t.outside, t.www.join("leakdir")).unwrap();
    std::os::unix::fs::symlink("ok.txt", t.www.join("alias.txt")).unwrap();
    let h = serving(&t.www, |_, _| {}).await;

    // Dot segments are resolved before routing (RFC 3986 §6.2.2, `tests/request_targets.rs`):
    // these are `/outside/secret.txt`, which is not under the files route (here, the origin's
    // 404), and `/static/ok.txt`.
    for path in [
        "/static/../outside/secret.txt",
        "/static/sub/../../outside/secret.txt",
        "/static/%2e%2e/outside/secret.txt",
        "/static/%2E%2e/outside/secret.txt",
        "/static/sub/%2e%2e/%2e%2e/outside/secret.txt",
    ] {
        let r = h.get(path).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_ne!(r.text(), "secret", "{path}");
    }
    assert_eq!(h.get("/static/./ok.txt").await.text(), "ok");
    for path in
        ["/static/..%2foutside/secret.txt", "/static/ok.txt%00.png", "/static/leak.txt", "/static/leakdir/secret.txt"]
    {
        let r = h.get(path).await;
        assert_eq!(r.status, 403, "{path}: {}", r.text());
        assert!(!r.text().contains("secret"), "{path}");
    }
    // Directories have nothing to serve.
    assert_eq!(h.get("/static/").await.status, 404);
    assert_eq!(h.get("/static/sub").await.status, 404);
    assert_eq!(h.get("/static/missing.txt").await.status, 404);
    // A link that stays inside the root is followed.
    assert_eq!(h.get("/static/alias.txt").await.text(), "ok");
    // Only GET and HEAD.
    let post = h.send("POST", "/static/ok.txt", &[], Some("x")).await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), "GET, HEAD");
}

#[tokio::test]
async fn links_out_of_the_root_are_followed_only_when_allowed() {
    let t = tree();
    std::os::unix::fs::symlink(t.outside.join("secret.txt"), t.www.join("shared.txt")).unwrap();
    let h = serving(&t.www, |files, _| files.follow_outside_symlinks = true).await;
    assert_eq!(h.get("/static/shared.txt").await.text(), "secret");
    // `..` leaves the files route whatever the link policy (resolved before routing).
    assert_eq!(h.get("/static/../outside/secret.txt").await.status, 404);
}

#[tokio::test]
async fn head_and_ranges_are_answered_from_the_cached_file() {
    let t = tree();
    std::fs::write(t.www.join("r.txt"), "0123456789").unwrap();
    let h = serving(&t.www, |_, _| {}).await;

    let head = h.send("HEAD", "/static/r.txt", &[], None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), "10");
    assert!(head.body.is_empty());
    // The cache fetched the whole file for the HEAD miss, and stores it in the background.
    h.eventually("the file fetched for HEAD to be stored", |h| stored(h, &t.www.join("r.txt")) == 1).await;

    let range = h.get_with("/static/r.txt", &[("Range", "bytes=2-5")]).await;
    assert_eq!(range.status, 206);
    assert_eq!(range.text(), "2345");
    assert_eq!(range.header("content-range"), "bytes 2-5/10");
    assert!(cache_status(&range).contains("hit"), "{}", cache_status(&range));
}

#[tokio::test]
async fn concurrent_misses_on_a_file_read_it_once() {
    let t = tree();
    let data: String = (0..200_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    std::fs::write(t.www.join("c.js"), &data).unwrap();
    let h = serving(&t.www, |_, _| {}).await;
    let replies = futures_util::future::join_all((0..8).map(|_| h.get("/static/c.js"))).await;
    assert!(replies.iter().all(|r| r.status == 200 && r.text() == data));
    // One request read the file; every other one shared its fill or hit what it stored.
    let fetched =
        replies.iter().filter(|r| !cache_status(r).contains("hit") && !cache_status(r).contains("collapsed")).count();
    assert_eq!(fetched, 1, "{:?}", replies.iter().map(cache_status).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_file_over_the_object_limit_streams_and_is_not_stored() {
    let t = tree();
    // 3 MiB of a pattern that shows any misplaced chunk.
    let big: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    let file = t.www.join("big.bin");
    std::fs::write(&file, &big).unwrap();
    let h = serving(&t.www, |_, config| config.cache.max_object = Size(1 << 20)).await;

    for _ in 0..2 {
        let r = h.get("/static/big.bin").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), "application/octet-stream");
        assert_eq!(r.header("content-length"), big.len().to_string());
        assert!(r.body == big, "body differs ({} bytes)", r.body.len());
        assert!(!cache_status(&r).contains("stored"), "{}", cache_status(&r));
        assert_eq!(stored(&h, &file), 0);
    }
}

#[tokio::test]
async fn with_the_cache_off_files_are_served_directly() {
    let t = tree();
    std::fs::write(t.www.join("p.json"), "{}").unwrap();
    let h = serving(&t.www, |_, config| config.cache.enabled = false).await;
    let r = h.get("/static/p.json").await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "{}"));
    assert_eq!(r.header("content-type"), "application/json");
    let etag = r.header("etag").to_owned();
    assert_eq!(h.get_with("/static/p.json", &[("If-None-Match", &etag)]).await.status, 304);
    assert_eq!(h.get("/static/nope.json").await.status, 404);
    assert_eq!(h.get("/static/%2e%2e/x").await.status, 404, "`/x`, not under the files route");
}

#[test]
fn a_route_needs_exactly_one_of_origin_and_files() {
    let both = "[[route]]\norigin = \"http://127.0.0.1:1\"\n[route.files]\nroot = \"/srv\"\n";
    assert!(Config::parse(both).unwrap_err().to_string().contains("exactly one"));
    assert!(Config::parse("[[route]]\npath_prefix = \"/x/\"\n").unwrap_err().to_string().contains("exactly one"));
    let relative = "[[route]]\nfiles = { root = \"srv/www\" }\n";
    assert!(Config::parse(relative).unwrap_err().to_string().contains("absolute"));
    let typo = "[[route]]\nfiles = { root = \"/srv\", watchh = false }\n";
    assert!(Config::parse(typo).unwrap_err().to_string().contains("watchh"));
    let ok = Config::parse("[[route]]\npath_prefix = \"/s/\"\nfiles = { root = \"/srv/www\" }\n").unwrap();
    let files = ok.route[0].files.as_ref().unwrap();
    assert_eq!((files.cache_control.as_str(), files.follow_outside_symlinks, files.watch), ("max-age=60", false, true));
}

#[test]
fn a_missing_directory_fails_at_start() {
    let mut config = Config::default();
    config.route.push(RouteConfig {
        files: Some(FilesConfig {
            root: "/nonexistent/sluice-test".into(),
            cache_control: "max-age=60".into(),
            follow_outside_symlinks: false,
            watch: false,
        }),
        ..RouteConfig::default()
    });
    let clock = std::sync::Arc::new(sluice_proxy::clock::SystemClock);
    let err = sluice_proxy::State::new(config, clock, vec![]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/sluice-test"), "{err}");
}
