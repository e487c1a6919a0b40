#!/usr/bin/env bash
# Sluice vs nginx (proxy_cache) as caching reverse proxies: user-space instructions per request,
# counted with callgrind. The steady counterpart of run.sh's requests per CPU second (repeat
# runs agree within ±0.3%; machine load does not move them); same origin, content and nginx
# configuration as run.sh (bench/proxy/conf.sh).
#
#   bench/proxy/callgrind.sh                 # hit-1k pass-1k, nginx and sluice: a markdown table
#   bench/proxy/callgrind.sh pass-1k         # chosen scenarios
#   PROXIES=sluice SLUICE=/tmp/sluice-abc N=2000 bench/proxy/callgrind.sh
#
# Each proxy runs as one process under valgrind --tool=callgrind --instr-atstart=no: Sluice
# (release build, serve --threads 1, memory cache, admin off) and nginx (master_process off,
# so the process serving is the one valgrind watches). Per scenario, two unmeasured requests
# warm the cache (and check that hit-* is a hit and pass-* is not), then the counters are on
# (callgrind_control -i on/off) for N keep-alive requests from one curl, and dumped (-d). The
# origin is an nginx outside valgrind; a pass-through run must reach it N times, a hit run never.
# Per-function costs: callgrind_annotate --inclusive=yes (or --tree=none) $OUT/<proxy>-<scenario>.out
#
# Environment (all optional):
#   N=1000              measured requests per scenario and proxy
#   PORT_BASE=18600     nginx +0, sluice +1, origin +10
#   SLUICE=path         the binary (default target/release/sluice, built when missing)
#   OUT=bench/out/callgrind-proxy   where the profiles go (<proxy>-<scenario>.out)
#   PROXIES="nginx sluice"
#   SLUICE_EXTRA=toml   more Sluice configuration after its [cache] section, e.g. a
#                       '[[rate_limit]]' table to price a feature per request
#   CLIENT=http         what curl speaks to the proxies, as in run.sh: http, https (HTTP/1.1 over
#                       TLS), h2 (HTTP/2 over TLS by ALPN); the N requests go over one
#                       connection either way. (Not h2c: Debian's curl 7.88 fails the second
#                       request on a prior-knowledge connection it reuses, with nginx as with
#                       Sluice.)
#   ORIGIN_HTTP2=1      Sluice speaks HTTP/2 to the origin (its route has `http2 = true`;
#                       the nginx origin also listens with http2 on its port + 1)
#   KEEP_TMP=1          keep the temp dir (configs, logs)
#   NO_INSTALL=1        fail instead of apt-get installing missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/proxy
N=${N:-1000}
PORT_BASE=${PORT_BASE:-18600}
SLUICE_GIVEN=${SLUICE:+1}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
OUT=${OUT:-$ROOT/bench/out/callgrind-proxy}
PROXIES=${PROXIES:-"nginx sluice"}
scenarios=("$@")
((${#scenarios[@]})) || scenarios=(hit-1k pass-1k)

declare -A PORT=([nginx]=$PORT_BASE [sluice]=$((PORT_BASE + 1)))
ORIGIN_PORT=$((PORT_BASE + 10))

log() { printf '[callgrind] %s\n' "$*" >&2; }
die() { printf '[callgrind] error: %s\n' "$*" >&2; exit 1; }

for proxy in $PROXIES; do [[ -n ${PORT[$proxy]:-} ]] || die "unknown proxy '$proxy' (nginx, sluice)"; done
for s in "${scenarios[@]}"; do [[ $s =~ ^(hit|pass)-(1k|16k|256k|4m)$ ]] || die "unknown scenario '$s'"; done
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer"

# PIDS, TMP, stop_pid, cleanup (EXIT trap), can_connect, wait_port.
source "$ROOT/bench/lib.sh"
# SIZE, write_content, scenario_path, origin_conf, nginx_conf, sluice_toml.
source "$HERE/conf.sh"

# ---------------------------------------------------------------- tools
missing=()
command -v valgrind >/dev/null || missing+=(valgrind)
command -v nginx >/dev/null || missing+=(nginx-light)
command -v curl >/dev/null || missing+=(curl)
install_missing "${missing[@]}"
NGINX=$(command -v nginx)
if [[ " $PROXIES " == *" sluice "* && ! -x $SLUICE ]]; then
    log "building sluice (cargo build --release -p sluice)"
    (cd "$ROOT" && cargo build --release -p sluice --quiet) || die "cargo build --release -p sluice failed"
fi

for p in "${PORT[@]}" "$ORIGIN_PORT"; do
    can_connect "$p" && die "port $p is in use (set PORT_BASE)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-callgrind.XXXXXX")
mkdir -p "$OUT"
export CLIENT=${CLIENT:-http}
SCHEME=http
case $CLIENT in
    http) CURL_PROTO=(--http1.1) ;;
    https | h2)
        SCHEME=https
        CURL_PROTO=(-k "$([[ $CLIENT == h2 ]] && echo --http2 || echo --http1.1)")
        tls_cert "$TMP" ;;
    *) die "CLIENT must be http, https or h2" ;;
esac
write_content "$TMP"

# ---------------------------------------------------------------- origin
origin_conf "$TMP" "$ORIGIN_PORT" >"$TMP/origin.conf"
"$NGINX" -p "$TMP" -c "$TMP/origin.conf" -e "$TMP/origin.error.log" &
PIDS+=("$!")
wait_port "$ORIGIN_PORT" || die "the origin did not start (see $TMP/origin.error.log)"
# Requests the origin has accepted so far (stub_status counts its own request too).
origin_requests() { curl -sf "http://127.0.0.1:$ORIGIN_PORT/status" | awk 'NR == 3 {print $3}'; }

# ---------------------------------------------------------------- proxies under valgrind
# Starts NAME under callgrind, profiles to $OUT/NAME.out.<dump>; sets VPID.
start_proxy() { # name
    local name=$1 cmd
    if [[ $name == nginx ]]; then
        rm -rf "$TMP/nginx-cache" && mkdir -p "$TMP/nginx-cache"
        nginx_conf "$TMP" nginx "${PORT[nginx]}" "$ORIGIN_PORT" 1 off >"$TMP/nginx.conf"
        cmd=("$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx.error.log")
    else
        sluice_toml "${PORT[sluice]}" "$ORIGIN_PORT" \
            "$(printf '[cache]\nmemory = "1GiB"\nmax_object = "64MiB"\n\n%s\n' "${SLUICE_EXTRA:-}")" >"$TMP/sluice.toml"
        "$SLUICE" serve --check-config "$TMP/sluice.toml" >/dev/null || die "sluice rejects $TMP/sluice.toml"
        cmd=("$SLUICE" serve --config "$TMP/sluice.toml" --threads 1)
    fi
    rm -f "$OUT/$name.out"*
    # (SLUICE_LOG set for valgrind: through `env`, the proxy would be an unwatched child)
    SLUICE_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.out" --instr-atstart=no "${cmd[@]}" \
        2>"$TMP/$name.valgrind.log" &
    VPID=$!
    PIDS+=("$VPID")
    local i
    for i in $(seq 600); do can_connect "${PORT[$name]}" && return 0; sleep 0.1; done
    die "$name did not start under valgrind (see $TMP/$name.valgrind.log)"
}

# The status a proxy reports for URL: X-Cache (nginx) or Cache-Status (Sluice).
cache_status() { # proxy url
    local field=cache-status
    [[ $1 == nginx ]] && field=x-cache
    curl -sf "${CURL_PROTO[@]}" -D - -o /dev/null "$2" | tr -d '\r' | awk -F': ' -v f="$field" 'tolower($1) == f {print $2}'
}

# Measures one scenario on a running proxy; prints the instructions per request.
measure() { # proxy pid scenario dump
    local proxy=$1 pid=$2 scenario=$3 dump=$4 url urls status o0 o1 total
    url="$SCHEME://127.0.0.1:${PORT[$proxy]}$(scenario_path "$scenario")"
    curl -sf "${CURL_PROTO[@]}" -o /dev/null "$url" || die "$proxy $url: request failed"
    status=$(cache_status "$proxy" "$url")
    case $scenario in
        hit-*) [[ $status == HIT || $status == *"; hit"* ]] || die "$proxy $url: the second request is not a hit (${status:-no cache status})" ;;
        pass-*) [[ $status != HIT && $status != *"; hit"* ]] || die "$proxy $url: a no-store response was served from the cache ($status)" ;;
    esac
    urls=$(for _ in $(seq "$N"); do printf '%s ' "$url"; done)
    o0=$(origin_requests)
    callgrind_control -i on "$pid" >/dev/null 2>&1
    # shellcheck disable=SC2086 # one argument per URL
    curl -sf "${CURL_PROTO[@]}" $urls >/dev/null || die "$proxy $url: a measured request failed"
    callgrind_control -i off "$pid" >/dev/null 2>&1
    callgrind_control -d "$pid" >/dev/null 2>&1
    o1=$(origin_requests)
    case $scenario in
        hit-*) ((o1 - o0 - 1 == 0)) || log "warning: $proxy $scenario: the origin saw $((o1 - o0 - 1)) requests" ;;
        pass-*) ((o1 - o0 - 1 == N)) || log "warning: $proxy $scenario: the origin saw $((o1 - o0 - 1)) of $N requests" ;;
    esac
    [[ -s $OUT/$proxy.out.$dump ]] || die "no callgrind dump $OUT/$proxy.out.$dump"
    mv "$OUT/$proxy.out.$dump" "$OUT/$proxy-$scenario.out"
    total=$(awk -F': ' '$1 == "totals" {print $2; exit}' "$OUT/$proxy-$scenario.out")
    echo $((total / N))
}

# ---------------------------------------------------------------- run
declare -A PER=()
for proxy in $PROXIES; do
    log "$proxy: starting under valgrind"
    start_proxy "$proxy"
    dump=0
    for scenario in "${scenarios[@]}"; do
        dump=$((dump + 1))
        PER[$proxy,$scenario]=$(measure "$proxy" "$VPID" "$scenario" "$dump")
        log "  $proxy $scenario: ${PER[$proxy,$scenario]} instructions per request"
    done
    stop_pid "$VPID"
    rm -f "$OUT/$proxy.out"
done

if [[ -n $SLUICE_GIVEN ]]; then
    what="$SLUICE"
else
    what="$SLUICE (tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    git -C "$ROOT" diff --quiet HEAD -- crates 2>/dev/null || what="$what with uncommitted changes under crates/"
    what="$what)"
fi
group() { awk -v n="$1" 'BEGIN { s = sprintf("%d", n); r = ""; while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }; print s r }'; }
echo "| scenario |$(for p in $PROXIES; do printf ' %s |' "$p"; done) sluice/nginx |"
echo "|---|$(for _ in $PROXIES; do printf -- '---:|'; done)---:|"
for scenario in "${scenarios[@]}"; do
    row="| $scenario |"
    for proxy in $PROXIES; do row="$row $(group "${PER[$proxy,$scenario]}") |"; done
    ratio="—"
    if [[ -n ${PER[nginx,$scenario]:-} && -n ${PER[sluice,$scenario]:-} ]]; then
        ratio=$(awk -v a="${PER[sluice,$scenario]}" -v b="${PER[nginx,$scenario]}" 'BEGIN { printf "%.2f×", a / b }')
    fi
    echo "$row $ratio |"
done
echo
echo "User-space instructions per request (callgrind), $N keep-alive requests from one curl per"
echo "scenario (CLIENT=$CLIENT); sluice: $what, --threads 1; $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'),"
echo "master_process off; profiles in $OUT"
