#!/usr/bin/env bash
# Builds h2spec (github.com/summerwind/h2spec, the HTTP/2 and HPACK conformance suite; its
# version and every dependency pinned by this directory's go.mod and go.sum, checked by Go
# against the checksum database) into target/test-deps/h2spec/, for the conformance test
# crates/sluice-proxy/tests/h2spec_suite.rs. Needs Go 1.21 or later (on PATH or as
# /usr/local/go/bin/go; scripts/install-deps.sh installs it first). Safe to run repeatedly
# (does nothing once built from these pins).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dest=$here/../../target/test-deps/h2spec
stamp=$dest/.built-$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
[ -x "$dest/h2spec" ] && [ -e "$stamp" ] && exit 0

go=go
command -v go >/dev/null 2>&1 || go=/usr/local/go/bin/go
rm -rf "$dest"
mkdir -p "$dest"
(cd "$here" && "$go" build -buildvcs=false -o "$dest/h2spec" github.com/summerwind/h2spec/cmd/h2spec)
touch "$stamp"
