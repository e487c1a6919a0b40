#!/usr/bin/env bash
# A connection flood past the descriptor budget: Sluice runs with a small open-file limit
# (ulimit -n FILES) as a reverse proxy for 1 KiB pass-through responses (each request needs
# an origin connection; nginx is the origin), and wrk opens CONNS keep-alive connections,
# more than the budget holds. Run twice: with client.max_connections automatic and with it
# effectively off. Reports what wrk got: responses, and of these the non-2xx answers (502:
# an origin connection the proxy could not open), with the proxy's limit, its waits and
# its "Too many open files" log lines.
#
#   bench/connections/run.sh
#   SLUICE_BIN=/tmp/sluice-abc FILES=256 CONNS=600 DURATION=10 bench/connections/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }
source "$ROOT/bench/lib.sh"
source "$ROOT/bench/proxy/conf.sh"

FILES=${FILES:-256}
CONNS=${CONNS:-600}
DURATION=${DURATION:-10}
PORT_BASE=${PORT_BASE:-18590}
NGINX=${NGINX:-nginx}
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v "$NGINX" >/dev/null || missing+=(nginx-light)
install_missing "${missing[@]}"
sluice_binary

TMP=$(mktemp -d)
origin_port=$((PORT_BASE + 2)) admin_port=$((PORT_BASE + 1))
write_content "$TMP"
origin_conf "$TMP" "$origin_port" >"$TMP/origin.conf"
"$NGINX" -p "$TMP" -c "$TMP/origin.conf" -e "$TMP/origin.error.log" &
PIDS+=("$!")
wait_port "$origin_port" || die "the origin did not start (see $TMP/origin.error.log)"

# Runs Sluice with client.max_connections = $2 under the flood; prints a table row
# labelled $1.
flood() {
    local label=$1 limit=$2 proxy=127.0.0.1:$PORT_BASE sluice stats requests non2xx waits used emfile
    sluice_toml "$PORT_BASE" "$origin_port" "" "$admin_port" >"$TMP/sluice.toml"
    printf '\n[client]\nmax_connections = %s\nheader_read_timeout = "120s"\n' "$limit" >>"$TMP/sluice.toml"
    (ulimit -n "$FILES" && exec "$SLUICE_BIN" serve --threads 1 --config "$TMP/sluice.toml") 2>"$TMP/sluice-$limit.log" &
    sluice=$!
    PIDS+=("$sluice")
    wait_port "$PORT_BASE" || die "sluice did not start (see $TMP/sluice-$limit.log)"
    wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 5s "http://$proxy/p/1k" >"$TMP/wrk-$limit.txt" 2>&1 || true
    stats=$(curl -s -H 'Authorization: Bearer bench' "http://127.0.0.1:$admin_port/stats")
    stop_pid "$sluice"
    requests=$(grep -oE '^ +[0-9]+ requests' "$TMP/wrk-$limit.txt" | tr -dc 0-9 || true)
    non2xx=$(grep -oE 'Non-2xx or 3xx responses: [0-9]+' "$TMP/wrk-$limit.txt" | sed 's/.*: //' || true)
    used=$(echo "$stats" | grep -oE '"connections_limit":[0-9]+' | tr -dc 0-9 || true)
    waits=$(echo "$stats" | grep -oE '"connection_waits":[0-9]+' | tr -dc 0-9 || true)
    emfile=$(grep -c 'Too many open files' "$TMP/sluice-$limit.log" || true)
    echo "| $label | ${used:-?} | ${requests:-0} | ${non2xx:-0} | ${waits:-?} | $emfile |"
}

echo "$SLUICE_DESC; ulimit -n $FILES; wrk -c$CONNS for ${DURATION}s on 1 KiB pass-through"
echo
echo "| max_connections | limit | responses | non-2xx | waits | 'Too many open files' log lines |"
echo "|---|---:|---:|---:|---:|---:|"
flood "automatic (0)" 0
flood "off (1000000)" 1000000
