use super::*;
use http::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, ACCEPT_LANGUAGE, COOKIE};
use proptest::prelude::*;

fn map(name: &HeaderName, lines: &[&'static str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for l in lines {
        h.append(name.clone(), HeaderValue::from_static(l));
    }
    h
}

#[test]
fn rfc9111_4_1_no_vary_or_empty_vary_is_none() {
    assert_eq!(Vary::from_headers(&HeaderMap::new()), Vary::None);
    assert_eq!(Vary::from_headers(&map(&VARY, &["", " , "])), Vary::None);
}

#[test]
fn rfc9111_4_1_vary_star_alone_or_in_a_list() {
    assert_eq!(Vary::from_headers(&map(&VARY, &["*"])), Vary::Star);
    assert_eq!(Vary::from_headers(&map(&VARY, &["accept, *"])), Vary::Star);
    assert_eq!(Vary::from_headers(&map(&VARY, &["accept", " * "])), Vary::Star);
}

#[test]
fn rfc9111_4_1_vary_names_are_lowercased_deduplicated_in_order() {
    let got = Vary::from_headers(&map(&VARY, &["Accept-Encoding, ACCEPT", "accept-encoding,Accept-Language"]));
    assert_eq!(got, Vary::Fields(vec![ACCEPT_ENCODING, ACCEPT, ACCEPT_LANGUAGE]));
}

#[test]
fn rfc9111_4_1_invalid_vary_name_never_matches() {
    assert_eq!(Vary::from_headers(&map(&VARY, &["accept, bad name"])), Vary::Star);
    assert_eq!(Vary::from_headers(&map(&VARY, &["\"accept\""])), Vary::Star);
}

#[test]
fn rfc9111_4_1_vary_key_absent_and_present_fields() {
    let mut req = map(&ACCEPT_ENCODING, &["gzip"]);
    req.append(COOKIE, HeaderValue::from_static(""));
    assert_eq!(
        vary_key(&[ACCEPT_ENCODING, ACCEPT, COOKIE], &req),
        vec![Some("gzip".to_string()), None, Some(String::new())]
    );
}

#[test]
fn rfc9111_4_1_vary_key_normalises_whitespace_and_lines() {
    let a = vary_key(&[ACCEPT_ENCODING], &map(&ACCEPT_ENCODING, &["gzip , br", "deflate "]));
    let b = vary_key(&[ACCEPT_ENCODING], &map(&ACCEPT_ENCODING, &["gzip,br,deflate"]));
    assert_eq!(a, b);
    // Accept-Encoding's members, whose order means nothing, also come sorted (codings.rs).
    assert_eq!(a, vec![Some("br,deflate,gzip".to_string())]);
    // Whitespace inside a member is significant.
    let c = vary_key(&[ACCEPT_ENCODING], &map(&ACCEPT_ENCODING, &["gzip;q=1, b r"]));
    assert_eq!(c, vec![Some("gzip;q=1,b r".to_string())]);
}

#[test]
fn rfc9113_8_2_3_cookie_crumbs_match_the_joined_cookie_and_commas_stay_inside_values() {
    let joined = vary_key(&[COOKIE], &map(&COOKIE, &["a=1; b=2"]));
    assert_eq!(joined, vary_key(&[COOKIE], &map(&COOKIE, &["a=1", "b=2"])), "HTTP/2 crumbs");
    assert_eq!(joined, vary_key(&[COOKIE], &map(&COOKIE, &["a=1 ;b=2;"])));
    assert_eq!(joined, vec![Some("a=1; b=2".to_string())]);
    // `a=1, b=2` is one cookie, `a` with the value `1, b=2`.
    assert_ne!(joined, vary_key(&[COOKIE], &map(&COOKIE, &["a=1, b=2"])));
    assert_ne!(joined, vary_key(&[COOKIE], &map(&COOKIE, &["b=2; a=1"])), "order is kept");
}

#[test]
fn rfc9111_4_1_vary_key_is_case_sensitive_in_values() {
    let a = vary_key(&[ACCEPT], &map(&ACCEPT, &["text/html"]));
    let b = vary_key(&[ACCEPT], &map(&ACCEPT, &["TEXT/HTML"]));
    assert_ne!(a, b);
}

#[test]
fn rfc9111_4_1_vary_key_ignores_case_where_the_values_do() {
    for (name, key) in [(ACCEPT_LANGUAGE, "en,de"), (ACCEPT_ENCODING, "de,en")] {
        let a = vary_key(std::slice::from_ref(&name), &map(&name, &["en, de"]));
        let b = vary_key(std::slice::from_ref(&name), &map(&name, &["eN,De"]));
        assert_eq!(a, b, "{name}");
        assert_eq!(a, vec![Some(key.to_string())]);
    }
}

#[test]
fn rfc9110_12_5_3_accept_encoding_matches_whatever_the_order_accept_language_does_not() {
    let encoding = |v: &'static str| vary_key(&[ACCEPT_ENCODING], &map(&ACCEPT_ENCODING, &[v]));
    assert_eq!(encoding("gzip, deflate, br, zstd"), encoding("br, gzip;q=1.0, zstd, deflate"));
    assert_ne!(encoding("gzip;q=0.5, br"), encoding("gzip, br;q=0.5"));
    // Unparseable: kept as sent (lowercased, whitespace around commas dropped).
    assert_eq!(encoding("Gzip;level=9 , BR"), vec![Some("gzip;level=9,br".to_string())]);
    // In Accept-Language the order may carry a preference (RFC 9110 §12.5.4): kept.
    let language = |v: &'static str| vary_key(&[ACCEPT_LANGUAGE], &map(&ACCEPT_LANGUAGE, &[v]));
    assert_ne!(language("en, de"), language("de, en"));
}

#[test]
fn rfc9111_4_1_vary_key_keeps_distinct_obs_text_distinct() {
    let mut a = HeaderMap::new();
    a.insert(ACCEPT, HeaderValue::from_bytes(b"x\xff").unwrap());
    let mut b = HeaderMap::new();
    b.insert(ACCEPT, HeaderValue::from_bytes(b"x\xfe").unwrap());
    let mut c = HeaderMap::new();
    c.insert(ACCEPT, HeaderValue::from_static("x\\xff"));
    let keys = [vary_key(&[ACCEPT], &a), vary_key(&[ACCEPT], &b), vary_key(&[ACCEPT], &c)];
    assert_ne!(keys[0], keys[1]);
    assert_ne!(keys[0], keys[2]);
}

proptest! {
    #[test]
    fn rfc9111_4_1_parsing_never_panics(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..4)) {
        let mut h = HeaderMap::new();
        for line in &lines {
            if let Ok(v) = HeaderValue::from_bytes(line) {
                h.append(VARY, v.clone());
                h.append(ACCEPT, v);
            }
        }
        if let Vary::Fields(fields) = Vary::from_headers(&h) {
            prop_assert!(!fields.is_empty());
            let _ = vary_key(&fields, &h);
        }
        prop_assert_eq!(vary_key(&[ACCEPT], &h).len(), 1);
    }
}
