# Debian's /etc/varnish/default.vcl with the backend pointed at the suite's origin, as the
# suite's docker/setup.sh does (upstream changes only the port). compare.sh replaces @ORIGIN@.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "@ORIGIN@";
}

sub vcl_recv {
}

sub vcl_backend_response {
}

sub vcl_deliver {
}
