use super::*;
use http::header::{HeaderMap, HeaderValue, CACHE_CONTROL};
use proptest::prelude::*;

fn cc(s: &'static str) -> CacheControl {
    let mut h = HeaderMap::new();
    h.insert(CACHE_CONTROL, HeaderValue::from_static(s));
    CacheControl::from_headers(&h)
}

fn stored(lifetime: u64, age: u64, response_cc: &CacheControl) -> StoredFreshness<'_> {
    StoredFreshness { lifetime: Duration::from_secs(lifetime), age: Duration::from_secs(age), response_cc }
}

fn decide_with(lifetime: u64, age: u64, response: &'static str, request: &'static str) -> Reuse {
    let response = cc(response);
    decide(&stored(lifetime, age, &response), &cc(request), false)
}

#[test]
fn rfc9111_4_2_fresh_response_is_served() {
    assert_eq!(decide_with(60, 10, "max-age=60", ""), Reuse::Fresh);
}

#[test]
fn rfc9111_4_2_age_equal_to_lifetime_is_stale() {
    let response = cc("max-age=60");
    let s = stored(60, 60, &response);
    assert!(!s.is_fresh());
    assert_eq!(s.ttl_secs(), 0);
    assert_eq!(decide(&s, &CacheControl::default(), false), Reuse::Validate);
}

#[test]
fn rfc9211_2_5_ttl_is_negative_when_stale_and_saturates() {
    let response = CacheControl::default();
    assert_eq!(stored(10, 25, &response).ttl_secs(), -15);
    assert_eq!(stored(25, 10, &response).ttl_secs(), 15);
    let huge = StoredFreshness { lifetime: Duration::ZERO, age: Duration::MAX, response_cc: &response };
    assert_eq!(huge.ttl_secs(), -i64::MAX);
}

#[test]
fn rfc9111_5_2_2_4_response_no_cache_always_validates() {
    assert_eq!(decide_with(60, 0, "max-age=60, no-cache", ""), Reuse::Validate);
    assert_eq!(decide_with(60, 0, r#"no-cache="set-cookie", max-age=60"#, ""), Reuse::Validate);
}

#[test]
fn rfc9111_5_2_1_4_request_no_cache_validates() {
    assert_eq!(decide_with(60, 0, "max-age=60", "no-cache"), Reuse::Validate);
}

#[test]
fn rfc9111_5_4_pragma_no_cache_validates() {
    let response = cc("max-age=60");
    assert_eq!(decide(&stored(60, 0, &response), &CacheControl::default(), true), Reuse::Validate);
}

#[test]
fn rfc9111_5_2_1_1_request_max_age() {
    assert_eq!(decide_with(600, 30, "max-age=600", "max-age=30"), Reuse::Fresh);
    assert_eq!(decide_with(600, 31, "max-age=600", "max-age=30"), Reuse::Validate);
    assert_eq!(decide_with(600, 1, "max-age=600", "max-age=0"), Reuse::Validate);
    // max-age beats max-stale.
    assert_eq!(decide_with(10, 20, "max-age=10", "max-age=15, max-stale"), Reuse::Validate);
}

#[test]
fn rfc9111_5_2_1_3_request_min_fresh() {
    assert_eq!(decide_with(100, 50, "max-age=100", "min-fresh=50"), Reuse::Fresh);
    assert_eq!(decide_with(100, 51, "max-age=100", "min-fresh=50"), Reuse::Validate);
}

#[test]
fn rfc9111_5_2_1_2_max_stale_without_value_allows_any_staleness() {
    assert_eq!(decide_with(10, 1_000_000, "max-age=10", "max-stale"), Reuse::StaleAllowed);
}

#[test]
fn rfc9111_5_2_1_2_max_stale_with_value_bounds_staleness() {
    assert_eq!(decide_with(10, 40, "max-age=10", "max-stale=30"), Reuse::StaleAllowed);
    assert_eq!(decide_with(10, 41, "max-age=10", "max-stale=30"), Reuse::Validate);
}

#[test]
fn rfc9111_4_2_4_must_revalidate_forbids_serving_stale() {
    for response in [
        "max-age=10, must-revalidate",
        "max-age=10, proxy-revalidate",
        "s-maxage=10",
        "s-maxage=10, stale-while-revalidate=60",
    ] {
        assert_eq!(decide_with(10, 11, response, "max-stale"), Reuse::Validate, "{response}");
    }
    // But a fresh one is still served.
    assert_eq!(decide_with(10, 5, "s-maxage=10", ""), Reuse::Fresh);
}

#[test]
fn rfc5861_3_stale_while_revalidate_window() {
    assert_eq!(decide_with(10, 10, "max-age=10, stale-while-revalidate=30", ""), Reuse::StaleWhileRevalidate);
    assert_eq!(decide_with(10, 40, "max-age=10, stale-while-revalidate=30", ""), Reuse::StaleWhileRevalidate);
    assert_eq!(decide_with(10, 41, "max-age=10, stale-while-revalidate=30", ""), Reuse::Validate);
}

#[test]
fn rfc5861_3_max_stale_takes_precedence_over_stale_while_revalidate() {
    assert_eq!(decide_with(10, 20, "max-age=10, stale-while-revalidate=30", "max-stale=20"), Reuse::StaleAllowed);
    assert_eq!(
        decide_with(10, 35, "max-age=10, stale-while-revalidate=30", "max-stale=20"),
        Reuse::StaleWhileRevalidate
    );
}

#[test]
fn rfc5861_3_request_no_cache_overrides_stale_while_revalidate() {
    assert_eq!(decide_with(10, 20, "max-age=10, stale-while-revalidate=30", "no-cache"), Reuse::Validate);
}

fn sie(lifetime: u64, age: u64, response: &'static str, request: &'static str) -> bool {
    let response = cc(response);
    stale_if_error_allows(&stored(lifetime, age, &response), &cc(request))
}

#[test]
fn rfc5861_4_stale_if_error_in_response() {
    assert!(sie(10, 70, "max-age=10, stale-if-error=60", ""));
    assert!(!sie(10, 71, "max-age=10, stale-if-error=60", ""));
}

#[test]
fn rfc5861_4_stale_if_error_in_request() {
    assert!(sie(10, 70, "max-age=10", "stale-if-error=60"));
    assert!(!sie(10, 71, "max-age=10", "stale-if-error=60"));
    // Either one suffices.
    assert!(sie(10, 100, "max-age=10, stale-if-error=5", "stale-if-error=600"));
}

#[test]
fn rfc5861_4_stale_if_error_absent_or_forbidden() {
    assert!(!sie(10, 11, "max-age=10", ""));
    assert!(!sie(10, 11, "max-age=10, must-revalidate, stale-if-error=60", ""));
    assert!(!sie(10, 11, "s-maxage=10, stale-if-error=60", ""));
    assert!(!sie(10, 11, "max-age=10, no-cache", "stale-if-error=60"));
}

#[test]
fn rfc5861_4_stale_if_error_covers_a_fresh_response() {
    assert!(sie(10, 5, "max-age=10, stale-if-error=0", ""));
}

fn unreachable(age: u64, response: &'static str, request: &'static str, pragma: bool, window: u64) -> bool {
    let response = cc(response);
    stale_if_unreachable_allows(&stored(10, age, &response), &cc(request), pragma, Duration::from_secs(window))
}

#[test]
fn rfc9111_4_2_4_a_disconnected_cache_serves_stale_within_its_window() {
    assert!(unreachable(70, "max-age=10", "", false, 60));
    assert!(!unreachable(71, "max-age=10", "", false, 60));
    assert!(!unreachable(11, "max-age=10", "", false, 0), "a zero window disables it");
    // stale-if-error applies whatever the window.
    assert!(unreachable(100, "max-age=10, stale-if-error=90", "", false, 0));
}

#[test]
fn rfc9111_4_2_4_a_disconnected_cache_obeys_directives_that_prohibit_stale() {
    for response in
        ["max-age=10, must-revalidate", "max-age=10, proxy-revalidate", "s-maxage=10", "max-age=10, no-cache"]
    {
        assert!(!unreachable(11, response, "", false, 60), "{response}");
    }
    assert!(!unreachable(11, "max-age=10", "no-cache", false, 60), "a client's no-cache asks for validation");
    assert!(!unreachable(11, "max-age=10", "", true, 60), "so does its Pragma: no-cache");
}

proptest! {
    #[test]
    fn rfc9111_4_2_fresh_only_when_lifetime_exceeds_age(lifetime in any::<u64>(), age in any::<u64>(), max_stale in proptest::option::of(any::<u64>())) {
        let response = CacheControl::default();
        let s = StoredFreshness { lifetime: Duration::from_secs(lifetime), age: Duration::from_secs(age), response_cc: &response };
        let request = CacheControl { max_stale: max_stale.map(MaxStale::Seconds), ..CacheControl::default() };
        let verdict = decide(&s, &request, false);
        prop_assert_eq!(verdict == Reuse::Fresh, lifetime > age);
        let _ = s.ttl_secs();
        let _ = stale_if_error_allows(&s, &request);
    }
}
