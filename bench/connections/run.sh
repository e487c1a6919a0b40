#!/usr/bin/env bash
# A connection flood past the descriptor budget: Sluice runs with a small open-file limit
# (ulimit -n FILES) as a reverse proxy for 1 KiB pass-through responses (each request needs
# an origin connection), and wrk opens CONNS keep-alive connections, more than the budget
# holds. Run twice: with client.max_connections automatic (half of FILES) and with it
# effectively off. Reports what wrk got: responses, non-2xx answers (502: an origin
# connection the proxy could not open) and socket errors/timeouts (connections left waiting
# in the backlog, which wrk counts as timeouts).
#
#   bench/connections/run.sh
#   SLUICE=/tmp/sluice-abc FILES=256 CONNS=600 DURATION=10 bench/connections/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/proxy/conf.sh

SLUICE=${SLUICE:-target/release/sluice}
FILES=${FILES:-256}
CONNS=${CONNS:-600}
DURATION=${DURATION:-10}
PORT_BASE=${PORT_BASE:-18590}
NGINX=${NGINX:-nginx}
for tool in wrk "$NGINX"; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light >/dev/null; }
done
[ -x "$SLUICE" ] || cargo build --release -p sluice

work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

origin_port=$((PORT_BASE + 2))
write_content "$work"
origin_conf "$work" "$origin_port" >"$work/origin.conf"
"$NGINX" -p "$work" -c "$work/origin.conf" -e "$work/origin.error.log" &
pids+=($!)

# Runs Sluice with max_connections = $1 under the flood; prints a table row.
flood() {
  local label=$1 limit=$2 proxy=127.0.0.1:$PORT_BASE
  cat >"$work/sluice.toml" <<TOML
[[listener]]
addr = "$proxy"
mode = "reverse"

[admin]
addr = "127.0.0.1:$((PORT_BASE + 1))"
token = "bench"

[client]
max_connections = $limit
header_read_timeout = "120s"

[[route]]
origin = "http://127.0.0.1:$origin_port"
TOML
  (ulimit -n "$FILES" && exec "$SLUICE" serve --threads 1 --config "$work/sluice.toml") 2>"$work/sluice-$limit.log" &
  local sluice=$!
  for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$proxy/p/1k")" = 200 ] && break
    sleep 0.1
  done
  wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 5s "http://$proxy/p/1k" >"$work/wrk-$limit.txt" 2>&1 || true
  local stats
  stats=$(curl -s -H 'Authorization: Bearer bench' "http://127.0.0.1:$((PORT_BASE + 1))/stats")
  kill "$sluice"
  wait "$sluice" 2>/dev/null || true
  local requests non2xx errors limit_used waits emfile
  requests=$(grep -oE '^ +[0-9]+ requests' "$work/wrk-$limit.txt" | tr -dc 0-9 || true)
  non2xx=$(grep -oE 'Non-2xx or 3xx responses: [0-9]+' "$work/wrk-$limit.txt" | sed 's/.*: //' || true)
  errors=$(grep -E 'Socket errors' "$work/wrk-$limit.txt" | sed 's/ *Socket errors: //' || true)
  limit_used=$(echo "$stats" | grep -oE '"connections_limit":[0-9]+' | tr -dc 0-9 || true)
  waits=$(echo "$stats" | grep -oE '"connection_waits":[0-9]+' | tr -dc 0-9 || true)
  emfile=$(grep -c 'Too many open files' "$work/sluice-$limit.log" || true)
  echo "| $label | ${limit_used:-?} | ${requests:-0} | ${non2xx:-0} | ${errors:-none} | ${waits:-?} | $emfile |"
}

echo "ulimit -n $FILES, wrk -c$CONNS for ${DURATION}s on 1 KiB pass-through"
echo
echo "| max_connections | limit | responses | non-2xx | wrk socket errors | waits | 'Too many open files' log lines |"
echo "|---|---:|---:|---:|---|---:|---:|"
flood "automatic (0)" 0
flood "off (1000000)" 1000000
