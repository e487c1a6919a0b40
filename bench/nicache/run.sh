#!/usr/bin/env bash
# NICache figure 6 on Sluice: throughput against the cacheable fraction of a dynamic workload.
#
#   bench/nicache/run.sh    # installs wrk/go/curl if missing, builds sluice and the origin, runs
#                           # the sweep, writes bench/out/nicache-<date>.{md,csv,svg} (report printed)
#
# The origin (origin.go) spends a fixed CPU time per response (SHA-256 until its thread's CPU
# clock has advanced by BURN) with ORIGIN_WORKERS workers; /c<p>/<i> is cacheable
# (max-age=86400) iff i < p*N/100, else no-store. wrk (mix.lua) requests /c<p>/<i> with i uniform
# in [0, N), so a fraction c = p/100 of the requests is for cacheable URLs. For each c, every URL
# of the level is first fetched once through Sluice (cacheable ones are then hits, no-store ones
# carry Sluice's hit-for-pass mark: the steady state of a proxy that has seen its URLs), then
# ROUNDS times, alternating:
#   origin   wrk straight to the origin (the "origin alone" line: every request is generated)
#   sluice   wrk through Sluice
# and, before and after the sweep, a pure-hit run (c = 100%, warmed): Sluice's hit capacity H.
# ideal(c) = min(O(c) / (1 - c), H), O(c) the median origin-alone run at the same c (interleaved
# with Sluice's runs, so drift of the shared machine affects both alike), H the mean of the two
# pure-hit runs; Sluice(c) is the median of its runs at c.
# See docs/benchmarks.md, "Dynamic content (NICache figure 6)".
#
# Environment (all optional):
#   C_LIST="0 10 25 50 75 90 95 98 100"   cacheable percentages (integers 0..100)
#   DURATION=5s       each measured wrk run (2 x ROUNDS per c, plus 2 pure-hit runs)
#   ROUNDS=3          origin/sluice run pairs per c (default total: ~5.5 min plus the builds)
#   CONNECTIONS=32    wrk -c (the origin queues them: ORIGIN_WORKERS generate at once)
#   WRK_THREADS=1     wrk -t
#   THREADS=1         sluice --threads
#   N=1000            URLs per c
#   BURN=2ms          origin CPU time per response (Go duration: 500us, 2ms, 5ms, ...)
#   ORIGIN_WORKERS=1  responses the origin generates at once
#   SIZE=4096         response body bytes
#   PIN=1             1: the origin on CPU $ORIGIN_CPU, sluice and wrk on CPU $PROXY_CPU (taskset),
#                     so the origin's capacity does not depend on how busy Sluice is; 0: no pinning
#   ORIGIN_CPU=0 PROXY_CPU=1
#   PORT_BASE=18300   sluice +1, sluice admin +9, origin +10
#   SLUICE_SRC=dir    the source tree to build (default: this repository), into its own target/
#   SLUICE_BIN=path   use this prebuilt binary instead of building
#   OUT_DIR=bench/out
#   KEEP_TMP=1        keep the temp dir (configs, logs, every wrk output)
#   NO_INSTALL=1      fail instead of apt-get installing missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/nicache
C_LIST=${C_LIST:-"0 10 25 50 75 90 95 98 100"}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-32}
WRK_THREADS=${WRK_THREADS:-1}
THREADS=${THREADS:-1}
N=${N:-1000}
BURN=${BURN:-2ms}
ORIGIN_WORKERS=${ORIGIN_WORKERS:-1}
SIZE=${SIZE:-4096}
PIN=${PIN:-1}
ORIGIN_CPU=${ORIGIN_CPU:-0}
PROXY_CPU=${PROXY_CPU:-1}
PORT_BASE=${PORT_BASE:-18300}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
SLUICE_PORT=$((PORT_BASE + 1))
SLUICE_ADMIN=$((PORT_BASE + 9))
ORIGIN_PORT=$((PORT_BASE + 10))

log() { printf '[nicache] %s\n' "$*" >&2; }
die() { printf '[nicache] error: %s\n' "$*" >&2; exit 1; }

for c in $C_LIST; do [[ $c =~ ^[0-9]+$ ]] && ((c <= 100)) || die "C_LIST: '$c' is not an integer percentage 0..100"; done
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"

ORIGIN_TASKSET=(); PROXY_TASKSET=()
if [[ $PIN == 1 ]]; then
    ((ORIGIN_CPU < $(nproc) && PROXY_CPU < $(nproc))) || die "PIN=1 needs CPUs $ORIGIN_CPU and $PROXY_CPU (PIN=0 to run unpinned)"
    ORIGIN_TASKSET+=(taskset -c "$ORIGIN_CPU"); PROXY_TASKSET+=(taskset -c "$PROXY_CPU")
fi

# ---------------------------------------------------------------- processes and cleanup
# PIDS, TMP, stop_pid, cleanup (EXIT trap), can_connect, wait_port; uses this script's log().
source "$ROOT/bench/lib.sh"

# ---------------------------------------------------------------- tools
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
command -v taskset >/dev/null || missing+=(util-linux)
command -v ss >/dev/null || missing+=(iproute2)
GO=$(command -v go || true)
[[ -z $GO && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
[[ -n $GO ]] || missing+=(golang-go)
install_missing "${missing[@]}"
[[ -n $GO ]] || GO=$(command -v go)

SLUICE_BIN_GIVEN=${SLUICE_BIN:-}
sluice_binary

for p in "$SLUICE_PORT" "$SLUICE_ADMIN" "$ORIGIN_PORT"; do
    can_connect "$p" && die "port $p is in use (set PORT_BASE)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-nicache.XXXXXX")
mkdir -p "$TMP/wrk"

# ---------------------------------------------------------------- origin
log "building the origin ($GO build $HERE/origin.go)"
(cd "$TMP" && GOTOOLCHAIN=local GO111MODULE=off "$GO" build -o "$TMP/origin" "$HERE/origin.go") || die "go build of the origin failed"
"${ORIGIN_TASKSET[@]}" "$TMP/origin" -addr "127.0.0.1:$ORIGIN_PORT" -burn "$BURN" -workers "$ORIGIN_WORKERS" \
    -n "$N" -size "$SIZE" 2>"$TMP/origin.stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" || die "the origin did not start (see $TMP/origin.stderr)"
origin_requests() { curl -sf "http://127.0.0.1:$ORIGIN_PORT/stats" | awk '$1 == "requests" {print $2}'; }

# ---------------------------------------------------------------- sluice
cat >"$TMP/sluice.toml" <<EOF
[[listener]]
addr = "127.0.0.1:$SLUICE_PORT"
mode = "reverse"
h2c = false

[[route]]
origin = "http://127.0.0.1:$ORIGIN_PORT"

[cache]
memory = "1GiB"

[admin]
addr = "127.0.0.1:$SLUICE_ADMIN"
token = "bench"

[log]
# no access_log (off)
EOF
"$SLUICE_BIN" serve --check-config "$TMP/sluice.toml" >/dev/null || die "sluice rejects $TMP/sluice.toml"
SLUICE_LOG=warn "${PROXY_TASKSET[@]}" "$SLUICE_BIN" serve --config "$TMP/sluice.toml" --threads "$THREADS" 2>>"$TMP/sluice.stderr" &
SLUICE_PID=$!
PIDS+=("$SLUICE_PID")
wait_port "$SLUICE_PORT" || die "sluice did not start (see $TMP/sluice.stderr)"
wait_port "$SLUICE_ADMIN" || die "sluice's admin listener did not start"

sluice_counter() { # result code, e.g. TCP_MEM_HIT
    curl -sf "http://127.0.0.1:$SLUICE_ADMIN/metrics" |
        awk -v want="sluice_requests_total{result=\"$1\"}" '$1 == want {printf "%d\n", $2; found = 1} END {if (!found) print 0}'
}

# CPU ticks (utime+stime, all threads) of a process
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

cacheable_count() { echo $(((N * $1 + 99) / 100)); } # i < p*N/100  <=>  i*100 < p*N

# Fetch every URL of level c once through Sluice (one curl, one keep-alive connection), then
# check that a cacheable URL is a hit and a no-store one is not.
warm() { # percent
    local p=$1 k i status
    k=$(cacheable_count "$p")
    for ((i = 0; i < N; i++)); do
        printf 'url = "http://127.0.0.1:%d/c%d/%d"\noutput = "/dev/null"\n' "$SLUICE_PORT" "$p" "$i"
    done >"$TMP/warm.cfg"
    curl -sf -K "$TMP/warm.cfg" || die "warm-up of /c$p/ through sluice failed"
    if ((k > 0)); then
        status=$(curl -sf -o /dev/null -D - "http://127.0.0.1:$SLUICE_PORT/c$p/$((k - 1))" | tr -d '\r' |
            awk -F': ' 'tolower($1) == "cache-status" {print $2}')
        [[ $status == *"; hit"* ]] || die "/c$p/$((k - 1)) is not a hit after the warm-up (${status:-no Cache-Status})"
    fi
    if ((k < N)); then
        status=$(curl -sf -o /dev/null -D - "http://127.0.0.1:$SLUICE_PORT/c$p/$k" | tr -d '\r' |
            awk -F': ' 'tolower($1) == "cache-status" {print $2}')
        [[ $status != *"; hit"* ]] || die "/c$p/$k (no-store) was served from the cache ($status)"
    fi
}

# wrk output -> requests rps errors
parse_wrk() {
    awk '/ requests in / { req = $1 }
         /^Requests\/sec:/ { rps = $2 }
         /Socket errors:/ { n = split($0, w, /[^0-9]+/); for (i = 1; i <= n; i++) err += w[i] }
         /Non-2xx or 3xx responses:/ { err += $NF }
         END { printf "%d %.1f %d\n", req, rps, err }' "$1"
}

# Samples, every 0.25 s until killed, how many of the origin's connections hold a request it has
# not read yet (Recv-Q > 0) plus the requests it has read and not answered: the origin's queue.
sample_queue() { # file
    while sleep 0.25; do
        q=$(ss -tnH state established "( sport = :$ORIGIN_PORT )" 2>/dev/null | awk '$1 > 0 {q++} END {print q + 0}')
        i=$(curl -sf "http://127.0.0.1:$ORIGIN_PORT/stats" | awk '$1 == "inflight" {print $2}')
        echo $((q + ${i:-0}))
    done >"$1"
}

# Waits (up to 3 s) until the origin has generated every request it had read: a wrk run that ends
# leaves up to CONNECTIONS requests queued there, which would otherwise eat into the next run.
settle() {
    local i quiet=0
    for i in $(seq 30); do
        if [[ $(curl -sf "http://127.0.0.1:$ORIGIN_PORT/stats" | awk '$1 == "inflight" {print $2}') == 0 ]]; then
            ((++quiet >= 2)) && return 0
        else
            quiet=0
        fi
        sleep 0.1
    done
}

# One measured run; appends a CSV row:
#   run,c,round,rps,requests,errors,sluice_hits,origin_requests,seconds,origin_cpu_s,sluice_cpu_s,origin_queue
measure() { # run(origin|sluice|hit) percent round
    local run=$1 p=$2 round=$3 sampler queue port out o0 o1 h0=0 h1=0 t0 t1 req rps err
    port=$SLUICE_PORT; [[ $run == origin ]] && port=$ORIGIN_PORT
    settle
    out="$TMP/wrk/$run-c$p-$((++RUN_NO)).txt"
    h0=$(sluice_counter TCP_MEM_HIT); o0=$(origin_requests)
    oc0=$(cpu_ticks "$ORIGIN_PID"); sc0=$(cpu_ticks "$SLUICE_PID"); t0=$(date +%s.%N)
    sample_queue "$out.queue" &
    sampler=$!
    PIDS+=("$sampler")
    "${PROXY_TASKSET[@]}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$DURATION" -s "$HERE/mix.lua" \
        "http://127.0.0.1:$port" -- "$p" "$N" >"$out"
    stop_pid "$sampler"
    unset 'PIDS[-1]'
    queue=$(awk '{s += $1; n++} END {printf "%.1f", n ? s / n : 0}' "$out.queue")
    t1=$(date +%s.%N); oc1=$(cpu_ticks "$ORIGIN_PID"); sc1=$(cpu_ticks "$SLUICE_PID")
    o1=$(origin_requests); h1=$(sluice_counter TCP_MEM_HIT)
    read -r req rps err < <(parse_wrk "$out")
    ((req > 0)) || { cat "$out" >&2; die "$run c=$p%: wrk completed no request"; }
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$run" "$p" "$round" "$rps" "$req" "$err" "$((h1 - h0))" "$((o1 - o0))" \
        "$(awk -v a="$t0" -v b="$t1" -v oc=$((oc1 - oc0)) -v sc=$((sc1 - sc0)) -v tck="$CLK_TCK" \
            'BEGIN {printf "%.2f,%.2f,%.2f", b - a, oc / tck, sc / tck}')" "$queue" >>"$CSV"
    log "  $(tail -1 "$CSV")"
}

# ---------------------------------------------------------------- run
STAMP=$(date +%Y-%m-%d-%H%M%S)
mkdir -p "$OUT_DIR"
CSV="$OUT_DIR/nicache-$STAMP.csv"
REPORT="$OUT_DIR/nicache-$STAMP.md"
SVG="$OUT_DIR/nicache-$STAMP.svg"
echo "run,c_percent,round,rps,requests,errors,sluice_hits,origin_requests,seconds,origin_cpu_s,sluice_cpu_s,origin_queue" >"$CSV"
RUN_NO=0
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)

log "pure-hit run (c=100%, warmed): sluice's hit capacity"
warm 100
measure hit 100 1
for p in $C_LIST; do
    log "c=$p%"
    warm "$p"
    for round in $(seq "$ROUNDS"); do
        measure origin "$p" "$round"
        measure sluice "$p" "$round"
    done
done
log "pure-hit run again"
measure hit 100 2
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

pin_desc="unpinned (origin, sluice and wrk share all $(nproc) CPUs)"
[[ $PIN == 1 ]] && pin_desc="origin on CPU $ORIGIN_CPU; sluice and wrk on CPU $PROXY_CPU (taskset)"
src=""
[[ $SLUICE_SRC != "$ROOT" ]] && src="SLUICE_SRC=$SLUICE_SRC "
[[ -n $SLUICE_BIN_GIVEN ]] && src="SLUICE_BIN=$SLUICE_BIN_GIVEN "
{
    echo "# Sluice on a dynamic workload (NICache figure 6), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- command: \`${src}C_LIST=\"$C_LIST\" DURATION=$DURATION ROUNDS=$ROUNDS CONNECTIONS=$CONNECTIONS WRK_THREADS=$WRK_THREADS THREADS=$THREADS N=$N BURN=$BURN ORIGIN_WORKERS=$ORIGIN_WORKERS SIZE=$SIZE PIN=$PIN bench/nicache/run.sh\`"
    echo "- $SLUICE_DESC; $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'); origin: bench/nicache/origin.go ($("$GO" version | awk '{print $3}'))"
    echo "- machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), Linux $(uname -r); load average $LOAD_START at start, $LOAD_END at end; sweep took $(($(date +%s) - START)) s"
    echo "- origin: $BURN of CPU per response (SHA-256 until the thread's CPU clock advanced that much), $ORIGIN_WORKERS worker(s), $SIZE-byte bodies, $N URLs per c, \`/c<p>/<i>\` cacheable (max-age=86400) iff i < p·N/100, else no-store"
    echo "- load: wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION, URLs uniform over the N, every URL fetched once through Sluice before a level's runs; $ROUNDS origin/sluice run pairs per c, interleaved, medians shown (range in brackets); sluice --threads $THREADS, memory cache, no access log; $pin_desc"
    echo
} >"$REPORT"
python3 "$HERE/report.py" "$CSV" "$SVG" "$(basename "$SVG")" >>"$REPORT"
cat "$REPORT"
log "report: $REPORT, data: $CSV, plot: $SVG"
