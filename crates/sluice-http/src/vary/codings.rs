//! The canonical form of an `Accept-Encoding` value for [`super::vary_key`]: the same
//! preferences, however a client writes and orders them, give one key.
//!
//! Which content codings a client accepts, and how much it prefers each, is all the field
//! says (RFC 9110 §12.5.3): the order of its members carries no preference (weights do), and
//! a weight of 1 is the default. So `gzip, deflate, br`, `br,gzip, deflate` and
//! `gzip;q=1.0, br, deflate` ask for the same thing, and a response chosen for one is
//! acceptable to the others. Browsers differ in exactly these ways, and without this a
//! response with `Vary: Accept-Encoding` would be stored once per way of writing the field.
//! The origin still gets the client's own field; only the cache's matching changes. Varnish,
//! by contrast, rewrites the request to `gzip` or nothing.

use crate::parse::{is_tchar, trim_ows};

/// The members of a lowercased `Accept-Encoding` value, each as `coding` or
/// `coding;q=0.xyz` (trailing zeros dropped, a weight of 1 left out), sorted and without
/// repeats, joined with `,`. `None` when the value is not a well-formed list of codings
/// with weights (RFC 9110 §12.4.2, §12.5.3), or names one coding twice with different
/// weights: then nothing is assumed about it and the caller keeps it as it is.
pub(super) fn canonical_codings(value: &[u8]) -> Option<String> {
    let mut members = Vec::new();
    for member in value.split(|&b| b == b',').map(trim_ows).filter(|m| !m.is_empty()) {
        let (coding, weight) = match member.iter().position(|&b| b == b';') {
            Some(semicolon) => (trim_ows(&member[..semicolon]), Some(trim_ows(&member[semicolon + 1..]))),
            None => (member, None),
        };
        if coding.is_empty() || !coding.iter().all(|&b| is_tchar(b)) {
            return None;
        }
        let thousandths = match weight {
            None => 1000,
            Some(weight) => parse_qvalue(weight.strip_prefix(b"q=")?)?,
        };
        members.push((coding, thousandths));
    }
    members.sort_unstable();
    members.dedup();
    if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return None;
    }
    let mut out = String::with_capacity(value.len());
    for (i, (coding, thousandths)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // A token is ASCII.
        out.push_str(std::str::from_utf8(coding).ok()?);
        if thousandths < 1000 {
            let digits = format!("{thousandths:03}");
            out.push_str(";q=0");
            let fraction = digits.trim_end_matches('0');
            if !fraction.is_empty() {
                out.push('.');
                out.push_str(fraction);
            }
        }
    }
    Some(out)
}

/// A qvalue (RFC 9110 §12.4.2) in thousandths: `0`, `0.5`, `0.125`, `1`, `1.000`.
fn parse_qvalue(q: &[u8]) -> Option<u16> {
    let (whole, fraction) = match q.iter().position(|&b| b == b'.') {
        Some(dot) => (&q[..dot], &q[dot + 1..]),
        None => (q, &b""[..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + fraction.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match whole {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::{select, Index};

    fn key(value: &str) -> Option<String> {
        canonical_codings(value.as_bytes())
    }

    #[test]
    fn rfc9110_12_5_3_order_and_default_weights_do_not_matter() {
        let browsers = ["gzip, deflate, br, zstd", "br,gzip, deflate,zstd", "zstd, br;q=1.0, gzip;q=1, deflate"];
        for value in browsers {
            assert_eq!(key(value).as_deref(), Some("br,deflate,gzip,zstd"), "{value}");
        }
        assert_eq!(key("gzip, gzip").as_deref(), Some("gzip"));
    }

    #[test]
    fn rfc9110_12_4_2_weights_are_kept_in_one_form() {
        assert_eq!(key("gzip;q=0.50, identity;q=0").as_deref(), Some("gzip;q=0.5,identity;q=0"));
        assert_eq!(key("br;q=0.125,*;q=0.000").as_deref(), Some("*;q=0,br;q=0.125"));
        assert_eq!(key("gzip ; q=0.8").as_deref(), Some("gzip;q=0.8"));
        assert_ne!(key("gzip;q=0.5, br"), key("gzip, br;q=0.5"));
    }

    #[test]
    fn what_is_not_a_list_of_weighted_codings_is_left_alone() {
        for value in [
            "gzip;q=2",
            "gzip;q=1.5",
            "gzip;q=0.1234",
            "gzip;q=",
            "gzip;level=9",
            "gzip;Q=0.5",
            "b r",
            ";q=0.5",
            "gzip;q=0.5, gzip",
            "gzip, \"br\"",
        ] {
            assert_eq!(key(value), None, "{value}");
        }
    }

    /// One member as a client might write it: any case, a weight of 1 written or not,
    /// trailing zeros, whitespace around the `;`.
    fn spelled(coding: &str, thousandths: u16, style: u8) -> String {
        let coding = if style & 1 == 1 { coding.to_ascii_uppercase() } else { coding.to_owned() };
        let space = if style & 2 == 2 { " " } else { "" };
        let weight = match (thousandths, style & 4 == 4) {
            (1000, false) => return coding,
            (1000, true) => "1.000".to_owned(),
            (t, zeros) => {
                let digits = format!("{t:03}");
                let digits = if zeros { digits.as_str() } else { digits.trim_end_matches('0') };
                if digits.is_empty() {
                    "0".to_owned()
                } else {
                    format!("0.{digits}")
                }
            }
        };
        format!("{coding}{space};{space}q={weight}")
    }

    proptest! {
        #[test]
        fn the_same_preferences_in_any_order_and_spelling_give_one_key(
            members in proptest::collection::btree_map(
                select(vec!["gzip", "br", "zstd", "deflate", "identity", "*", "x-custom"]),
                prop_oneof![Just(1000u16), 0..1000u16],
                0..6,
            ),
            styles in proptest::collection::vec(0..8u8, 6),
            order in proptest::collection::vec(any::<Index>(), 6),
        ) {
            let plain: Vec<String> = members.iter().map(|(c, &t)| spelled(c, t, 0)).collect();
            let mut written: Vec<String> =
                members.iter().zip(&styles).map(|((c, &t), &style)| spelled(c, t, style)).collect();
            for (i, index) in order.iter().enumerate().take(written.len()) {
                let j = index.index(written.len());
                written.swap(i, j);
            }
            let canonical = key(&plain.join(", ").to_ascii_lowercase()).expect("well-formed");
            prop_assert_eq!(key(&written.join(" ,").to_ascii_lowercase()), Some(canonical.clone()));
            // The key is its own canonical form.
            prop_assert_eq!(key(&canonical), Some(canonical.clone()));
        }
    }

    #[test]
    fn an_empty_field_asks_for_no_coding() {
        assert_eq!(key("").as_deref(), Some(""));
        assert_eq!(key(" , ").as_deref(), Some(""));
    }
}
