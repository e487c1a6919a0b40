use super::*;
use crate::dates::format_http_date;
use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, CDN_CACHE_CONTROL, PRAGMA};
use std::time::UNIX_EPOCH;

const T: u64 = 1_700_000_000;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

struct Resp(HeaderMap);

impl Resp {
    fn new() -> Self {
        Resp(HeaderMap::new())
    }
    fn date(mut self, name: HeaderName, secs: u64) -> Self {
        self.0.insert(name, format_http_date(at(secs)));
        self
    }
    fn raw(mut self, name: HeaderName, value: &'static str) -> Self {
        self.0.append(name, HeaderValue::from_static(value));
        self
    }
    fn lifetime(&self, status: u16) -> (Duration, LifetimeSource) {
        self.lifetime_with(status, &Heuristic::default())
    }
    fn lifetime_with(&self, status: u16, heuristic: &Heuristic) -> (Duration, LifetimeSource) {
        let status = StatusCode::from_u16(status).unwrap();
        let cc = CacheControl::effective_for_cdn(&self.0);
        freshness_lifetime(status, &self.0, &cc, at(T), heuristic)
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn rfc9111_4_2_1_s_maxage_wins_over_max_age_and_expires() {
    let r = Resp::new().raw(CACHE_CONTROL, "max-age=10, s-maxage=20").date(DATE, T).date(EXPIRES, T + 30);
    assert_eq!(r.lifetime(200), (secs(20), LifetimeSource::SMaxAge));
}

#[test]
fn rfc9111_4_2_1_max_age_wins_over_expires() {
    let r = Resp::new().raw(CACHE_CONTROL, "max-age=10").date(DATE, T).date(EXPIRES, T + 30);
    assert_eq!(r.lifetime(200), (secs(10), LifetimeSource::MaxAge));
}

#[test]
fn rfc9111_4_2_1_duplicated_max_age_is_stale() {
    let r = Resp::new().raw(CACHE_CONTROL, "max-age=10").raw(CACHE_CONTROL, "max-age=10");
    assert_eq!(r.lifetime(200), (Duration::ZERO, LifetimeSource::MaxAge));
}

#[test]
fn rfc9111_4_2_1_expires_minus_date() {
    let r = Resp::new().date(DATE, T - 100).date(EXPIRES, T + 200);
    assert_eq!(r.lifetime(200), (secs(300), LifetimeSource::Expires));
}

#[test]
fn rfc9111_4_2_1_expires_without_date_uses_response_time() {
    let r = Resp::new().date(EXPIRES, T + 200);
    assert_eq!(r.lifetime(200), (secs(200), LifetimeSource::Expires));
}

#[test]
fn rfc9111_5_3_invalid_expires_means_already_expired() {
    for bad in ["0", "-1", "next week", ""] {
        let r = Resp::new().date(DATE, T).raw(EXPIRES, bad).date(LAST_MODIFIED, T - 1000);
        assert_eq!(r.lifetime(200), (Duration::ZERO, LifetimeSource::Expires), "{bad}");
    }
}

#[test]
fn rfc9111_4_2_1_expires_before_date_is_zero() {
    let r = Resp::new().date(DATE, T).date(EXPIRES, T - 60);
    assert_eq!(r.lifetime(200), (Duration::ZERO, LifetimeSource::Expires));
}

#[test]
fn rfc9111_4_2_2_heuristic_is_ten_percent_of_date_minus_last_modified() {
    let r = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 10_000);
    assert_eq!(r.lifetime(200), (secs(1_000), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_5_4_a_response_pragma_no_cache_without_cache_control_has_no_heuristic() {
    let r = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 10_000).raw(PRAGMA, "no-cache");
    assert_eq!(r.lifetime(200), (Duration::ZERO, LifetimeSource::None));
    let with_cc = r.raw(CACHE_CONTROL, "public");
    assert_eq!(
        with_cc.lifetime(200),
        (secs(1_000), LifetimeSource::Heuristic),
        "Cache-Control present: Pragma ignored"
    );
}

#[test]
fn rfc9111_4_2_2_heuristic_is_capped() {
    let r = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 100 * 24 * 3600);
    assert_eq!(r.lifetime(200), (secs(24 * 3600), LifetimeSource::Heuristic));
    let small = Heuristic { last_modified_fraction: 0.1, max: secs(60), fixed: None };
    assert_eq!(r.lifetime_with(200, &small), (secs(60), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_4_2_2_heuristic_tolerates_odd_fractions() {
    let r = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 1_000);
    let negative = Heuristic { last_modified_fraction: -1.0, max: secs(60), fixed: None };
    assert_eq!(r.lifetime_with(200, &negative), (Duration::ZERO, LifetimeSource::Heuristic));
    let nan = Heuristic { last_modified_fraction: f64::NAN, max: secs(60), fixed: None };
    assert_eq!(r.lifetime_with(200, &nan), (Duration::ZERO, LifetimeSource::Heuristic));
    let infinite = Heuristic { last_modified_fraction: f64::INFINITY, max: secs(60), fixed: None };
    assert_eq!(r.lifetime_with(200, &infinite), (secs(60), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_4_2_2_heuristic_without_date_uses_response_time() {
    let r = Resp::new().date(LAST_MODIFIED, T - 500);
    assert_eq!(r.lifetime(404), (secs(50), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_4_2_2_no_heuristic_for_non_cacheable_status_unless_public() {
    let r = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 10_000);
    assert_eq!(r.lifetime(302), (Duration::ZERO, LifetimeSource::None));
    assert_eq!(r.lifetime(500), (Duration::ZERO, LifetimeSource::None));
    let public = Resp::new().raw(CACHE_CONTROL, "public").date(DATE, T).date(LAST_MODIFIED, T - 10_000);
    assert_eq!(public.lifetime(302), (secs(1_000), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_4_2_2_no_heuristic_without_earlier_last_modified() {
    assert_eq!(Resp::new().date(DATE, T).lifetime(200), (Duration::ZERO, LifetimeSource::None));
    let same = Resp::new().date(DATE, T).date(LAST_MODIFIED, T);
    assert_eq!(same.lifetime(200), (Duration::ZERO, LifetimeSource::None));
    let later = Resp::new().date(DATE, T).date(LAST_MODIFIED, T + 10);
    assert_eq!(later.lifetime(200), (Duration::ZERO, LifetimeSource::None));
    let invalid = Resp::new().date(DATE, T).raw(LAST_MODIFIED, "yesterday");
    assert_eq!(invalid.lifetime(200), (Duration::ZERO, LifetimeSource::None));
}

#[test]
fn rfc9110_15_1_heuristically_cacheable_statuses() {
    let cacheable: Vec<u16> =
        (100..600).filter(|&s| heuristically_cacheable(StatusCode::from_u16(s).unwrap())).collect();
    assert_eq!(cacheable, vec![200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]);
}

#[test]
fn rfc9213_2_2_cdn_cache_control_max_age_wins() {
    let r = Resp::new().raw(CACHE_CONTROL, "max-age=10").raw(CDN_CACHE_CONTROL, "max-age=600");
    assert_eq!(r.lifetime(200), (secs(600), LifetimeSource::MaxAge));
}

#[test]
fn rfc9213_2_2_expires_is_consulted_unless_the_caller_removes_it() {
    let r =
        Resp::new().raw(CDN_CACHE_CONTROL, "public").date(DATE, T).date(EXPIRES, T + 300).date(LAST_MODIFIED, T - 100);
    // The function cannot know whether the caller is a CDN cache: Expires counts.
    assert_eq!(r.lifetime(200), (secs(300), LifetimeSource::Expires));
    // A CDN cache drops Expires while CDN-Cache-Control is in force, as RFC 9213 §2.2 says.
    assert!(crate::cache_control::cdn_cache_control_in_force(&r.0));
    let mut headers = r.0.clone();
    headers.remove(EXPIRES);
    assert_eq!(Resp(headers).lifetime(200), (secs(10), LifetimeSource::Heuristic));
}

#[test]
fn rfc9111_4_2_2_a_fixed_heuristic_replaces_the_fraction_where_a_heuristic_applies() {
    let fixed = Heuristic { fixed: Some(secs(600)), ..Heuristic::default() };
    // With or without Last-Modified, for heuristically cacheable statuses.
    let modified = Resp::new().date(DATE, T).date(LAST_MODIFIED, T - 100 * 24 * 3600);
    assert_eq!(modified.lifetime_with(200, &fixed), (secs(600), LifetimeSource::Heuristic));
    let bare = Resp::new().date(DATE, T);
    assert_eq!(bare.lifetime_with(404, &fixed), (secs(600), LifetimeSource::Heuristic));
    assert_eq!(bare.lifetime_with(302, &fixed), (Duration::ZERO, LifetimeSource::None), "302: no heuristic");
    // Never over an explicit lifetime.
    let explicit = Resp::new().date(DATE, T).date(EXPIRES, T + 5);
    assert_eq!(explicit.lifetime_with(200, &fixed), (secs(5), LifetimeSource::Expires));
}
