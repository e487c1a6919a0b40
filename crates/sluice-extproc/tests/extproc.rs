//! Helper processes end to end: a real Sluice (forward proxy, cache on) in front of a scripted
//! origin, with the demo ext_proc processor (`sluice-extproc-demo`) as a supervised helper on
//! a Unix socket. No sleeps as synchronisation: waits poll a condition with a deadline.

use sluice_extproc::{BodyMode, ExtProc, ExtProcConfig, HelperState, OnUnavailable, ResponsePhase};
use sluice_module::FailurePolicy;
use sluice_proxy::clock::{Clock, ManualClock};
use sluice_proxy::config::{Config, ListenerConfig, Mode};
use sluice_proxy::{LoadedModule, Running, State};
use sluice_testkit::client::{self, Reply as ClientReply};
use sluice_testkit::{Origin, Reply};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const DEMO: &str = env!("CARGO_BIN_EXE_sluice-extproc-demo");

/// A forward proxy with the helper's modules, in front of a fresh origin.
struct Harness {
    origin: Origin,
    proxy: Running,
    extproc: ExtProc,
    _dir: tempfile::TempDir,
}

/// The demo helper's configuration, with a socket in `dir`.
fn demo_config(dir: &tempfile::TempDir) -> ExtProcConfig {
    let mut config = ExtProcConfig::new(DEMO, dir.path().join("helper.sock"));
    config.args = vec!["--socket".into(), "{socket}".into()];
    config.backoff_initial_ms = 50;
    config.backoff_max_ms = 2_000;
    config.message_timeout_ms = 5_000;
    config
}

impl Harness {
    async fn start(tweak: impl FnOnce(&mut ExtProcConfig)) -> Self {
        Self::start_with(FailurePolicy::Closed, tweak).await
    }

    /// [`Harness::start`] with the module failing as `on_error` says.
    async fn start_with(on_error: FailurePolicy, tweak: impl FnOnce(&mut ExtProcConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = demo_config(&dir);
        tweak(&mut config);
        let extproc = ExtProc::start(config).expect("extproc");
        let modules = vec![LoadedModule { module: extproc.module(), on_error }];
        let clock = ManualClock::default();
        let origin_clock = clock.clone();
        let origin = Origin::start(move || origin_clock.now()).await;
        let mut config = Config {
            listener: vec![ListenerConfig {
                addr: "127.0.0.1:0".parse().unwrap(),
                mode: Mode::Forward,
                ..ListenerConfig::default()
            }],
            ..Config::default()
        };
        config.admin.addr = "127.0.0.1:0".parse().unwrap();
        config.admin.token = Some("test-token".into());
        // The origin is on loopback, which forward requests may not reach by default.
        config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap()];
        config.log.access_log = Some(dir.path().join("access.log"));
        config.validate().expect("valid test config");
        let state = State::new(config, Arc::new(clock), modules).expect("state");
        let proxy = sluice_proxy::start(state).await.expect("start");
        Self { origin, proxy, extproc, _dir: dir }
    }

    /// Waits until the access log has a line containing `needle`.
    async fn logged(&self, needle: &str) {
        let path = self._dir.path().join("access.log");
        until(&format!("{needle:?} in the access log"), || {
            std::fs::read_to_string(&path).is_ok_and(|log| log.contains(needle))
        })
        .await;
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.listeners()[0]
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> ClientReply {
        client::get(self.addr(), &self.origin.url(path), headers).await
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> ClientReply {
        client::send(self.addr(), "POST", &self.origin.url(path), headers, Some(body)).await
    }

    async fn admin(&self, method: &str, path: &str) -> ClientReply {
        let admin = self.proxy.admin.expect("admin");
        client::send(admin, method, path, &[("Authorization", "Bearer test-token")], None).await
    }

    /// Waits until the helper is up (after `restarts` restarts at least).
    async fn up(&self, restarts: u64) {
        until("the helper to be up", || {
            let s = self.extproc.status();
            s.state == HelperState::Up && s.restarts >= restarts
        })
        .await;
    }
}

/// Polls `done` every few milliseconds for up to 20 s; panics with `what` otherwise.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn values<'a>(reply: &'a ClientReply, name: &str) -> Vec<&'a str> {
    reply.headers.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
}

#[tokio::test]
async fn request_and_response_headers_are_mutated_end_to_end() {
    let h = Harness::start(|_| {}).await;
    h.up(0).await;
    h.origin.on("/a", Reply::ok("hello").header("cache-control", "max-age=60").header("x-origin-secret", "s3cr3t"));

    let reply = h.get("/a", &[("x-demo-remove", "1"), ("x-extproc-trace", "client")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "hello");
    // The request as the origin saw it: set, appended, removed.
    let seen = h.origin.last_request("/a").expect("origin request");
    assert_eq!(seen.header("x-extproc-demo"), Some("request"));
    assert!(seen.header("x-demo-remove").is_none());
    let trace: Vec<&str> = seen
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("x-extproc-trace"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(trace, ["client", "demo"]);
    // The response as the client saw it.
    let pid = h.extproc.status().pid.expect("pid").to_string();
    assert_eq!(reply.header("x-extproc-demo"), "response");
    assert_eq!(reply.header("x-extproc-demo-pid"), pid);
    assert!(reply.headers.get("x-origin-secret").is_none());
    h.logged(" extproc=req:ok,resp:ok").await;

    // A hit is processed too (response_headers = "client"), and the origin is not asked again.
    let hit = h.get("/a", &[]).await;
    assert_eq!(h.origin.hits("/a"), 1);
    assert_eq!(hit.header("x-extproc-demo"), "response");
    assert!(hit.headers.get("x-origin-secret").is_none());

    // `:path` from the helper rewrites the request before the cache and the origin see it.
    h.origin.on("/rewritten", Reply::ok("new place"));
    let reply = h.get("/old", &[("x-demo-rewrite", "/rewritten")]).await;
    assert_eq!(reply.text(), "new place");
    assert_eq!(h.origin.hits("/old"), 0);

    // The status endpoint.
    let status = h.admin("GET", "/modules/extproc/status").await;
    assert_eq!(status.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(json["state"], "up");
    assert_eq!(json["pid"].to_string(), pid);
    assert_eq!(json["answered"], 6, "{json}");
    assert_eq!(json["in_flight"], 0);
}

#[tokio::test]
async fn immediate_responses_answer_locally_in_both_phases() {
    let h = Harness::start(|_| {}).await;
    h.up(0).await;
    let reply = h.get("/blocked/x", &[]).await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "blocked by sluice-extproc-demo\n");
    assert_eq!(reply.header("x-extproc-demo"), "immediate");
    assert_eq!(h.origin.hits("/blocked/x"), 0);
    h.logged(" extproc=req:immediate(demo-blocked)").await;

    // In the response phase the helper's answer replaces the origin's response, body too.
    h.origin.on("/r", Reply::ok("original body").header("x-demo-replace", "1"));
    let reply = h.get("/r", &[]).await;
    assert_eq!(reply.status, 451);
    assert_eq!(reply.text(), "replaced by sluice-extproc-demo\n");
    assert_eq!(reply.header("x-extproc-demo"), "replaced");
    assert_eq!(reply.header("content-length"), "32", "framed by the host, the original dropped");
    assert_eq!(h.extproc.counters().immediate.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[tokio::test]
async fn a_crashed_helper_is_restarted_with_backoff_and_the_next_request_works() {
    let h = Harness::start(|c| c.on_unavailable = OnUnavailable::Bypass).await;
    h.up(0).await;
    let first = h.extproc.status();
    h.origin.on("/c", Reply::ok("from origin"));

    // The helper exits mid-exchange: this transaction goes on without it (bypass).
    let reply = h.get("/c", &[("x-demo-crash", "1")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "from origin");
    assert!(reply.headers.get("x-extproc-demo").is_none());
    h.logged(" extproc=req:bypass(broken)").await;

    h.up(1).await;
    let status = h.extproc.status();
    assert_eq!(status.restarts, 1);
    assert_eq!(status.starts, 2);
    assert_eq!(status.consecutive_failures, 1);
    assert_eq!(status.backoff_ms, 50, "the first restart waits the initial delay");
    assert!(status.last_exit.as_deref().is_some_and(|e| e.contains('3')), "{:?}", status.last_exit);
    assert_ne!(status.pid, first.pid);

    let reply = h.get("/c", &[]).await;
    assert_eq!(reply.header("x-extproc-demo"), "response");
    assert_eq!(reply.header("x-extproc-demo-pid"), status.pid.unwrap().to_string());

    // A restart through the admin endpoint is not a crash: the failure count starts over
    // and the helper starts again without a delay.
    assert_eq!(h.admin("POST", "/modules/extproc/restart").await.status, 202);
    h.up(2).await;
    let status = h.extproc.status();
    assert_eq!((status.consecutive_failures, status.backoff_ms), (0, 0));
    assert_eq!(h.get("/c", &[]).await.header("x-extproc-demo"), "response");
    // The endpoint takes POST only.
    let get = h.admin("GET", "/modules/extproc/restart").await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), "POST");
}

/// A response replaced at its headers (an immediate response, or `on_unavailable = "fail"`)
/// never carries the original body, however large, with the module failing open.
#[tokio::test]
async fn a_replaced_response_never_carries_the_original_body() {
    let original = "x".repeat(5000);
    let h = Harness::start_with(FailurePolicy::Open, |c| c.replace_buffer_max = 100).await;
    h.up(0).await;
    h.origin.on("/big", Reply::ok(original.clone()).header("x-demo-replace", "1"));
    let reply = h.get("/big", &[]).await;
    assert_eq!(reply.status, 451);
    assert_eq!(reply.text(), "replaced by sluice-extproc-demo\n");
    assert_eq!(reply.header("cache-control"), "no-store");

    // A response-phase timeout with `on_unavailable = "fail"`: a 503 and its own body.
    let h = Harness::start_with(FailurePolicy::Open, |c| {
        c.replace_buffer_max = 100;
        c.message_timeout_ms = 300;
    })
    .await;
    h.up(0).await;
    let never = h._dir.path().join("never");
    h.origin.on("/slow", Reply::ok(original).header("x-demo-hold", never.to_str().unwrap()));
    let reply = h.get("/slow", &[]).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.text(), "503 Service Unavailable: helper extproc unavailable (timeout)\n");
    h.logged(" extproc=req:ok,resp:fail(timeout)").await;
}

/// Bodies over gRPC's default 4 MiB message limit go to the helper and come back (Sluice's
/// client and the demo server take `max_body_bytes` and headroom); a helper that cannot read
/// a message ends the stream with an error, which `on_unavailable = "fail"` fails.
#[tokio::test]
async fn bodies_over_four_mib_are_processed_and_an_unreadable_message_fails() {
    let body = "a".repeat(5 << 20);
    let h = Harness::start(buffered_bodies).await;
    h.up(0).await;
    h.origin.on("/large", Reply::ok(body.clone()));
    let reply = h.get("/large", &[("x-demo-body", "upcase")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-extproc-body-bytes"), (5 << 20).to_string());
    assert!(reply.text() == body.to_ascii_uppercase(), "the body came back upcased");

    // The demo told to read at most 1000 bytes a message.
    let h = Harness::start(|c| {
        buffered_bodies(c);
        c.args.extend(["--max-message-bytes".into(), "1000".into()]);
    })
    .await;
    h.up(0).await;
    h.origin.on("/mid", Reply::ok("b".repeat(5000)));
    let reply = h.get("/mid", &[("x-demo-body", "upcase")]).await;
    assert_eq!(reply.status, 503, "not a clean end of the stream: the failure policy applies");
    h.logged(" extproc=req:ok,resp:ok,resp-body:fail(broken)").await;
}

#[tokio::test]
async fn an_unavailable_helper_is_bypassed_or_fails_as_configured() {
    // `false` exits at once: the helper never comes up and restarts with growing delays.
    let bypass = Harness::start(|c| {
        c.command = "false".into();
        c.args.clear();
        c.backoff_initial_ms = 10;
        c.backoff_max_ms = 40;
        c.on_unavailable = OnUnavailable::Bypass;
    })
    .await;
    bypass.origin.on("/u", Reply::ok("origin"));
    let reply = bypass.get("/u", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "origin");
    assert!(reply.headers.get("x-extproc-demo").is_none());
    assert!(bypass.extproc.counters().bypassed.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    until("three failed starts", || bypass.extproc.status().consecutive_failures >= 3).await;
    let status = bypass.extproc.status();
    assert_ne!(status.state, HelperState::Up);
    let expected = (10u64 << (status.consecutive_failures - 1).min(10)).min(40);
    assert!(status.backoff_ms == expected || status.backoff_ms == 40, "{status:?}");
    assert!(status.restarts >= 2);

    let fail = Harness::start(|c| {
        c.command = "false".into();
        c.args.clear();
        c.on_unavailable = OnUnavailable::Fail;
    })
    .await;
    fail.origin.on("/u", Reply::ok("origin"));
    let reply = fail.get("/u", &[]).await;
    assert_eq!(reply.status, 503);
    assert!(reply.text().contains("unavailable (down)"), "{}", reply.text());
    assert_eq!(fail.origin.hits("/u"), 0);
}

#[tokio::test]
async fn the_queue_bound_is_enforced() {
    let h = Harness::start(|c| {
        c.max_in_flight = 1;
        c.on_unavailable = OnUnavailable::Fail;
    })
    .await;
    h.up(0).await;
    h.origin.on("/q", Reply::ok("q"));
    let release = h._dir.path().join("release");
    let hold = release.to_str().unwrap().to_owned();
    let (addr, url) = (h.addr(), h.origin.url("/q"));
    let held = tokio::spawn(async move { client::get(addr, &url, &[("x-demo-hold", &hold)]).await });
    until("one message in flight", || h.extproc.in_flight() == 1).await;

    let refused = h.get("/q", &[]).await;
    assert_eq!(refused.status, 503);
    assert!(refused.text().contains("queue full"), "{}", refused.text());
    assert_eq!(h.extproc.counters().queue_full.load(std::sync::atomic::Ordering::Relaxed), 1);

    std::fs::write(&release, b"").unwrap();
    let reply = held.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-extproc-demo"), "response");
    until("the queue to drain", || h.extproc.in_flight() == 0).await;
    assert_eq!(h.get("/q", &[]).await.status, 200);
}

#[tokio::test]
async fn a_slow_helper_misses_the_message_timeout() {
    let h = Harness::start(|c| {
        c.message_timeout_ms = 200;
        c.on_unavailable = OnUnavailable::Bypass;
    })
    .await;
    h.up(0).await;
    h.origin.on("/slow", Reply::ok("slow"));
    let never = h._dir.path().join("never");
    let reply = h.get("/slow", &[("x-demo-hold", never.to_str().unwrap())]).await;
    assert_eq!(reply.status, 200);
    assert!(reply.headers.get("x-extproc-demo").is_none(), "the stream is abandoned after a timeout");
    assert_eq!(h.extproc.counters().errors.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(h.extproc.in_flight(), 0);
}

#[tokio::test]
async fn the_helper_runs_at_the_configured_nice_level() {
    let h = Harness::start(|c| c.nice = Some(7)).await;
    h.up(0).await;
    let pid = h.extproc.status().pid.expect("pid");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    // Fields after the command name start at field 3; nice is field 19.
    let nice: i32 = rest.split_whitespace().nth(16).unwrap().parse().unwrap();
    assert_eq!(nice, 7, "{stat}");
    assert!(stat.contains("(sluice-extproc-"), "the pid is the helper's, not nice's: {stat}");
}

#[tokio::test]
async fn origin_phase_mutations_are_what_gets_stored() {
    let h = Harness::start(|c| c.response_headers = ResponsePhase::Origin).await;
    h.up(0).await;
    h.origin.on("/s", Reply::ok("stored").header("cache-control", "max-age=60").header("x-origin-secret", "1"));
    let miss = h.get("/s", &[]).await;
    assert_eq!(values(&miss, "x-extproc-demo"), ["response"], "set once, before the store");
    let answered = h.extproc.counters().answered.load(std::sync::atomic::Ordering::Relaxed);
    let hit = h.get("/s", &[]).await;
    assert_eq!(h.origin.hits("/s"), 1);
    assert_eq!(hit.header("x-extproc-demo"), "response", "the stored response carries the mutation");
    assert!(hit.headers.get("x-origin-secret").is_none());
    // Only the request headers went to the helper for the hit.
    assert_eq!(h.extproc.counters().answered.load(std::sync::atomic::Ordering::Relaxed), answered + 1);

    // A response the helper replaces in the origin phase is not stored.
    h.origin.on("/replaced", Reply::ok("origin").header("cache-control", "max-age=60").header("x-demo-replace", "1"));
    for _ in 0..2 {
        let reply = h.get("/replaced", &[]).await;
        assert_eq!(reply.status, 451);
        assert_eq!(reply.text(), "replaced by sluice-extproc-demo\n");
    }
    assert_eq!(h.origin.hits("/replaced"), 2);
}

/// Framing fields a processor sets (`x-demo-set`): a length of its own, chunking, `Connection`.
const FRAMING: &str = "content-length=5; transfer-encoding=chunked; connection=close, x-listed; x-listed=1";

#[tokio::test]
async fn framing_fields_a_processor_sets_are_the_hosts() {
    // Towards the client: a wrong length would leave bytes in front of the second answer.
    let h = Harness::start(|_| {}).await;
    h.up(0).await;
    h.origin.on("/k", Reply::ok("twenty-two bytes here!").header("x-demo-set", FRAMING));
    let answers = client::two_on_one_connection(h.addr(), &h.origin.url("/k")).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    for answer in answers {
        client::assert_framed_by_the_proxy(&answer, "twenty-two bytes here!");
    }

    // Before the store: the stored object keeps its true length and no chunking.
    let h = Harness::start(|c| c.response_headers = ResponsePhase::Origin).await;
    h.up(0).await;
    h.origin.on("/s", Reply::ok("stored whole").header("cache-control", "max-age=60").header("x-demo-set", FRAMING));
    assert_eq!(h.get("/s", &[]).await.text(), "stored whole");
    let hit = h.get("/s", &[]).await;
    assert_eq!(h.origin.hits("/s"), 1);
    assert_eq!((hit.text(), hit.header("content-length")), ("stored whole".to_owned(), "12"), "its true length");
    assert_eq!(hit.header("transfer-encoding"), "");
}

#[tokio::test]
async fn dropping_the_modules_stops_the_helper_and_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_config(&dir);
    let socket = config.socket.clone();
    let extproc = ExtProc::start(config).unwrap();
    until("the helper to be up", || extproc.status().state == HelperState::Up).await;
    let pid = extproc.status().pid.unwrap();
    assert!(socket.exists());
    drop(extproc);
    // Killed: gone, or a zombie until it is reaped.
    until("the helper to stop", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat[stat.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
    })
    .await;
    assert!(!socket.exists());
}

/// Interoperability with a processor built on Envoy's own generated API, not on this crate's
/// protobuf subset: the Go processor in `interop/go-processor` (go-control-plane and gRPC-Go),
/// which mirrors the demo's request, response and `/blocked` rules. Built by the test
/// ([`go_processor`]), or taken from `SLUICE_EXTPROC_PROCESSOR` (any processor taking
/// `--socket PATH` and following the same rules).
#[tokio::test]
async fn an_existing_envoy_processor_works_unchanged() {
    let command = go_processor();
    let h = Harness::start(|c| c.command = command.to_string_lossy().into_owned()).await;
    h.up(0).await;
    h.origin.on("/e", Reply::ok("e").header("x-origin-secret", "1"));
    let reply = h.get("/e", &[("x-demo-remove", "1")]).await;
    let seen = h.origin.last_request("/e").unwrap();
    assert_eq!(seen.header("x-extproc-demo"), Some("request"));
    assert!(seen.header("x-demo-remove").is_none());
    assert_eq!(reply.header("x-extproc-demo"), "response");
    assert_eq!(reply.header("x-extproc-demo-pid"), h.extproc.status().pid.unwrap().to_string());
    assert!(reply.headers.get("x-origin-secret").is_none());
    assert_eq!(reply.header("x-go-saw-status"), "200", "`:status` reached the processor");
    let blocked = h.get("/blocked", &[]).await;
    assert_eq!(blocked.status, 403);
    assert_eq!(blocked.header("x-extproc-demo"), "immediate");
    assert_eq!(h.origin.hits("/blocked"), 0);
}

#[tokio::test]
async fn the_demo_helper_exits_when_the_process_that_started_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("demo.sock");
    // Started as the supervisor starts helpers: stdin a pipe held by the parent.
    let mut child = tokio::process::Command::new(DEMO)
        .arg("--socket")
        .arg(&socket)
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until("the demo helper to listen", || std::os::unix::net::UnixStream::connect(&socket).is_ok()).await;
    assert!(child.try_wait().unwrap().is_none(), "the helper runs while its parent's end of stdin is open");
    // What the kernel does when Sluice exits, however it exits: its end of the pipe closes.
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the helper exited at the end of its stdin")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Both bodies in `buffered` mode.
fn buffered_bodies(config: &mut ExtProcConfig) {
    config.request_body = BodyMode::Buffered;
    config.response_body = BodyMode::Buffered;
}

#[tokio::test]
async fn buffered_bodies_go_to_the_helper_and_its_answers_replace_them() {
    let h = Harness::start(buffered_bodies).await;
    h.up(0).await;
    h.origin.on("/page", Reply::ok("quiet page").header("cache-control", "max-age=60"));

    // The response body, replaced (with a header set along with it: the head is not sent yet),
    // on a miss and on a hit: bodies go to the helper on their way to each client.
    for round in ["miss", "hit"] {
        let reply = h.get("/page", &[("x-demo-body", "upcase")]).await;
        assert_eq!(reply.status, 200, "{round}");
        assert_eq!(reply.text(), "QUIET PAGE", "{round}");
        assert_eq!(reply.header("content-length"), "10", "{round}");
        assert_eq!(reply.header("x-extproc-body-bytes"), "10", "{round}: the body answer's header mutation");
        assert_eq!(reply.header("x-extproc-demo"), "response", "{round}: the headers answer applied too");
    }
    assert_eq!(h.origin.hits("/page"), 1);
    h.logged(" extproc=req:ok,resp:ok,resp-body:ok").await;

    // Left alone, cleared.
    assert_eq!(h.get("/page", &[]).await.text(), "quiet page");
    let cleared = h.get("/page", &[("x-demo-body", "clear")]).await;
    assert_eq!((cleared.text().as_str(), cleared.header("content-length")), ("", "0"));

    // The request body, replaced before it goes to the origin.
    h.origin.on("/upload", Reply::ok("stored"));
    let reply = h.post("/upload", &[("x-demo-body", "upcase")], "small letters").await;
    assert_eq!(reply.status, 200);
    let seen = h.origin.last_request("/upload").expect("the origin got the request");
    assert_eq!(seen.body, b"SMALL LETTERS");
    assert_eq!(seen.header("content-length"), Some("13"));
    h.logged(" extproc=req:ok,req-body:ok,resp:ok,resp-body:ok").await;
}

#[tokio::test]
async fn a_response_body_can_be_answered_immediately_or_replaced_with_its_headers() {
    let h = Harness::start(buffered_bodies).await;
    h.up(0).await;
    h.origin.on("/doc", Reply::ok("the document").header("cache-control", "max-age=60"));

    // An immediate response after the body: status, fields and body replaced (the head was
    // held with the body).
    let reply = h.get("/doc", &[("x-demo-body", "immediate")]).await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "blocked after its body\n");
    assert_eq!(reply.header("x-extproc-demo"), "immediate");
    assert_eq!(reply.header("cache-control"), "no-store");

    // CONTINUE_AND_REPLACE on the response headers: the body is replaced without being sent.
    let answered = h.extproc.counters().answered.load(std::sync::atomic::Ordering::Relaxed);
    let reply = h.get("/doc", &[("x-demo-body", "early")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "replaced early\n");
    assert_eq!(reply.header("content-length"), "15");
    let sent = h.extproc.counters().answered.load(std::sync::atomic::Ordering::Relaxed) - answered;
    assert_eq!(sent, 2, "request and response headers only: the body was not sent");
    assert_eq!(h.origin.hits("/doc"), 1, "the stored body is the origin's");
}

#[tokio::test]
async fn a_helper_that_misses_the_body_message_timeout_fails_or_is_bypassed_as_configured() {
    for on_unavailable in [OnUnavailable::Fail, OnUnavailable::Bypass] {
        let h = Harness::start(|c| {
            buffered_bodies(c);
            c.on_unavailable = on_unavailable;
            c.message_timeout_ms = 300;
        })
        .await;
        h.up(0).await;
        h.origin.on("/p", Reply::ok("plain body"));
        // The demo never answers this response body.
        let reply = h.get("/p", &[("x-demo-body", "stall")]).await;
        match on_unavailable {
            OnUnavailable::Fail => {
                assert_eq!(reply.status, 503, "the held response is replaced");
                assert_eq!(reply.text(), "503 Service Unavailable: helper extproc unavailable (timeout)\n");
                h.logged(" extproc=req:ok,resp:ok,resp-body:fail(timeout)").await;
            }
            OnUnavailable::Bypass => {
                assert_eq!(reply.status, 200);
                assert_eq!(reply.text(), "plain body", "the body goes on unchanged");
                h.logged(" extproc=req:ok,resp:ok,resp-body:bypass(timeout)").await;
            }
        }
    }
}

/// The processor for [`an_existing_envoy_processor_works_unchanged`]: `SLUICE_EXTPROC_PROCESSOR`
/// if set, else `interop/go-processor` built with Go (once per test binary) into
/// `$CARGO_TARGET_DIR/sluice-extproc-interop` or the workspace's `target/`
/// ([`sluice_testkit::go::build`]).
fn go_processor() -> &'static std::path::Path {
    use std::path::PathBuf;
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(given) = std::env::var_os("SLUICE_EXTPROC_PROCESSOR") {
            return PathBuf::from(given);
        }
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        sluice_testkit::go::build(
            &manifest.join("interop/go-processor"),
            &manifest.join("../.."),
            "sluice-extproc-interop/go-extproc",
        )
    })
}
