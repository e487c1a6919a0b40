use super::*;
use http::header::{HeaderValue, CACHE_CONTROL, CONNECTION, DATE, EXPIRES};

fn map(fields: &[(HeaderName, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in fields {
        h.append(name.clone(), HeaderValue::from_static(value));
    }
    h
}

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LM2: &str = "Mon, 07 Nov 1994 08:49:37 GMT";

#[test]
fn rfc9111_4_3_1_adds_both_validators_replacing_client_conditionals() {
    let mut out = map(&[
        (IF_NONE_MATCH, "\"client\""),
        (IF_MODIFIED_SINCE, LM2),
        (IF_MATCH, "\"m\""),
        (IF_UNMODIFIED_SINCE, LM2),
        (IF_RANGE, "\"r\""),
        (CACHE_CONTROL, "max-age=0"),
    ]);
    let stored = map(&[(ETAG, "W/\"v1\""), (LAST_MODIFIED, LM)]);
    assert!(add_validators(&mut out, &stored));
    assert_eq!(out.get_all(IF_NONE_MATCH).iter().collect::<Vec<_>>(), vec!["W/\"v1\""]);
    assert_eq!(out.get_all(IF_MODIFIED_SINCE).iter().collect::<Vec<_>>(), vec![LM]);
    assert!(!out.contains_key(IF_MATCH) && !out.contains_key(IF_UNMODIFIED_SINCE) && !out.contains_key(IF_RANGE));
    assert!(out.contains_key(CACHE_CONTROL));
}

#[test]
fn rfc9111_4_3_1_etag_only_or_last_modified_only() {
    let mut out = HeaderMap::new();
    assert!(add_validators(&mut out, &map(&[(ETAG, "\"v1\"")])));
    assert!(out.contains_key(IF_NONE_MATCH) && !out.contains_key(IF_MODIFIED_SINCE));
    let mut out = HeaderMap::new();
    assert!(add_validators(&mut out, &map(&[(LAST_MODIFIED, LM)])));
    assert!(!out.contains_key(IF_NONE_MATCH) && out.contains_key(IF_MODIFIED_SINCE));
}

#[test]
fn rfc9111_4_3_1_no_validator_adds_nothing() {
    let mut out = map(&[(IF_NONE_MATCH, "\"client\"")]);
    let stored = map(&[(ETAG, "not-quoted"), (LAST_MODIFIED, "0"), (DATE, LM)]);
    assert!(!add_validators(&mut out, &stored));
    assert!(!out.contains_key(IF_NONE_MATCH) && !out.contains_key(IF_MODIFIED_SINCE));
}

#[test]
fn rfc9111_4_3_4_strong_etag_in_304_must_match_strongly() {
    let stored = map(&[(ETAG, "\"v1\"")]);
    assert!(not_modified_selects(&stored, &map(&[(ETAG, "\"v1\"")]), false));
    assert!(!not_modified_selects(&stored, &map(&[(ETAG, "\"v2\"")]), true));
    assert!(!not_modified_selects(&map(&[(ETAG, "W/\"v1\"")]), &map(&[(ETAG, "\"v1\"")]), true));
    assert!(!not_modified_selects(&map(&[(LAST_MODIFIED, LM)]), &map(&[(ETAG, "\"v1\""), (LAST_MODIFIED, LM)]), true));
}

#[test]
fn rfc9111_4_3_4_weak_validators_must_all_match() {
    let stored = map(&[(ETAG, "W/\"v1\""), (LAST_MODIFIED, LM)]);
    assert!(not_modified_selects(&stored, &map(&[(ETAG, "W/\"v1\"")]), false));
    assert!(not_modified_selects(&stored, &map(&[(LAST_MODIFIED, LM)]), false));
    assert!(not_modified_selects(&stored, &map(&[(ETAG, "W/\"v1\""), (LAST_MODIFIED, LM)]), false));
    assert!(!not_modified_selects(&stored, &map(&[(LAST_MODIFIED, LM2)]), true));
    assert!(!not_modified_selects(&stored, &map(&[(ETAG, "W/\"v2\"")]), true));
    assert!(!not_modified_selects(&stored, &map(&[(ETAG, "W/\"v1\""), (LAST_MODIFIED, LM2)]), true));
}

#[test]
fn rfc9111_4_3_4_a_304_without_validators_selects_the_only_candidate() {
    let bare = map(&[(CACHE_CONTROL, "max-age=60")]);
    // §4.3.4's own case: neither has a validator.
    assert!(not_modified_selects(&map(&[(DATE, LM)]), &bare, true));
    assert!(!not_modified_selects(&map(&[(DATE, LM)]), &bare, false));
    // The answer to the cache's own conditional, built from the stored validators, which the
    // 304 need not repeat (RFC 9110 §15.4.5).
    assert!(not_modified_selects(&map(&[(LAST_MODIFIED, LM)]), &bare, true));
    assert!(not_modified_selects(&map(&[(ETAG, "\"v1\"")]), &bare, true));
    assert!(!not_modified_selects(&map(&[(LAST_MODIFIED, LM)]), &bare, false));
}

#[test]
fn rfc9111_3_2_freshening_replaces_fields_but_keeps_those_describing_the_stored_bytes() {
    let mut stored = map(&[
        (CONTENT_LENGTH, "1234"),
        (CONTENT_TYPE, "text/html"),
        (CONTENT_ENCODING, "gzip"),
        (CACHE_CONTROL, "max-age=10"),
        (CACHE_CONTROL, "public"),
        (DATE, LM),
        (ETAG, "\"v1\""),
        (HeaderName::from_static("x-old"), "kept"),
        (HeaderName::from_static("content-md5"), "rL0Y20zC+Fzt72VPzMSk2A=="),
    ]);
    let not_modified = map(&[
        (CONTENT_LENGTH, "0"),
        (CONTENT_TYPE, "text/plain"),
        (CONTENT_ENCODING, "br"),
        (CONTENT_RANGE, "bytes 0-1/2"),
        (TRANSFER_ENCODING, "chunked"),
        (CACHE_CONTROL, "max-age=600"),
        (DATE, LM2),
        (EXPIRES, LM2),
        (ETAG, "\"v1\""),
        (HeaderName::from_static("content-md5"), "N7UdGUp1E+RbVvZSTy1R8g=="),
    ]);
    let mut reshaped = stored.clone();
    freshen_from_304(&mut stored, &not_modified, false);
    assert_eq!(stored.get(CONTENT_LENGTH).unwrap(), "1234");
    assert_eq!(stored.get(CONTENT_TYPE).unwrap(), "text/plain", "the type is the representation's, updated");
    assert_eq!(stored.get("content-md5").unwrap(), "rL0Y20zC+Fzt72VPzMSk2A==", "a digest of the stored bytes");
    assert_eq!(stored.get(CONTENT_ENCODING).unwrap(), "gzip");
    assert!(!stored.contains_key(CONTENT_RANGE) && !stored.contains_key(TRANSFER_ENCODING));
    assert_eq!(stored.get_all(CACHE_CONTROL).iter().collect::<Vec<_>>(), vec!["max-age=600"]);
    assert_eq!(stored.get(DATE).unwrap(), LM2);
    assert_eq!(stored.get(EXPIRES).unwrap(), LM2);
    assert_eq!(stored.get("x-old").unwrap(), "kept");
    // A body a module rewrote keeps the type the module gave it.
    freshen_from_304(&mut reshaped, &not_modified, true);
    assert_eq!(reshaped.get(CONTENT_TYPE).unwrap(), "text/html");
    assert_eq!(reshaped.get(DATE).unwrap(), LM2);
}

#[test]
fn rfc9111_3_2_freshening_skips_hop_by_hop_and_connection_listed_fields() {
    let mut stored = map(&[(HeaderName::from_static("x-a"), "1")]);
    let not_modified = map(&[
        (CONNECTION, "x-a, keep-alive"),
        (HeaderName::from_static("x-a"), "2"),
        (HeaderName::from_static("keep-alive"), "timeout=5"),
        (HeaderName::from_static("x-b"), "3"),
    ]);
    freshen_from_304(&mut stored, &not_modified, false);
    assert_eq!(stored.get("x-a").unwrap(), "1");
    assert_eq!(stored.get("x-b").unwrap(), "3");
    assert!(!stored.contains_key(CONNECTION) && !stored.contains_key("keep-alive"));
}

#[test]
fn rfc9111_3_2_freshening_keeps_etag_of_other_strength() {
    let mut stored = map(&[(ETAG, "\"v1\"")]);
    freshen_from_304(&mut stored, &map(&[(ETAG, "W/\"v1\"")]), false);
    assert_eq!(stored.get(ETAG).unwrap(), "\"v1\"");
    freshen_from_304(&mut stored, &map(&[(ETAG, "garbage")]), false);
    assert_eq!(stored.get(ETAG).unwrap(), "\"v1\"");
    let mut untagged = HeaderMap::new();
    freshen_from_304(&mut untagged, &map(&[(ETAG, "W/\"v9\"")]), false);
    assert_eq!(untagged.get(ETAG).unwrap(), "W/\"v9\"");
}
