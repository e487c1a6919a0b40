#!/usr/bin/env bash
# Regenerates src/pb/*.rs from proto/ with a pure-Rust protobuf compiler (protox) and
# tonic-prost-build, in a throwaway crate, so the build of sluice-extproc itself needs neither
# protoc nor the code generators. Run after changing anything under proto/.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/out"
cat >"$work/Cargo.toml" <<'TOML'
[package]
name = "extproc-gen"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
protox = "0.10"
tonic-prost-build = "0.14"
prost-build = "0.14"
TOML
cp "$here/scripts/gen/main.rs" "$work/src/main.rs"
(cd "$work" && cargo run -q -- "$here/proto" "$work/out")
cp "$work/out/envoy.config.core.v3.rs" "$here/src/pb/envoy.config.core.v3.rs"
cp "$work/out/envoy.r#type.v3.rs" "$here/src/pb/envoy.type.v3.rs"
cp "$work/out/envoy.service.ext_proc.v3.rs" "$here/src/pb/envoy.service.ext_proc.v3.rs"
echo "regenerated $here/src/pb"
