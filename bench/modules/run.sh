#!/usr/bin/env bash
# Seed 000, table 5, on Sluice: the cost of the module machinery on 1 KiB cache hits.
#
# Runs Sluice as a reverse proxy in front of a local origin once per configuration (no module,
# the `noop` module on every phase, `add-headers` adding four headers, `body-copy` copying every
# response body; and the same three as Proxy-Wasm plugins: `empty` (also as `-lean`, with the
# request and response heads not kept for later callbacks, and `empty_abi`, the same empty
# callbacks without the SDK), `add_headers`, `body_transform` in copy mode), loads each with
# wrk on loopback, and reports requests per CPU second of the Sluice process (its threads'
# run time from /proc/<pid>/task/*/schedstat before and after), the stable figure on shared
# machines. Rounds are interleaved so drift in machine load hits every configuration
# alike, and the overhead is the median over rounds of each round's ratio to that same round's
# no-module run (paired, so a slow minute moves both sides of a ratio); each round starts with
# the next configuration, so none always runs first. The user share of CPU tells how much of a
# request is user space (what bench/modules/callgrind.sh counts) rather than kernel. The table
# gives a 95% confidence interval of each median (order statistics); it covers the rounds of
# one run only, and separate runs' medians differ by more (the machine changes under them).
#
#   bench/modules/run.sh                   # defaults below
#   DURATION=2s ROUNDS=15 bench/modules/run.sh
#   WASM=0 bench/modules/run.sh            # native modules only (no wasm32-wasip1 build)
#   CONFIGS="none noop none-2" bench/modules/run.sh   # chosen ones; none-2: an A/A check
#   CONFIGS="none wasm-empty spin-5600" bench/modules/run.sh   # spin-N: N turns of pure CPU work
#   RATE=40000 bench/modules/run.sh        # a fixed offered load (h2load --rps) instead of wrk
#   SLUICE=<release> SLUICE_B=target/pgo/sluice CONFIGS="none wasm-empty none-b wasm-empty-b" \
#     bench/modules/run.sh                 # two builds in one run: <config>-b runs SLUICE_B
#
# With SLUICE_B, a configuration named <config>-b is <config> on the second build, and its
# overhead is against the second build's baseline (the first configuration's -b twin) in
# the same round; that baseline's own row compares the two builds.
#
# By default wrk keeps CONNECTIONS requests in flight (a closed loop): the proxy is the
# bottleneck, and a slower configuration also makes wrk sleep and be woken more often, which
# can cost the proxy kernel time of its own ("Why timing shows more than the instructions" in
# docs/benchmarks.md). With RATE, h2load (HTTP/1.1, the same connections) offers RATE
# requests a second whatever the configuration, so every configuration meets the same client
# behaviour: pick a rate below every configuration's capacity (wrk's req/s); a configuration
# that cannot keep up serves fewer requests, which the table shows.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-3s}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-1}
PORT_BASE=${PORT_BASE:-18200}
SLUICE=${SLUICE:-target/release/sluice}
WASM=${WASM:-1}
RATE=${RATE:-}
SLUICE_B=${SLUICE_B:-}

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
if [ -n "$RATE" ]; then
  command -v h2load >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client >/dev/null; }
fi
[ -x "$SLUICE" ] || cargo build --release -p sluice

# $work, pids, cleanup, start_origin, module_entry, build_plugins.
source bench/modules/common.sh
start_origin "$PORT_BASE"

configs=(none noop add-headers body-copy)
if [ "$WASM" = 1 ]; then configs+=(wasm-empty wasm-empty-lean wasm-empty-abi wasm-add-headers wasm-body-copy); fi
# CONFIGS="none noop none-2" picks configurations (the first is the baseline; none-2 is a
# second no-module instance, an A/A check of the method).
if [ -n "${CONFIGS:-}" ]; then read -ra configs <<<"$CONFIGS"; fi
if [[ " ${configs[*]} " == *" wasm-"* ]]; then
  # The test plugins of crates/sluice-wasm, built for wasm32-wasip1 (the target is installed by
  # scripts/install-deps.sh).
  wasm_dir=$(build_plugins)
fi

declare -A port
i=1
for c in "${configs[@]}"; do
  port[$c]=$((PORT_BASE + i)); i=$((i + 1))
  {
    printf '[[listener]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\nh2c = false\n\n' "${port[$c]}"
    printf '[[route]]\norigin = "http://127.0.0.1:%s"\n\n' "$PORT_BASE"
    printf '[admin]\nenabled = false\n\n'
    module_entry "${c%-b}" "${wasm_dir:-}"
  } > "$work/$c.toml"
  bin=$SLUICE
  if [[ $c == *-b ]]; then
    [ -n "$SLUICE_B" ] || { echo "$c needs SLUICE_B, the second build" >&2; exit 2; }
    bin=$SLUICE_B
  fi
  "$bin" serve --config "$work/$c.toml" --threads "$THREADS" >"$work/$c.log" 2>&1 &
  pids+=($!)
  eval "pid_${c//-/_}=$!"
done

# Wait for every listener, then warm each cache.
for c in "${configs[@]}"; do
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:${port[$c]}/1k" && break; sleep 0.1; done
  curl -s -o /dev/null "http://127.0.0.1:${port[$c]}/1k"
  status=$(curl -s -D - -o /dev/null "http://127.0.0.1:${port[$c]}/1k" | tr -d '\r' | grep -i '^cache-status' || true)
  case "$status" in *"; hit"*) ;; *) echo "warning: $c is not serving hits: $status" >&2 ;; esac
done

# utime and stime of a process, in clock ticks (for the user share).
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# CPU time of all of a process's threads, in ns (schedstat: finer than the 10 ms ticks, which
# a fixed-rate run of a few seconds uses only a hundred or so of).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f", ns}'; }
# The configuration that $1's overhead is measured against in each round: the first one, or
# for a second-build configuration (-b) the first one's -b twin when it runs (which is itself
# measured against the first).
baseline_of() {
  local twin="${configs[0]%-b}-b"
  if [[ $1 == *-b && $1 != "$twin" && " ${configs[*]} " == *" $twin "* ]]; then echo "$twin"; else echo "${configs[0]}"; fi
}
declare -A results ratios user_shares
n=${#configs[@]}
for round in $(seq "$ROUNDS"); do
  declare -A this_round=()
  # Each round starts one configuration later, so no configuration always runs first (an A/A
  # run showed a couple of percent of position bias).
  for k in $(seq 0 $((n - 1))); do
    c=${configs[$(((k + round - 1) % n))]}
    pid_var="pid_${c//-/_}"; pid=${!pid_var}
    read -r user_before sys_before < <(ticks "$pid")
    ns_before=$(cpu_ns "$pid")
    if [ -n "$RATE" ]; then
      out=$(h2load --h1 -t1 -c"$CONNECTIONS" --rps=$((RATE / CONNECTIONS)) -D "$DURATION" "http://127.0.0.1:${port[$c]}/1k")
    else
      out=$(wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "http://127.0.0.1:${port[$c]}/1k")
    fi
    read -r user_after sys_after < <(ticks "$pid")
    ns=$(($(cpu_ns "$pid") - ns_before))
    user=$((user_after - user_before))
    total=$((user + sys_after - sys_before))
    if [ -n "$RATE" ]; then
      # "requests: 96000 total, 96000 started, 96000 done, 96000 succeeded, ..."
      requests=$(echo "$out" | awk '/^requests:/ {print $8}')
      rps=$(echo "$out" | awk '/^finished in/ {print $4}')
    else
      requests=$(echo "$out" | awk '/requests in/ {print $1}')
      rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    fi
    per_cpu=$(awk -v r="$requests" -v ns="$ns" 'BEGIN { printf "%.0f", (ns > 0) ? r / (ns / 1e9) : 0 }')
    results[$c]+="$per_cpu "
    user_shares[$c]+="$(awk -v u="$user" -v t="$total" 'BEGIN { printf "%.3f", (t > 0) ? u / t : 0 }') "
    this_round[$c]=$per_cpu
    echo "round $round  $c: $rps req/s, $per_cpu req/CPU-s" >&2
  done
  for c in "${configs[@]}"; do
    ratios[$c]+="$(awk -v m="${this_round[$c]}" -v b="${this_round[$(baseline_of "$c")]}" 'BEGIN { printf "%.4f", (b > 0) ? m / b : 0 }') "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR == 1 {lo=$1} {hi=$1} END {printf "%+.1f%% .. %+.1f%%", (lo - 1) * 100, (hi - 1) * 100}'; }
# A distribution-free 95% confidence interval of the median: the order statistics k and
# n + 1 - k, k = n/2 - 0.98 sqrt(n) rounded down (the normal approximation of the binomial).
median_ci() {
  tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {
    k = int(NR / 2 - 0.98 * sqrt(NR)); if (k < 1) k = 1
    printf "%+.1f%% .. %+.1f%%", (a[k] - 1) * 100, (a[NR + 1 - k] - 1) * 100 }'
}
echo
echo "| configuration | req/CPU-s (median of $ROUNDS) | overhead (median of paired ratios) | 95% confidence interval of the median | range over rounds | user share of CPU |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${configs[@]}"; do
  m=$(echo "${results[$c]}" | median)
  r=$(echo "${ratios[$c]}" | median)
  span=$(echo "${ratios[$c]}" | range)
  ci=$(echo "${ratios[$c]}" | median_ci)
  u=$(echo "${user_shares[$c]}" | median)
  awk -v c="$c" -v m="$m" -v r="$r" -v ci="$ci" -v s="$span" -v u="$u" 'BEGIN { printf "| %s | %.0f | %+.1f%% | %s | %s | %.0f%% |\n", c, m, (r - 1) * 100, ci, s, u * 100 }'
done
echo
if [ -n "$RATE" ]; then load="h2load --h1 -t1 -c$CONNECTIONS at $RATE req/s -D $DURATION"; else load="wrk -t1 -c$CONNECTIONS -d$DURATION"; fi
echo "1 KiB hits, $load, sluice --threads $THREADS, $(git rev-parse --short HEAD)${SLUICE_B:+; -b: $SLUICE_B}"
