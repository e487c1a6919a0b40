#!/usr/bin/env bash
# Sluice against nginx as gRPC proxies: unary gRPC calls (grpc.health.v1.Health/Check, an
# empty request) from h2load, through each proxy, to one grpc-go server (the interop peer in
# crates/sluice-proxy/interop/grpc-health). Sluice: a reverse route with `http2 = true`;
# nginx: `grpc_pass` to an upstream with `keepalive 64`. Both one worker, HTTP/2 from the
# client with prior knowledge. Reports calls per second and per CPU second of the proxy's own
# process (utime + stime from /proc, before and after), the median of ROUNDS interleaved runs.
#
#   bench/grpc/run.sh
#   SLUICE_BIN=/tmp/sluice-abc CALLS=100000 CLIENTS=16 STREAMS=8 ROUNDS=5 bench/grpc/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }
source "$ROOT/bench/lib.sh"

CALLS=${CALLS:-50000}
CLIENTS=${CLIENTS:-16}
STREAMS=${STREAMS:-8}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-18560}
missing=()
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v nginx >/dev/null || missing+=(nginx-light)
install_missing "${missing[@]}"
GO=$(command -v go || echo /usr/local/go/bin/go)
[[ -x $GO ]] || die "Go is needed to build the gRPC server (scripts/install-deps.sh installs it)"
sluice_binary

TMP=$(mktemp -d)
log "building the grpc-go server"
(cd "$ROOT/crates/sluice-proxy/interop/grpc-health" && "$GO" build -buildvcs=false -o "$TMP/grpc-health" .)
# The server stops when its standard input closes: a FIFO this script holds open.
mkfifo "$TMP/hold"
exec 3<>"$TMP/hold"
"$TMP/grpc-health" serve <&3 >"$TMP/grpc.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do grep -q '^listening ' "$TMP/grpc.out" && break; sleep 0.1; done
origin=$(awk '/^listening / {print $2; exit}' "$TMP/grpc.out")
[[ -n $origin ]] || die "the gRPC server did not start: $(cat "$TMP/grpc.out")"

declare -A PORT=([nginx]=$PORT_BASE [sluice]=$((PORT_BASE + 1)))
cat >"$TMP/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
user root;
pid $TMP/nginx.pid;
error_log $TMP/nginx.error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    upstream grpc_origin {
        server $origin;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:${PORT[nginx]} http2;
        location / { grpc_pass grpc://grpc_origin; }
    }
}
EOF
cat >"$TMP/sluice.toml" <<EOF
[[listener]]
addr = "127.0.0.1:${PORT[sluice]}"
mode = "reverse"

[[route]]
origin = "http://$origin"
http2 = true
cache = false

[admin]
enabled = false
EOF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
PIDS+=("$!")
declare -A PID=([nginx]=$!)
"$SLUICE_BIN" serve --config "$TMP/sluice.toml" --threads 1 >"$TMP/sluice.log" 2>&1 &
PIDS+=("$!")
PID[sluice]=$!
for proxy in nginx sluice; do wait_port "${PORT[$proxy]}" || die "$proxy did not start"; done

printf '\0\0\0\0\0' >"$TMP/request" # an empty HealthCheckRequest, framed
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# One run through $1: "<calls/s> <calls per CPU second>"; dies unless every call succeeded.
run() {
    local before after out done_ok
    before=$(cpu_ticks "${PID[$1]}")
    out=$(h2load -n "$CALLS" -c "$CLIENTS" -m "$STREAMS" -d "$TMP/request" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://127.0.0.1:${PORT[$1]}/grpc.health.v1.Health/Check" 2>&1)
    after=$(cpu_ticks "${PID[$1]}")
    done_ok=$(awk '/^status codes:/ {gsub(",", "", $3); print $3}' <<<"$out")
    [[ $done_ok == "$CALLS" ]] || die "$1: not every call got a 2xx: $out"
    awk -v out="$out" -v n="$CALLS" -v t=$((after - before)) -v hz="$hz" 'BEGIN {
        match(out, /finished in [0-9.]+(ms|s), [0-9.]+ req\/s/); split(substr(out, RSTART, RLENGTH), w, " ");
        printf "%.0f %.0f\n", w[4], (t > 0 ? n * hz / t : 0) }'
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A RATE CPU
for proxy in nginx sluice; do RATE[$proxy]="" CPU[$proxy]=""; done
for round in $(seq "$ROUNDS"); do
    for proxy in nginx sluice; do
        read -r rate cpu < <(run "$proxy")
        log "round $round $proxy: $rate calls/s, $cpu per CPU second"
        RATE[$proxy]+=" $rate" CPU[$proxy]+=" $cpu"
    done
done
printf '| proxy | calls/s | calls per CPU second of the proxy |\n|---|---:|---:|\n'
for proxy in nginx sluice; do
    # shellcheck disable=SC2086
    printf '| %s | %s | %s |\n' "$proxy" "$(median ${RATE[$proxy]})" "$(median ${CPU[$proxy]})"
done
# shellcheck disable=SC2086
awk -v s="$(median ${CPU[sluice]})" -v n="$(median ${CPU[nginx]})" 'BEGIN { printf "\nsluice/nginx per CPU second: %.2f×\n", s / n }'
printf '%s, --threads 1; %s; h2load -n %s -c %s -m %s, medians of %s rounds\n' "$SLUICE_DESC" "$(nginx -v 2>&1)" \
    "$CALLS" "$CLIENTS" "$STREAMS" "$ROUNDS"
