use super::*;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};

fn map(fields: &[(HeaderName, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in fields {
        h.append(name.clone(), HeaderValue::from_static(value));
    }
    h
}

const EARLY: &str = "Sat, 05 Nov 1994 08:49:37 GMT";
const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const LATE: &str = "Mon, 07 Nov 1994 08:49:37 GMT";

fn stored() -> HeaderMap {
    map(&[(ETAG, "\"v1\""), (LAST_MODIFIED, LM), (DATE, LATE)])
}

fn eval(method: Method, request: &[(HeaderName, &'static str)]) -> Precondition {
    evaluate(&method, &map(request), StatusCode::OK, &stored())
}

#[test]
fn rfc9110_13_2_2_no_preconditions_proceed() {
    assert_eq!(eval(Method::GET, &[]), Precondition::Proceed);
}

#[test]
fn rfc9110_13_1_1_if_match_uses_strong_comparison() {
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "\"v1\"")]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "\"v0\", \"v1\"")]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "W/\"v1\"")]), Precondition::Failed);
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "\"v2\"")]), Precondition::Failed);
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "garbage")]), Precondition::Failed);
    let weak_stored = map(&[(ETAG, "W/\"v1\"")]);
    assert_eq!(
        evaluate(&Method::GET, &map(&[(IF_MATCH, "W/\"v1\"")]), StatusCode::OK, &weak_stored),
        Precondition::Failed
    );
}

#[test]
fn rfc9110_13_1_1_if_match_star_matches_any_stored_representation() {
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "*")]), Precondition::Proceed);
    assert_eq!(
        evaluate(&Method::GET, &map(&[(IF_MATCH, "*")]), StatusCode::OK, &HeaderMap::new()),
        Precondition::Proceed
    );
}

#[test]
fn rfc9110_13_1_4_if_unmodified_since() {
    assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, LM)]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, LATE)]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, EARLY)]), Precondition::Failed);
    // Ignored when invalid, repeated, or when If-Match is present.
    assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, "0")]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_UNMODIFIED_SINCE, EARLY), (IF_UNMODIFIED_SINCE, EARLY)]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "\"v1\""), (IF_UNMODIFIED_SINCE, EARLY)]), Precondition::Proceed);
    // Ignored without a stored Last-Modified.
    let no_lm = map(&[(DATE, LATE)]);
    assert_eq!(
        evaluate(&Method::GET, &map(&[(IF_UNMODIFIED_SINCE, EARLY)]), StatusCode::OK, &no_lm),
        Precondition::Proceed
    );
}

#[test]
fn rfc9110_13_1_2_if_none_match_uses_weak_comparison() {
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "\"v1\"")]), Precondition::NotModified);
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "W/\"v1\"")]), Precondition::NotModified);
    assert_eq!(eval(Method::HEAD, &[(IF_NONE_MATCH, "\"x\", W/\"v1\"")]), Precondition::NotModified);
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "\"v2\"")]), Precondition::Proceed);
}

#[test]
fn rfc9110_13_1_2_if_none_match_star() {
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "*")]), Precondition::NotModified);
    assert_eq!(eval(Method::PUT, &[(IF_NONE_MATCH, "*")]), Precondition::Failed);
}

#[test]
fn rfc9110_13_2_2_if_none_match_match_on_unsafe_method_fails() {
    assert_eq!(eval(Method::POST, &[(IF_NONE_MATCH, "\"v1\"")]), Precondition::Failed);
    assert_eq!(eval(Method::DELETE, &[(IF_NONE_MATCH, "\"v2\"")]), Precondition::Proceed);
}

#[test]
fn rfc9110_13_1_3_if_modified_since() {
    assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, LM)]), Precondition::NotModified);
    assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, LATE)]), Precondition::NotModified);
    assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, EARLY)]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, "yesterday")]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_MODIFIED_SINCE, LM), (IF_MODIFIED_SINCE, LM)]), Precondition::Proceed);
    // Only for GET and HEAD.
    assert_eq!(eval(Method::POST, &[(IF_MODIFIED_SINCE, LATE)]), Precondition::Proceed);
}

#[test]
fn rfc9110_13_1_3_if_modified_since_ignored_when_if_none_match_present() {
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "\"v2\""), (IF_MODIFIED_SINCE, LATE)]), Precondition::Proceed);
    assert_eq!(eval(Method::GET, &[(IF_NONE_MATCH, "\"v1\""), (IF_MODIFIED_SINCE, EARLY)]), Precondition::NotModified);
}

#[test]
fn rfc9111_4_3_2_if_modified_since_uses_date_without_last_modified() {
    let no_lm = map(&[(DATE, LM)]);
    let req = map(&[(IF_MODIFIED_SINCE, LM)]);
    assert_eq!(evaluate(&Method::GET, &req, StatusCode::OK, &no_lm), Precondition::NotModified);
    let req = map(&[(IF_MODIFIED_SINCE, EARLY)]);
    assert_eq!(evaluate(&Method::GET, &req, StatusCode::OK, &no_lm), Precondition::Proceed);
    assert_eq!(evaluate(&Method::GET, &req, StatusCode::OK, &HeaderMap::new()), Precondition::Proceed);
}

#[test]
fn rfc9110_13_2_2_if_match_failure_wins_over_if_none_match() {
    assert_eq!(eval(Method::GET, &[(IF_MATCH, "\"v2\""), (IF_NONE_MATCH, "\"v1\"")]), Precondition::Failed);
}

#[test]
fn rfc9110_13_2_1_preconditions_ignored_for_non_2xx() {
    for status in [StatusCode::NOT_FOUND, StatusCode::MOVED_PERMANENTLY, StatusCode::GONE] {
        let got = evaluate(&Method::GET, &map(&[(IF_MATCH, "\"nope\"")]), status, &stored());
        assert_eq!(got, Precondition::Proceed);
        let got = evaluate(&Method::GET, &map(&[(IF_NONE_MATCH, "*")]), status, &stored());
        assert_eq!(got, Precondition::Proceed);
    }
}

#[test]
fn rfc9110_15_4_5_not_modified_headers_are_the_listed_subset() {
    let stored = map(&[
        (CACHE_CONTROL, "max-age=60"),
        (CACHE_CONTROL, "public"),
        (CONTENT_LOCATION, "/a"),
        (DATE, LM),
        (ETAG, "\"v1\""),
        (EXPIRES, LATE),
        (VARY, "accept"),
        (LAST_MODIFIED, EARLY),
        (CONTENT_LENGTH, "10"),
        (CONTENT_TYPE, "text/plain"),
        (HeaderName::from_static("x-other"), "1"),
    ]);
    let got = not_modified_headers(&stored);
    assert_eq!(got.len(), 8);
    assert_eq!(got.get_all(CACHE_CONTROL).iter().count(), 2);
    assert!(!got.contains_key(CONTENT_LENGTH) && !got.contains_key(CONTENT_TYPE) && !got.contains_key("x-other"));
    assert_eq!(got.get(LAST_MODIFIED).unwrap(), EARLY);
}
