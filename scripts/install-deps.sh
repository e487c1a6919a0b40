#!/usr/bin/env bash
# Installs what Sluice's tests need on a fresh Debian machine: curl (driven by the integration
# tests as a real client), calamaris (a Squid log analyser, run on Sluice's access log),
# htpasswd from apache2-utils (it writes the users files of the proxy authentication tests), Node.js
# and the HTTP cache test suite of cache-tests.fyi (run against Sluice as a conformance test),
# the Rust components fmt and clippy, the wasm32-wasip1 target (the Proxy-Wasm test plugins),
# Go (the interoperability tests build an ext_proc processor on Envoy's Go API and a gRPC
# server and client on gRPC-Go) and, built with it, h2spec (the HTTP/2 conformance suite, run against Sluice's listeners). Safe to run
# repeatedly.
set -euo pipefail

need_apt=()
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v calamaris >/dev/null 2>&1 || need_apt+=(calamaris)
command -v htpasswd >/dev/null 2>&1 || need_apt+=(apache2-utils)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
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

# Go: any Go from 1.21 on fetches the toolchain the processor's go.mod names by itself (from
# the Go module proxy). Without one, that toolchain is fetched here, from the same proxy.
go_usable() {
  local version
  version=$("$1" env GOVERSION 2>/dev/null) || return 1
  [[ $version =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 21))
}
if ! go_usable go && ! go_usable /usr/local/go/bin/go; then
  go_mod=crates/sluice-extproc/interop/go-processor/go.mod
  want=$(awk '$1 == "go" { print $2 }' "$(dirname "$0")/../$go_mod")
  case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) echo "install-deps: no Go toolchain for $(uname -m); install Go $want" >&2; exit 1 ;;
  esac
  if [ "$(id -u)" -ne 0 ] || [ -e /usr/local/go ]; then
    echo "install-deps: please install Go $want (or any Go >= 1.21) as /usr/local/go or on PATH" >&2
    exit 1
  fi
  command -v unzip >/dev/null 2>&1 || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip >/dev/null
  }
  proxy=${GOPROXY:-https://proxy.golang.org}
  proxy=${proxy%%,*}
  unpack=$(mktemp -d)
  curl -fsSL -o "$unpack/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$want.linux-$arch.zip"
  unzip -q "$unpack/go.zip" -d "$unpack"
  mv "$unpack/golang.org/toolchain@v0.0.1-go$want.linux-$arch" /usr/local/go
  rm -rf "$unpack"
fi

"$(dirname "$0")/cache-tests/install.sh"
"$(dirname "$0")/h2spec/install.sh"
