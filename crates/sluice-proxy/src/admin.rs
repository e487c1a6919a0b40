//! The admin listener: metrics and management, on loopback, behind a bearer token.
//!
//! | endpoint | token | what |
//! |---|---|---|
//! | `GET /healthz` | no | `ok` |
//! | `GET /metrics` | no | Prometheus text exposition |
//! | `GET /stats` | yes | JSON counters and cache gauges |
//! | `GET\|PUT\|DELETE /cache`, `/cache/*`, `POST /fetch`, `/prefetch` | yes | content management (`admin_content`, docs/content.md) |
//! | `POST /cache/sweep` | yes | one expiry sweep now (`sweep`); the report as JSON |
//! | `POST /log/reopen` | yes | reopen the access log file at its path (log rotation); 404 without one, 500 when it cannot be opened |
//! | `GET /config` | yes | the running configuration, every option with its value, as TOML (as `sluice serve --print-config` shows a file; the admin token redacted; the `[[module]]` entries as they run, changes through `/modules/` included) |
//! | `POST /config/reload` | yes | re-read the `--config` file and make it the running configuration (`crate::generation`); the report as JSON; 404 without a file, 400 when it is rejected (nothing changes) |
//! | `GET /modules` | yes | JSON list of the `[[module]]` entries: name, kind, order, state, modules |
//! | `GET /modules/<name>` | yes | one entry, as listed |
//! | `PUT /modules/<name>` | yes | load or reload an entry (body: JSON or TOML entry, or a `.wasm` path as `text/plain`; empty: reload as is); 201 new, 200 reloaded, 400 bad spec |
//! | `DELETE /modules/<name>` | yes | unload an entry; 404 when there is none |
//! | `GET\|POST /modules/<name>/<path>` | yes | the module's own admin endpoint |

use crate::generation::{Generations, ReloadError};
use crate::state::State;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::Arc;

/// Admin state: the proxy's generations (each request is served by the current one) and the
/// token.
#[derive(Debug)]
pub struct Admin {
    pub generations: Arc<Generations>,
    pub token: String,
}

pub(crate) type AdminResponse = Response<Full<Bytes>>;

/// Admin response bodies: small buffers, or streamed content (`admin_content`).
pub type AdminBody = http_body_util::Either<Full<Bytes>, crate::body::ProxyBody>;

fn unauthorized() -> AdminResponse {
    let mut r = text(StatusCode::UNAUTHORIZED, "missing or wrong admin token (Authorization: Bearer <token>)\n");
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

pub(crate) fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> AdminResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> AdminResponse {
    reply(status, "text/plain; charset=utf-8", body.into())
}

/// `405` for an admin endpoint that takes only the methods `allow` lists.
pub(crate) fn not_allowed(allow: &'static str) -> AdminResponse {
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, format!("method not allowed; allowed: {allow}\n"));
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

impl Admin {
    /// Serves one admin request.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<AdminBody>, Infallible> {
        use http_body_util::Either;
        let state = &self.generations.current();
        // The proxy's own clients may reach the admin listener through its forward role (it
        // is on loopback, like the proxy). The proxy does not connect here
        // (`Upstream::is_own_admin`, `Via` or not); a request that this proxy forwarded
        // anyway, as its own `Via` shows (another hop in between), is refused too, the
        // token-free `/metrics` and `/healthz` included.
        if state.config.headers.via && crate::service::via_has(req.headers(), &state.name) {
            return Ok(text(StatusCode::FORBIDDEN, "the admin API does not answer requests forwarded by this proxy\n")
                .map(Either::Left));
        }
        if crate::admin_content::serves(req.uri().path()) {
            if !self.authorized(&req) {
                return Ok(unauthorized().map(Either::Left));
            }
            return Ok(crate::admin_content::handle(state, req).await.map(Either::Right));
        }
        let path = req.uri().path();
        let response = match (req.method(), path) {
            (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
            (&Method::GET, "/metrics") => reply(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                state.metrics.prometheus(&state.store.stats(), state.collapser.in_flight())
                    + &state.metrics.durations.prometheus()
                    + &state.connection_limit.prometheus()
                    + &self.generations.outcomes().prometheus()
                    + &crate::tls::prometheus(state)
                    + &crate::disk_metrics::prometheus(&state.store)
                    + &crate::pool_metrics::prometheus(&state.routes)
                    + &crate::rate_limit::prometheus(&state.rate_limits),
            ),
            _ if !self.authorized(&req) => unauthorized(),
            (&Method::GET, "/stats") => {
                let mut json = state.metrics.json(&state.store.stats(), state.collapser.in_flight());
                json["client"]["connections_limit"] = state.connection_limit.limit().into();
                json["client"]["connection_waits"] = state.connection_limit.waits().into();
                json["config"] = self.generations.outcomes().json();
                if let Some(disk) = crate::disk_metrics::json(&state.store) {
                    json["disk"] = disk;
                }
                if let Some(pools) = crate::pool_metrics::json(&state.routes) {
                    json["pools"] = pools;
                }
                if let Some(limits) = crate::rate_limit::json(&state.rate_limits) {
                    json["rate_limits"] = limits;
                }
                reply(StatusCode::OK, "application/json", json.to_string())
            }
            (&Method::POST, "/cache/sweep") => crate::sweep::admin(state),
            (&Method::POST, "/log/reopen") => reopen_log(state).await,
            (&Method::POST, "/config/reload") => reload(&self.generations).await,
            (&Method::GET, "/config") => running_config(state),
            (_, p) if crate::admin_pools::owns(p) => crate::admin_pools::handle(state, &req),
            (_, p) if crate::admin_modules::owns(p) => crate::admin_modules::handle(state, req).await,
            (_, p) if p.starts_with("/modules/") => self.module(state, req).await,
            (_, "/cache/sweep" | "/log/reopen" | "/config/reload") => not_allowed("POST"),
            (_, "/config") => not_allowed("GET"),
            (_, "/healthz" | "/metrics" | "/stats") => not_allowed("GET"),
            _ => text(StatusCode::NOT_FOUND, format!("no admin endpoint {path}\n")),
        };
        Ok(response.map(Either::Left))
    }

    /// Hands `/modules/<name>/<path>` to the module `name`.
    async fn module(&self, state: &State, req: Request<Incoming>) -> AdminResponse {
        use http_body_util::BodyExt;
        let path = req.uri().path().trim_start_matches("/modules/").to_owned();
        let (name, rest) = path.split_once('/').unwrap_or((path.as_str(), ""));
        let Some(loaded) = state.modules.find(name) else {
            return text(StatusCode::NOT_FOUND, format!("no module {name}\n"));
        };
        let method = req.method().clone();
        let body = match http_body_util::Limited::new(req.into_body(), 1 << 20).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "admin request bodies are limited to 1 MiB\n"),
        };
        let module = Arc::clone(&loaded.module);
        let rest = format!("/{rest}");
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| module.admin(&method, &rest, &body))) {
            Ok(Some(local)) => {
                let mut response = Response::new(Full::new(local.body));
                *response.status_mut() = local.status;
                *response.headers_mut() = local.headers;
                response
            }
            Ok(None) => text(StatusCode::NOT_FOUND, format!("module {name} has no admin endpoint {rest}\n")),
            Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("module {name} panicked\n")),
        }
    }

    /// `Authorization: Bearer <token>`, the scheme in any case (RFC 9110 §11.1: auth
    /// schemes are case-insensitive).
    fn authorized<B>(&self, req: &Request<B>) -> bool {
        let Some(given) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
        let Some((scheme, given)) = given.trim_start().split_once(' ') else { return false };
        if !scheme.eq_ignore_ascii_case("Bearer") {
            return false;
        }
        constant_time_eq(given.trim().as_bytes(), self.token.as_bytes())
    }
}

/// `POST /log/reopen`.
async fn reopen_log(state: &State) -> AdminResponse {
    let Some(log) = &state.access_log else {
        return text(StatusCode::NOT_FOUND, "no access log is configured ([log] access_log)\n");
    };
    match log.reopen().await {
        Ok(()) => text(StatusCode::OK, "access log reopened\n"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot reopen the access log: {e}\n")),
    }
}

/// `GET /config`: what runs now (after reloads, with the settings kept for a restart at
/// their running values, and the module entries as the admin API left them).
fn running_config(state: &State) -> AdminResponse {
    let mut config = state.config.redacted();
    if let Some(manager) = &state.module_manager {
        config.module = manager.entries();
    }
    match toml::to_string_pretty(&config) {
        Ok(text) => reply(StatusCode::OK, "application/toml", text),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the configuration: {e}\n")),
    }
}

/// `POST /config/reload`.
async fn reload(generations: &Generations) -> AdminResponse {
    match generations.reload_file().await {
        Ok(report) => {
            tracing::info!("configuration reloaded from {} (admin API)", report.path.display());
            let json = serde_json::to_string(&report).unwrap_or_default();
            reply(StatusCode::OK, "application/json", json + "\n")
        }
        Err(e @ ReloadError::NoFile) => text(StatusCode::NOT_FOUND, format!("{e}\n")),
        Err(e) => {
            tracing::error!("configuration reload refused (admin API): {e}; nothing changed");
            text(StatusCode::BAD_REQUEST, format!("configuration rejected, nothing changed: {e}\n"))
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A fresh random admin token: 32 hex digits.
pub fn generate_token() -> String {
    format!("{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_handles_escapes_and_stray_percents() {
        assert_eq!(percent_decode("http%3A%2F%2Fa%2Fb%3Fx%3D1"), "http://a/b?x=1");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("a%zzb"), "a%zzb");
    }

    #[test]
    fn token_comparison_needs_equal_lengths() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
