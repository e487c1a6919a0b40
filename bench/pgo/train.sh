#!/usr/bin/env bash
# The training workload of the profile-guided build (scripts/build-pgo.sh): drives an
# instrumented `sluice` through the paths a caching proxy spends its time on, so that the
# compiler lays out and inlines for them. Not a benchmark: it measures nothing.
#
#   bench/pgo/train.sh SLUICE_BIN     # about a minute; the profile goes where SLUICE_BIN's
#                                     # -Cprofile-generate directory says
#
# In front of an nginx origin (the benchmark's content and configuration, bench/proxy/conf.sh):
#   1. no module, two workers, a reverse and a forward listener: hits of 1 KiB to 4 MiB,
#      pass-through of 1 KiB and 256 KiB, misses of new URLs (stored, then evicted from a
#      small cache), revalidations (`no-cache` responses: a conditional request and a 304
#      each), 304s answered from the cache, absolute-form requests to the forward listener,
#      HTTP/2 hits (h2c), and hits over TLS (a third listener): HTTP/1.1 and HTTP/2;
#   2. one worker, modules: the built-in `add-headers` and `body-copy` with the Proxy-Wasm
#      `add_headers` test plugin after them, on hits, pass-through and misses.
# Deliberately not the benchmarks' own configurations (no empty module, no empty plugin): the
# profile should describe production traffic, not the figures it is judged by.
#
# Any answer other than 2xx or 3xx, or a socket error, stops the training: a profile of error
# paths would be worse than none. Each sluice is stopped with SIGTERM: its profile is written
# when it exits cleanly.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PORT_BASE=${PORT_BASE:-18750}
ORIGIN_PORT=$PORT_BASE # and its HTTP/2 twin on + 1 (bench/proxy/conf.sh)
REVERSE_PORT=$((PORT_BASE + 2))
FORWARD_PORT=$((PORT_BASE + 3))
TLS_PORT=$((PORT_BASE + 4))
log() { printf '[pgo-train] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
source "$ROOT/bench/lib.sh"
source "$ROOT/bench/proxy/conf.sh"
source "$ROOT/bench/plugins.sh"
SLUICE=${1:?usage: bench/pgo/train.sh SLUICE_BIN}
install_missing $(command -v nginx >/dev/null || echo nginx-light) $(command -v wrk >/dev/null || echo wrk) \
    $(command -v h2load >/dev/null || echo nghttp2-client) $(command -v curl >/dev/null || echo curl) \
    $(command -v openssl >/dev/null || echo openssl)

TMP=$(mktemp -d)
write_content "$TMP"
tls_cert "$TMP"
origin_conf "$TMP" "$ORIGIN_PORT" >"$TMP/origin.conf"
nginx -p "$TMP" -c "$TMP/origin.conf" -e "$TMP/origin.error.log" &
PIDS+=("$!")
wait_port "$ORIGIN_PORT" || die "origin did not start"

log "building the Proxy-Wasm test plugins (wasm32-wasip1)"
plugins=$(build_plugins)

# A wrk script that asks for a new URL every time (a miss each).
cat >"$TMP/misses.lua" <<'EOF'
local n = 0
request = function()
    n = n + 1
    return wrk.format(nil, wrk.path .. "?n=" .. n)
end
EOF
# A wrk script for a forward proxy: absolute-form requests.
printf 'wrk.path = "http://127.0.0.1:%s/c/1k"\n' "$ORIGIN_PORT" >"$TMP/forward.lua"

# Runs wrk with these arguments; dies on an answer other than 2xx or 3xx or a socket error.
wrk_checked() {
    local out
    out=$(wrk -t1 -c16 "$@")
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        die "training load failed: wrk $*: $(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ')"
    fi
}

# Runs h2load with these arguments; dies unless it completed requests, all of them 2xx.
h2load_checked() {
    local out
    out=$(h2load "$@")
    grep -qE '^requests: [0-9]+ total, [0-9]+ started, [1-9][0-9]* done, [0-9]+ succeeded, 0 failed, 0 errored, 0 timeout' <<<"$out" &&
        grep -qE '^status codes: [0-9]+ 2xx, 0 3xx, 0 4xx, 0 5xx' <<<"$out" ||
        die "training load failed: h2load $*: $(grep -E '^(requests|status codes):' <<<"$out" | tr '\n' ' ')"
}

load() { # seconds path [wrk options...]
    local seconds=$1 path=$2
    shift 2
    wrk_checked -d"${seconds}s" "$@" "http://127.0.0.1:$REVERSE_PORT$path"
}

# Starts sluice on config $1 with $2 workers, runs the workload function $3, stops sluice
# (writing its profile).
train() {
    local config=$1 threads=$2 workload=$3 pid
    "$SLUICE" serve --config "$config" --threads "$threads" >"$config.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$REVERSE_PORT" || die "sluice did not start ($config.log)"
    "$workload"
    stop_pid "$pid"
}

plain() {
    local size
    for size in 1k 16k 256k 4m; do curl -sf -o /dev/null "http://127.0.0.1:$REVERSE_PORT/c/$size"; done
    load 6 /c/1k
    load 3 /c/16k
    load 2 /c/256k
    load 2 /c/4m -c4
    load 5 /p/1k
    load 2 /p/256k
    load 3 /c/1k -s "$TMP/misses.lua"
    load 2 /v/1k
    load 2 /c/1k -H 'If-Modified-Since: Tue, 01 Jan 2030 00:00:00 GMT'
    wrk_checked -d3s -s "$TMP/forward.lua" "http://127.0.0.1:$FORWARD_PORT/"
    h2load_checked -c8 -m8 -D 3s "http://127.0.0.1:$REVERSE_PORT/c/1k"
    wrk_checked -d3s "https://127.0.0.1:$TLS_PORT/c/1k"
    h2load_checked -c8 -m4 -D 3s "https://127.0.0.1:$TLS_PORT/c/1k"
}

with_modules() {
    curl -sf -o /dev/null "http://127.0.0.1:$REVERSE_PORT/c/1k"
    load 5 /c/1k
    load 2 /c/16k
    load 3 /p/1k
    load 2 /c/1k -s "$TMP/misses.lua"
}

cache='[cache]
memory = "64MiB"
max_object = "8MiB"'
{
    # h2c on the reverse listener (HTTP/1.1 and HTTP/2 with prior knowledge on one port).
    CLIENT=h2c sluice_toml "$REVERSE_PORT" "$ORIGIN_PORT" "$cache"
    printf '\n[[listener]]\naddr = "127.0.0.1:%s"\nmode = "forward"\n' "$FORWARD_PORT"
    # The origin is on loopback, which forward requests may not reach by default.
    printf '\n[access]\nallow_destinations = ["127.0.0.1"]\n'
    printf '\n[[listener]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\ntls = { cert = "%s", key = "%s" }\n' \
        "$TLS_PORT" "$TLS_CERT" "$TLS_KEY"
} >"$TMP/plain.toml"
{
    sluice_toml "$REVERSE_PORT" "$ORIGIN_PORT" "$cache"
    printf '\n[[module]]\nname = "add-headers"\n\n[[module]]\nname = "body-copy"\n'
    printf '\n[[module]]\nname = "wasm-add-headers"\nkind = "wasm"\nsettings = { path = "%s" }\n' "$plugins/add_headers.wasm"
} >"$TMP/modules.toml"

# Two workers (the multi-thread runtime, the default on a machine with more than one core)
# without modules, one (the single event loop, as the benchmarks run) with them.
log "training without modules"
train "$TMP/plain.toml" 2 plain
log "training with modules"
train "$TMP/modules.toml" 1 with_modules
log "done"
