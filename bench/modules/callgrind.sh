#!/usr/bin/env bash
# User-space instructions per 1 KiB cache hit, per module configuration, counted with callgrind:
# the steady counterpart of run.sh's requests per CPU second (repeat runs agree within ±0.3%;
# machine load does not move them). Also counts each configuration's system calls per hit
# (strace, natively), and estimates the overhead in CPU time, the issue's unit, from both:
#
#   CPU overhead >= (instructions over none / instructions of none under load) x user share
#
# where "under load" is none under callgrind loaded by wrk -t1 -c32 (Tokio and epoll work is
# shared by the requests a wakeup finds, so a hit costs fewer instructions than one at a time)
# and the user share is none's utime / (utime + stime) natively under the same wrk (/proc).
# Every configuration makes the same system calls per hit (the table shows them), so this is
# the overhead if kernel time per hit stayed the same: a lower bound. Under a closed-loop load
# it does not quite stay: a slower proxy lets wrk go idle more often, and on this VM the
# cross-CPU wake-ups that follow cost kernel time too (docs/benchmarks.md, "Why timing shows
# more than the instructions"). run.sh measures the whole directly, but on this shared VM its
# rounds swing by tens of percent.
#
#   bench/modules/callgrind.sh                          # none noop add-headers wasm-empty
#   bench/modules/callgrind.sh none noop                # chosen configurations
#   N=2000 SLUICE=/tmp/sluice-abc bench/modules/callgrind.sh none wasm-empty-lean
#   SHARE=0.40 LOADED=20700 bench/modules/callgrind.sh ...   # share and load figures of before
#   CACHE=1 bench/modules/callgrind.sh none spin-1300 wasm-empty   # L1 misses per hit too
#
# Configurations: none; any built-in module name (noop, add-headers, body-copy); spin-N (the
# built-in `spin`, N loop turns of pure CPU work per hit); wasm-empty,
# wasm-empty-lean (heads not kept for later callbacks), wasm-empty-abi (no SDK),
# wasm-add-headers. For each, Sluice
# (release build, --threads 1) runs under valgrind in front of a python origin; after two warm-up
# hits the counters are switched on for N keep-alive hits from one curl, then dumped. Per-function
# costs: callgrind_annotate --tree=none $OUT/<configuration>.out.1 (diff two configurations).
# Run one at a time (PORT_BASE, PORT_BASE+1).
set -euo pipefail
cd "$(dirname "$0")/../.."

N=${N:-1000}
CACHE=${CACHE:-0}
# CACHE=1: callgrind also simulates the L1 caches (--cache-sim=yes) and a second table gives
# each configuration's L1 misses per hit.
if [ "$CACHE" = 1 ]; then cache_sim=(--cache-sim=yes); else cache_sim=(); fi
PORT_BASE=${PORT_BASE:-18300}
SLUICE=${SLUICE:-target/release/sluice}
OUT=${OUT:-bench/out/callgrind}
configs=("$@")
((${#configs[@]})) || configs=(none noop add-headers wasm-empty)

for tool in valgrind strace wrk; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null; }
done
[ -x "$SLUICE" ] || cargo build --release -p sluice
# $work, pids, cleanup, start_origin, module_entry, build_plugins.
source bench/modules/common.sh
plugins=""
if [[ " ${configs[*]} " == *" wasm-"* ]]; then plugins=$(build_plugins); fi
mkdir -p "$OUT"
start_origin "$PORT_BASE"
proxy=127.0.0.1:$((PORT_BASE + 1))

urls=$(for _ in $(seq "$N"); do printf 'http://%s/1k ' "$proxy"; done)
# Waits until $proxy serves a hit (warning when it serves something else).
warm() {
  for _ in $(seq 300); do curl -sf -o /dev/null "http://$proxy/1k" && break; sleep 0.2; done
  curl -sf -o /dev/null "http://$proxy/1k"
  status=$(curl -s -D - -o /dev/null "http://$proxy/1k" | tr -d '\r' | grep -i '^cache-status' || true)
  case "$status" in *"; hit"*) ;; *) echo "warning: $1 is not serving hits: $status" >&2 ;; esac
}

# Stops process $1 and waits for it to go.
stop() {
  kill "$1"
  while kill -0 "$1" 2>/dev/null; do sleep 0.1; done
}

# System calls per hit of configuration $1, every thread's (strace -c, natively, N hits):
# prints "total i/o", i/o being all but the futex and sleep calls of idle helper threads.
syscalls_per_hit() {
  "$SLUICE" serve --config "$work/$1.toml" --threads 1 2>>"$work/$1.log" &
  local spid=$!
  pids+=("$spid")
  warm "$1"
  strace -f -c -p "$spid" -o "$work/$1.strace" 2>"$work/$1.strace.err" &
  local tpid=$!
  # Attached once strace says so for the process's threads.
  for _ in $(seq 100); do grep -q "attached" "$work/$1.strace.err" 2>/dev/null && break; sleep 0.05; done
  # shellcheck disable=SC2086 # one argument per URL
  curl -s $urls >/dev/null
  kill -INT "$tpid"
  wait "$tpid" || true
  stop "$spid"
  awk -v n="$N" '$NF != "total" && $4 ~ /^[0-9]+$/ {
      all += $4; if ($NF !~ /^(futex|nanosleep|clock_nanosleep|sched_yield|restart_syscall)$/) io += $4 }
    END { printf "%.2f %.2f", all / n, io / n }' "$work/$1.strace"
}

# Configuration $1 (the baseline) under wrk -t1 -c32 for 2 s at a time, three times: natively,
# its user share of CPU (utime / (utime + stime), from /proc), over the three runs and the
# lowest and highest of a single run; under callgrind, its instructions per hit. Prints
# "share lowest highest instructions".
under_load() {
  "$SLUICE" serve --config "$work/$1.toml" --threads 1 2>>"$work/$1.log" &
  local spid=$! user=0 total=0 u0 s0 u1 s1 hits=0 lo=1 hi=0
  pids+=("$spid")
  warm "$1"
  for _ in 1 2 3; do
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$spid/stat")
    wrk -t1 -c32 -d2s "http://$proxy/1k" >/dev/null
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$spid/stat")
    user=$((user + u1 - u0)); total=$((total + u1 - u0 + s1 - s0))
    read -r lo hi < <(awk -v u=$((u1 - u0)) -v t=$((u1 - u0 + s1 - s0)) -v lo="$lo" -v hi="$hi" \
      'BEGIN { s = u / t; printf "%.3f %.3f\n", (s < lo ? s : lo), (s > hi ? s : hi) }')
  done
  stop "$spid"
  valgrind --tool=callgrind --callgrind-out-file="$OUT/$1-loaded.out" --instr-atstart=no \
    "$SLUICE" serve --config "$work/$1.toml" --threads 1 2>>"$work/$1.log" &
  spid=$!
  pids+=("$spid")
  warm "$1"
  callgrind_control -i on "$spid" >/dev/null
  for _ in 1 2 3; do
    hits=$((hits + $(wrk -t1 -c32 -d2s "http://$proxy/1k" | awk '/requests in/ {print $1}')))
  done
  callgrind_control -i off "$spid" >/dev/null
  callgrind_control -d "$spid" >/dev/null
  stop "$spid"
  awk -v u="$user" -v t="$total" -v lo="$lo" -v hi="$hi" -v h="$hits" -v i="$(instructions "$OUT/$1-loaded.out.1")" \
    'BEGIN { printf "%.3f %s %s %d\n", u / t, lo, hi, i / h }'
}

# The L1 instruction misses and L1 data misses (reads and writes) per hit in callgrind
# profile $1 (made with CACHE=1).
l1_misses() {
  awk -v n="$N" '/^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
    /^totals:/ { printf "%.0f %.0f\n", $col["I1mr"] / n, ($col["D1mr"] + $col["D1mw"]) / n }' "$1"
}

# The instructions counted in callgrind profile $1.
instructions() {
  callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ && !seen {gsub(",", "", $1); print $1; seen = 1}'
}

declare -A per_hit calls
base=""
for c in "${configs[@]}"; do
  {
    printf '[[listener]]\naddr = "%s"\nmode = "reverse"\nh2c = false\n\n' "$proxy"
    printf '[[route]]\norigin = "http://127.0.0.1:%s"\n\n[admin]\nenabled = false\n\n' "$PORT_BASE"
    module_entry "$c" "$plugins"
  } > "$work/$c.toml"
  rm -f "$OUT/$c.out"*
  valgrind --tool=callgrind "${cache_sim[@]}" --callgrind-out-file="$OUT/$c.out" --instr-atstart=no \
    "$SLUICE" serve --config "$work/$c.toml" --threads 1 2>"$work/$c.log" &
  vpid=$!
  pids+=("$vpid")
  warm "$c"
  callgrind_control -i on "$vpid" >/dev/null
  # shellcheck disable=SC2086 # one argument per URL
  curl -s $urls >/dev/null
  callgrind_control -i off "$vpid" >/dev/null
  callgrind_control -d "$vpid" >/dev/null
  stop "$vpid"
  per_hit[$c]=$(($(instructions "$OUT/$c.out.1") / N))
  [ -n "$base" ] || base=${per_hit[$c]}
  calls[$c]=$(syscalls_per_hit "$c")
done
if [ -n "${SHARE:-}" ] && [ -n "${LOADED:-}" ]; then
  loaded=$LOADED; share=$SHARE; lo=$SHARE; hi=$SHARE
else
  read -r share lo hi loaded < <(under_load "${configs[0]}")
fi

echo "| configuration | instructions per hit | over none | system calls per hit (i/o) | CPU overhead, lower bound (at the lowest and highest share of a run) |"
echo "|---|---:|---:|---:|---:|"
for c in "${configs[@]}"; do
  read -r all io <<<"${calls[$c]}"
  awk -v c="$c" -v p="${per_hit[$c]}" -v b="$base" -v all="$all" -v io="$io" -v s="$share" -v lo="$lo" -v hi="$hi" -v l="$loaded" 'BEGIN {
    printf "| %s | %d | %+d (%+.1f%%) | %.2f (%.2f) | %+.1f%% (%+.1f%% .. %+.1f%%) |\n", c, p, p - b, 100 * (p - b) / b, all, io,
      100 * s * (p - b) / l, 100 * lo * (p - b) / l, 100 * hi * (p - b) / l }'
done
if [ "$CACHE" = 1 ]; then
  echo
  echo "| configuration | L1 instruction misses per hit | over none | L1 data misses per hit | over none |"
  echo "|---|---:|---:|---:|---:|"
  read -r base_i base_d < <(l1_misses "$OUT/${configs[0]}.out.1")
  for c in "${configs[@]}"; do
    read -r i d < <(l1_misses "$OUT/$c.out.1")
    printf '| %s | %d | %+d | %d | %+d |\n' "$c" "$i" $((i - base_i)) "$d" $((d - base_d))
  done
fi
echo
echo "release build $SLUICE, --threads 1, $N keep-alive 1 KiB hits from one curl; profiles in $OUT."
echo "none under wrk -t1 -c32: $loaded instructions per hit, user share of CPU $share (single runs $lo to $hi); the estimate"
echo "is (over none) / $loaded x $share."
