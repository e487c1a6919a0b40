//! Age calculation, RFC 9111 §4.2.3.

use crate::dates::header_date;
use crate::parse::{parse_delta_seconds, split_list};
use http::header::{HeaderMap, AGE, DATE};
use std::time::{Duration, SystemTime};

/// `corrected_initial_age` of §4.2.3 for a response received at `response_time` to a request
/// sent at `request_time`: `max(apparent_age, Age + response_delay)` where `apparent_age =
/// max(0, response_time - Date)` (0 without a valid `Date`). An invalid or negative `Age`
/// counts as 0; a huge one saturates at 2^31 seconds (§1.2.2). A list-valued `Age` uses its
/// first member (§5.1). A `response_time` earlier than `request_time` counts as no delay.
pub fn corrected_initial_age(
    response_headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent_age = header_date(response_headers, &DATE)
        .and_then(|date| response_time.duration_since(date).ok())
        .unwrap_or_default();
    let response_delay = response_time.duration_since(request_time).unwrap_or_default();
    let corrected_age_value = age_value(response_headers).saturating_add(response_delay);
    apparent_age.max(corrected_age_value)
}

/// The `Age` field value in seconds (§5.1), 0 when absent or invalid.
fn age_value(headers: &HeaderMap) -> Duration {
    let first_member = headers.get(AGE).and_then(|v| split_list(v.as_bytes()).first().copied());
    Duration::from_secs(first_member.and_then(parse_delta_seconds).unwrap_or(0))
}

/// `current_age` of §4.2.3: `corrected_initial_age + (now - response_time)`, where a clock
/// going backwards counts as no time passing. Saturates instead of overflowing.
pub fn current_age(corrected_initial_age: Duration, response_time: SystemTime, now: SystemTime) -> Duration {
    corrected_initial_age.saturating_add(now.duration_since(response_time).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dates::format_http_date;
    use http::header::HeaderValue;
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn response(date: Option<u64>, age: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(d) = date {
            h.insert(DATE, format_http_date(at(d)));
        }
        if let Some(a) = age {
            h.insert(AGE, HeaderValue::from_static(a));
        }
        h
    }

    const T: u64 = 1_700_000_000;

    #[test]
    fn rfc9111_4_2_3_age_uses_apparent_age_when_larger() {
        // Date 100 s before receipt, Age 10, 2 s round trip.
        let h = response(Some(T - 100), Some("10"));
        assert_eq!(corrected_initial_age(&h, at(T - 2), at(T)), Duration::from_secs(100));
    }

    #[test]
    fn rfc9111_4_2_3_age_uses_age_plus_response_delay_when_larger() {
        let h = response(Some(T - 5), Some("30"));
        assert_eq!(corrected_initial_age(&h, at(T - 2), at(T)), Duration::from_secs(32));
    }

    #[test]
    fn rfc9111_4_2_3_date_in_the_future_gives_zero_apparent_age() {
        let h = response(Some(T + 500), None);
        assert_eq!(corrected_initial_age(&h, at(T - 1), at(T)), Duration::from_secs(1));
    }

    #[test]
    fn rfc9111_4_2_3_missing_date_and_age_give_the_response_delay() {
        let h = response(None, None);
        assert_eq!(corrected_initial_age(&h, at(T - 3), at(T)), Duration::from_secs(3));
    }

    #[test]
    fn rfc9111_5_1_invalid_or_negative_age_counts_as_zero() {
        for bad in ["-5", "abc", "", "1.5"] {
            let h = response(Some(T), Some(bad));
            assert_eq!(corrected_initial_age(&h, at(T), at(T)), Duration::ZERO, "{bad}");
        }
    }

    #[test]
    fn rfc9111_5_1_list_valued_age_uses_first_member() {
        let h = response(Some(T), Some("7, 100"));
        assert_eq!(corrected_initial_age(&h, at(T), at(T)), Duration::from_secs(7));
    }

    #[test]
    fn rfc9111_1_2_2_huge_age_saturates() {
        let h = response(Some(T), Some("999999999999999999999999"));
        assert_eq!(corrected_initial_age(&h, at(T), at(T)), Duration::from_secs(1 << 31));
    }

    #[test]
    fn rfc9111_4_2_3_response_before_request_counts_as_no_delay() {
        let h = response(None, Some("4"));
        assert_eq!(corrected_initial_age(&h, at(T + 10), at(T)), Duration::from_secs(4));
    }

    #[test]
    fn rfc9111_4_2_3_current_age_adds_resident_time() {
        assert_eq!(current_age(Duration::from_secs(5), at(T), at(T + 60)), Duration::from_secs(65));
        // A clock going backwards adds nothing.
        assert_eq!(current_age(Duration::from_secs(5), at(T), at(T - 60)), Duration::from_secs(5));
        // No overflow panic.
        assert_eq!(current_age(Duration::MAX, at(0), at(T)), Duration::MAX);
    }

    proptest! {
        #[test]
        fn rfc9111_4_2_3_corrected_age_is_at_least_the_response_delay(
            age in proptest::collection::vec(any::<u8>(), 0..24),
            req in 0u64..4_000_000_000, resp in 0u64..4_000_000_000, date in 0u64..4_000_000_000,
        ) {
            let mut h = response(Some(date), None);
            if let Ok(v) = HeaderValue::from_bytes(&age) {
                h.insert(AGE, v);
            }
            let got = corrected_initial_age(&h, at(req), at(resp));
            prop_assert!(got >= Duration::from_secs(resp.saturating_sub(req)));
        }
    }
}
