//! Entity tags and their comparison, RFC 9110 §8.8.3.
//!
//! An `opaque-tag` may contain commas and backslashes and has no escapes, so entity-tag
//! lists get their own scanner instead of the generic quoted-string list splitter.

use http::header::{HeaderMap, HeaderName, ETAG};

/// One entity tag; `opaque` excludes the surrounding quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntityTag<'a> {
    pub weak: bool,
    pub opaque: &'a [u8],
}

impl EntityTag<'_> {
    /// Strong comparison (§8.8.3.2): both strong and character-by-character equal.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison (§8.8.3.2): opaque tags equal, whatever the weakness indicators.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// `etagc = %x21 / %x23-7E / obs-text`.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// Parses an entity tag at the start of `s`; returns it and the rest of `s`.
fn parse_prefix(s: &[u8]) -> Option<(EntityTag<'_>, &[u8])> {
    // The weakness indicator `W/` is case-sensitive (§8.8.3).
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let body = s.strip_prefix(b"\"")?;
    let close = body.iter().position(|&b| b == b'"')?;
    let opaque = &body[..close];
    opaque.iter().all(|&b| is_etagc(b)).then_some((EntityTag { weak, opaque }, &body[close + 1..]))
}

/// Parses a field value that is exactly one entity tag (OWS around it allowed).
pub(crate) fn parse(value: &[u8]) -> Option<EntityTag<'_>> {
    let (tag, rest) = parse_prefix(crate::parse::trim_ows(value))?;
    rest.is_empty().then_some(tag)
}

/// The stored response's `ETag` (first line), if it is a valid entity tag.
pub(crate) fn stored(headers: &HeaderMap) -> Option<EntityTag<'_>> {
    headers.get(ETAG).and_then(|v| parse(v.as_bytes()))
}

/// An `If-Match`/`If-None-Match` field value: `"*" / #entity-tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TagList<'a> {
    Any,
    /// The valid tags; invalid members are skipped, so this may be empty.
    Tags(Vec<EntityTag<'a>>),
}

impl TagList<'_> {
    /// Does the list match the current representation's tag (§13.1.1, §13.1.2)? `*` matches
    /// any existing representation; otherwise some member must compare equal to `current`.
    pub fn matches(&self, current: Option<&EntityTag<'_>>, strong: bool) -> bool {
        match self {
            TagList::Any => true,
            TagList::Tags(tags) => {
                current.is_some_and(|cur| tags.iter().any(|t| if strong { t.strong_eq(cur) } else { t.weak_eq(cur) }))
            }
        }
    }
}

/// Parses every line of the list field `name`; `None` when the field is absent.
pub(crate) fn list<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<TagList<'a>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut tags = Vec::new();
    for line in lines {
        let mut s = line.as_bytes();
        loop {
            s = skip_separators(s);
            if s.is_empty() {
                break;
            }
            if let Some(rest) = s.strip_prefix(b"*") {
                if member_ends(rest) {
                    return Some(TagList::Any);
                }
            }
            match parse_prefix(s) {
                Some((tag, rest)) if member_ends(rest) => {
                    tags.push(tag);
                    s = rest;
                }
                // Not a valid member: skip it, up to the next comma.
                _ => s = s.iter().position(|&b| b == b',').map_or(&[][..], |i| &s[i..]),
            }
        }
    }
    Some(TagList::Tags(tags))
}

fn skip_separators(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b',' || crate::parse::is_ows(b)).count();
    &s[n..]
}

/// True when only OWS separates the end of a member from the next comma or the end.
fn member_ends(rest: &[u8]) -> bool {
    matches!(rest.iter().find(|&&b| !crate::parse::is_ows(b)), None | Some(b','))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, IF_NONE_MATCH};

    fn tag(weak: bool, opaque: &[u8]) -> EntityTag<'_> {
        EntityTag { weak, opaque }
    }

    #[test]
    fn rfc9110_8_8_3_parses_strong_and_weak_tags() {
        assert_eq!(parse(br#""xyzzy""#), Some(tag(false, b"xyzzy")));
        assert_eq!(parse(br#"W/"xyzzy""#), Some(tag(true, b"xyzzy")));
        assert_eq!(parse(br#""""#), Some(tag(false, b"")));
        assert_eq!(parse(br#" "a,b\" "#), Some(tag(false, br"a,b\")));
    }

    #[test]
    fn rfc9110_8_8_3_rejects_malformed_tags() {
        assert_eq!(parse(b"xyzzy"), None);
        assert_eq!(parse(br#"w/"xyzzy""#), None);
        assert_eq!(parse(br#""xy zzy""#), None);
        assert_eq!(parse(br#""xyzzy"x"#), None);
        assert_eq!(parse(br#""xyzzy"#), None);
    }

    #[test]
    fn rfc9110_8_8_3_2_comparison_table() {
        // The example table of §8.8.3.2.
        let (w1, w2, s1) = (tag(true, b"1"), tag(true, b"2"), tag(false, b"1"));
        assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
        assert!(!w1.strong_eq(&w2) && !w1.weak_eq(&w2));
        assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
        assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
    }

    fn list_of(lines: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(IF_NONE_MATCH, HeaderValue::from_static(l));
        }
        h
    }

    #[test]
    fn rfc9110_13_1_2_list_over_lines_skips_invalid_members() {
        let h = list_of(&[r#""a", W/"b,c""#, r#"bogus, "d" junk, "e""#]);
        let got = list(&h, &IF_NONE_MATCH);
        assert_eq!(got, Some(TagList::Tags(vec![tag(false, b"a"), tag(true, b"b,c"), tag(false, b"e")])));
    }

    #[test]
    fn rfc9110_13_1_2_star_and_absent() {
        assert_eq!(list(&list_of(&[" * "]), &IF_NONE_MATCH), Some(TagList::Any));
        assert_eq!(list(&HeaderMap::new(), &IF_NONE_MATCH), None);
        assert_eq!(list(&list_of(&[""]), &IF_NONE_MATCH), Some(TagList::Tags(vec![])));
        assert_eq!(list(&list_of(&["*x"]), &IF_NONE_MATCH), Some(TagList::Tags(vec![])));
    }

    #[test]
    fn rfc9110_13_1_1_matching_needs_a_current_tag_unless_star() {
        let tags = TagList::Tags(vec![tag(true, b"a")]);
        assert!(tags.matches(Some(&tag(false, b"a")), false));
        assert!(!tags.matches(Some(&tag(false, b"a")), true));
        assert!(!tags.matches(None, false));
        assert!(TagList::Any.matches(None, true));
    }
}
