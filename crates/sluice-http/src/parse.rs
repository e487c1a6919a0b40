//! Low-level field-value parsing shared by the modules (RFC 9110 §5.6): list splitting,
//! quoted strings, tokens, and delta-seconds.
//!
//! Everything works on bytes, because field values may legally carry obs-text (bytes
//! 0x80-0xFF) and `HeaderValue::to_str` would reject them. Nothing here can panic.

/// The largest delta-seconds value represented. RFC 9111 §1.2.2: a larger value, or one
/// that overflows, MUST be read as 2^31 (or the greatest integer conveniently represented);
/// saturating at 2^31 also keeps every later `Duration` sum far from overflow.
pub(crate) const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// Optional whitespace (RFC 9110 §5.6.3): SP or HTAB.
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `s` without leading and trailing OWS.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ows(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// `tchar` of RFC 9110 §5.6.2.
pub(crate) fn is_tchar(b: u8) -> bool {
    // A `match` compiles to a range check and a bit test, not a scan of the symbols.
    matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// Splits one field line into the members of a comma-separated list (RFC 9110 §5.6.1).
/// Commas inside quoted strings (with backslash escapes) do not split; members are
/// OWS-trimmed and empty members dropped, as §5.6.1 requires recipients to tolerate them.
pub(crate) fn split_list(line: &[u8]) -> Vec<&[u8]> {
    let mut members = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, &b) in line.iter().enumerate() {
        if in_quotes {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_quotes = false;
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == b',' {
            push_member(&mut members, &line[start..i]);
            start = i + 1;
        }
    }
    push_member(&mut members, &line[start..]);
    members
}

fn push_member<'a>(members: &mut Vec<&'a [u8]>, raw: &'a [u8]) {
    let member = trim_ows(raw);
    if !member.is_empty() {
        members.push(member);
    }
}

/// The content of a `quoted-string` (RFC 9110 §5.6.4) with escapes resolved. `None` unless
/// `s` is exactly one well-formed quoted string.
pub(crate) fn unquote(s: &[u8]) -> Option<Vec<u8>> {
    let inner = s.strip_prefix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut iter = inner.iter().enumerate();
    while let Some((i, &b)) = iter.next() {
        match b {
            b'\\' => out.push(*iter.next()?.1),
            // The closing quote must be the last byte.
            b'"' => return (i + 1 == inner.len()).then_some(out),
            _ => out.push(b),
        }
    }
    None
}

/// Parses `delta-seconds` (RFC 9111 §1.2.2): one or more ASCII digits, saturating at
/// [`DELTA_SECONDS_MAX`]. Signs, spaces and empty input are invalid.
pub(crate) fn parse_delta_seconds(s: &[u8]) -> Option<u64> {
    parse_digits(s).map(|n| n.min(DELTA_SECONDS_MAX))
}

/// Parses one or more ASCII digits as a `u64`, saturating at `u64::MAX`.
pub(crate) fn parse_digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |acc, &d| acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))))
}

/// A directive argument that should be delta-seconds, given as a token or (as recipients
/// must also accept, RFC 9111 §5.2) as a quoted string.
pub(crate) fn parse_delta_seconds_arg(raw: &[u8]) -> Option<u64> {
    if raw.first() == Some(&b'"') {
        parse_delta_seconds(&unquote(raw)?)
    } else {
        parse_delta_seconds(raw)
    }
}

/// Splits a `name[=value]` list member (a cache directive, RFC 9111 §5.2) into its name and
/// raw value, both OWS-trimmed. `None` for the value when there is no `=`.
pub(crate) fn split_directive(member: &[u8]) -> (&[u8], Option<&[u8]>) {
    match member.iter().position(|&b| b == b'=') {
        Some(i) => (trim_ows(&member[..i]), Some(trim_ows(&member[i + 1..]))),
        None => (trim_ows(member), None),
    }
}

/// The OWS-trimmed members of every line of a comma-separated list field, in order.
pub(crate) fn list_members<'a>(headers: &'a http::HeaderMap, name: &http::header::HeaderName) -> Vec<&'a [u8]> {
    headers.get_all(name).iter().flat_map(|v| split_list(v.as_bytes())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9110_5_6_2_tchar_is_alphanumeric_or_the_listed_symbols() {
        for b in 0..=255u8 {
            let expected = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), expected, "byte {b}");
        }
    }

    #[test]
    fn rfc9110_5_6_1_list_ignores_empty_members_and_ows() {
        assert_eq!(split_list(b" a ,, b\t,\t, c "), vec![&b"a"[..], b"b", b"c"]);
        assert!(split_list(b" , ,").is_empty());
        assert!(split_list(b"").is_empty());
    }

    #[test]
    fn rfc9110_5_6_1_list_does_not_split_inside_quoted_strings() {
        assert_eq!(
            split_list(br#"private="a, b", no-cache="c\", d", x"#),
            vec![&br#"private="a, b""#[..], br#"no-cache="c\", d""#, b"x"]
        );
    }

    #[test]
    fn rfc9110_5_6_4_unquote_resolves_escapes() {
        assert_eq!(unquote(br#""a\"b\\c""#).as_deref(), Some(&br#"a"b\c"#[..]));
        assert_eq!(unquote(br#""""#).as_deref(), Some(&b""[..]));
        assert_eq!(unquote(br#""abc"#), None);
        assert_eq!(unquote(br#""a"b"#), None);
        assert_eq!(unquote(b"abc"), None);
        assert_eq!(unquote(br#""a\"#), None);
    }

    #[test]
    fn rfc9111_1_2_2_delta_seconds_saturate_at_2_pow_31() {
        assert_eq!(parse_delta_seconds(b"0"), Some(0));
        assert_eq!(parse_delta_seconds(b"60"), Some(60));
        assert_eq!(parse_delta_seconds(b"99999999999999999999999999"), Some(DELTA_SECONDS_MAX));
        assert_eq!(parse_delta_seconds(b""), None);
        assert_eq!(parse_delta_seconds(b"-1"), None);
        assert_eq!(parse_delta_seconds(b"+1"), None);
        assert_eq!(parse_delta_seconds(b"1.5"), None);
        assert_eq!(parse_delta_seconds(b"1 2"), None);
    }

    #[test]
    fn rfc9111_5_2_delta_seconds_argument_may_be_quoted() {
        assert_eq!(parse_delta_seconds_arg(br#""30""#), Some(30));
        assert_eq!(parse_delta_seconds_arg(b"30"), Some(30));
        assert_eq!(parse_delta_seconds_arg(br#""30"#), None);
        assert_eq!(parse_delta_seconds_arg(br#""x""#), None);
    }

    #[test]
    fn rfc9111_5_2_directive_splits_at_first_equals() {
        assert_eq!(split_directive(b"max-age=5"), (&b"max-age"[..], Some(&b"5"[..])));
        assert_eq!(split_directive(b"no-store"), (&b"no-store"[..], None));
        assert_eq!(split_directive(b"a = b=c"), (&b"a"[..], Some(&b"b=c"[..])));
        assert_eq!(split_directive(b"max-age="), (&b"max-age"[..], Some(&b""[..])));
    }

    #[test]
    fn rfc9110_5_6_2_tchars() {
        assert!(b"no-cache!#$%&'*+.^_`|~09AZ".iter().all(|&b| is_tchar(b)));
        assert!(!b" \t\"(),/:;<=>?@[\\]{}\x7f\x80".iter().any(|&b| is_tchar(b)));
    }
}
