#!/usr/bin/env bash
# Installs what Sluice's tests need on a fresh Debian machine: curl (driven by the integration
# tests as a real client) and the Rust components fmt and clippy. Safe to run repeatedly.
set -euo pipefail

need_apt=()
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install-deps: please install: ${need_apt[*]}" >&2
    exit 1
  fi
fi

if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
  rustup target list --installed | grep -q wasm32-wasip1 || rustup target add wasm32-wasip1
elif [ ! -d "$(rustc --print sysroot)/lib/rustlib/wasm32-wasip1" ]; then
  # No rustup (a distribution's Rust, say): the target cannot be added from here.
  echo "install-deps: the Rust target wasm32-wasip1 is needed (the Proxy-Wasm test plugins are" >&2
  echo "install-deps: built for it) and rustup is not installed: install rustup and run" >&2
  echo "install-deps: 'rustup target add wasm32-wasip1', or your distribution's wasm32-wasip1" >&2
  echo "install-deps: standard library for $(rustc --version)." >&2
  exit 1
fi
