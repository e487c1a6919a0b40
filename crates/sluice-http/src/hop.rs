//! Hop-by-hop header fields, RFC 9110 §7.6.1.

use http::header::HeaderMap;

/// Removes the hop-by-hop fields (`Connection` and every field it names, `Keep-Alive`,
/// `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
/// `Proxy-Authenticate`, `Proxy-Authorization`) from a message being forwarded.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let _ = headers;
    todo!()
}
