//! Request targets as a proxy must read them before routing, keying or forwarding:
//! the path normalised to the form every equivalent spelling shares (RFC 3986 §6.2.2), and
//! the `Host` field's syntax (RFC 9110 §7.2).
//!
//! Without normalisation `/a/../private/x`, `/./private/x` and `/%70rivate/x` would each
//! escape a route, rate limit or cache entry for `/private/`, and reach the origin as
//! `/private/x` all the same.

/// The normalised form of a request's path and query (`/a/./b/../c?q`), or `None` when it
/// is already normal (the common case, decided by a scan for `%` and `/.`):
/// percent-encoded unreserved characters decoded and other percent-encodings' hex digits
/// upper-cased (§6.2.2.1, §6.2.2.2), then `.` and `..` segments removed (§6.2.2.3, §5.2.4).
/// The query is left as it is; so are encoded slashes (`%2F`) and invalid `%` sequences.
/// Targets that are not a path (`*`, authority-form) are `None`.
pub fn normalize_path(path_and_query: &str) -> Option<String> {
    let bytes = path_and_query.as_bytes();
    if bytes.first() == Some(&b'?') {
        // `http://host?q` has an empty path, which is `/` (RFC 9112 §3.2.1, RFC 3986 §6.2.3);
        // sent on as it is, `GET ?q` is no request line at all.
        return Some(format!("/{path_and_query}"));
    }
    if bytes.first() != Some(&b'/') {
        return None;
    }
    // This runs on every request, and most paths hold neither a `%` nor a segment that starts
    // with `.`: byte searches (memchr) first, the pairs only when there is a dot at all.
    let end = path_and_query.find('?').unwrap_or(bytes.len());
    let path = &bytes[..end];
    let suspect = path.contains(&b'%') || (path.contains(&b'.') && path.windows(2).any(|pair| pair == b"/."));
    if !suspect {
        return None;
    }
    let (path, query) = path_and_query.split_at(end);
    let decoded = if path.contains('%') { crate::key::normalise_percent(path) } else { path.to_owned() };
    let has_dot_segment = decoded.split('/').any(|s| s == "." || s == "..");
    let normal = if has_dot_segment { crate::uri_ref::remove_dot_segments(&decoded) } else { decoded };
    (normal != path).then(|| normal + query)
}

/// True when `value` is a valid `Host` field value (RFC 9110 §7.2): `uri-host [ ":" port ]`,
/// the host a registered name (unreserved characters, percent-encodings, sub-delims), an
/// IPv4 address (a registered name's syntax) or a bracketed IP literal, the port digits
/// naming a port from 1 to 65535 (or none: `host:` is the default port, RFC 3986 §3.2.3).
/// A port out of range is refused, not read as the default one (`:99999` would otherwise
/// reach port 80), and so is port 0, which no origin listens on.
/// Empty is valid (a target without an authority). No userinfo (`@`), no spaces.
pub fn is_valid_host(value: &[u8]) -> bool {
    if value.first() == Some(&b'[') {
        let Some(end) = value.iter().position(|&b| b == b']') else { return false };
        let literal = &value[1..end];
        let literal_ok = !literal.is_empty()
            && literal.iter().all(|&b| b.is_ascii_hexdigit() || b":.".contains(&b) || is_unreserved(b));
        return literal_ok && is_port(&value[end + 1..]);
    }
    // One pass (this runs on every request's `Host`): registered-name bytes up to the first
    // other one, which may only be the `:` of a port.
    match value.iter().position(|&byte| !REG_NAME[usize::from(byte)]) {
        None => true,
        Some(end) => is_port(&value[end..]),
    }
}

/// Nothing, `:` alone, or `:` and the digits of a port from 1 to 65535 (leading zeros
/// allowed, as `u16` parsing reads them).
fn is_port(port: &[u8]) -> bool {
    match port.split_first() {
        None | Some((b':', [])) => true,
        Some((b':', digits)) => {
            digits.iter().all(u8::is_ascii_digit)
                && std::str::from_utf8(digits).ok().and_then(|d| d.parse::<u16>().ok()).is_some_and(|p| p != 0)
        }
        Some(_) => false,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// The bytes of a registered name (RFC 3986 §3.2.2): unreserved characters, `%` of
/// percent-encodings and sub-delims, as a table (this runs on every request's `Host`).
const REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'-' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')')
            || matches!(c, b'*' | b'+' | b',' | b';' | b'=');
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3986_6_2_2_equivalent_paths_share_one_form() {
        let normal = |pq: &str| normalize_path(pq);
        assert_eq!(normal("/a/b?x=../y"), None, "the query is not a path");
        assert_eq!(normal("/file.txt"), None, "a dot in a name is no segment");
        assert_eq!(normal("/pub/../private/x"), Some("/private/x".into()));
        assert_eq!(normal("/./api/v1?q=1"), Some("/api/v1?q=1".into()));
        assert_eq!(normal("/x/../api/"), Some("/api/".into()));
        assert_eq!(normal("/a/.."), Some("/".into()));
        assert_eq!(normal("/../../etc/passwd"), Some("/etc/passwd".into()), "never above the root");
        assert_eq!(normal("/%61pi/x"), Some("/api/x".into()), "unreserved characters decoded");
        assert_eq!(normal("/pub/%2e%2e/private/x"), Some("/private/x".into()), "then dot segments removed");
        assert_eq!(normal("/a%2fb/%2E%2E/c"), Some("/c".into()), "an encoded slash stays, upper-cased");
        assert_eq!(normal("/a%2Fb"), None);
        assert_eq!(normal("/a%2fb"), Some("/a%2Fb".into()));
        assert_eq!(normal("/100%"), None, "an invalid escape is left");
        assert_eq!(normal("/%zz/./x"), Some("/%zz/x".into()));
        assert_eq!(normal("/caf%C3%A9"), None, "non-ASCII stays encoded");
        assert_eq!(normal("*"), None);
        assert_eq!(normal("?q=1"), Some("/?q=1".into()), "an empty path is /");
    }

    #[test]
    fn rfc9110_7_2_host_syntax() {
        for good in [
            "example.com",
            "example.com:8080",
            "EXAMPLE.com.",
            "[::1]",
            "[::1]:80",
            "192.0.2.1:",
            "",
            "a-b_c~d",
            "h:65535",
            "h:1",
            "h:0080",
        ] {
            assert!(is_valid_host(good.as_bytes()), "{good}");
        }
        for bad in
            ["a.test:@evil.test", "u@h", "h:abc", "h:-1", "h:+80", "a b", "h/x", "[::1", "[::1]x", "h:80:80", "[]"]
        {
            assert!(!is_valid_host(bad.as_bytes()), "{bad}");
        }
        // Ports out of range would otherwise become the default port (`Uri::port_u16` is
        // `None`), port 0 reaches no origin.
        for bad in ["h:99999", "h:65536", "h:0", "h:00", "[::1]:99999", "[::1]:0", "h:184467440737095516160"] {
            assert!(!is_valid_host(bad.as_bytes()), "{bad}");
        }
    }
}
