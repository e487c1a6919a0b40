# The Proxy-Wasm test plugins, for the bench scripts (sourced, not run; defines a function and
# nothing else, so scripts with their own process cleanup can share it).
#
#   build_plugins     builds crates/sluice-wasm/plugins for wasm32-wasip1 (the target is
#                     installed by scripts/install-deps.sh) and prints their directory

build_plugins() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cargo build --release --locked --target wasm32-wasip1 --manifest-path "$root/crates/sluice-wasm/plugins/Cargo.toml" \
    --target-dir "$root/target/sluice-wasm-plugins" -q
  echo "$root/target/sluice-wasm-plugins/wasm32-wasip1/release"
}
