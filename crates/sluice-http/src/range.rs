//! Range requests answered from a complete stored representation, RFC 9110 §14.

use crate::dates::{header_date, parse_http_date};
use crate::etag;
use http::header::{HeaderMap, DATE, IF_RANGE, LAST_MODIFIED, RANGE};
use http::Method;
use std::ops::Range;
use std::time::Duration;

mod spec;
#[cfg(test)]
mod tests;

/// What to send for a request that may carry `Range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Send the whole representation with its own status (no `Range`, not GET, a failed
    /// `If-Range`, a `Range` unit other than `bytes`, or a syntactically invalid `Range`,
    /// all of which §14.2 says to ignore).
    Full,
    /// Send 206 with these byte ranges (half-open), in request order, overlapping ones
    /// coalesced; one range means a single-part 206, several a `multipart/byteranges` one.
    /// Every range is non-empty and lies inside `0..len`; ranges that merely touch are
    /// coalesced too (§14.2 allows coalescing whenever the gap is smaller than a part's
    /// overhead), and a coalesced range takes the place of its earliest member.
    Partial(Vec<Range<u64>>),
    /// Send 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// How far into the representation a GET's `Range` starts: the smallest first-pos of its
/// ranges, before the representation's length is known (a cache deciding whether to fetch
/// the whole of it first). `None` without a valid `bytes` `Range` (it would be ignored);
/// `u64::MAX` when a suffix range (`bytes=-500`) is among them, as it reaches back from an
/// end not known yet.
pub fn first_offset(method: &Method, request: &HeaderMap) -> Option<u64> {
    if method != Method::GET {
        return None;
    }
    let mut lines = request.get_all(RANGE).iter();
    let (Some(range), None) = (lines.next(), lines.next()) else {
        return None;
    };
    spec::parse(range.as_bytes())?
        .into_iter()
        .map(|spec| match spec {
            spec::Spec::Int { first, .. } => first,
            spec::Spec::Suffix(_) => u64::MAX,
        })
        .min()
}

/// Evaluates `Range` (and `If-Range`, strong comparison against the stored `ETag` or exact
/// `Last-Modified` date) of a GET against a stored 200 of `len` bytes with headers `stored`.
/// At most 64 ranges are honoured; more is treated as invalid (`Full`).
///
/// Details: a `Range` sent on several lines is invalid. An `If-Range` date only matches when
/// it is a strong validator (§13.1.5, §8.8.2.2): it equals the stored `Last-Modified` and
/// the stored `Date` is at least one second later. For an empty representation, a suffix
/// range cannot be expressed in `Content-Range`, so it gives `Full`; other ranges are
/// unsatisfiable there.
pub fn evaluate(method: &Method, request: &HeaderMap, stored: &HeaderMap, len: u64) -> RangeOutcome {
    if method != Method::GET {
        return RangeOutcome::Full;
    }
    let mut lines = request.get_all(RANGE).iter();
    let (Some(range), None) = (lines.next(), lines.next()) else {
        return RangeOutcome::Full;
    };
    let Some(specs) = spec::parse(range.as_bytes()) else {
        return RangeOutcome::Full;
    };
    if request.contains_key(IF_RANGE) && !if_range_passes(request, stored) {
        return RangeOutcome::Full;
    }
    if len == 0 && specs.iter().any(|s| matches!(s, spec::Spec::Suffix(n) if *n > 0)) {
        return RangeOutcome::Full;
    }
    let ranges: Vec<Range<u64>> = specs.into_iter().filter_map(|s| s.resolve(len)).collect();
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial(coalesce(ranges))
}

/// §13.1.5: the condition holds when the validator strongly matches the stored one.
fn if_range_passes(request: &HeaderMap, stored: &HeaderMap) -> bool {
    let mut lines = request.get_all(IF_RANGE).iter();
    let (Some(value), None) = (lines.next(), lines.next()) else {
        return false;
    };
    let trimmed = crate::parse::trim_ows(value.as_bytes());
    if trimmed.starts_with(b"\"") || trimmed.starts_with(b"W/") {
        return match (etag::parse(trimmed), etag::stored(stored)) {
            (Some(given), Some(current)) => given.strong_eq(&current),
            _ => false,
        };
    }
    let (Some(given), Some(modified)) = (parse_http_date(value), header_date(stored, &LAST_MODIFIED)) else {
        return false;
    };
    let strong = header_date(stored, &DATE)
        .and_then(|date| date.duration_since(modified).ok())
        .is_some_and(|gap| gap >= Duration::from_secs(1));
    strong && given == modified
}

/// Merges overlapping or touching ranges. Each merged range sits where its earliest member
/// was; the rest keep request order.
fn coalesce(ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for mut range in ranges {
        // Absorb every earlier range this one meets; it then takes the first one's place.
        let mut slot = None;
        let mut i = 0;
        while i < out.len() {
            if out[i].start <= range.end && range.start <= out[i].end {
                range = out[i].start.min(range.start)..out[i].end.max(range.end);
                out.remove(i);
                slot = Some(slot.map_or(i, |s: usize| s.min(i)));
                // Restart: the grown range may now meet ranges already passed.
                i = 0;
            } else {
                i += 1;
            }
        }
        match slot {
            Some(s) => out.insert(s.min(out.len()), range),
            None => out.push(range),
        }
    }
    out
}

/// The `Content-Range` value `bytes first-last/len` of one part. `range` must be non-empty,
/// as every range [`evaluate`] returns is (an empty one does not panic, but renders as
/// `first-first`).
pub fn content_range(range: &Range<u64>, len: u64) -> String {
    format!("bytes {}-{}/{}", range.start, range.end.saturating_sub(1).max(range.start), len)
}

/// One part of a `multipart/byteranges` body: the part's header block (starting with the
/// boundary delimiter line) and the byte range that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub head: String,
    pub range: Range<u64>,
}

/// Lays out a `multipart/byteranges` body (RFC 9110 §14.6): returns the parts and the
/// closing delimiter; the body is `part.head, bytes[part.range]` for each part, then the
/// closing delimiter. `content_type` is the stored `Content-Type`, if any.
///
/// The layout follows RFC 2046 §5.1.1 with no preamble: the first part starts with
/// `--boundary CRLF`, later parts with `CRLF --boundary CRLF` (the CRLF ending the previous
/// part's data belongs to the delimiter), each followed by its `Content-Type` (if any) and
/// `Content-Range` lines and an empty line; the closing delimiter is `CRLF --boundary-- CRLF`.
/// CR and LF are dropped from `content_type` and `boundary` so they cannot forge lines.
pub fn multipart_layout(
    ranges: &[Range<u64>],
    len: u64,
    content_type: Option<&str>,
    boundary: &str,
) -> (Vec<Part>, String) {
    let boundary = without_line_breaks(boundary);
    let content_type = content_type.map(without_line_breaks);
    let parts = ranges
        .iter()
        .enumerate()
        .map(|(i, range)| {
            let mut head = String::new();
            if i > 0 {
                head.push_str("\r\n");
            }
            head.push_str(&format!("--{boundary}\r\n"));
            if let Some(ct) = &content_type {
                head.push_str(&format!("Content-Type: {ct}\r\n"));
            }
            head.push_str(&format!("Content-Range: {}\r\n\r\n", content_range(range, len)));
            Part { head, range: range.clone() }
        })
        .collect();
    (parts, format!("\r\n--{boundary}--\r\n"))
}

fn without_line_breaks(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect()
}
