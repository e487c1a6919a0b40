# The benchmark's content and configurations, shared by run.sh (timing) and callgrind.sh
# (instruction counts) so both measure the same setup (sourced, not run).
#
#   write_content DIR             DIR/www/c/<size> (cacheable), DIR/www/p/<size> (no-store) and
#                                 DIR/www/v/<size> (no-cache: revalidated on every request)
#                                 for the sizes of SIZE, random bytes
#   scenario_path SCENARIO        hit-1k -> /c/1k, pass-256k -> /p/256k
#   origin_conf DIR PORT          nginx origin serving DIR/www on 127.0.0.1:PORT (stdout), and
#                                 over HTTP/2 with prior knowledge on PORT+1
#   ORIGIN_HTTP2=1                (environment) sluice_toml's route goes to PORT+1 with
#                                 `http2 = true`: HTTP/2 to the origin
#   CLIENT=http|https|h2|h2c      (environment) what the proxies' listeners speak to clients:
#                                 HTTP/1.1 (default), HTTP/1.1 over TLS, HTTP/2 over TLS (ALPN),
#                                 HTTP/2 with prior knowledge; https and h2 need TLS_CERT and
#                                 TLS_KEY (environment: PEM files)
#   tls_cert DIR                  a self-signed P-256 certificate for 127.0.0.1 and its key
#                                 in DIR; sets and exports TLS_CERT and TLS_KEY
#   nginx_conf DIR NAME PORT ORIGIN_PORT WORKERS [MASTER] [EXTRA]
#                                 nginx proxy_cache config (stdout); MASTER on|off (default on,
#                                 off: the single process serves, for valgrind); EXTRA: more
#                                 http-level directives
#   sluice_toml PORT ORIGIN_PORT CACHE [ADMIN_PORT]
#                                 Sluice reverse-proxy config (stdout); CACHE is the [cache]
#                                 section; no ADMIN_PORT: admin listener disabled

declare -A SIZE=([1k]=1024 [16k]=16384 [256k]=262144 [4m]=4194304)

write_content() {
    local s
    mkdir -p "$1/www/c" "$1/www/p" "$1/www/v"
    for s in "${!SIZE[@]}"; do
        head -c "${SIZE[$s]}" /dev/urandom >"$1/www/c/$s"
        cp "$1/www/c/$s" "$1/www/p/$s"
        cp "$1/www/c/$s" "$1/www/v/$s"
    done
}

scenario_path() {
    case $1 in hit-*) echo "/c/${1#hit-}" ;; pass-*) echo "/p/${1#pass-}" ;; esac
}

origin_conf() {
    cat <<EOF
daemon off;
master_process on;
worker_processes 1;
user root;
pid $1/origin.pid;
error_log $1/origin.error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$2;
        listen 127.0.0.1:$(($2 + 1)) http2;
        root $1/www;
        location /c/ { add_header Cache-Control "max-age=3600"; }
        location /p/ { add_header Cache-Control "no-store"; }
        location /v/ { add_header Cache-Control "no-cache"; }
        location = /status { stub_status; }
    }
}
EOF
}

nginx_conf() {
    local dir=$1 name=$2 port=$3 origin=$4 workers=$5 master=${6:-on} extra=${7:-}
    cat <<EOF
daemon off;
master_process $master;
worker_processes $workers;
user root;
pid $dir/$name.pid;
error_log $dir/$name.error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    $extra
    proxy_cache_path $dir/$name-cache levels=1:2 keys_zone=bench:16m max_size=2g inactive=1h use_temp_path=off;
    upstream origin {
        server 127.0.0.1:$origin;
        keepalive 64;
    }
    server {
$(nginx_listen "$port")
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 1h;
            add_header X-Cache \$upstream_cache_status;
        }
    }
}
EOF
}

sluice_toml() {
    local admin
    if [[ -n ${4:-} ]]; then
        admin=$(printf 'addr = "127.0.0.1:%s"\ntoken = "bench"' "$4")
    else
        admin="enabled = false"
    fi
    cat <<EOF
[[listener]]
addr = "127.0.0.1:$1"
mode = "reverse"
$(sluice_listen)

[[route]]
$(if [[ -n ${ORIGIN_HTTP2:-} ]]; then printf 'origin = "http://127.0.0.1:%s"\nhttp2 = true' $(($2 + 1)); else printf 'origin = "http://127.0.0.1:%s"' "$2"; fi)

$3

[admin]
$admin

[log]
# no access_log: off, like nginx's
EOF
}

tls_cert() {
    TLS_CERT=$1/proxy.crt TLS_KEY=$1/proxy.key
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=bench.test \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$TLS_KEY" -out "$TLS_CERT" 2>/dev/null
    export TLS_CERT TLS_KEY
}

# The proxy listener's lines for CLIENT (see the top of this file).
nginx_listen() { # port
    case ${CLIENT:-http} in
        http) printf '        listen 127.0.0.1:%s;\n' "$1" ;;
        h2c) printf '        listen 127.0.0.1:%s http2;\n' "$1" ;;
        https | h2)
            printf '        listen 127.0.0.1:%s ssl%s;\n' "$1" "$([[ $CLIENT == h2 ]] && echo ' http2')"
            printf '        ssl_certificate %s;\n        ssl_certificate_key %s;\n' "$TLS_CERT" "$TLS_KEY" ;;
    esac
}
sluice_listen() {
    case ${CLIENT:-http} in
        http) echo 'h2c = false' ;;
        h2c) echo 'h2c = true' ;;
        https | h2) printf 'h2c = false\ntls = { cert = "%s", key = "%s" }\n' "$TLS_CERT" "$TLS_KEY" ;;
    esac
}
