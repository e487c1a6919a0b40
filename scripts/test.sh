#!/usr/bin/env bash
# The whole test suite, as CI runs it: install what the tests need, check formatting and
# lints, then run every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
