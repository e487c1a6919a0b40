use super::*;
use http::header::{HeaderName, HeaderValue, ETAG};
use proptest::prelude::*;

fn map(fields: &[(HeaderName, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in fields {
        h.append(name.clone(), HeaderValue::from_static(value));
    }
    h
}

const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LATER: &str = "Mon, 07 Nov 1994 08:49:37 GMT";

fn stored() -> HeaderMap {
    map(&[(ETAG, "\"v1\""), (LAST_MODIFIED, LM), (DATE, LATER)])
}

fn eval(request: &[(HeaderName, &'static str)], len: u64) -> RangeOutcome {
    evaluate(&Method::GET, &map(request), &stored(), len)
}

fn partial(ranges: &[Range<u64>]) -> RangeOutcome {
    RangeOutcome::Partial(ranges.to_vec())
}

/// A range built by a call, so single-range slices read naturally.
fn r(start: u64, end: u64) -> Range<u64> {
    start..end
}

#[test]
fn rfc9110_14_2_no_range_or_not_get_is_full() {
    assert_eq!(eval(&[], 100), RangeOutcome::Full);
    let req = map(&[(RANGE, "bytes=0-9")]);
    assert_eq!(evaluate(&Method::HEAD, &req, &stored(), 100), RangeOutcome::Full);
    assert_eq!(evaluate(&Method::POST, &req, &stored(), 100), RangeOutcome::Full);
}

#[test]
fn rfc9110_14_1_2_single_int_range() {
    assert_eq!(eval(&[(RANGE, "bytes=0-499")], 10_000), partial(&[r(0, 500)]));
}

#[test]
fn rfc9110_14_1_2_suffix_range() {
    assert_eq!(eval(&[(RANGE, "bytes=-500")], 10_000), partial(&[r(9_500, 10_000)]));
    // A suffix longer than the representation selects all of it.
    assert_eq!(eval(&[(RANGE, "bytes=-500")], 100), partial(&[r(0, 100)]));
}

#[test]
fn rfc9110_14_1_2_open_range() {
    assert_eq!(eval(&[(RANGE, "bytes=500-")], 10_000), partial(&[r(500, 10_000)]));
}

#[test]
fn rfc9110_14_1_2_range_beyond_length_is_clipped() {
    assert_eq!(eval(&[(RANGE, "bytes=9000-20000")], 10_000), partial(&[r(9_000, 10_000)]));
}

#[test]
fn rfc9110_14_1_1_unsatisfiable_specs_are_dropped() {
    assert_eq!(eval(&[(RANGE, "bytes=20000-, 0-0, -0")], 10_000), partial(&[r(0, 1)]));
}

#[test]
fn rfc9110_15_5_17_all_unsatisfiable_is_416() {
    assert_eq!(eval(&[(RANGE, "bytes=10000-")], 10_000), RangeOutcome::Unsatisfiable);
    assert_eq!(eval(&[(RANGE, "bytes=-0, 20000-30000")], 10_000), RangeOutcome::Unsatisfiable);
    assert_eq!(eval(&[(RANGE, "bytes=0-5")], 0), RangeOutcome::Unsatisfiable);
}

#[test]
fn rfc9110_14_1_2_suffix_of_empty_representation_is_full() {
    assert_eq!(eval(&[(RANGE, "bytes=-5")], 0), RangeOutcome::Full);
}

#[test]
fn rfc9110_14_2_multiple_ranges_keep_request_order() {
    assert_eq!(eval(&[(RANGE, "bytes=500-599, 0-99, -100")], 1_000), partial(&[r(500, 600), r(0, 100), r(900, 1_000)]));
}

#[test]
fn rfc9110_15_3_7_2_overlapping_ranges_are_coalesced() {
    assert_eq!(eval(&[(RANGE, "bytes=0-99, 50-149")], 1_000), partial(&[r(0, 150)]));
    assert_eq!(eval(&[(RANGE, "bytes=500-599, 0-9, 550-700")], 1_000), partial(&[r(500, 701), r(0, 10)]));
    // A later range bridging two earlier ones merges all three into the first's place.
    assert_eq!(eval(&[(RANGE, "bytes=800-899, 0-10, 20-30, 5-25")], 1_000), partial(&[r(800, 900), r(0, 31)]));
    // Touching ranges are coalesced too.
    assert_eq!(eval(&[(RANGE, "bytes=0-9, 10-19")], 1_000), partial(&[r(0, 20)]));
    // Duplicates collapse.
    assert_eq!(eval(&[(RANGE, "bytes=-10, 990-")], 1_000), partial(&[r(990, 1_000)]));
}

#[test]
fn rfc9110_14_2_invalid_syntax_is_full() {
    for bad in ["bytes=5-1", "bytes=abc", "bytes=", "items=0-1", "bytes=0-1,,x", "0-1"] {
        let req = map(&[(RANGE, bad)]);
        assert_eq!(evaluate(&Method::GET, &req, &stored(), 100), RangeOutcome::Full, "{bad}");
    }
    assert_eq!(eval(&[(RANGE, "bytes=0-1"), (RANGE, "bytes=2-3")], 100), RangeOutcome::Full);
}

#[test]
fn rfc9110_14_2_more_than_64_ranges_is_full() {
    let many: String = (0..65).map(|i| format!("{}-{}", i * 10, i * 10 + 1)).collect::<Vec<_>>().join(",");
    let mut req = HeaderMap::new();
    req.insert(RANGE, HeaderValue::from_str(&format!("bytes={many}")).unwrap());
    assert_eq!(evaluate(&Method::GET, &req, &stored(), 10_000), RangeOutcome::Full);
}

#[test]
fn rfc9110_13_1_5_if_range_etag_needs_strong_match() {
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, "\"v1\"")], 100), partial(&[r(0, 10)]));
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, "\"v2\"")], 100), RangeOutcome::Full);
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, "W/\"v1\"")], 100), RangeOutcome::Full);
    let weak_stored = map(&[(ETAG, "W/\"v1\"")]);
    let req = map(&[(RANGE, "bytes=0-9"), (IF_RANGE, "W/\"v1\"")]);
    assert_eq!(evaluate(&Method::GET, &req, &weak_stored, 100), RangeOutcome::Full);
}

#[test]
fn rfc9110_13_1_5_if_range_date_needs_exact_strong_last_modified() {
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, LM)], 100), partial(&[r(0, 10)]));
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, LATER)], 100), RangeOutcome::Full);
    assert_eq!(eval(&[(RANGE, "bytes=0-9"), (IF_RANGE, "garbage")], 100), RangeOutcome::Full);
    // Last-Modified is weak when the stored Date is not at least a second later.
    let weak = map(&[(LAST_MODIFIED, LM), (DATE, LM)]);
    let req = map(&[(RANGE, "bytes=0-9"), (IF_RANGE, LM)]);
    assert_eq!(evaluate(&Method::GET, &req, &weak, 100), RangeOutcome::Full);
    let no_date = map(&[(LAST_MODIFIED, LM)]);
    assert_eq!(evaluate(&Method::GET, &req, &no_date, 100), RangeOutcome::Full);
}

#[test]
fn rfc9110_13_1_5_if_range_without_range_is_ignored() {
    assert_eq!(eval(&[(IF_RANGE, "\"v2\"")], 100), RangeOutcome::Full);
}

#[test]
fn rfc9110_14_4_content_range_format() {
    assert_eq!(content_range(&(0..500), 10_000), "bytes 0-499/10000");
    assert_eq!(content_range(&(9_999..10_000), 10_000), "bytes 9999-9999/10000");
    // Misuse with an empty range does not panic.
    assert_eq!(content_range(&(0..0), 0), "bytes 0-0/0");
}

#[test]
fn rfc9110_14_6_multipart_layout() {
    let (parts, closing) = multipart_layout(&[0..10, 20..25], 100, Some("text/html"), "THIS_STRING_SEPARATES");
    assert_eq!(parts.len(), 2);
    assert_eq!(
        parts[0].head,
        "--THIS_STRING_SEPARATES\r\nContent-Type: text/html\r\nContent-Range: bytes 0-9/100\r\n\r\n"
    );
    assert_eq!(parts[0].range, 0..10);
    assert_eq!(
        parts[1].head,
        "\r\n--THIS_STRING_SEPARATES\r\nContent-Type: text/html\r\nContent-Range: bytes 20-24/100\r\n\r\n"
    );
    assert_eq!(closing, "\r\n--THIS_STRING_SEPARATES--\r\n");
}

#[test]
fn rfc9110_14_6_multipart_without_content_type_and_sanitised() {
    let (parts, closing) = multipart_layout(&[r(5, 6)], 10, None, "b\r\nX: y");
    assert_eq!(parts[0].head, "--bX: y\r\nContent-Range: bytes 5-5/10\r\n\r\n");
    assert_eq!(closing, "\r\n--bX: y--\r\n");
    let (parts, _) = multipart_layout(&[r(5, 6)], 10, Some("text/plain\r\nEvil: 1"), "b");
    assert_eq!(parts[0].head, "--b\r\nContent-Type: text/plainEvil: 1\r\nContent-Range: bytes 5-5/10\r\n\r\n");
}

proptest! {
    #[test]
    fn rfc9110_14_range_outcomes_stay_inside_the_representation(
        specs in proptest::collection::vec((proptest::option::of(0u64..2_000), proptest::option::of(0u64..2_000)), 1..8),
        len in 0u64..1_500,
    ) {
        let set: Vec<String> = specs.iter().map(|(a, b)| format!(
            "{}-{}",
            a.map(|v| v.to_string()).unwrap_or_default(),
            b.map(|v| v.to_string()).unwrap_or_default(),
        )).collect();
        let mut req = HeaderMap::new();
        req.insert(RANGE, HeaderValue::from_str(&format!("bytes={}", set.join(","))).unwrap());
        if let RangeOutcome::Partial(ranges) = evaluate(&Method::GET, &req, &stored(), len) {
            prop_assert!(!ranges.is_empty());
            for (i, r) in ranges.iter().enumerate() {
                prop_assert!(r.start < r.end && r.end <= len);
                for other in &ranges[i + 1..] {
                    // Coalesced: no two ranges overlap or touch.
                    prop_assert!(r.end < other.start || other.end < r.start);
                }
            }
        }
    }

    #[test]
    fn rfc9110_14_range_parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), len in any::<u64>()) {
        let mut value = b"bytes=".to_vec();
        value.extend_from_slice(&bytes);
        for v in [value.as_slice(), bytes.as_slice()] {
            if let Ok(v) = HeaderValue::from_bytes(v) {
                let mut req = HeaderMap::new();
                req.insert(RANGE, v.clone());
                req.insert(IF_RANGE, v);
                if let RangeOutcome::Partial(ranges) = evaluate(&Method::GET, &req, &stored(), len) {
                    prop_assert!(ranges.iter().all(|r| r.start < r.end && r.end <= len));
                }
            }
        }
    }
}

#[test]
fn first_offset_is_the_smallest_first_pos_and_unknown_for_suffixes() {
    let with = |range: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(RANGE, range.parse().unwrap());
        first_offset(&Method::GET, &headers)
    };
    assert_eq!(with("bytes=500-999"), Some(500));
    assert_eq!(with("bytes=700-, 20-30"), Some(20));
    assert_eq!(with("bytes=-100"), Some(u64::MAX));
    assert_eq!(with("bytes=10-20, -100"), Some(10));
    assert_eq!(with("items=0-5"), None, "not bytes: ignored");
    assert_eq!(with("bytes=5-1"), None, "invalid: ignored");
    assert_eq!(first_offset(&Method::GET, &HeaderMap::new()), None);
    let mut headers = HeaderMap::new();
    headers.insert(RANGE, "bytes=9-".parse().unwrap());
    assert_eq!(first_offset(&Method::HEAD, &headers), None);
}
