#!/usr/bin/env bash
# A Proxy-Wasm plugin that makes an HTTP call on every request (test plugin `http_call`: a
# request with `x-user: ann` waits for `GET /check/ann` on cluster `auth`, an nginx here), in
# front of 1 KiB cache hits: requests per second, requests per CPU second of the proxy, wrk's
# errors, and the connections the proxy opened to the cluster (nginx's count of accepted
# connections), for one or two builds. With two,
# their rounds alternate (A, B, A, B, ...) so that both see the same machine, and the table
# gives each one's median and the ratio B/A.
#
#   bench/modules/callout.sh                                          # target/release/sluice
#   SLUICE_A=/tmp/sluice-before SLUICE_B=target/release/sluice bench/modules/callout.sh
#   ROUNDS=5 DURATION=5s CONNECTIONS=16 bench/modules/callout.sh
#
# Sluice runs with --threads 1; wrk -t1. Ports PORT_BASE (origin), +1 (proxy), +2 (nginx).
set -euo pipefail
cd "$(dirname "$0")/../.."

SLUICE_A=${SLUICE_A:-target/release/sluice}
SLUICE_B=${SLUICE_B:-}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNECTIONS=${CONNECTIONS:-16}
PORT_BASE=${PORT_BASE:-18400}

for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool/nginx/nginx-light}" >/dev/null; }
done
[ -x "$SLUICE_A" ] || cargo build --release -p sluice
# $work, pids, cleanup, start_origin, build_plugins.
source bench/modules/common.sh
plugins=$(build_plugins)
start_origin "$PORT_BASE"
proxy=127.0.0.1:$((PORT_BASE + 1))
auth_port=$((PORT_BASE + 2))

cat > "$work/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
error_log $work/nginx.error.log;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$auth_port;
    location /check/ { return 200 "ok"; }
    location = /status { stub_status; }
  }
}
EOF
nginx -p "$work" -c "$work/nginx.conf" &
pids+=($!)
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$auth_port/check/x" && break; sleep 0.1; done

{
  printf '[[listener]]\naddr = "%s"\nmode = "reverse"\nh2c = false\n\n' "$proxy"
  printf '[[route]]\norigin = "http://127.0.0.1:%s"\n\n[admin]\nenabled = false\n\n' "$PORT_BASE"
  printf '[[module]]\nname = "asker"\nkind = "wasm"\n[module.settings]\npath = "%s/http_call.wasm"\n' "$plugins"
  printf 'clusters = { auth = "http://127.0.0.1:%s" }\n' "$auth_port"
} > "$work/sluice.toml"

# Connections the cluster has accepted so far.
accepted() { curl -sf "http://127.0.0.1:$auth_port/status" | awk 'NR == 3 {print $1}'; }

# One round of build $1: prints "requests/s requests-per-CPU-second errors connections".
round() {
  "$1" serve --config "$work/sluice.toml" --threads 1 2>>"$work/sluice.log" &
  local spid=$! u0 s0 u1 s1 out
  pids+=("$spid")
  for _ in $(seq 100); do curl -sf -o /dev/null -H 'x-user: ann' "http://$proxy/1k" && break; sleep 0.1; done
  curl -sf -o /dev/null -H 'x-user: ann' "http://$proxy/1k"
  local c0 c1
  c0=$(accepted)
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$spid/stat")
  out=$(wrk -t1 -c"$CONNECTIONS" -d"$DURATION" -H 'x-user: ann' "http://$proxy/1k")
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$spid/stat")
  c1=$(accepted)
  kill "$spid"
  while kill -0 "$spid" 2>/dev/null; do sleep 0.1; done
  awk -v cpu="$((u1 - u0 + s1 - s0))" -v hz="$(getconf CLK_TCK)" -v conns="$((c1 - c0 - 1))" '
    /requests in/ { n = $1 }
    /Requests\/sec/ { rps = $2 }
    /Non-2xx|Socket errors/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) { gsub(",", "", $i); err += $i } }
    END { printf "%.0f %.0f %d %d\n", rps, n / (cpu / hz), err, conns }' <<<"$out"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A results
builds=(A)
[ -n "$SLUICE_B" ] && builds+=(B)
for _ in $(seq "$ROUNDS"); do
  for b in "${builds[@]}"; do
    bin=SLUICE_$b
    results[$b]+="$(round "${!bin}")"$'\n'
  done
done

echo "| build | requests/s | requests per CPU second | wrk errors | connections opened to the cluster |"
echo "|---|---:|---:|---:|---:|"
declare -A med
for b in "${builds[@]}"; do
  bin=SLUICE_$b
  for col in 1 2 3 4; do
    med[$b$col]=$(awk -v c="$col" 'NF {print $c}' <<<"${results[$b]}" | median)
  done
  echo "| $b (${!bin}) | ${med[${b}1]} | ${med[${b}2]} | ${med[${b}3]} | ${med[${b}4]} |"
done
if [ -n "$SLUICE_B" ]; then
  awk -v a="${med[A2]}" -v b="${med[B2]}" -v ra="${med[A1]}" -v rb="${med[B1]}" \
    'BEGIN { printf "\nB/A: requests/s %.2fx, requests per CPU second %.2fx (medians of %d rounds)\n", rb / ra, b / a, '"$ROUNDS"' }'
fi
