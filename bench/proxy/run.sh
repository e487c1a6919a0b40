#!/usr/bin/env bash
# Sluice vs nginx (proxy_cache) as caching reverse proxies on loopback, loaded with wrk.
#
#   bench/proxy/run.sh      # installs wrk/nginx if missing, builds sluice, runs, and writes
#                           # bench/out/proxy-<date>.md (printed too)
#
# The stable figure is requests per CPU second of the proxy's own processes (utime+stime from
# /proc before and after each wrk run); req/s and latency are shown too, but they depend on
# what else runs on the (shared, 2-core) machine. See docs/benchmarks.md.
#
# Environment (all optional):
#   DURATION=5s      measured wrk run per scenario, proxy and round
#   WARMUP=1s        unmeasured wrk run just before each measured one (0 to skip)
#   CONNECTIONS=32   wrk -c
#   WRK_THREADS=1    wrk -t
#   THREADS=1        proxy workers, a list: "1" (nginx worker_processes 1 vs sluice --threads 1),
#                    "2", or "1 2" (both, twice the time)
#   ROUNDS=3         measured runs per scenario and proxy, interleaved (nginx, nginx-ofc, sluice,
#                    nginx, ...); the tables show the median round by req/CPU-s and the range
#                    (all rounds are in the .tsv next to the report). Default total: ~5.5 min
#                    (3 proxies x 6 scenarios x 3 rounds x 6 s) plus the build
#   SCENARIOS="hit-1k hit-16k hit-256k hit-4m pass-1k pass-256k"
#   PROXIES="nginx nginx-ofc sluice sluice-disk sluice-pipe"
#                    nginx: proxy_cache as the issue describes it, on Debian's defaults
#                    (sendfile on, tcp_nopush on); nginx-ofc: the same plus open_file_cache, a
#                    common tuning that saves the open/fstat/close of the cache file on each hit;
#                    sluice: the proxy under test, memory tier only; sluice-disk: Sluice with a
#                    disk tier holding objects over 1 MiB (cache.max_object = 1MiB), so 4 MiB
#                    hits are disk hits sent with sendfile, like nginx's; sluice-pipe: the
#                    sluice configuration with upstream.pipeline = 8 (HTTP/1.1 pipelining to
#                    the origin, docs/config.md). Ratios are each sluice* over each nginx.
#   PORT_BASE=18080  nginx +0, sluice +1, nginx-ofc +2, sluice-disk +3, sluice-pipe +4,
#                    sluice-pipe admin +7, sluice-disk admin +8, sluice admin +9, origin +10
#   SLUICE_SRC=dir   the source tree to build (default: this repository); it builds into its
#                    own target/ (cargo build --release -p sluice)
#   SLUICE_BIN=path  use this prebuilt binary instead of building
#   OUT_DIR=bench/out
#   PIN=0            1: pin the proxies to CPU 1 and wrk to CPU 0 (taskset); the origin floats
#   CLIENT=http      what the proxies speak to clients: http (HTTP/1.1, wrk), https (HTTP/1.1
#                    over TLS 1.3, wrk), h2 (HTTP/2 over TLS 1.3 by ALPN, h2load), h2c (HTTP/2
#                    with prior knowledge, h2load); one P-256 certificate for both proxies.
#                    h2load gives no percentiles: the p50 and p99 columns show its mean and max
#   STREAMS=1        h2load -m (requests in flight per connection) for h2 and h2c
#   ORIGIN_HTTP2=1   Sluice speaks HTTP/2 to the origin (its route has `http2 = true`;
#                    the nginx origin also listens with http2 on its port + 1)
#   KEEP_TMP=1       keep the temp dir (configs, logs, every wrk output)
#   NO_INSTALL=1     fail instead of apt-get installing missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/proxy
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
CONNECTIONS=${CONNECTIONS:-32}
WRK_THREADS=${WRK_THREADS:-1}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}
SCENARIOS=${SCENARIOS:-"hit-1k hit-16k hit-256k hit-4m pass-1k pass-256k"}
PROXIES=${PROXIES:-"nginx nginx-ofc sluice sluice-disk sluice-pipe"}
PORT_BASE=${PORT_BASE:-18080}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
PIN=${PIN:-0}
CLIENT=${CLIENT:-http}
STREAMS=${STREAMS:-1}
SCHEME=http
CURL_PROTO=(--http1.1)
case $CLIENT in
    http) ;;
    https) SCHEME=https; CURL_PROTO=(-k --http1.1) ;;
    h2) SCHEME=https; CURL_PROTO=(-k --http2) ;;
    h2c) CURL_PROTO=(--http2-prior-knowledge) ;;
    *) printf '[bench] error: CLIENT must be http, https, h2 or h2c\n' >&2; exit 1 ;;
esac
PROXY_CPU=(); WRK_CPU=()
if [[ $PIN == 1 ]]; then PROXY_CPU=(taskset -c 1); WRK_CPU=(taskset -c 0); fi

declare -A PORT=([nginx]=$PORT_BASE [sluice]=$((PORT_BASE + 1)) [nginx-ofc]=$((PORT_BASE + 2)) [sluice-disk]=$((PORT_BASE + 3)) [sluice-pipe]=$((PORT_BASE + 4)))
declare -A ADMIN=([sluice]=$((PORT_BASE + 9)) [sluice-disk]=$((PORT_BASE + 8)) [sluice-pipe]=$((PORT_BASE + 7)))
declare -A PID=()
ORIGIN_PORT=$((PORT_BASE + 10))

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }

for proxy in $PROXIES; do [[ -n ${PORT[$proxy]:-} ]] || die "unknown proxy '$proxy' (nginx, nginx-ofc, sluice, sluice-disk, sluice-pipe)"; done
for scenario in $SCENARIOS; do [[ $scenario =~ ^(hit-(1k|16k|256k|4m)|pass-(1k|16k|256k|4m))$ ]] || die "unknown scenario '$scenario'"; done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"

# ---------------------------------------------------------------- processes and cleanup
# PIDS, TMP, stop_pid, cleanup (EXIT trap), can_connect, wait_port; uses this script's log().
source "$ROOT/bench/lib.sh"
# SIZE, write_content, scenario_path, origin_conf, nginx_conf, sluice_toml.
source "$HERE/conf.sh"

# ---------------------------------------------------------------- tools
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx-light)
command -v curl >/dev/null || missing+=(curl)
command -v pgrep >/dev/null || missing+=(procps)
command -v openssl >/dev/null || missing+=(openssl)
[[ $CLIENT == h2* ]] && ! command -v h2load >/dev/null && missing+=(nghttp2-client)
install_missing "${missing[@]}"
NGINX=$(command -v nginx)

sluice_binary

for p in "${PORT[@]}" "${ADMIN[@]}" "$ORIGIN_PORT"; do
    can_connect "$p" && die "port $p is in use (set PORT_BASE)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
mkdir -p "$TMP/wrk"

# ---------------------------------------------------------------- TLS towards clients
[[ $SCHEME == https ]] && tls_cert "$TMP"
export CLIENT

# ---------------------------------------------------------------- content
# /c/<size> is cacheable (max-age=3600), /p/<size> is pass-through (no-store); random bytes.
write_content "$TMP"

# ---------------------------------------------------------------- origin: nginx, static files
origin_conf "$TMP" "$ORIGIN_PORT" >"$TMP/origin.conf"
"$NGINX" -p "$TMP" -c "$TMP/origin.conf" -e "$TMP/origin.error.log" &
PIDS+=("$!")
wait_port "$ORIGIN_PORT" || die "the origin did not start (see $TMP/origin.error.log)"

# Requests the origin has accepted so far (stub_status counts its own request too).
origin_requests() { curl -sf "http://127.0.0.1:$ORIGIN_PORT/status" | awk 'NR == 3 {print $3}'; }

# ---------------------------------------------------------------- the proxies
start_nginx() { # name workers
    local name=$1 workers=$2 extra=""
    [[ $name == nginx-ofc ]] && extra="open_file_cache max=10000 inactive=60s;"
    rm -rf "$TMP/$name-cache" && mkdir -p "$TMP/$name-cache"
    nginx_conf "$TMP" "$name" "${PORT[$name]}" "$ORIGIN_PORT" "$workers" on "$extra" >"$TMP/$name.conf"
    "${PROXY_CPU[@]}" "$NGINX" -p "$TMP" -c "$TMP/$name.conf" -e "$TMP/$name.error.log" &
    PID[$name]=$!
    PIDS+=("$!")
    wait_port "${PORT[$name]}" || die "$name did not start (see $TMP/$name.error.log)"
}

start_sluice() { # name threads
    local name=$1 cache
    if [[ $name == sluice-disk ]]; then
        rm -rf "$TMP/$name-cache"
        cache=$(printf '[cache]\nmemory = "1GiB"\nmax_object = "1MiB"\n\n[cache.disk]\ndir = "%s"\nsize = "2GiB"\nmax_object = "64MiB"\n' "$TMP/$name-cache")
    else
        cache=$(printf '[cache]\nmemory = "1GiB"\nmax_object = "64MiB"\n')
    fi
    [[ $name == sluice-pipe ]] && cache=$(printf '%s\n\n[upstream]\npipeline = 8\n' "$cache")
    sluice_toml "${PORT[$name]}" "$ORIGIN_PORT" "$cache" "${ADMIN[$name]}" >"$TMP/$name.toml"
    "$SLUICE_BIN" serve --check-config "$TMP/$name.toml" >/dev/null || die "$name rejects $TMP/$name.toml"
    SLUICE_LOG=warn "${PROXY_CPU[@]}" "$SLUICE_BIN" serve --config "$TMP/$name.toml" --threads "$2" 2>>"$TMP/$name.stderr" &
    PID[$name]=$!
    PIDS+=("$!")
    wait_port "${PORT[$name]}" || die "$name did not start (see $TMP/$name.stderr)"
    wait_port "${ADMIN[$name]}" || die "$name's admin listener did not start"
}

stop_proxy() { # name
    local pid=${PID[$1]} keep=() p
    stop_pid "$pid"
    for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

# ---------------------------------------------------------------- CPU accounting
CLK_TCK=$(getconf CLK_TCK)
# CPU ticks used by one proxy instance: utime+stime of the process (all its threads) and of its
# children (nginx: master, workers, cache manager and loader), plus cutime+cstime of the
# process, so a child that exits mid-run still counts.
cpu_ticks() { # pid
    local pid=$1 files=("/proc/$1/stat") k
    for k in $(pgrep -P "$pid" || true); do [[ -r /proc/$k/stat ]] && files+=("/proc/$k/stat"); done
    awk -v own="/proc/$pid/stat" '
        { sub(/^.*\) /, ""); t = $12 + $13; if (FILENAME == own) t += $14 + $15; sum += t }
        END { print sum + 0 }' "${files[@]}"
}

sluice_hits() { # name: requests a Sluice instance answered from its cache (memory or disk)
    curl -sf "http://127.0.0.1:${ADMIN[$1]}/metrics" |
        awk '$1 == "sluice_requests_total{result=\"TCP_MEM_HIT\"}" || $1 == "sluice_requests_total{result=\"TCP_HIT\"}" {sum += $2}
             END {printf "%d\n", sum}'
}

# ---------------------------------------------------------------- correctness
# Fetches twice through a proxy: the body must be the origin's, and the second answer must be a
# hit (hit-*) or must not be (pass-*). Prints the cache status header.
check_path() { # proxy scenario
    local proxy=$1 scenario=$2 path url headers status version
    path=$(scenario_path "$scenario")
    url="$SCHEME://127.0.0.1:${PORT[$proxy]}$path"
    version=$(curl -sf "${CURL_PROTO[@]}" -o /dev/null -w '%{http_version}' "$url") || die "$proxy $path: request failed"
    [[ $version == "$([[ $CLIENT == h2* ]] && echo 2 || echo 1.1)" ]] || die "$proxy $path: answered in HTTP/$version, not as CLIENT=$CLIENT asks"
    # A disk-only object is a hit once its background write is durable: poll for up to 5 s.
    for _ in $(seq 50); do
        headers=$(curl -sf "${CURL_PROTO[@]}" -D - -o "$TMP/body" "$url" | tr -d '\r') || die "$proxy $path: request failed"
        cmp -s "$TMP/body" "$TMP/www$path" || die "$proxy $path: body differs from the origin's"
        case $proxy in
            nginx*) status=$(awk -F': ' 'tolower($1) == "x-cache" {print $2}' <<<"$headers") ;;
            sluice*) status=$(awk -F': ' 'tolower($1) == "cache-status" {print $2}' <<<"$headers") ;;
        esac
        [[ $scenario == hit-* && $status != HIT && $status != *"; hit"* ]] || break
        sleep 0.1
    done
    case $scenario in
        hit-*) [[ $status == HIT || $status == *"; hit"* ]] || die "$proxy $path: the second request is not a hit (${status:-no cache status})" ;;
        pass-*) [[ $status != HIT && $status != *"; hit"* ]] || die "$proxy $path: a no-store response was served from the cache ($status)" ;;
    esac
    printf '%s' "$status"
}

# ---------------------------------------------------------------- load generators
# awk: a latency as wrk and h2load print it (850us, 1.20ms, 2m, 1.5s) in milliseconds.
AWK_MS='
    function ms(v) {
        if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
        if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
        if (v ~ /m$/)  { sub(/m$/, "", v); return v * 60000 }
        if (v ~ /s$/)  { sub(/s$/, "", v); return v * 1000 }
        return v + 0
    }'

# A wrk --latency output as: requests rps p50_ms p99_ms errors
parse_wrk() {
    awk "$AWK_MS"'
        / requests in / { req = $1 }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = ms($2) }
        $1 == "99%" { p99 = ms($2) }
        /Socket errors:/ { n = split($0, w, /[^0-9]+/); for (i = 1; i <= n; i++) err += w[i] }
        /Non-2xx or 3xx responses:/ { err += $NF }
        END { printf "%d %.0f %.3f %.3f %d\n", req, rps, p50, p99, err }' "$1"
}

# An h2load output in the same form (its mean and max latency in place of p50 and p99).
parse_h2load() {
    awk "$AWK_MS"'
        /^finished in / { rps = $4 }
        /^requests: / { req = $6; err = $10 + $12 + $14 }
        /^status codes: / { err += $7 + $9 }
        /^time for request:/ { mean = ms($6); max = ms($5) }
        END { printf "%d %.0f %.3f %.3f %d\n", req, rps, mean, max, err }' "$1"
}

# The load generator for CLIENT: wrk for HTTP/1.1, h2load for HTTP/2.
load() { # duration url [--latency]
    if [[ $CLIENT == h2* ]]; then
        "${WRK_CPU[@]}" h2load -t"$WRK_THREADS" -c"$CONNECTIONS" -m"$STREAMS" -D "$1" "$2"
    else
        "${WRK_CPU[@]}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$1" "${@:3}" "$2"
    fi
}

# One measured run. Prints: requests rps p50_ms p99_ms errors cpu_s origin_requests sluice_hits
measure() { # proxy scenario label
    local proxy=$1 scenario=$2 label=$3 url pid out o0 o1 h0=0 h1=0 c0 c1 req rps p50 p99 err
    url="$SCHEME://127.0.0.1:${PORT[$proxy]}$(scenario_path "$scenario")"
    pid=${PID[$proxy]}
    if [[ $WARMUP != 0 && $WARMUP != 0s ]]; then
        load "$WARMUP" "$url" >/dev/null
    fi
    out="$TMP/wrk/$label.txt"
    [[ $proxy == sluice* ]] && h0=$(sluice_hits "$proxy")
    o0=$(origin_requests)
    c0=$(cpu_ticks "$pid")
    load "$DURATION" "$url" --latency >"$out"
    c1=$(cpu_ticks "$pid")
    o1=$(origin_requests)
    [[ $proxy == sluice* ]] && h1=$(sluice_hits "$proxy")
    if [[ $CLIENT == h2* ]]; then
        read -r req rps p50 p99 err < <(parse_h2load "$out")
    else
        read -r req rps p50 p99 err < <(parse_wrk "$out")
    fi
    ((req > 0)) || { cat "$out" >&2; die "$proxy $scenario: the load generator completed no request"; }
    awk -v r="$req" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v e="$err" -v c="$((c1 - c0))" -v tck="$CLK_TCK" \
        -v o="$((o1 - o0 - 1))" -v h="$((h1 - h0))" \
        'BEGIN { printf "%d %d %.3f %.3f %d %.2f %d %d\n", r, rps, p50, p99, e, c / tck, o, h }'
}

# ---------------------------------------------------------------- run
STAMP=$(date +%Y-%m-%d-%H%M%S)
mkdir -p "$OUT_DIR"
REPORT="$OUT_DIR/proxy-$STAMP.md"
RESULTS="$OUT_DIR/proxy-$STAMP.tsv"
printf 'threads\tscenario\tproxy\trequests rps p50_ms p99_ms errors cpu_s origin_requests sluice_hits\n' >"$RESULTS"

{
    echo "# Sluice vs nginx proxy_cache, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    src=""; [[ $SLUICE_SRC != "$ROOT" ]] && src="SLUICE_SRC=$SLUICE_SRC "
    streams=""; [[ $CLIENT == h2* ]] && streams="STREAMS=$STREAMS "
    echo "- command: \`${src}CLIENT=$CLIENT ${streams}DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS WRK_THREADS=$WRK_THREADS THREADS=\"$THREADS\" ROUNDS=$ROUNDS PIN=$PIN bench/proxy/run.sh\`"
    echo "- $SLUICE_DESC; $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}')"
    echo "- machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), Linux $(uname -r), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ $CLIENT == h2* ]]; then gen="h2load -t$WRK_THREADS -c$CONNECTIONS -m$STREAMS -D $DURATION ($CLIENT; p50 and p99 show h2load's mean and max)"; else gen="wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION --latency ($CLIENT)"; fi
    echo "- load: $gen on loopback, after an unmeasured $WARMUP run; access logs off; $ROUNDS round(s) per proxy, interleaved; median round by req/CPU-s, (range) when several"
    echo "- **req/CPU-s** = requests completed / CPU seconds (utime+stime) of the proxy's own processes during the run"
    echo
} >"$REPORT"

for threads in $THREADS; do
    log "workers=$threads: starting $PROXIES"
    for proxy in $PROXIES; do
        if [[ $proxy == sluice* ]]; then start_sluice "$proxy" "$threads"; else start_nginx "$proxy" "$threads"; fi
    done
    # warm the caches and check that hits are hits and no-store is not stored
    for scenario in $SCENARIOS; do
        for proxy in $PROXIES; do
            status=$(check_path "$proxy" "$scenario")
            log "  $proxy $(scenario_path "$scenario"): $status"
        done
    done
    for scenario in $SCENARIOS; do
        for round in $(seq "$ROUNDS"); do
            for proxy in $PROXIES; do
                line=$(measure "$proxy" "$scenario" "w$threads-$scenario-$proxy-$round")
                log "  workers=$threads $scenario $proxy #$round: $line"
                printf '%s\t%s\t%s\t%s\n' "$threads" "$scenario" "$proxy" "$line" >>"$RESULTS"
            done
        done
    done
    # still hits after the load (nothing evicted or expired)
    for scenario in $SCENARIOS; do
        [[ $scenario == hit-* ]] || continue
        for proxy in $PROXIES; do check_path "$proxy" "$scenario" >/dev/null; done
    done
    for proxy in $PROXIES; do stop_proxy "$proxy"; done
done

awk -F'\t' -v scenarios="$SCENARIOS" -v threads="$THREADS" -v proxies="$PROXIES" -f "$HERE/report.awk" "$RESULTS" >>"$REPORT"
cat "$REPORT"
log "report: $REPORT (every round: $RESULTS)"
