//! Primary cache keys.

use http::Uri;

/// The primary cache key of an absolute request URI: `scheme://host[:port]/path?query` with
/// scheme and host lowercased, the scheme's default port removed, an empty path written `/`,
/// and no fragment. `None` when `uri` has no scheme or authority.
///
/// Following RFC 9110 §4.2.3 (equivalent URIs), userinfo is dropped, an empty port counts as
/// the default one, and percent-encodings in path and query are normalised: hex digits
/// uppercased, and octets of unreserved characters decoded (RFC 3986 §6.2.2.2).
///
/// Computed on every cacheable request, so it builds one pre-sized string and copies path and
/// query unchanged when they hold no percent-encoding.
pub fn primary_key(uri: &Uri) -> Option<String> {
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?.as_str();
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = split_host_port(host_port);
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        Some("80")
    } else if scheme.eq_ignore_ascii_case("https") {
        Some("443")
    } else {
        None
    };
    let path = match uri.path() {
        "" => "/",
        path => path,
    };
    let query = uri.query();
    let mut key =
        String::with_capacity(scheme.len() + 3 + host_port.len() + path.len() + query.map_or(0, |q| q.len() + 1));
    // Copied whole, then lowercased in place (not char by char).
    key.push_str(scheme);
    key.make_ascii_lowercase();
    key.push_str("://");
    let host_start = key.len();
    key.push_str(host);
    key[host_start..].make_ascii_lowercase();
    if let Some(port) = port.filter(|p| !p.is_empty() && Some(*p) != default_port) {
        key.push(':');
        key.push_str(port);
    }
    push_normalised(&mut key, path);
    if let Some(query) = query {
        key.push('?');
        push_normalised(&mut key, query);
    }
    Some(key)
}

fn push_normalised(out: &mut String, s: &str) {
    if s.contains('%') {
        out.push_str(&normalise_percent(s));
    } else {
        out.push_str(s);
    }
}

/// The origin (scheme, host, port) of an absolute URI, normalised for comparison
/// (RFC 9110 §4.3.1): lowercase scheme and host, no default or empty port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    /// `None` for the scheme's default port.
    port: Option<String>,
}

impl Origin {
    pub(crate) fn of(uri: &Uri) -> Option<Origin> {
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?.as_str();
        // Userinfo ends at the last '@' (RFC 3986 §3.2.1); a host cannot contain one.
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = split_host_port(host_port);
        let default_port = match scheme.as_str() {
            "http" => Some("80"),
            "https" => Some("443"),
            _ => None,
        };
        let port = port.filter(|p| !p.is_empty() && Some(*p) != default_port).map(str::to_string);
        Some(Origin { scheme, host: host.to_ascii_lowercase(), port })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match &self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Splits `host[:port]`, keeping an IPv6 literal's brackets in the host.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
    let host_end =
        if s.starts_with('[') { s.find(']').map_or(s.len(), |i| i + 1) } else { s.find(':').unwrap_or(s.len()) };
    let (host, rest) = s.split_at(host_end);
    (host, rest.strip_prefix(':'))
}

/// Uppercases the hex digits of percent-encodings and decodes those of unreserved
/// characters (`ALPHA / DIGIT / "-" / "." / "_" / "~"`), which are equivalent either way.
pub(crate) fn normalise_percent(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match decoded {
            Some(c) if c.is_ascii_alphanumeric() || b"-._~".contains(&c) => out.push(c),
            Some(c) => out.extend_from_slice(format!("%{c:02X}").as_bytes()),
            None => {
                out.push(bytes[i]);
                i += 1;
                continue;
            }
        }
        i += 3;
    }
    // Only ASCII was rewritten, so the result is as valid UTF-8 as the input.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: &str) -> Option<String> {
        primary_key(&s.parse::<Uri>().unwrap())
    }

    #[test]
    fn rfc9110_4_2_3_scheme_and_host_lowercased() {
        assert_eq!(key("HTTP://Example.COM/A/b?Q=1").as_deref(), Some("http://example.com/A/b?Q=1"));
    }

    #[test]
    fn rfc9110_4_2_3_default_and_empty_ports_removed() {
        assert_eq!(key("http://example.com:80/").as_deref(), Some("http://example.com/"));
        assert_eq!(key("https://example.com:443/x").as_deref(), Some("https://example.com/x"));
        assert_eq!(key("https://example.com:80/x").as_deref(), Some("https://example.com:80/x"));
        assert_eq!(key("http://example.com:8080/").as_deref(), Some("http://example.com:8080/"));
    }

    #[test]
    fn rfc9110_4_2_3_empty_path_is_slash() {
        assert_eq!(key("http://example.com").as_deref(), Some("http://example.com/"));
        assert_eq!(key("http://example.com?a").as_deref(), Some("http://example.com/?a"));
    }

    #[test]
    fn rfc9110_4_2_3_empty_query_is_kept_distinct() {
        assert_eq!(key("http://example.com/?").as_deref(), Some("http://example.com/?"));
    }

    #[test]
    fn rfc9110_4_2_3_userinfo_dropped_and_ipv6_kept() {
        assert_eq!(key("http://user:pw@Example.com/").as_deref(), Some("http://example.com/"));
        assert_eq!(key("http://[::1]:80/x").as_deref(), Some("http://[::1]/x"));
        assert_eq!(key("http://[::1]:8080/x").as_deref(), Some("http://[::1]:8080/x"));
    }

    #[test]
    fn rfc3986_6_2_2_2_percent_encoding_normalised() {
        assert_eq!(key("http://a/%7euser/%2fx%2F?q=%41%3d").as_deref(), Some("http://a/~user/%2Fx%2F?q=A%3D"));
        assert_eq!(key("http://a/100%25/%zz/%4").as_deref(), Some("http://a/100%25/%zz/%4"));
    }

    #[test]
    fn rfc9111_2_origin_form_has_no_key() {
        assert_eq!(key("/just/a/path"), None);
        assert_eq!(key("*"), None);
    }

    proptest! {
        #[test]
        fn rfc9111_2_keys_never_panic(s in "[a-zA-Z0-9:/?#\\[\\]@!$&'()*+,;=%._~-]{0,40}") {
            if let Ok(uri) = s.parse::<Uri>() {
                if let Some(k) = primary_key(&uri) {
                    prop_assert!(k.contains("://"));
                }
            }
        }
    }
}
