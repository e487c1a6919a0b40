# Shared by the bench scripts (sourced, not run): the processes a benchmark starts and how
# they are stopped, and waiting for a port. The sourcing script defines log() and sets TMP
# to its temporary directory once it has made one.
#
#   PIDS+=("$!")        after starting a process: stopped (TERM, then KILL) on exit
#   wait_port PORT      until something accepts on 127.0.0.1:PORT (10 s at most)
#   sluice_binary       sets SLUICE_BIN (built from SLUICE_SRC unless given) and SLUICE_DESC
#   install_missing PKG...   apt-get installs these Debian packages (none: nothing); dies
#                       instead when NO_INSTALL=1 (uses the sourcing script's die())
#   KEEP_TMP=1          keep $TMP instead of removing it on exit

PIDS=() # every process this script started, stopped by PID on exit
TMP=""
stop_pid() {
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    if [[ -n $TMP && -d $TMP ]]; then
        if [[ ${KEEP_TMP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

can_connect() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # port
    local i
    for i in $(seq 100); do can_connect "$1" && return 0; sleep 0.1; done
    return 1
}

# The binary to bench: SLUICE_BIN when given, else a release build of SLUICE_SRC (default: this
# repository, $ROOT) into its own target/. Sets SLUICE_BIN and SLUICE_DESC (what was benched,
# for the report). Uses the sourcing script's die().
sluice_binary() {
    local rev
    SLUICE_SRC=${SLUICE_SRC:-$ROOT}
    if [[ -z ${SLUICE_BIN:-} ]]; then
        log "building sluice in $SLUICE_SRC (cargo build --release -p sluice)"
        (cd "$SLUICE_SRC" && CARGO_TARGET_DIR="$SLUICE_SRC/target" cargo build --release -p sluice --quiet) ||
            die "cargo build --release -p sluice failed in $SLUICE_SRC (SLUICE_SRC=<a clean checkout> or SLUICE_BIN=<binary> to bench another build)"
        SLUICE_BIN=$SLUICE_SRC/target/release/sluice
        rev=$(git -C "$SLUICE_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
        git -C "$SLUICE_SRC" diff --quiet HEAD -- crates 2>/dev/null || rev="$rev with uncommitted changes under crates/"
        SLUICE_DESC="sluice $rev (built from $SLUICE_SRC)"
    else
        rev=$(git -C "$(dirname "$SLUICE_BIN")" rev-parse --short HEAD 2>/dev/null || true)
        SLUICE_DESC="sluice prebuilt $SLUICE_BIN${rev:+ (tree at $rev)}"
    fi
    [[ -x $SLUICE_BIN ]] || die "no sluice binary at $SLUICE_BIN"
}

install_missing() {
    (($#)) || return 0
    [[ ${NO_INSTALL:-0} == 1 ]] && die "missing: $*"
    log "installing $*"
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
