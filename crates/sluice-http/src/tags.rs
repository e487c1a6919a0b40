//! Cache tags ("surrogate keys"): names an origin gives a response so that a group of
//! stored objects can be purged together.
//!
//! Two spellings are read, as CDNs do: `Surrogate-Key` (Fastly; space-separated) and
//! `Cache-Tag` (Cloudflare, Akamai; comma-separated). Both may appear, on several lines.

use http::header::{HeaderMap, HeaderName};

/// `Surrogate-Key`: tags separated by spaces.
pub const SURROGATE_KEY: HeaderName = HeaderName::from_static("surrogate-key");
/// `Cache-Tag`: tags separated by commas.
pub const CACHE_TAG: HeaderName = HeaderName::from_static("cache-tag");

/// The tags of a response, in header order, without duplicates. Values that are not
/// visible ASCII are skipped; tags are compared byte for byte (case-sensitive), like the
/// CDNs that define these fields.
pub fn tags(headers: &HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |tag: &str| {
        if !tag.is_empty() && !out.iter().any(|t| t == tag) {
            out.push(tag.to_owned());
        }
    };
    for value in headers.get_all(SURROGATE_KEY).iter().filter_map(|v| v.to_str().ok()) {
        value.split_ascii_whitespace().for_each(&mut add);
    }
    for value in headers.get_all(CACHE_TAG).iter().filter_map(|v| v.to_str().ok()) {
        value.split(',').map(str::trim).for_each(&mut add);
    }
    out
}

/// True when the response carries any tag field (cheap: no parsing).
pub fn has_tags(headers: &HeaderMap) -> bool {
    crate::fields::has_any(headers, &[SURROGATE_KEY, CACHE_TAG])
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn both_spellings_are_split_and_deduplicated() {
        let mut h = HeaderMap::new();
        h.append(SURROGATE_KEY, HeaderValue::from_static(" news  sport/1 "));
        h.append(SURROGATE_KEY, HeaderValue::from_static("news"));
        h.append(CACHE_TAG, HeaderValue::from_static("product-7, news ,,Sale"));
        assert_eq!(tags(&h), ["news", "sport/1", "product-7", "Sale"]);
        assert!(has_tags(&h));
    }

    #[test]
    fn no_fields_no_tags() {
        assert!(tags(&HeaderMap::new()).is_empty());
        assert!(!has_tags(&HeaderMap::new()));
    }
}
