#!/usr/bin/env bash
# Installs the HTTP cache test suite of cache-tests.fyi (npm package http-cache-tests, pinned
# by version and SHA-512) and the HTTP client it runs with (node-fetch, pinned by this
# directory's package-lock.json) into target/test-deps/cache-tests/, for the conformance test
# (crates/sluice-proxy/tests/cache_tests_suite.rs) and bench/cache-tests/compare.sh. Needs
# node and npm; safe to run repeatedly (does nothing once installed).
set -euo pipefail

VERSION=0.4.5
SHA512=0e3bb037d9d46572d35bec1abf52d1112099355c65f12b21c0ecb8cf5a71b966d6b79fdacbab0cf5043595e6c16833ba3f520c0682ba99d7fe3ee54ffd034bf0

here=$(cd "$(dirname "$0")" && pwd)
dest=$here/../../target/test-deps/cache-tests
[ -e "$dest/http-cache-tests/.installed-$VERSION" ] && exit 0

rm -rf "$dest"
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)

tarball=$(cd "$dest" && npm pack --silent "http-cache-tests@$VERSION" | tail -n1)
echo "$SHA512  $dest/$tarball" | sha512sum --check --quiet ||
  { echo "install-deps: http-cache-tests-$VERSION.tgz does not have the pinned SHA-512" >&2; exit 1; }
mkdir "$dest/http-cache-tests"
tar xzf "$dest/$tarball" -C "$dest/http-cache-tests" --strip-components=1
rm "$dest/$tarball"
touch "$dest/http-cache-tests/.installed-$VERSION"
