//! Lookups over a message's fields shared by the modules of this crate and by the proxy.

use http::header::{HeaderMap, HeaderName};

/// Maps with at most this many distinct names are scanned rather than looked up in. A
/// lookup hashes the name and probes, about 80 instructions per name sought; the scan
/// compares each name with each sought one, a few instructions a pair. Response heads of a
/// dozen fields or two are scanned too.
const SCAN_UP_TO: usize = 24;

/// True when `headers` has a field named by one of `names`.
///
/// Answered on every request or response for a few rare fields (preconditions, cache tags),
/// so it is made cheap for the usual short head: one pass over its names, where a standard
/// name differs from another at its first comparison, costs less than a lookup per name
/// (each of which hashes the name). Longer maps are looked up in.
#[inline]
pub fn has_any(headers: &HeaderMap, names: &[HeaderName]) -> bool {
    if headers.keys_len() <= SCAN_UP_TO {
        headers.keys().any(|name| names.contains(name))
    } else {
        names.iter().any(|name| headers.contains_key(name))
    }
}

/// The `Content-Length` a message announces, when it is one valid number.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, ETAG, HOST, IF_NONE_MATCH};

    #[test]
    fn standard_and_custom_names_are_found_in_short_and_long_maps() {
        let custom = HeaderName::from_static("x-wanted");
        for extra in [0, SCAN_UP_TO * 2] {
            let mut headers = HeaderMap::new();
            for i in 0..extra {
                headers.insert(HeaderName::try_from(format!("x-f{i}")).unwrap(), HeaderValue::from_static("v"));
            }
            headers.insert(HOST, HeaderValue::from_static("a"));
            let wanted = [IF_NONE_MATCH, custom.clone()];
            assert!(!has_any(&headers, &wanted), "{extra} extra fields");
            for name in &wanted {
                let mut with = headers.clone();
                with.insert(name.clone(), HeaderValue::from_static("x"));
                assert!(has_any(&with, &wanted), "{name} among {extra} extra fields");
                assert!(!has_any(&with, &[ETAG]), "{extra} extra fields");
            }
        }
    }
}
