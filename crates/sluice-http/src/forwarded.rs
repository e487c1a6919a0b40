//! RFC 7239 `Forwarded`: reading the `for` node of each element, and writing an element.
//!
//! ```text
//! Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"
//! ```
//!
//! A field value is a comma-separated list of elements, one per proxy, oldest first; an
//! element is `;`-separated `name=value` pairs, each value a token or a quoted string
//! (§4). Commas and semicolons inside quoted strings do not separate anything.

use std::net::{IpAddr, Ipv6Addr};

/// The `for` node of each element of `values` (the header's field lines, in order), oldest
/// first: `Some(address)` for an IP address (with or without a port; IPv4-mapped IPv6
/// addresses as IPv4), `None` for an element whose `for` is `unknown`, an obfuscated
/// identifier (`_hidden`), malformed, or missing.
pub fn for_nodes<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Option<IpAddr>> {
    values.into_iter().flat_map(|value| split_outside_quotes(value, b',')).map(element_for).collect()
}

/// One element naming a client at `client` (`None`: `unknown`) that asked for `host` over
/// `proto` (`http` or `https`): `for=192.0.2.60;host=example.com;proto=https`, quoting what
/// needs it (IPv6 addresses, hosts with a port).
pub fn element(client: Option<IpAddr>, host: Option<&str>, proto: &str) -> String {
    let mut out = match client.map(|ip| ip.to_canonical()) {
        None => "for=unknown".to_owned(),
        Some(IpAddr::V4(v4)) => format!("for={v4}"),
        Some(IpAddr::V6(v6)) => format!("for=\"[{v6}]\""),
    };
    if let Some(host) = host {
        out.push_str(";host=");
        push_value(&mut out, host);
    }
    out.push_str(";proto=");
    push_value(&mut out, proto);
    out
}

fn element_for(element: &str) -> Option<IpAddr> {
    let value = split_outside_quotes(element, b';').into_iter().find_map(|pair| {
        let (name, value) = split_at_first(pair, b'=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value.trim())
    })?;
    node_address(&unquote(value))
}

/// The address of a node (`192.0.2.60`, `192.0.2.60:4711`, `[2001:db8::1]`,
/// `[2001:db8::1]:4711`); `None` for `unknown`, obfuscated names and anything else.
fn node_address(node: &str) -> Option<IpAddr> {
    let ip = if let Some(rest) = node.strip_prefix('[') {
        let (v6, after) = split_at_first(rest, b']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(valid_port)) {
            return None;
        }
        IpAddr::V6(v6.parse::<Ipv6Addr>().ok()?)
    } else {
        let (name, port) = split_at_first(node, b':').map_or((node, None), |(n, p)| (n, Some(p)));
        if port.is_some_and(|p| !valid_port(p)) {
            return None;
        }
        IpAddr::V4(name.parse().ok()?)
    };
    Some(ip.to_canonical())
}

/// A node port: digits, or an obfuscated port (`_` then letters, digits, `.`, `_`, `-`).
fn valid_port(port: &str) -> bool {
    (!port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()))
        || port.strip_prefix('_').is_some_and(|rest| {
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

/// The parts of `text` between `separator`s that are not inside a quoted string, trimmed,
/// empty ones left out.
fn split_outside_quotes(text: &str, separator: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, b) in text.bytes().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if b == separator && !quoted => {
                parts.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|part| !part.is_empty());
    parts
}

/// `text` split at the first `byte` (ASCII), which neither part keeps. (Not `split_once`
/// with a `char`: its searcher, shared with the request path's own uses, is then no longer
/// inlined there.)
fn split_at_first(text: &str, byte: u8) -> Option<(&str, &str)> {
    let at = text.bytes().position(|b| b == byte)?;
    Some((&text[..at], &text[at + 1..]))
}

/// A token as it is, a quoted string without its quotes and escapes.
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else { return value.to_owned() };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' { chars.next().unwrap_or('\\') } else { c });
    }
    out
}

/// `value` as a token when it is one, else as a quoted string.
fn push_value(out: &mut String, value: &str) {
    let token = !value.is_empty() && value.bytes().all(is_tchar);
    if token {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(lines: &[&str]) -> Vec<Option<String>> {
        for_nodes(lines.iter().copied()).into_iter().map(|n| n.map(|ip| ip.to_string())).collect()
    }

    #[test]
    fn the_for_node_of_each_element_in_order_rfc7239_section_4() {
        assert_eq!(
            nodes(&["for=192.0.2.60;proto=http;by=203.0.113.43, for=\"[2001:db8:cafe::17]:4711\""]),
            vec![Some("192.0.2.60".into()), Some("2001:db8:cafe::17".into())]
        );
        assert_eq!(
            nodes(&["For=\"192.0.2.43:47011\"", "proto=https;FOR=198.51.100.17"]),
            vec![Some("192.0.2.43".into()), Some("198.51.100.17".into())],
            "names without case, lines joined, ports dropped"
        );
        assert_eq!(nodes(&["for=\"[::ffff:192.0.2.9]\""]), vec![Some("192.0.2.9".into())]);
    }

    #[test]
    fn unknown_obfuscated_missing_and_malformed_nodes_name_nobody() {
        assert_eq!(
            nodes(&["for=unknown, for=_hidden, proto=http, for=2001:db8::1, for=192.0.2.1:x"]),
            vec![None, None, None, None, None],
            "an IPv6 address must be bracketed and quoted; a port is digits or obfuscated"
        );
        assert_eq!(nodes(&["for=\"192.0.2.1:_p1\""]), vec![Some("192.0.2.1".into())]);
    }

    #[test]
    fn separators_inside_quoted_strings_separate_nothing() {
        assert_eq!(
            nodes(&["host=\"a,b;c\";for=192.0.2.5, for=192.0.2.6;ext=\"x\\\"y,z\""]),
            vec![Some("192.0.2.5".into()), Some("192.0.2.6".into())]
        );
        assert!(nodes(&["", " , "]).is_empty());
    }

    #[test]
    fn an_element_quotes_what_is_not_a_token() {
        let v4: IpAddr = "192.0.2.60".parse().unwrap();
        let v6: IpAddr = "2001:db8:cafe::17".parse().unwrap();
        assert_eq!(element(Some(v4), Some("example.com"), "https"), "for=192.0.2.60;host=example.com;proto=https");
        assert_eq!(
            element(Some(v6), Some("example.com:8080"), "http"),
            "for=\"[2001:db8:cafe::17]\";host=\"example.com:8080\";proto=http"
        );
        assert_eq!(element(Some(v4), None, "http"), "for=192.0.2.60;proto=http");
        assert_eq!(element(None, Some("h"), "http"), "for=unknown;host=h;proto=http");
        // What is written reads back.
        let written = element(Some(v6), Some("a\"b"), "http");
        assert_eq!(for_nodes([written.as_str()]), vec![Some(v6)]);
    }
}
