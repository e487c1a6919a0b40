//! A real Sluice (forward proxy, cache on) in front of a scripted origin, with its module
//! list managed by `sluice_modules::Factory` as `sluice serve` sets it up, and the test
//! Proxy-Wasm plugins of `crates/sluice-wasm/plugins`.

use sluice_modules::Factory;
use sluice_proxy::clock::{Clock, ManualClock};
use sluice_proxy::config::Config;
use sluice_proxy::module_manager::ModuleManager;
use sluice_proxy::{Running, State};
use sluice_testkit::client::{self, Reply};
use sluice_testkit::Origin;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

pub const TOKEN: &str = "test-token";

/// The proxy, its origin and its module manager.
pub struct Proxy {
    pub origin: Origin,
    pub running: Running,
    pub manager: Arc<ModuleManager>,
}

impl Proxy {
    /// Starts a proxy whose configuration file ends with `modules` (`[[module]]` entries).
    pub async fn start(modules: &str) -> Self {
        let text = format!(
            "[[listener]]\naddr = \"127.0.0.1:0\"\n\n[access]\nallow_destinations = [\"127.0.0.0/8\"]\n\n[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n{modules}"
        );
        let config = Config::parse(&text).expect("valid test configuration");
        let clock = ManualClock::default();
        let origin_clock = clock.clone();
        let origin = Origin::start(move || origin_clock.now()).await;
        let mut state = State::new(config, Arc::new(clock), Vec::new()).expect("state");
        let manager = Factory::attach(&mut state).expect("modules build");
        let running = sluice_proxy::start(state).await.expect("start");
        Self { origin, running, manager }
    }

    pub fn addr(&self) -> SocketAddr {
        self.running.listeners()[0]
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.running.admin.expect("admin listener")
    }

    /// GET `path` of the origin through the proxy, on a new connection.
    pub async fn get(&self, path: &str) -> Reply {
        client::get(self.addr(), &self.origin.url(path), &[]).await
    }

    /// An admin request with the token; `content_type` and `body` when given.
    pub async fn admin(&self, method: &str, path: &str, content_type: Option<&str>, body: Option<&str>) -> Reply {
        let auth = format!("Bearer {TOKEN}");
        let mut headers = vec![("authorization", auth.as_str())];
        if let Some(content_type) = content_type {
            headers.push(("content-type", content_type));
        }
        client::send(self.admin_addr(), method, path, &headers, body).await
    }
}

/// Builds the test plugins (release, `wasm32-wasip1`) once per test binary, into the same
/// directory as the sluice-wasm tests; returns the path of plugin `name` (e.g.
/// `add_headers`). Panics with the build output if the build fails (is the target
/// installed? `rustup target add wasm32-wasip1`, done by scripts/install-deps.sh).
pub fn plugin(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let target = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => PathBuf::from(dir).join("sluice-wasm-plugins"),
            None => manifest_dir.join("../../target/sluice-wasm-plugins"),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let output = Command::new(cargo)
            .args(["build", "--release", "--locked", "--target", "wasm32-wasip1", "--manifest-path"])
            .arg(manifest_dir.join("../sluice-wasm/plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .output()
            .expect("run cargo to build the test plugins");
        assert!(
            output.status.success(),
            "building the test plugins failed (is the wasm32-wasip1 target installed?):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        target.join("wasm32-wasip1/release")
    });
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.is_file(), "no plugin {}", path.display());
    path
}

/// A `[[module]]` entry for the add-headers plugin (adds `x-wasm-1: one` ... `x-wasm-4`).
pub fn add_headers_entry(name: &str) -> String {
    format!(
        "[[module]]\nname = \"{name}\"\nkind = \"wasm\"\n[module.settings]\npath = {:?}\ninstances = 2\n",
        plugin("add_headers").display().to_string()
    )
}

/// A `[[module]]` entry for test plugin `plugin` (e.g. `trap`) named `name`: one instance, a
/// 50 ms callback deadline, a crashed instance recreated at once, failures `on_error`.
pub fn strict_entry(name: &str, plugin_name: &str, on_error: &str) -> String {
    format!(
        "[[module]]\nname = \"{name}\"\nkind = \"wasm\"\non_error = \"{on_error}\"\n[module.settings]\npath = {:?}\n\
         instances = 1\n[module.settings.limits]\ndeadline_ms = 50\nbackoff_base_ms = 0\n",
        plugin(plugin_name).display().to_string()
    )
}

/// Waits (up to 10 s of real time) until `done` holds; panics with `what` otherwise. For
/// effects no response signals: background work, the access log's writer thread.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
