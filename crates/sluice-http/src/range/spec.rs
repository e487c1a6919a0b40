//! Parsing the `Range` field of byte ranges, RFC 9110 §14.1.1 and §14.2.

use crate::parse::{parse_digits, split_list, trim_ows};

/// The most ranges honoured; more is treated as an invalid (hence ignored) `Range`, as
/// §14.2 allows against denial-of-service through many small ranges.
pub(super) const MAX_RANGES: usize = 64;

/// One `range-spec` of the `bytes` unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spec {
    /// `first-pos "-" [ last-pos ]`, with `last >= first` when present.
    Int { first: u64, last: Option<u64> },
    /// `"-" suffix-length`.
    Suffix(u64),
}

/// Parses a `Range` value `bytes=range-set`. `None` when the unit is not `bytes` (compared
/// case-insensitively, §14.1), the set is empty or longer than [`MAX_RANGES`], or any
/// range-spec is invalid (§14.1.1: then the whole ranges-specifier is invalid). Numbers too
/// large for `u64` saturate, which leaves them beyond any representation length.
pub(super) fn parse(value: &[u8]) -> Option<Vec<Spec>> {
    let value = trim_ows(value);
    let eq = value.iter().position(|&b| b == b'=')?;
    if !value[..eq].eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let members = split_list(&value[eq + 1..]);
    if members.is_empty() || members.len() > MAX_RANGES {
        return None;
    }
    members.into_iter().map(parse_spec).collect()
}

fn parse_spec(s: &[u8]) -> Option<Spec> {
    let dash = s.iter().position(|&b| b == b'-')?;
    let (first, last) = (&s[..dash], &s[dash + 1..]);
    if first.is_empty() {
        return parse_digits(last).map(Spec::Suffix);
    }
    let first = parse_digits(first)?;
    let last = if last.is_empty() { None } else { Some(parse_digits(last)?) };
    match last {
        Some(l) if l < first => None,
        _ => Some(Spec::Int { first, last }),
    }
}

impl Spec {
    /// The half-open byte range this spec selects from `len` bytes, clipped to them; `None`
    /// when unsatisfiable (§14.1.1: first-pos at or past the end, or a zero suffix).
    pub(super) fn resolve(self, len: u64) -> Option<std::ops::Range<u64>> {
        let range = match self {
            Spec::Int { first, last } => first..last.map_or(len, |l| l.saturating_add(1).min(len)),
            Spec::Suffix(n) => len.saturating_sub(n)..len,
        };
        (range.start < range.end).then_some(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9110_14_1_1_parses_all_range_spec_forms() {
        assert_eq!(
            parse(b"bytes=0-499, 500-, -500,  ,9500-9999"),
            Some(vec![
                Spec::Int { first: 0, last: Some(499) },
                Spec::Int { first: 500, last: None },
                Spec::Suffix(500),
                Spec::Int { first: 9500, last: Some(9999) },
            ])
        );
        assert_eq!(parse(b"Bytes=1-2"), Some(vec![Spec::Int { first: 1, last: Some(2) }]));
    }

    #[test]
    fn rfc9110_14_1_1_invalid_specifiers() {
        for bad in [
            &b"bytes=5-4"[..],
            b"bytes=",
            b"bytes=,",
            b"bytes=-",
            b"bytes=a-b",
            b"bytes=1-2-3",
            b"bytes=1 -2",
            b"bytes=+1-2",
            b"bytes=1-2,x",
            b"items=1-2",
            b"1-2",
            b"bytes 1-2",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn rfc9110_14_2_too_many_ranges_are_invalid() {
        let ok = format!("bytes={}", vec!["0-0"; MAX_RANGES].join(","));
        assert_eq!(parse(ok.as_bytes()).map(|v| v.len()), Some(MAX_RANGES));
        let too_many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(parse(too_many.as_bytes()), None);
    }

    #[test]
    fn rfc9110_14_1_1_huge_numbers_saturate() {
        assert_eq!(
            parse(b"bytes=0-999999999999999999999999"),
            Some(vec![Spec::Int { first: 0, last: Some(u64::MAX) }])
        );
        assert_eq!(Spec::Int { first: 0, last: Some(u64::MAX) }.resolve(10), Some(0..10));
    }

    #[test]
    fn rfc9110_14_1_2_resolution_clips_and_detects_unsatisfiable() {
        assert_eq!(Spec::Int { first: 2, last: Some(5) }.resolve(10), Some(2..6));
        assert_eq!(Spec::Int { first: 2, last: Some(50) }.resolve(10), Some(2..10));
        assert_eq!(Spec::Int { first: 2, last: None }.resolve(10), Some(2..10));
        assert_eq!(Spec::Int { first: 10, last: None }.resolve(10), None);
        assert_eq!(Spec::Suffix(3).resolve(10), Some(7..10));
        assert_eq!(Spec::Suffix(30).resolve(10), Some(0..10));
        assert_eq!(Spec::Suffix(0).resolve(10), None);
        assert_eq!(Spec::Suffix(5).resolve(0), None);
    }
}
