#!/usr/bin/env bash
# Two Sluice builds side by side, for one change's effect in time rather than instructions
# (`callgrind.sh`): both run at once as reverse proxies in front of one nginx origin (same
# content and configuration as run.sh, bench/proxy/conf.sh), idle except while measured, and
# are loaded in alternating rounds of `wrk -t1 -c32` (an unmeasured 1 s, then 4 s measured).
# Per round and build: user and kernel µs per request (utime and stime from /proc) and
# requests per CPU second. On this shared VM kernel time swings by ±15% between rounds; user
# µs per request is the steadier figure for a change in user space.
#
#   A=/tmp/sluice-before B=/tmp/sluice-after bench/proxy/ab.sh
#   A=... B=... SCENARIO=pass-1k ROUNDS=7 PIPE=1 bench/proxy/ab.sh   # PIPE=1: upstream.pipeline = 8
#   A=... B=... THREADS=2 bench/proxy/ab.sh                          # sluice serve --threads 2 (default 1)
#   A=... B=... CLIENT=h2 bench/proxy/ab.sh   # clients over https, h2 (TLS) or h2c, as in run.sh;
#                                             # HTTP/2 is loaded by h2load -c32 -m$STREAMS (default 1)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/proxy
PORT_BASE=${PORT_BASE:-18520}
ORIGIN_PORT=$((PORT_BASE + 10))
log() { printf '[ab] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
source "$ROOT/bench/lib.sh"
source "$HERE/conf.sh"
[[ -x ${A:-} && -x ${B:-} ]] || die "set A and B to two sluice binaries"
install_missing $(command -v nginx >/dev/null || echo nginx) $(command -v wrk >/dev/null || echo wrk) \
    $([[ ${CLIENT:-http} == h2* ]] && ! command -v h2load >/dev/null && echo nghttp2-client)
NGINX=$(command -v nginx)
TMP=$(mktemp -d)
export CLIENT=${CLIENT:-http}
scheme=http
case $CLIENT in
    http | h2c) ;;
    https | h2)
        scheme=https
        tls_cert "$TMP" ;;
    *) die "CLIENT must be http, https, h2 or h2c" ;;
esac
write_content "$TMP"
origin_conf "$TMP" "$ORIGIN_PORT" >"$TMP/origin.conf"
"$NGINX" -p "$TMP" -c "$TMP/origin.conf" -e "$TMP/origin.error.log" &
PIDS+=("$!")
wait_port "$ORIGIN_PORT" || die "origin did not start"
cache=$(printf '[cache]\nmemory = "1GiB"\nmax_object = "64MiB"\n')
[[ ${PIPE:-0} == 1 ]] && cache=$(printf '%s\n\n[upstream]\npipeline = 8\n' "$cache")
declare -A PID=() PORT=()
i=0
for build in A B; do
    i=$((i + 1))
    PORT[$build]=$((PORT_BASE + i))
    sluice_toml "${PORT[$build]}" "$ORIGIN_PORT" "$cache" $((PORT_BASE + 7 + i)) >"$TMP/$build.toml"
    SLUICE_LOG=warn "${!build}" serve --config "$TMP/$build.toml" --threads "${THREADS:-1}" 2>"$TMP/$build.err" &
    PID[$build]=$!
    PIDS+=("$!")
    wait_port "${PORT[$build]}" || die "build $build did not start (see $TMP/$build.err)"
done
path=$(scenario_path "${SCENARIO:-hit-1k}")
log "A=$A B=$B scenario ${SCENARIO:-hit-1k}, ${ROUNDS:-5} rounds, ${THREADS:-1} thread(s), CLIENT=$CLIENT"
load() { # duration url: prints the requests completed
    if [[ $CLIENT == h2* ]]; then
        h2load -c32 -m"${STREAMS:-1}" -D "$1" "$2" | awk '/^requests:/ {print $6}'
    else
        wrk -t1 -c32 -d"$1" "$2" | awk '/requests in/ {print $1}'
    fi
}
measure() { # build
    local pid=${PID[$1]} url="$scheme://127.0.0.1:${PORT[$1]}$path" u0 s0 u1 s1 n
    load 1s "$url" >/dev/null
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    n=$(load 4s "$url")
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    awk -v b="$1" -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {
        printf "%s: %d requests, user %.2f µs/request, kernel %.2f µs/request, %.0f req/CPU-s\n",
            b, n, u * 1e6 / hz / n, s * 1e6 / hz / n, n / ((u + s) / hz) }'
}
for _ in $(seq "${ROUNDS:-5}"); do
    measure A
    measure B
done
