#!/usr/bin/env bash
# TLS handshakes on a Sluice listener: new sessions against resumed ones (tls::Resumption),
# per CPU second of the Sluice process. `openssl s_time` opens connection after connection for
# DURATION seconds, each fetching a 1 KiB file (served from a files route, so no origin
# runs), first with a full handshake every time (-new), then resuming the first session
# (-reuse); for TLS 1.3 and TLS 1.2 in turn. The figure that counts is handshakes per CPU
# second of the proxy (its utime + stime from /proc, before and after), not per wall second:
# openssl runs on the same 2-core machine.
#
#   bench/tls/handshakes.sh
#   SLUICE_BIN=/tmp/sluice-abc DURATION=5 ROUNDS=3 KEY=rsa bench/tls/handshakes.sh
#
# KEY: the certificate's key, ec (P-256, the default) or rsa (2048 bits), whose signature
# makes a full handshake several times dearer.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }
source "$ROOT/bench/lib.sh"

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18570}
KEY=${KEY:-ec}
command -v openssl >/dev/null || install_missing openssl
sluice_binary

TMP=$(mktemp -d)
mkdir -p "$TMP/www"
head -c 1024 /dev/urandom >"$TMP/www/index.html"
case $KEY in
    ec) key_args=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;;
    rsa) key_args=(-newkey rsa:2048) ;;
    *) die "KEY must be ec or rsa" ;;
esac
openssl req -x509 "${key_args[@]}" -nodes -days 30 -subj /CN=bench.test \
    -addext subjectAltName=DNS:bench.test -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
cat >"$TMP/sluice.toml" <<EOF
[[listener]]
addr = "127.0.0.1:$PORT"
mode = "reverse"
tls = { cert = "$TMP/cert.pem", key = "$TMP/key.pem" }

[[route]]
files = { root = "$TMP/www" }

[admin]
enabled = false
EOF
"$SLUICE_BIN" serve --config "$TMP/sluice.toml" --threads 1 >"$TMP/sluice.log" 2>&1 &
PIDS+=("$!")
sluice_pid=$!
wait_port "$PORT" || die "sluice did not start (see $TMP/sluice.log)"

# The CPU time of the Sluice process so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$sluice_pid/stat"; }
hz=$(getconf CLK_TCK)

# One run: handshakes and handshakes per CPU second of Sluice, for $1 (-new or -reuse) and
# $2 (-tls1_3 or -tls1_2).
run() {
    local before after out n
    before=$(cpu_ticks)
    out=$(openssl s_time -connect "127.0.0.1:$PORT" -www /index.html "$1" "$2" \
        -time "$DURATION" 2>&1 || true)
    after=$(cpu_ticks)
    n=$(awk '/connections in .* real seconds/ {print $1; exit}' <<<"$out")
    [[ -n $n ]] || die "openssl s_time printed no count: $out"
    awk -v n="$n" -v t=$((after - before)) -v hz="$hz" 'BEGIN { printf "%d %.0f\n", n, (t > 0 ? n * hz / t : 0) }'
}

printf '| protocol | handshakes per CPU second, new sessions (median of %s) | resumed | resumed/new |\n' "$ROUNDS"
printf '|---|---:|---:|---:|\n'
for proto in -tls1_3 -tls1_2; do
    new=() reused=()
    for _ in $(seq "$ROUNDS"); do
        new+=("$(run -new "$proto" | awk '{print $2}')")
        reused+=("$(run -reuse "$proto" | awk '{print $2}')")
    done
    median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
    m_new=$(median "${new[@]}") m_reused=$(median "${reused[@]}")
    printf '| %s | %s | %s | %.1f× |\n' "${proto#-}" "$m_new" "$m_reused" \
        "$(awk -v a="$m_reused" -v b="$m_new" 'BEGIN { print (b > 0 ? a / b : 0) }')"
done
printf '\n%s, --threads 1, %s key; openssl s_time, %s s per run, %s\n' "$SLUICE_DESC" "$KEY" "$DURATION" "$(openssl version)"
