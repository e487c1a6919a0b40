#!/usr/bin/env bash
# Seed 000, table 5, on Sluice: the cost of the module machinery on 1 KiB cache hits.
#
# Runs Sluice as a reverse proxy in front of a local origin once per configuration (no module,
# the `noop` module on every phase, `add-headers` adding four headers, `body-copy` copying every
# response body), loads each with wrk on loopback, and reports requests per CPU second of the
# Sluice process (utime+stime from /proc before and after), the stable figure on shared
# machines, with the ratio to the no-module baseline. Rounds are interleaved so drift in machine
# load hits every configuration alike.
#
#   bench/modules/run.sh                   # defaults below
#   DURATION=10s ROUNDS=5 bench/modules/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-6s}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1}
PORT_BASE=${PORT_BASE:-18200}
SLUICE=${SLUICE:-target/release/sluice}

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
[ -x "$SLUICE" ] || cargo build --release -p sluice

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# Origin: a 1 KiB object, heuristically fresh for a day (modified ten days ago).
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k"
touch -d "10 days ago" "$work/www/1k"
python3 -m http.server "$PORT_BASE" --bind 127.0.0.1 -d "$work/www" >/dev/null 2>&1 &
pids+=($!)

configs=(none noop add-headers body-copy)
declare -A port
i=1
for c in "${configs[@]}"; do
  port[$c]=$((PORT_BASE + i)); i=$((i + 1))
  {
    printf '[[listener]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\nh2c = false\n\n' "${port[$c]}"
    printf '[[route]]\norigin = "http://127.0.0.1:%s"\n\n' "$PORT_BASE"
    printf '[admin]\nenabled = false\n\n'
    [ "$c" = none ] || printf '[[module]]\nname = "%s"\n' "$c"
  } > "$work/$c.toml"
  "$SLUICE" serve --config "$work/$c.toml" --threads "$THREADS" >"$work/$c.log" 2>&1 &
  pids+=($!)
  eval "pid_${c//-/_}=$!"
done

# Wait for every listener, then warm each cache.
for c in "${configs[@]}"; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${port[$c]}/1k" && break; sleep 0.1; done
  curl -s -o /dev/null "http://127.0.0.1:${port[$c]}/1k"
  status=$(curl -s -D - -o /dev/null "http://127.0.0.1:${port[$c]}/1k" | tr -d '\r' | grep -i '^cache-status' || true)
  case "$status" in *"; hit"*) ;; *) echo "warning: $c is not serving hits: $status" >&2 ;; esac
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A results
for round in $(seq "$ROUNDS"); do
  for c in "${configs[@]}"; do
    pid_var="pid_${c//-/_}"; pid=${!pid_var}
    before=$(cpu_ticks "$pid")
    out=$(wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "http://127.0.0.1:${port[$c]}/1k")
    after=$(cpu_ticks "$pid")
    requests=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    per_cpu=$(awk -v r="$requests" -v t=$((after - before)) -v hz="$hz" 'BEGIN { printf "%.0f", (t > 0) ? r / (t / hz) : 0 }')
    results[$c]+="$per_cpu "
    echo "round $round  $c: $rps req/s, $per_cpu req/CPU-s" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
base=$(echo "${results[none]}" | median)
echo
echo "| configuration | req/CPU-s (median of $ROUNDS) | vs no module |"
echo "|---|---:|---:|"
for c in "${configs[@]}"; do
  m=$(echo "${results[$c]}" | median)
  awk -v c="$c" -v m="$m" -v b="$base" 'BEGIN { printf "| %s | %d | %+.1f%% |\n", c, m, (m / b - 1) * 100 }'
done
echo
echo "1 KiB hits, wrk -t1 -c$CONNECTIONS -d$DURATION, sluice --threads $THREADS, $(git rev-parse --short HEAD)"
