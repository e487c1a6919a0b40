//! `sluice ctl` and `sluice fetch` end to end: the built binary runs `sluice serve` on
//! 127.0.0.1 in front of a scripted origin, and the same binary's clients talk to its admin
//! API. The proxy runs on the system clock; nothing here depends on time passing.

use sluice_proxy::clock::{Clock, SystemClock};
use sluice_testkit::{client, Origin, Reply};
use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

const TOKEN: &str = "ctl-test-token";

/// A `sluice serve` child process, killed (by its handle) when dropped.
struct Proxy {
    child: Child,
    listener: SocketAddr,
    admin: SocketAddr,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Starts `sluice serve` on ephemeral ports and waits for its startup lines, which name
/// the chosen addresses.
async fn serve() -> Proxy {
    serve_with("").await
}

/// [`serve`] with `extra` appended to the configuration file.
async fn serve_with(extra: &str) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[[listener]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n\n[access]\nallow_destinations = [\"127.0.0.0/8\"]\n\n[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n{extra}"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--threads", "1", "--config"])
        .arg(&config)
        .env("SLUICE_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn sluice serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut listener, mut admin) = (None, None);
    let startup = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on ").nth(1) {
                listener = rest.split_whitespace().next().and_then(|a| a.parse().ok());
            }
            if let Some(rest) = line.split("admin API on http://").nth(1) {
                admin = rest.split('/').next().and_then(|a| a.parse().ok());
            }
            if listener.is_some() && admin.is_some() {
                return;
            }
        }
        panic!("sluice serve exited before it was ready");
    };
    tokio::time::timeout(Duration::from_secs(30), startup).await.expect("sluice serve starts within 30 s");
    // Keep draining the log so the proxy never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Proxy { child, listener: listener.unwrap(), admin: admin.unwrap(), config, _dir: dir }
}

impl Proxy {
    /// `sluice <args>` with the address and token given as flags.
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.args(args).args(["--admin", &self.admin.to_string(), "--token", TOKEN]);
        command.env_remove("SLUICE_ADMIN").env_remove("SLUICE_ADMIN_TOKEN");
        run(command, stdin).await
    }
}

async fn run(mut command: Command, stdin: Option<&str>) -> Output {
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn sluice");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.expect("finishes").unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_prints_the_body_and_the_cache_status_miss_then_hit() {
    let origin = Origin::start(|| SystemClock.now()).await;
    origin.on("/doc", Reply::ok("document body").header("cache-control", "max-age=600"));
    let proxy = serve().await;
    let url = origin.url("/doc");

    let first = proxy.run(&["fetch", &url], None).await;
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), "document body");
    assert!(stderr(&first).contains("TCP_MISS"), "{}", stderr(&first));
    assert!(stderr(&first).contains("fwd=uri-miss"), "{}", stderr(&first));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.txt");
    let second = proxy.run(&["fetch", &url, "-o", file.to_str().unwrap()], None).await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "document body");
    assert!(stderr(&second).contains("TCP_MEM_HIT"), "{}", stderr(&second));
    assert_eq!(origin.hits("/doc"), 1);

    // The token may come from the configuration file instead of a flag.
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["ctl", "--config"]).arg(&proxy.config).args(["--admin", &proxy.admin.to_string(), "query", &url]);
    command.env_remove("SLUICE_ADMIN").env_remove("SLUICE_ADMIN_TOKEN");
    let query = run(command, None).await;
    assert!(query.status.success(), "{}", stderr(&query));
    assert_eq!(json(&query)["variants"][0]["hits"], 1);
    // Or both from the environment.
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["ctl", "query", &url]).env("SLUICE_ADMIN", proxy.admin.to_string()).env("SLUICE_ADMIN_TOKEN", TOKEN);
    let from_env = run(command, None).await;
    assert!(from_env.status.success(), "{}", stderr(&from_env));
    assert_eq!(json(&from_env)["key"], url);

    let bad = proxy.run(&["fetch", "not-a-url"], None).await;
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("400") && stderr(&bad).contains("not-a-url"), "{}", stderr(&bad));
    let mut no_token = Command::new(env!("CARGO_BIN_EXE_sluice"));
    no_token.args(["fetch", &url, "--admin", &proxy.admin.to_string(), "--token", "wrong"]);
    no_token.env_remove("SLUICE_ADMIN_TOKEN");
    let refused = run(no_token, None).await;
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("401"), "{}", stderr(&refused));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_pushes_reads_queries_and_deletes_by_tag() {
    let origin = Origin::start(|| SystemClock.now()).await;
    let proxy = serve().await;
    let url = origin.url("/promo");

    let push = proxy
        .run(
            &["ctl", "push", &url, "-H", "Cache-Control: max-age=600", "-H", "Surrogate-Key: promo spring"],
            Some("pushed from stdin"),
        )
        .await;
    assert!(push.status.success(), "{}", stderr(&push));
    assert_eq!(json(&push)["size"], 17);
    assert_eq!(json(&push)["tags"], serde_json::json!(["promo", "spring"]));

    let served = client::get(proxy.listener, &url, &[]).await;
    assert_eq!(served.text(), "pushed from stdin");
    assert!(served.header("cache-status").contains("hit"), "{}", served.header("cache-status"));
    assert_eq!(origin.hits("/promo"), 0, "pushed content needs no origin");

    let part = proxy.run(&["ctl", "read", &url, "--range", "0-5"], None).await;
    assert!(part.status.success(), "{}", stderr(&part));
    assert_eq!(stdout(&part), "pushed");
    let suffix = proxy.run(&["ctl", "read", &url, "--range", "-5"], None).await;
    assert!(suffix.status.success(), "a suffix range as documented: {}", stderr(&suffix));
    assert_eq!(stdout(&suffix), "stdin");

    let expire = proxy.run(&["ctl", "expire", &url, "--ttl", "60"], None).await;
    assert!(expire.status.success(), "{}", stderr(&expire));
    assert_eq!(json(&expire)["variants"][0]["ttl_s"], 60);

    let delete = proxy.run(&["ctl", "delete", "--tag", "spring"], None).await;
    assert!(delete.status.success(), "{}", stderr(&delete));
    assert_eq!(json(&delete)["removed"], 1);
    let gone = proxy.run(&["ctl", "query", &url], None).await;
    assert!(!gone.status.success(), "nothing stored any more");
    assert!(stderr(&gone).contains("404"), "{}", stderr(&gone));
    let unknown_tag = proxy.run(&["ctl", "delete", "--tag", "spring"], None).await;
    assert!(!unknown_tag.status.success());
    assert!(stderr(&unknown_tag).contains("no stored object has tag"), "{}", stderr(&unknown_tag));
}

#[test]
fn ctl_and_fetch_have_help_for_every_operation() {
    for args in [
        &["ctl", "--help"][..],
        &["fetch", "--help"],
        &["ctl", "query", "--help"],
        &["ctl", "fetch", "--help"],
        &["ctl", "prefetch", "--help"],
        &["ctl", "validate", "--help"],
        &["ctl", "expire", "--help"],
        &["ctl", "delete", "--help"],
        &["ctl", "push", "--help"],
        &["ctl", "read", "--help"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: sluice"), "{args:?}");
    }
}

#[tokio::test]
async fn ctl_drains_and_undrains_an_origin_of_a_pool() {
    let proxy = serve_with("\n[[route]]\norigins = [\"http://127.0.0.1:9\", \"http://127.0.0.1:10\"]\n").await;
    let pools = json(&proxy.run(&["ctl", "pools"], None).await);
    assert_eq!(pools[0]["route"], "*/");
    assert_eq!(pools[0]["origins"][0]["origin"], "http://127.0.0.1:9");
    assert_eq!(pools[0]["origins"][0]["up"], true);
    let drained = proxy.run(&["ctl", "drain", "http://127.0.0.1:9"], None).await;
    assert!(drained.status.success(), "{}", stderr(&drained));
    assert_eq!(json(&drained), serde_json::json!({ "drained": true, "routes": ["*/"] }));
    let pools = json(&proxy.run(&["ctl", "pools"], None).await);
    assert_eq!(
        (pools[0]["origins"][0]["drained"].clone(), pools[0]["origins"][0]["up"].clone()),
        (true.into(), false.into())
    );
    let undrained = proxy.run(&["ctl", "undrain", "http://127.0.0.1:9", "--route", "*/"], None).await;
    assert_eq!(json(&undrained)["drained"], false);
    assert_eq!(json(&proxy.run(&["ctl", "pools"], None).await)[0]["origins"][0]["up"], true);
    let unknown = proxy.run(&["ctl", "drain", "http://127.0.0.1:11"], None).await;
    assert!(!unknown.status.success());
    assert!(stderr(&unknown).contains("no origin pool has that origin"), "{}", stderr(&unknown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_from_a_file_is_named_in_the_error() {
    let proxy = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("stale.token");
    std::fs::write(&token_file, "not-the-token\n").unwrap();
    let client_config = dir.path().join("client.toml");
    std::fs::write(&client_config, format!("[admin]\ntoken_file = {:?}\n", token_file.display().to_string())).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["ctl", "--admin", &proxy.admin.to_string(), "--config"]).arg(&client_config);
    command.args(["query", "http://example.test/"]);
    command.env_remove("SLUICE_ADMIN").env_remove("SLUICE_ADMIN_TOKEN");
    let out = run(command, None).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("401 Unauthorized") && err.contains(&format!("the token read from {}", token_file.display())),
        "{err}"
    );
}
