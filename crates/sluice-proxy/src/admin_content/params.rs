//! Parameters of the content endpoints: the query string, byte ranges, expiry times and the
//! header fields of a pushed response.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use std::ops::Range;
use std::time::{Duration, SystemTime};

/// The decoded `name=value` pairs of a query string (`+` and `%XX` decoded).
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(query: Option<&str>) -> Self {
        let pairs = query.unwrap_or("").split('&').filter(|p| !p.is_empty()).map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (crate::admin::percent_decode(name), crate::admin::percent_decode(value))
        });
        Self(pairs.collect())
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// True when `name` is given with a true-ish value (`1`, `true`, `yes`, or empty).
    pub fn flag(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| matches!(v, "" | "1" | "true" | "yes"))
    }

    /// Parameter names that are not in `known`.
    pub fn unknown<'a>(&'a self, known: &[&str]) -> Option<&'a str> {
        self.0.iter().map(|(n, _)| n.as_str()).find(|n| !known.contains(n))
    }
}

/// Why a range was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeError {
    /// Not `[bytes=]first-last`, `first-` or `-suffix` (400).
    Syntax(String),
    /// Well-formed but outside the body (416).
    Unsatisfiable(String),
}

/// Resolves one byte range, `[bytes=]a-b` (inclusive, as in HTTP), `a-` or `-n`, against a
/// body of `len` bytes, to a non-empty half-open range.
pub fn byte_range(spec: &str, len: u64) -> Result<Range<u64>, RangeError> {
    let spec = spec.trim();
    let spec = spec.strip_prefix("bytes=").unwrap_or(spec);
    let syntax = || RangeError::Syntax(format!("{spec:?} is not one byte range (first-last, first- or -suffix)"));
    let (first, last) = spec.split_once('-').ok_or_else(syntax)?;
    let number = |s: &str| -> Result<Option<u64>, RangeError> {
        if s.is_empty() {
            return Ok(None);
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax());
        }
        s.parse().map(Some).map_err(|_| syntax())
    };
    let unsatisfiable = || RangeError::Unsatisfiable(format!("range {spec} is outside the {len}-byte body"));
    let range = match (number(first)?, number(last)?) {
        (Some(a), Some(b)) if b < a => return Err(syntax()),
        (Some(a), Some(b)) => a..b.saturating_add(1).min(len),
        (Some(a), None) => a..len,
        (None, Some(n)) => len.saturating_sub(n)..len,
        (None, None) => return Err(syntax()),
    };
    if range.start >= range.end {
        return Err(unsatisfiable());
    }
    Ok(range)
}

/// The longest `ttl` (100 years), and half the latest `at`: times past these overflow the
/// clock arithmetic of the store and mean nothing for a cache.
const MAX_EXPIRY_SECS: u64 = 100 * 365 * 86_400;

/// A new expiry from `ttl=SECONDS` or `at=` (Unix seconds or an HTTP date).
pub fn expiry(query: &Query) -> Result<sluice_module::Expiry, String> {
    use sluice_module::Expiry;
    match (query.get("ttl"), query.get("at")) {
        (Some(_), Some(_)) => Err("give ttl or at, not both".into()),
        (Some(ttl), None) => {
            let secs: u64 = ttl.trim().parse().map_err(|_| format!("ttl={ttl} is not a number of seconds"))?;
            if secs > MAX_EXPIRY_SECS {
                return Err(format!("ttl={ttl} is more than 100 years"));
            }
            Ok(if secs == 0 { Expiry::Now } else { Expiry::In(Duration::from_secs(secs)) })
        }
        (None, Some(at)) => {
            let at = at.trim();
            if let Ok(secs) = at.parse::<u64>() {
                if secs > MAX_EXPIRY_SECS * 2 {
                    return Err(format!("at={at} is beyond the year 2170"));
                }
                return Ok(Expiry::At(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)));
            }
            HeaderValue::from_str(at)
                .ok()
                .and_then(|v| sluice_http::dates::parse_http_date(&v))
                .map(Expiry::At)
                .ok_or_else(|| format!("at={at} is neither Unix seconds nor an HTTP date"))
        }
        (None, None) => Ok(Expiry::Now),
    }
}

/// Request-only fields of a `PUT /cache` that are not part of the pushed response: they
/// describe the admin request itself (or are added by every client, like `User-Agent`).
const REQUEST_ONLY: [HeaderName; 17] = [
    header::HOST,
    header::AUTHORIZATION,
    header::USER_AGENT,
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::EXPECT,
    header::COOKIE,
    header::REFERER,
    header::ORIGIN,
    header::RANGE,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
];

/// The header fields of a pushed response: the request's, without hop-by-hop and
/// request-only fields ([`REQUEST_ONLY`]).
pub fn pushed_headers(request: &HeaderMap) -> HeaderMap {
    let mut headers = request.clone();
    sluice_http::hop::remove_hop_by_hop(&mut headers);
    for name in &REQUEST_ONLY {
        headers.remove(name);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded() {
        let q = Query::parse(Some("url=http%3A%2F%2Fa%2Fb%3Fx%3D1&prefetch&ttl=60"));
        assert_eq!(q.get("url"), Some("http://a/b?x=1"));
        assert!(q.flag("prefetch"));
        assert_eq!(q.unknown(&["url", "prefetch"]), Some("ttl"));
    }

    #[test]
    fn ranges_follow_http_syntax() {
        assert_eq!(byte_range("bytes=0-4", 10), Ok(0..5));
        assert_eq!(byte_range("2-", 10), Ok(2..10));
        assert_eq!(byte_range("-3", 10), Ok(7..10));
        assert_eq!(byte_range("5-100", 10), Ok(5..10));
        assert!(matches!(byte_range("4-2", 10), Err(RangeError::Syntax(_))));
        assert!(matches!(byte_range("a-b", 10), Err(RangeError::Syntax(_))));
        assert!(matches!(byte_range("0-1,3-4", 10), Err(RangeError::Syntax(_))));
        assert!(matches!(byte_range("-", 10), Err(RangeError::Syntax(_))));
        assert!(matches!(byte_range("10-", 10), Err(RangeError::Unsatisfiable(_))));
        assert!(matches!(byte_range("-0", 10), Err(RangeError::Unsatisfiable(_))));
    }

    #[test]
    fn expiry_takes_seconds_or_dates() {
        use sluice_module::Expiry;
        assert_eq!(expiry(&Query::parse(Some("ttl=60"))), Ok(Expiry::In(Duration::from_secs(60))));
        assert_eq!(expiry(&Query::parse(None)), Ok(Expiry::Now));
        assert_eq!(
            expiry(&Query::parse(Some("at=784111777"))),
            Ok(Expiry::At(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777)))
        );
        assert_eq!(
            expiry(&Query::parse(Some("at=Sun,+06+Nov+1994+08:49:37+GMT"))),
            Ok(Expiry::At(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777)))
        );
        assert!(expiry(&Query::parse(Some("ttl=soon"))).is_err());
        assert!(expiry(&Query::parse(Some("ttl=1&at=2"))).is_err());
        // Out of range: refused, not an overflow.
        assert!(expiry(&Query::parse(Some("at=18446744073709551615"))).is_err());
        assert!(expiry(&Query::parse(Some("ttl=18446744073709551615"))).is_err());
    }

    #[test]
    fn pushed_headers_drop_request_only_fields() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("user-agent", HeaderValue::from_static("curl"));
        h.insert("connection", HeaderValue::from_static("close"));
        h.insert("cache-control", HeaderValue::from_static("max-age=60"));
        h.insert("surrogate-key", HeaderValue::from_static("a b"));
        let out = pushed_headers(&h);
        assert_eq!(out.len(), 2);
        assert!(out.contains_key("cache-control") && out.contains_key("surrogate-key"));
    }
}
