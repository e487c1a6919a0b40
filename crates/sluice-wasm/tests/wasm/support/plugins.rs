//! Builds the test plugins (`crates/sluice-wasm/plugins`) for `wasm32-wasip1`, once per test
//! binary, and hands out their bytes or compiled forms.

use sluice_wasm::CompiledPlugin;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the plugins are built: `$CARGO_TARGET_DIR/sluice-wasm-plugins`, or the workspace's
/// `target/sluice-wasm-plugins`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("sluice-wasm-plugins"),
        None => manifest_dir().join("../../target/sluice-wasm-plugins"),
    }
}

/// Builds every plugin (release, `wasm32-wasip1`) the first time it is called; returns the
/// directory holding the `.wasm` files. Panics with the build output if the build fails
/// (e.g. the target is missing: `rustup target add wasm32-wasip1`).
pub fn build() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let manifest = manifest_dir().join("plugins/Cargo.toml");
        let target = target_dir();
        let output = Command::new(cargo)
            .args(["build", "--release", "--locked", "--target", "wasm32-wasip1", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            // The plugin workspace has its own settings; nothing of the outer build applies.
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .output()
            .expect("run cargo to build the test plugins");
        assert!(
            output.status.success(),
            "building the test plugins failed (is the wasm32-wasip1 target installed? `rustup target add wasm32-wasip1`):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        target.join("wasm32-wasip1/release")
    })
}

/// The bytes of plugin `name` (file name without `.wasm`, e.g. `add_headers`).
pub fn wasm(name: &str) -> Vec<u8> {
    let path = build().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// Plugin `name`, compiled once per test binary.
pub fn compiled(name: &str) -> CompiledPlugin {
    static CACHE: OnceLock<Mutex<HashMap<String, CompiledPlugin>>> = OnceLock::new();
    // Compiling under the lock: tests running in parallel wait instead of compiling twice.
    let mut cache = CACHE.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(name.to_string())
        .or_insert_with(|| CompiledPlugin::compile(name, &wasm(name)).expect("compile plugin"))
        .clone()
}
