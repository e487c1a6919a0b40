# Shared by run.sh and callgrind.sh (sourced): the temporary directory, process cleanup, the
# origin, and the [[module]] entry of each configuration.
#
# After sourcing: $work (removed at exit), pids (killed at exit); start_origin PORT serves a
# 1 KiB object at http://127.0.0.1:PORT/1k, fresh for a day; module_entry NAME PLUGIN_DIR
# prints NAME's [[module]] entry (nothing for `none`).
#
# ORIGIN=python (the default) is Python's http.server: a short response head (five fields:
# Server, Date, Content-type, Content-Length, Last-Modified; heuristically fresh, modified ten
# days ago). ORIGIN=nginx is an nginx with `expires 1d`: the head of a typical static server
# (nine fields once Connection is dropped: ETag, Accept-Ranges, Expires and Cache-Control
# besides). The length of the stored head changes what a module's added fields cost: see
# docs/benchmarks-history.md, "Re-measured at 364f9d3".

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

start_origin() {
  mkdir -p "$work/www"
  head -c 1024 /dev/zero | tr '\0' 'x' > "$work/www/1k"
  touch -d "10 days ago" "$work/www/1k"
  case ${ORIGIN:-python} in
    python) python3 -m http.server "$1" --bind 127.0.0.1 -d "$work/www" >/dev/null 2>&1 & ;;
    nginx)
      command -v nginx >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; }
      # `user root`: the workers must read $work, which mktemp makes private to this user.
      printf 'daemon off;\nuser root;\nworker_processes 1;\npid %s/origin.pid;\nerror_log %s/origin.err;\nevents {}\nhttp {\n  access_log off;\n  server {\n    listen 127.0.0.1:%s;\n    root %s/www;\n    location / { expires 1d; }\n  }\n}\n' \
        "$work" "$work" "$1" "$work" > "$work/origin.conf"
      nginx -p "$work" -c "$work/origin.conf" -e "$work/origin.err" & ;;
    *) echo "ORIGIN must be python or nginx" >&2; exit 2 ;;
  esac
  pids+=($!)
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$1/1k" && break; sleep 0.1; done
}

# Configurations: none; a built-in module name (noop, add-headers, body-copy); spin-N (the
# built-in `spin` doing N loop turns of pure CPU work per transaction); wasm-empty,
# wasm-empty-lean (the request and response heads not kept for later callbacks),
# wasm-empty-abi (empty callbacks written against the ABI, without the SDK's dispatcher),
# wasm-add-headers, wasm-body-copy (the test plugins of crates/sluice-wasm/plugins).
module_entry() {
  case $1 in
    none | none-*) ;;
    wasm-empty) printf '[[module]]\nname = "%s"\nkind = "wasm"\nsettings = { path = "%s" }\n' "$1" "$2/empty.wasm" ;;
    wasm-empty-lean)
      printf '[[module]]\nname = "%s"\nkind = "wasm"\nsettings = { path = "%s", request_headers_in_response = false, response_headers_in_body = false }\n' \
        "$1" "$2/empty.wasm" ;;
    wasm-empty-abi) printf '[[module]]\nname = "%s"\nkind = "wasm"\nsettings = { path = "%s" }\n' "$1" "$2/empty_abi.wasm" ;;
    wasm-add-headers) printf '[[module]]\nname = "%s"\nkind = "wasm"\nsettings = { path = "%s" }\n' "$1" "$2/add_headers.wasm" ;;
    wasm-body-copy)
      printf '[[module]]\nname = "%s"\nkind = "wasm"\nsettings = { path = "%s", plugin_config = "copy", edits_response_body = true }\n' \
        "$1" "$2/body_transform.wasm" ;;
    spin-*) printf '[[module]]\nname = "spin"\nsettings = { iterations = %s }\n' "${1#spin-}" ;;
    *) printf '[[module]]\nname = "%s"\n' "$1" ;;
  esac
}

# build_plugins: the Proxy-Wasm test plugins' directory, built when needed.
source "$(dirname "${BASH_SOURCE[0]}")/../plugins.sh"
