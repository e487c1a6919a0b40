#!/usr/bin/env bash
# The HTTP cache conformance suite of cache-tests.fyi (npm http-cache-tests, pinned by
# scripts/cache-tests/install.sh) against Sluice and Debian's own reverse-proxy caches, one after
# another, each with a fresh cache in front of the suite's origin, on loopback.
#
#   bench/cache-tests/compare.sh    # installs what is missing (apt, npm), runs, writes
#                                   # bench/out/cache-tests-<date>.md (printed too) and
#                                   # bench/out/cache-tests-<date>-<proxy>.json (run.mjs's output)
#
# Each cache is set up the way the suite's own docker/ configuration sets it up (see the files
# beside this script, which say what differs and why); ~15 s of tests per cache.
#
# Environment (all optional):
#   PROXIES="sluice squid varnish nginx trafficserver apache"   which caches, in this order
#   SLUICE_BIN=path  the sluice binary (default: a release build of SLUICE_SRC, see bench/lib.sh)
#   SLUICE_SRC=dir   the source tree to build when SLUICE_BIN is not given (default: this repo)
#   PORT_BASE=18380  origin +0, sluice +1, squid +2, varnish +3, nginx +4, trafficserver +5,
#                    apache +6, sluice admin +9
#   OUT_DIR=bench/out
#   KEEP_TMP=1       keep the temp dir (configurations and logs of every cache)
#   NO_INSTALL=1     fail instead of apt-get installing missing packages
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/cache-tests
SUITE=$ROOT/target/test-deps/cache-tests/http-cache-tests
PROXIES=${PROXIES:-"sluice squid varnish nginx trafficserver apache"}
PORT_BASE=${PORT_BASE:-18380}
OUT_DIR=${OUT_DIR:-$ROOT/bench/out}
ORIGIN_PORT=$PORT_BASE
ADMIN_PORT=$((PORT_BASE + 9))
declare -A PORT=([sluice]=$((PORT_BASE + 1)) [squid]=$((PORT_BASE + 2)) [varnish]=$((PORT_BASE + 3))
    [nginx]=$((PORT_BASE + 4)) [trafficserver]=$((PORT_BASE + 5)) [apache]=$((PORT_BASE + 6)))
# Debian package and command of each cache (sluice: none, it is ours).
declare -A PACKAGE=([squid]=squid [varnish]=varnish [nginx]=nginx [trafficserver]=trafficserver [apache]=apache2)
declare -A COMMAND=([squid]=squid [varnish]=varnishd [nginx]=nginx [trafficserver]=traffic_server [apache]=apache2)

log() { printf '[cache-tests] %s\n' "$*" >&2; }
die() { printf '[cache-tests] error: %s\n' "$*" >&2; exit 1; }

for proxy in $PROXIES; do [[ -n ${PORT[$proxy]:-} ]] || die "unknown proxy '$proxy' (${!PORT[*]})"; done

# PIDS, TMP, stop_pid, cleanup (EXIT trap), can_connect, wait_port, sluice_binary, install_missing.
# shellcheck source=SCRIPTDIR/../lib.sh
source "$ROOT/bench/lib.sh"

# ---------------------------------------------------------------- tools
missing=()
command -v node >/dev/null || missing+=(nodejs npm)
command -v curl >/dev/null || missing+=(curl)
for proxy in $PROXIES; do
    if [[ -n ${COMMAND[$proxy]:-} ]] && ! command -v "${COMMAND[$proxy]}" >/dev/null; then missing+=("${PACKAGE[$proxy]}"); fi
done
if ((${#missing[@]})); then
    # Installing a server package must not start its system service: deny every start for the
    # install (invoke-rc.d asks policy-rc.d), unless this machine already has a policy of its own.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [[ ! -e $policy && ${NO_INSTALL:-0} != 1 ]]; then
        printf '#!/bin/sh\n# bench/cache-tests/compare.sh: no service starts while it installs\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        own_policy=1
    fi
    status=0
    (install_missing "${missing[@]}") || status=$?
    if ((own_policy)); then rm -f "$policy"; fi
    ((status == 0)) || die "could not install ${missing[*]}"
fi
bash "$ROOT/scripts/cache-tests/install.sh" || die "scripts/cache-tests/install.sh failed"
if [[ " $PROXIES " == *" sluice "* ]]; then sluice_binary; fi

for p in "$ORIGIN_PORT" "$ADMIN_PORT" "${PORT[@]}"; do
    can_connect "$p" && die "port $p is in use (set PORT_BASE)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cache-tests.XXXXXX")
chmod 755 "$TMP" # the caches that drop root (squid, varnish, trafficserver, apache) look inside

# ---------------------------------------------------------------- the caches
# Writes TEMPLATE (beside this script) to OUT with this run's directory and ports.
render() { # template out dir port
    sed -e "s|@DIR@|$3|g" -e "s|@PORT@|$4|g" -e "s|@ORIGIN@|$ORIGIN_PORT|g" -e "s|@ADMIN@|$ADMIN_PORT|g" \
        "$HERE/$1" >"$2"
}

# Starts one cache in the foreground of a background job, its files under DIR; prints nothing.
start() { # proxy dir
    local proxy=$1 dir=$2 port=${PORT[$1]} f
    case $proxy in
        sluice)
            render sluice.toml "$dir/sluice.toml" "$dir" "$port"
            "$SLUICE_BIN" serve --check-config "$dir/sluice.toml" >/dev/null || die "sluice rejects $dir/sluice.toml"
            SLUICE_LOG=warn "$SLUICE_BIN" serve --config "$dir/sluice.toml" >"$dir/stdout" 2>&1 &
            ;;
        squid)
            render squid.conf "$dir/squid.conf" "$dir" "$port"
            chown proxy: "$dir"
            squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>&1 &
            ;;
        varnish)
            render varnish.vcl "$dir/default.vcl" "$dir" "$port"
            # upstream's docker/serve.sh command line, but on loopback and without a CLI port
            varnishd -F -j unix -n "$dir/work" -a "127.0.0.1:$port" -T none -f "$dir/default.vcl" \
                -p default_ttl=0 -p default_grace=0 -p default_keep=3600 -s malloc,64M >"$dir/stdout" 2>&1 &
            ;;
        nginx)
            render nginx.conf "$dir/nginx.conf" "$dir" "$port"
            mkdir -p "$dir/cache"
            nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout" 2>&1 &
            ;;
        trafficserver)
            # Debian's configuration files, then upstream's where it has its own (beside this script)
            mkdir -p "$dir/etc" "$dir/var" "$dir/run" "$dir/log" "$dir/cache"
            cp -r /etc/trafficserver/. "$dir/etc/"
            for f in records.config remap.config storage.config ip_allow.yaml; do
                render "trafficserver/$f" "$dir/etc/$f" "$dir" "$port"
            done
            render trafficserver/runroot.yaml "$dir/runroot.yaml" "$dir" "$port"
            chown -R trafficserver: "$dir"
            TS_RUNROOT=$dir/runroot.yaml traffic_server >"$dir/stdout" 2>&1 &
            ;;
        apache)
            render apache.conf "$dir/apache.conf" "$dir" "$port"
            mkdir -p "$dir/cache"
            chown www-data: "$dir/cache"
            apache2 -X -f "$dir/apache.conf" >"$dir/stdout" 2>&1 &
            ;;
    esac
    PIDS+=("$!")
}

version() { # proxy
    local v
    case $1 in
        sluice) v="$("$SLUICE_BIN" --version), $SLUICE_DESC, binary of $(date -u -r "$SLUICE_BIN" '+%Y-%m-%d %H:%M UTC')" ;;
        squid) v=$(squid -v | sed -n 1p) ;;
        varnish) v=$(varnishd -V 2>&1 | sed -n 1p) ;;
        nginx) v=$(nginx -v 2>&1) ;;
        trafficserver) v=$(traffic_server -V 2>/dev/null | sed -n 1p) ;;
        apache) v=$(apache2 -v | sed -n 1p) ;;
    esac
    if [[ -n ${PACKAGE[$1]:-} ]]; then
        v="$v (Debian package ${PACKAGE[$1]} $(dpkg-query -W -f='${Version}' "${PACKAGE[$1]}" 2>/dev/null || echo '?'))"
    fi
    printf '%s\n' "$v"
}

# The last lines of a cache's logs, for a report that says it did not work.
log_tail() { # dir
    find "$1" -maxdepth 2 -type f \( -name stdout -o -name '*.log' \) -size +0 -print0 |
        xargs -0 -r tail -n 3 2>/dev/null | tr '\n' ' ' | cut -c1-600
}

# Writes {"error": MESSAGE} as a cache's result file.
failed() { # json message
    node -e 'console.log(JSON.stringify({ error: process.argv[1] }))' "$2" >"$1"
}

# ---------------------------------------------------------------- run
STAMP=$(date +%Y-%m-%d-%H%M%S)
mkdir -p "$OUT_DIR"
REPORT=$OUT_DIR/cache-tests-$STAMP.md
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

log "origin on 127.0.0.1:$ORIGIN_PORT"
node "$ROOT/scripts/cache-tests/origin.mjs" "$SUITE" "$ORIGIN_PORT" >"$TMP/origin.log" 2>&1 &
PIDS+=("$!")
wait_port "$ORIGIN_PORT" || die "the origin did not start (see $TMP/origin.log)"

pairs=()
versions=()
for proxy in $PROXIES; do
    dir=$TMP/$proxy
    json=$OUT_DIR/cache-tests-$STAMP-$proxy.json
    mkdir -p "$dir"
    versions+=("- $proxy: $(version "$proxy")")
    pairs+=("$proxy=$json")
    log "$proxy on 127.0.0.1:${PORT[$proxy]}"
    start "$proxy" "$dir"
    pid=${PIDS[-1]}
    code=000
    if wait_port "${PORT[$proxy]}"; then
        # through to the origin (which has no /: 404) and back
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:${PORT[$proxy]}/" || true)
    fi
    if [[ $code == 000 || $code == 5* ]]; then
        log "$proxy does not work (GET / answered ${code/000/nothing})"
        failed "$json" "it does not work (GET / answered ${code/000/nothing}): $(log_tail "$dir")"
    elif ! timeout 300 node "$ROOT/scripts/cache-tests/run.mjs" "$SUITE" "http://127.0.0.1:${PORT[$proxy]}" \
        >"$json" 2>"$dir/run.stderr"; then
        log "the suite failed against $proxy (see $dir/run.stderr)"
        failed "$json" "the suite's run failed: $(tail -n 3 "$dir/run.stderr" | tr '\n' ' ' | cut -c1-400)"
    elif ! can_connect "${PORT[$proxy]}"; then
        log "$proxy exited during the run"
        failed "$json" "it exited during the run: $(log_tail "$dir")"
    fi
    stop_pid "$pid"
    unset 'PIDS[-1]'
done

{
    echo "# HTTP cache conformance (cache-tests.fyi): ${PROXIES// /, }, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    src=""; [[ -n ${SLUICE_SRC:-} && ${SLUICE_SRC:-} != "$ROOT" ]] && src="SLUICE_SRC=$SLUICE_SRC "
    bin=""; [[ " $PROXIES " == *" sluice "* && -n ${SLUICE_BIN:-} ]] && bin="SLUICE_BIN=$SLUICE_BIN "
    echo "- command: \`${src}${bin}PROXIES=\"$PROXIES\" bench/cache-tests/compare.sh\`"
    echo "- suite: cache-tests.fyi \`http-cache-tests\` $(node -p "require('$SUITE/package.json').version"), run by scripts/cache-tests/run.mjs (Node $(node --version), node-fetch over Node's default keep-alive agent); its origin (scripts/cache-tests/origin.mjs) on 127.0.0.1:$ORIGIN_PORT"
    echo "- each cache: a reverse proxy in front of that origin, configured after the suite's docker/ files (bench/cache-tests/), a fresh cache, one after another"
    echo "- machine: $(nproc) cores, Linux $(uname -r), Debian $(cat /etc/debian_version), load average at start $LOAD_START"
    echo
    echo "## Versions"
    echo
    printf '%s\n' "${versions[@]}"
    echo
    node "$HERE/report.mjs" "$SUITE" "${pairs[@]}"
} >"$REPORT"
cat "$REPORT"
log "report: $REPORT (results: $OUT_DIR/cache-tests-$STAMP-*.json)"
