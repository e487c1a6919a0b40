//! Invalidation after unsafe methods, RFC 9111 §4.4.

use crate::key::{primary_key, Origin};
use crate::uri_ref::resolve;
use http::header::{HeaderMap, CONTENT_LOCATION, LOCATION};
use http::{Method, StatusCode, Uri};

/// The URIs whose stored responses must be invalidated after a request with an unsafe
/// method (anything but GET, HEAD, OPTIONS, TRACE) to `target` got a non-error (2xx or
/// 3xx) response: the target URI, and the URIs in `Location` and `Content-Location`
/// (resolved against `target`) when they have the same scheme and authority as `target`.
/// Empty for safe methods and error statuses.
///
/// "Same scheme and authority" is same origin (§4.4 and RFC 9110 §4.3.1): scheme, host and
/// port compared after normalisation (case, default port; userinfo ignored). Unparseable
/// field values are skipped, and the result holds each cache key at most once, target first.
pub fn targets(method: &Method, target: &Uri, status: StatusCode, response: &HeaderMap) -> Vec<Uri> {
    let safe = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method);
    if safe || !(status.is_success() || status.is_redirection()) {
        return Vec::new();
    }
    let origin = Origin::of(target);
    let mut out = vec![target.clone()];
    let mut seen = vec![dedup_key(target)];
    for name in [LOCATION, CONTENT_LOCATION] {
        for value in response.get_all(name) {
            let Some(uri) = value.to_str().ok().and_then(|s| resolve(target, s.trim())) else {
                continue;
            };
            let key = dedup_key(&uri);
            if Origin::of(&uri) == origin && !seen.contains(&key) {
                seen.push(key);
                out.push(uri);
            }
        }
    }
    out
}

fn dedup_key(uri: &Uri) -> String {
    primary_key(uri).unwrap_or_else(|| uri.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    fn response(fields: &[(http::header::HeaderName, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in fields {
            h.append(name.clone(), HeaderValue::from_static(value));
        }
        h
    }

    fn strings(uris: Vec<Uri>) -> Vec<String> {
        uris.into_iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn rfc9111_4_4_unsafe_success_invalidates_target() {
        let t = uri("http://example.com/a");
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::from_bytes(b"PURGE").unwrap()] {
            assert_eq!(strings(targets(&m, &t, StatusCode::OK, &HeaderMap::new())), vec!["http://example.com/a"]);
        }
        assert_eq!(targets(&Method::POST, &t, StatusCode::SEE_OTHER, &HeaderMap::new()).len(), 1);
    }

    #[test]
    fn rfc9111_4_4_safe_methods_invalidate_nothing() {
        let t = uri("http://example.com/a");
        for m in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
            assert!(targets(&m, &t, StatusCode::OK, &response(&[(LOCATION, "/b")])).is_empty());
        }
    }

    #[test]
    fn rfc9111_4_4_error_statuses_invalidate_nothing() {
        let t = uri("http://example.com/a");
        for s in [StatusCode::CONTINUE, StatusCode::NOT_FOUND, StatusCode::INTERNAL_SERVER_ERROR] {
            assert!(targets(&Method::POST, &t, s, &HeaderMap::new()).is_empty());
        }
    }

    #[test]
    fn rfc9111_4_4_location_and_content_location_resolved_same_origin() {
        let t = uri("http://example.com/dir/a");
        let r = response(&[(LOCATION, "b?x=1#frag"), (CONTENT_LOCATION, "HTTP://EXAMPLE.COM:80/c")]);
        assert_eq!(
            strings(targets(&Method::POST, &t, StatusCode::CREATED, &r)),
            vec!["http://example.com/dir/a", "http://example.com/dir/b?x=1", "http://EXAMPLE.COM:80/c"]
        );
    }

    #[test]
    fn rfc9111_4_4_other_origins_are_not_invalidated() {
        let t = uri("http://example.com/a");
        let r = response(&[
            (LOCATION, "http://evil.example/a"),
            (LOCATION, "https://example.com/a"),
            (CONTENT_LOCATION, "http://example.com:8080/a"),
            (CONTENT_LOCATION, "//other.example/x"),
        ]);
        assert_eq!(strings(targets(&Method::PUT, &t, StatusCode::OK, &r)), vec!["http://example.com/a"]);
    }

    #[test]
    fn rfc9111_4_4_duplicates_and_garbage_are_skipped() {
        let t = uri("http://example.com/a");
        let r = response(&[
            (LOCATION, "/a"),
            (CONTENT_LOCATION, "http://example.com/%7ex"),
            (CONTENT_LOCATION, "/~x"),
            (LOCATION, "http://bad host/"),
        ]);
        assert_eq!(
            strings(targets(&Method::DELETE, &t, StatusCode::NO_CONTENT, &r)),
            vec!["http://example.com/a", "http://example.com/%7ex"]
        );
        let mut obs = HeaderMap::new();
        obs.insert(LOCATION, HeaderValue::from_bytes(b"/\xff").unwrap());
        assert_eq!(targets(&Method::POST, &t, StatusCode::OK, &obs).len(), 1);
    }
}
