//! Admin API helpers shared by the integration tests: requests with the harness's token,
//! JSON bodies, URL parameters, and whether the cache holds a URL.

use super::Harness;
use sluice_testkit::client::{self, Reply};

/// The `Authorization` field carrying the harness's admin token.
pub const AUTH: (&str, &str) = ("Authorization", "Bearer test-token");

/// An admin request with the token (and `extra` header fields).
pub async fn admin(h: &Harness, method: &str, path: &str, extra: &[(&str, &str)], body: Option<&str>) -> Reply {
    let mut headers = vec![AUTH];
    headers.extend_from_slice(extra);
    client::send(h.admin(), method, path, &headers, body).await
}

/// The reply's body as JSON; panics with the body when it is not.
pub fn json(reply: &Reply) -> serde_json::Value {
    serde_json::from_slice(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", reply.text()))
}

/// `url` percent-encoded for a query parameter.
pub fn enc(url: &str) -> String {
    url.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// True when something is stored for `path` on the origin (admin `GET /cache?url=`).
pub async fn stored(h: &Harness, path: &str) -> bool {
    let url = enc(&h.origin.url(path));
    admin(h, "GET", &format!("/cache?url={url}"), &[], None).await.status == 200
}
