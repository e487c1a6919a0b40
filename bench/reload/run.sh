#!/usr/bin/env bash
# Configuration reloads under load: Sluice serves 1 KiB cache hits to wrk (HTTP/1.1 keep-alive)
# and then h2load (HTTP/2), while SIGHUP reloads its configuration file every RELOAD_EVERY
# seconds. Every other reload adds a second listener to the file and the next removes it
# again, so the listener under load is kept while another is opened and closed beside it.
# Reports each client's completed requests and its errors: a reload that closed connections
# or lost requests shows up as wrk's socket errors or h2load's failed requests.
#
#   bench/reload/run.sh
#   SLUICE=/tmp/sluice-abc DURATION=10 RELOAD_EVERY=0.5 bench/reload/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SLUICE=${SLUICE:-target/release/sluice}
DURATION=${DURATION:-10}
RELOAD_EVERY=${RELOAD_EVERY:-0.5}
PORT_BASE=${PORT_BASE:-18480}
for tool in wrk h2load; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" nghttp2-client >/dev/null; }
done
[ -x "$SLUICE" ] || cargo build --release -p sluice

work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

proxy=127.0.0.1:$PORT_BASE
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' 'x' >"$work/www/1k"
python3 -m http.server "$((PORT_BASE + 2))" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
pids+=($!)
cat >"$work/sluice.toml" <<TOML
[[listener]]
addr = "$proxy"
mode = "reverse"

[admin]
addr = "127.0.0.1:$((PORT_BASE + 1))"
token = "bench"

[[route]]
origin = "http://127.0.0.1:$((PORT_BASE + 2))"
default_ttl = "1h"
TOML
cp "$work/sluice.toml" "$work/one-listener.toml"
cat "$work/sluice.toml" - >"$work/two-listeners.toml" <<TOML

[[listener]]
addr = "127.0.0.1:$((PORT_BASE + 3))"
mode = "reverse"
TOML
"$SLUICE" serve --threads 1 --config "$work/sluice.toml" 2>"$work/sluice.log" &
sluice=$!
pids+=("$sluice")
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$proxy/1k")" = 200 ] && break
  sleep 0.1
done
curl -s -D - -o /dev/null "http://$proxy/1k" | grep -qi 'cache-status: .*hit' || { echo "no cache hit" >&2; exit 1; }

# Sends SIGHUP every RELOAD_EVERY seconds while the client runs; prints how many it sent.
reload_while() {
  local sent=0
  while kill -0 "$1" 2>/dev/null; do
    sleep "$RELOAD_EVERY"
    kill -0 "$1" 2>/dev/null || break
    sent=$((sent + 1))
    if [ $((sent % 2)) = 1 ]; then variant=two-listeners; else variant=one-listener; fi
    cp "$work/$variant.toml" "$work/sluice.toml"
    kill -HUP "$sluice"
  done
  echo "$sent"
}

wrk -t1 -c32 -d"${DURATION}s" "http://$proxy/1k" >"$work/wrk.txt" 2>&1 &
wrk_reloads=$(reload_while $!)
h2load -c32 -m8 -D "$DURATION" "http://$proxy/1k" >"$work/h2load.txt" 2>&1 &
h2_reloads=$(reload_while $!)

echo "| client | reloads | requests | errors |"
echo "|---|---:|---:|---|"
wrk_requests=$(grep -oE '^ +[0-9]+ requests' "$work/wrk.txt" | tr -dc 0-9 || true)
wrk_errors=$(grep -E 'Socket errors|Non-2xx' "$work/wrk.txt" | tr '\n' ' ' | sed 's/  */ /g' || true)
echo "| wrk (HTTP/1.1 keep-alive) | $wrk_reloads | $wrk_requests | ${wrk_errors:-none} |"
h2_line=$(grep -E '^requests:' "$work/h2load.txt" || true)
h2_requests=$(echo "$h2_line" | grep -oE '[0-9]+ succeeded' | tr -dc 0-9 || true)
h2_errors=$(echo "$h2_line" | grep -oE '[0-9]+ failed, [0-9]+ errored, [0-9]+ timeout' || true)
echo "| h2load (HTTP/2) | $h2_reloads | $h2_requests | $h2_errors |"
echo
echo "reloads logged by Sluice: $(grep -c 'configuration reloaded' "$work/sluice.log" || true);" \
  "second listener opened $(grep -c "SIGHUP: listening on 127.0.0.1:$((PORT_BASE + 3))" "$work/sluice.log" || true)," \
  "closed $(grep -c "no longer listening on 127.0.0.1:$((PORT_BASE + 3))" "$work/sluice.log" || true) times"
