//! Hop-by-hop header fields, RFC 9110 §7.6.1.

use crate::parse::list_members;
use http::header::{
    HeaderMap, HeaderName, CONNECTION, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};

/// The fields that are always hop-by-hop (besides those `Connection` names); `connection`
/// first ([`remove_hop_by_hop`] reads it before removing anything). A `static` of
/// `HeaderName`s built at compile time: removing by one parses no name, as removing by its
/// `&str` would.
pub(crate) static HOP_BY_HOP: [HeaderName; 9] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
];

/// The field names listed in `Connection` (all lines); members that are not valid field
/// names (they cannot name a field present in the message) are skipped.
pub(crate) fn connection_listed(headers: &HeaderMap) -> Vec<HeaderName> {
    list_members(headers, &CONNECTION).into_iter().filter_map(|m| HeaderName::from_bytes(m).ok()).collect()
}

/// True when `name` is one of the fields that are always hop-by-hop (whatever `Connection`
/// lists).
pub fn is_always_hop_by_hop(name: &HeaderName) -> bool {
    hop_by_hop_index(name.as_str()).is_some()
}

/// True when `name` is hop-by-hop in a message whose `Connection` lists `connection_listed`.
pub(crate) fn is_hop_by_hop(name: &HeaderName, connection_listed: &[HeaderName]) -> bool {
    HOP_BY_HOP.contains(name) || connection_listed.contains(name)
}

/// Removes the hop-by-hop fields (`Connection` and every field it names, `Keep-Alive`,
/// `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
/// `Proxy-Authenticate`, `Proxy-Authorization`) from a message being forwarded.
///
/// Runs on every forwarded message, so it makes one pass over the names (no hashing, no
/// allocation) and then removes only the fields present: the common cases (none at all, or
/// just `Connection: keep-alive`) cost no lookups of absent names.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let mut present = [false; HOP_BY_HOP.len()];
    let mut any = false;
    for name in headers.keys() {
        if let Some(i) = hop_by_hop_index(name.as_str()) {
            present[i] = true;
            any = true;
        }
    }
    if !any {
        return;
    }
    // Read Connection before removing it (HOP_BY_HOP[0]). The usual `Connection: keep-alive`
    // or `close` names only fields removed below anyway: no list to build then.
    if present[0] && !connection_lists_only_fixed_names(headers) {
        for name in connection_listed(headers) {
            headers.remove(&name);
        }
    }
    for (name, present) in HOP_BY_HOP.iter().zip(present) {
        if present {
            headers.remove(name);
        }
    }
}

/// The index of `name` (lower case) in [`HOP_BY_HOP`]; a `match`, which compiles to a
/// switch on the length and inline compares, so a name of another length costs no compare.
fn hop_by_hop_index(name: &str) -> Option<usize> {
    Some(match name {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-connection" => 2,
        "te" => 3,
        "trailer" => 4,
        "transfer-encoding" => 5,
        "upgrade" => 6,
        "proxy-authenticate" => 7,
        "proxy-authorization" => 8,
        _ => return None,
    })
}

/// True when every member of every `Connection` line is one of [`HOP_BY_HOP`] (ASCII
/// case-insensitively), or `close` with no field of that name present, so removing the fixed
/// fields also removes every field `Connection` names. Splits on commas without building a
/// list; a member holding anything else (a quote included) answers false, leaving the exact
/// parse to [`connection_listed`].
fn connection_lists_only_fixed_names(headers: &HeaderMap) -> bool {
    headers.get_all(CONNECTION).iter().all(|value| {
        value.as_bytes().split(|&b| b == b',').map(trim_ows).all(|member| {
            member.is_empty()
                || (member.eq_ignore_ascii_case(b"close") && !headers.contains_key("close"))
                || HOP_BY_HOP.iter().any(|hop| member.eq_ignore_ascii_case(hop.as_str().as_bytes()))
        })
    })
}

/// `bytes` without leading and trailing spaces and tabs (OWS).
fn trim_ows(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Whether `TE` says its sender accepts trailer fields (the `trailers` member, RFC 9110
/// §10.1.4), which a proxy may pass on for its client to a next hop that can send them.
pub fn te_accepts_trailers(headers: &HeaderMap) -> bool {
    headers.contains_key(TE) && list_members(headers, &TE).iter().any(|member| member.eq_ignore_ascii_case(b"trailers"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, TE};

    #[test]
    fn hop_by_hop_index_finds_every_fixed_name_and_nothing_else() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name.as_str()), Some(i), "{name}");
        }
        for name in ["host", "date", "user-agent", "connectio", "tf", "trailers", "content-length", "x"] {
            assert_eq!(hop_by_hop_index(name), None, "{name}");
        }
    }

    #[test]
    fn rfc9110_7_6_1_removes_fixed_hop_by_hop_fields() {
        let mut h = HeaderMap::new();
        for name in &HOP_BY_HOP {
            h.append(name, HeaderValue::from_static("x"));
        }
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(CONTENT_TYPE));
    }

    #[test]
    fn rfc9110_7_6_1_removes_fields_named_by_connection_on_all_lines() {
        let mut h = HeaderMap::new();
        h.append(CONNECTION, HeaderValue::from_static("close, X-Foo"));
        h.append(CONNECTION, HeaderValue::from_static(" x-bar ,, bad name"));
        h.append("x-foo", HeaderValue::from_static("1"));
        h.append("x-foo", HeaderValue::from_static("2"));
        h.insert("x-bar", HeaderValue::from_static("3"));
        h.insert("x-keep", HeaderValue::from_static("4"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        remove_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left.len(), 2);
        assert!(h.contains_key("x-keep") && h.contains_key(CACHE_CONTROL));
    }

    #[test]
    fn rfc9110_7_6_1_is_hop_by_hop_includes_connection_listed() {
        let listed = vec![HeaderName::from_static("x-foo")];
        assert!(is_hop_by_hop(&TE, &listed));
        assert!(is_hop_by_hop(&HeaderName::from_static("x-foo"), &listed));
        assert!(!is_hop_by_hop(&CACHE_CONTROL, &listed));
    }

    #[test]
    fn rfc9110_7_6_1_connection_naming_only_fixed_fields_or_close() {
        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("Keep-Alive,\tTE"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(TE, HeaderValue::from_static("trailers"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), [CACHE_CONTROL]);

        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("close"));
        h.insert("close", HeaderValue::from_static("a field named close"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), [CACHE_CONTROL], "Connection names the field `close` too");

        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, \"x-quoted\""));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), [CACHE_CONTROL]);
    }

    #[test]
    fn rfc9110_10_1_4_te_trailers_is_a_member_of_its_own() {
        let te = |values: &[&'static str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(TE, HeaderValue::from_static(v));
            }
            te_accepts_trailers(&h)
        };
        assert!(te(&["trailers"]));
        assert!(te(&["gzip;q=0.5, Trailers"]));
        assert!(te(&["gzip", "deflate, trailers"]), "on a later line");
        assert!(!te(&[]));
        assert!(!te(&["gzip"]));
        assert!(!te(&["trailers-please"]));
    }
}
