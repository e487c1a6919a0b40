#!/usr/bin/env bash
# User-space instructions per 1 KiB cache hit, per module configuration, counted with callgrind:
# the steady counterpart of run.sh's requests per CPU second (repeat runs agree within ±0.3%;
# machine load does not move them).
#
#   bench/modules/callgrind.sh                          # none noop add-headers wasm-empty
#   bench/modules/callgrind.sh none noop                # chosen configurations
#   N=2000 SLUICE=/tmp/sluice-abc bench/modules/callgrind.sh none wasm-empty-lean
#
# Configurations: none; any built-in module name (noop, add-headers, body-copy); wasm-empty,
# wasm-empty-lean (heads not kept for later callbacks), wasm-empty-abi (no SDK),
# wasm-add-headers. For each, Sluice
# (release build, --threads 1) runs under valgrind in front of a python origin; after two warm-up
# hits the counters are switched on for N keep-alive hits from one curl, then dumped. Per-function
# costs: callgrind_annotate --tree=none $OUT/<configuration>.out.1 (diff two configurations).
# Run one at a time (PORT_BASE, PORT_BASE+1).
set -euo pipefail
cd "$(dirname "$0")/../.."

N=${N:-1000}
PORT_BASE=${PORT_BASE:-18300}
SLUICE=${SLUICE:-target/release/sluice}
OUT=${OUT:-bench/out/callgrind}
configs=("$@")
((${#configs[@]})) || configs=(none noop add-headers wasm-empty)

command -v valgrind >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
[ -x "$SLUICE" ] || cargo build --release -p sluice
# $work, pids, cleanup, start_origin, module_entry, build_plugins.
source bench/modules/common.sh
plugins=""
if [[ " ${configs[*]} " == *" wasm-"* ]]; then plugins=$(build_plugins); fi
mkdir -p "$OUT"
start_origin "$PORT_BASE"
proxy=127.0.0.1:$((PORT_BASE + 1))

urls=$(for _ in $(seq "$N"); do printf 'http://%s/1k ' "$proxy"; done)
echo "| configuration | instructions per hit | over none |"
echo "|---|---:|---:|"
base=""
for c in "${configs[@]}"; do
  {
    printf '[[listener]]\naddr = "%s"\nmode = "reverse"\nh2c = false\n\n' "$proxy"
    printf '[[route]]\norigin = "http://127.0.0.1:%s"\n\n[admin]\nenabled = false\n\n' "$PORT_BASE"
    module_entry "$c" "$plugins"
  } > "$work/$c.toml"
  rm -f "$OUT/$c.out"*
  valgrind --tool=callgrind --callgrind-out-file="$OUT/$c.out" --instr-atstart=no \
    "$SLUICE" serve --config "$work/$c.toml" --threads 1 2>"$work/$c.log" &
  vpid=$!
  pids+=("$vpid")
  for _ in $(seq 300); do curl -sf -o /dev/null "http://$proxy/1k" && break; sleep 0.2; done
  curl -sf -o /dev/null "http://$proxy/1k"
  status=$(curl -s -D - -o /dev/null "http://$proxy/1k" | tr -d '\r' | grep -i '^cache-status' || true)
  case "$status" in *"; hit"*) ;; *) echo "warning: $c is not serving hits: $status" >&2 ;; esac
  callgrind_control -i on "$vpid" >/dev/null
  # shellcheck disable=SC2086 # one argument per URL
  curl -s $urls >/dev/null
  callgrind_control -i off "$vpid" >/dev/null
  callgrind_control -d "$vpid" >/dev/null
  kill "$vpid"
  while kill -0 "$vpid" 2>/dev/null; do sleep 0.1; done
  total=$(callgrind_annotate "$OUT/$c.out.1" | awk '/PROGRAM TOTALS/ && !seen {gsub(",", "", $1); print $1; seen = 1}')
  per=$((total / N))
  [ -n "$base" ] || base=$per
  awk -v c="$c" -v p="$per" -v b="$base" 'BEGIN { printf "| %s | %d | %+d (%+.1f%%) |\n", c, p, p - b, 100 * (p - b) / b }'
done
echo
echo "release build $SLUICE, --threads 1, $N keep-alive 1 KiB hits; profiles in $OUT"
