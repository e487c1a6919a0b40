//! HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, RFC 850 and asctime forms.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The last instant an HTTP-date can express (9999-12-31T23:59:59Z); later times are
/// formatted as this one.
const LATEST_SECS: u64 = 253_402_300_799;

/// Parses an HTTP-date. `None` for anything invalid (including `0` and `-1`).
///
/// All three formats of §5.6.7 are accepted; a weekday that does not match the date, an
/// impossible day, a year before 1970 or non-ASCII bytes make the value invalid. Two-digit
/// RFC 850 years below 70 are read as 20xx (there is no clock here for the "50 years in the
/// future" rule).
pub fn parse_http_date(value: &HeaderValue) -> Option<SystemTime> {
    let s = std::str::from_utf8(value.as_bytes()).ok()?;
    httpdate::parse_http_date(s.trim()).ok()
}

/// Parses the first line of the date field `name` in `headers`.
pub fn header_date(headers: &HeaderMap, name: &HeaderName) -> Option<SystemTime> {
    headers.get(name).and_then(parse_http_date)
}

/// Formats `t` as an IMF-fixdate header value. Sub-second precision is truncated; times
/// before 1970 or after year 9999 are clamped to that range (httpdate would panic on them).
pub fn format_http_date(t: SystemTime) -> HeaderValue {
    let latest = UNIX_EPOCH + Duration::from_secs(LATEST_SECS);
    let clamped = t.clamp(UNIX_EPOCH, latest);
    let text = httpdate::fmt_http_date(clamped);
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{DATE, EXPIRES};
    use proptest::prelude::*;

    const SUN_06_NOV_1994: u64 = 784_111_777;

    fn parse(s: &'static str) -> Option<SystemTime> {
        parse_http_date(&HeaderValue::from_static(s))
    }

    #[test]
    fn rfc9110_5_6_7_accepts_all_three_formats() {
        let t = UNIX_EPOCH + Duration::from_secs(SUN_06_NOV_1994);
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), Some(t));
    }

    #[test]
    fn rfc9111_5_3_invalid_dates_such_as_zero_are_rejected() {
        for bad in [
            "0",
            "-1",
            "",
            "tomorrow",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let obs_text = HeaderValue::from_bytes(b"Sun, 06 Nov 1994 08:49:37 GMT\xff").ok();
        assert_eq!(obs_text.as_ref().and_then(parse_http_date), None);
    }

    #[test]
    fn rfc9110_5_6_7_header_date_reads_first_line() {
        let mut h = HeaderMap::new();
        h.append(DATE, HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        h.append(DATE, HeaderValue::from_static("Mon, 07 Nov 1994 08:49:37 GMT"));
        assert_eq!(header_date(&h, &DATE), Some(UNIX_EPOCH + Duration::from_secs(SUN_06_NOV_1994)));
        assert_eq!(header_date(&h, &EXPIRES), None);
    }

    #[test]
    fn rfc9110_5_6_7_formats_imf_fixdate() {
        let t = UNIX_EPOCH + Duration::from_millis(SUN_06_NOV_1994 * 1000 + 999);
        assert_eq!(format_http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn rfc9110_5_6_7_formatting_clamps_out_of_range_times() {
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(format_http_date(before), "Thu, 01 Jan 1970 00:00:00 GMT");
        let after = UNIX_EPOCH + Duration::from_secs(LATEST_SECS + 1_000_000);
        assert_eq!(format_http_date(after), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    proptest! {
        #[test]
        fn rfc9110_5_6_7_format_then_parse_round_trips(secs in 0u64..=LATEST_SECS) {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            prop_assert_eq!(parse_http_date(&format_http_date(t)), Some(t));
        }

        #[test]
        fn rfc9110_5_6_7_parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(v) = HeaderValue::from_bytes(&bytes) {
                let _ = parse_http_date(&v);
            }
        }
    }
}
