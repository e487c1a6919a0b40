//! Age calculation, RFC 9111 §4.2.3.

use http::header::HeaderMap;
use std::time::{Duration, SystemTime};

/// `corrected_initial_age` of §4.2.3 for a response received at `response_time` to a request
/// sent at `request_time`: `max(apparent_age, Age + response_delay)` where `apparent_age =
/// max(0, response_time - Date)` (0 without a valid `Date`). An invalid or negative `Age`
/// counts as 0; a huge one saturates.
pub fn corrected_initial_age(
    response_headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let _ = (response_headers, request_time, response_time);
    todo!()
}

/// `current_age` of §4.2.3: `corrected_initial_age + (now - response_time)`, where a clock
/// going backwards counts as no time passing.
pub fn current_age(corrected_initial_age: Duration, response_time: SystemTime, now: SystemTime) -> Duration {
    corrected_initial_age + now.duration_since(response_time).unwrap_or_default()
}
