use super::*;
use http::header::HeaderValue;
use proptest::prelude::*;

fn headers(fields: &[(&HeaderName, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in fields {
        h.append((*name).clone(), HeaderValue::from_static(value));
    }
    h
}

fn cc(lines: &[&'static str]) -> CacheControl {
    let fields: Vec<_> = lines.iter().map(|l| (&CACHE_CONTROL, *l)).collect();
    CacheControl::from_headers(&headers(&fields))
}

#[test]
fn rfc9111_5_2_absent_field_has_no_directives() {
    assert_eq!(CacheControl::from_headers(&HeaderMap::new()), CacheControl::default());
}

#[test]
fn rfc9111_5_2_merges_directives_over_all_lines() {
    let got = cc(&["public, max-age=60", "s-maxage=120", "immutable,no-transform"]);
    assert_eq!(
        got,
        CacheControl {
            public: true,
            max_age: Some(60),
            s_maxage: Some(120),
            immutable: true,
            no_transform: true,
            ..CacheControl::default()
        }
    );
}

#[test]
fn rfc9111_5_2_reads_every_flag_directive() {
    let got = cc(&["no-cache, no-store, no-transform, only-if-cached, must-revalidate, proxy-revalidate, \
         must-understand, private, public, immutable"]);
    assert!(got.no_cache && got.no_store && got.no_transform && got.only_if_cached);
    assert!(got.must_revalidate && got.proxy_revalidate && got.must_understand);
    assert!(got.private && got.public && got.immutable);
}

#[test]
fn rfc9111_5_2_directive_names_are_case_insensitive() {
    let got = cc(&["Max-Age=10, NO-STORE, S-MaxAge=5, Stale-While-Revalidate=3"]);
    assert_eq!(got.max_age, Some(10));
    assert_eq!(got.s_maxage, Some(5));
    assert_eq!(got.stale_while_revalidate, Some(3));
    assert!(got.no_store);
}

#[test]
fn rfc9111_5_2_numeric_arguments_may_be_quoted() {
    let got = cc(&[r#"max-age="30", s-maxage="40", stale-if-error="50""#]);
    assert_eq!((got.max_age, got.s_maxage, got.stale_if_error), (Some(30), Some(40), Some(50)));
}

#[test]
fn rfc9111_4_2_1_duplicated_max_age_reads_as_stale() {
    assert_eq!(cc(&["max-age=60, max-age=120"]).max_age, Some(0));
    assert_eq!(cc(&["max-age=60", "max-age=60"]).max_age, Some(0));
    assert_eq!(cc(&["s-maxage=60, s-maxage=60"]).s_maxage, Some(0));
}

#[test]
fn rfc9111_4_2_1_invalid_max_age_reads_as_stale() {
    for value in ["max-age=abc", "max-age=", "max-age", "max-age=-1", "max-age=1.5", r#"max-age="1"#, "max-age=1 2"] {
        let got = CacheControl::from_headers(&headers(&[(&CACHE_CONTROL, value)]));
        assert_eq!(got.max_age, Some(0), "{value}");
    }
    assert_eq!(cc(&["s-maxage=soon"]).s_maxage, Some(0));
}

#[test]
fn rfc9111_1_2_2_huge_delta_seconds_saturate() {
    assert_eq!(cc(&["max-age=99999999999999999999999"]).max_age, Some(1 << 31));
}

#[test]
fn rfc9111_5_2_2_4_qualified_no_cache_and_private_count_as_unqualified() {
    let got = cc(&[r#"no-cache="Set-Cookie, X-Foo", private="a,b", max-age=5"#]);
    assert!(got.no_cache && got.private);
    // The commas inside the quoted arguments did not split the list.
    assert_eq!(got.max_age, Some(5));
}

#[test]
fn rfc9111_5_2_1_2_max_stale_without_value_accepts_any_staleness() {
    assert_eq!(cc(&["max-stale"]).max_stale, Some(MaxStale::Any));
    assert_eq!(cc(&["max-stale=30"]).max_stale, Some(MaxStale::Seconds(30)));
    assert_eq!(cc(&[r#"max-stale="30""#]).max_stale, Some(MaxStale::Seconds(30)));
}

#[test]
fn rfc9111_5_2_1_2_max_stale_repeated_or_invalid_is_read_restrictively() {
    assert_eq!(cc(&["max-stale, max-stale=30"]).max_stale, Some(MaxStale::Seconds(30)));
    assert_eq!(cc(&["max-stale=30, max-stale"]).max_stale, Some(MaxStale::Seconds(30)));
    assert_eq!(cc(&["max-stale=30, max-stale=10"]).max_stale, Some(MaxStale::Seconds(10)));
    assert_eq!(cc(&["max-stale=30, max-stale=x"]).max_stale, None);
}

#[test]
fn rfc9111_5_2_1_3_min_fresh_keeps_the_largest_valid_value() {
    assert_eq!(cc(&["min-fresh=10, min-fresh=20"]).min_fresh, Some(20));
    assert_eq!(cc(&["min-fresh=x"]).min_fresh, None);
}

#[test]
fn rfc5861_3_stale_while_revalidate_parses_and_invalid_drops_it() {
    assert_eq!(cc(&["max-age=1, stale-while-revalidate=59"]).stale_while_revalidate, Some(59));
    assert_eq!(cc(&["stale-while-revalidate=59, stale-while-revalidate=9"]).stale_while_revalidate, Some(9));
    assert_eq!(cc(&["stale-while-revalidate"]).stale_while_revalidate, None);
    assert_eq!(cc(&["stale-while-revalidate=1, stale-while-revalidate=x"]).stale_while_revalidate, None);
}

#[test]
fn rfc5861_4_stale_if_error_parses_and_invalid_drops_it() {
    assert_eq!(cc(&["stale-if-error=600"]).stale_if_error, Some(600));
    assert_eq!(cc(&["stale-if-error=-5"]).stale_if_error, None);
}

#[test]
fn rfc9111_5_2_3_unknown_extensions_are_ignored() {
    let got = cc(&[r#"community="UCI", foo, bar=baz, max-age=3"#]);
    assert_eq!(got, CacheControl { max_age: Some(3), ..CacheControl::default() });
}

#[test]
fn rfc9111_5_2_tolerates_garbage_members() {
    let got = cc(&[r#",,, =, "quoted", max-age=7 ,;;"#]);
    assert_eq!(got.max_age, Some(7));
}

#[test]
fn rfc9111_5_2_2_10_s_maxage_implies_proxy_revalidate() {
    assert!(cc(&["s-maxage=10"]).forbids_stale_for_shared());
    assert!(cc(&["must-revalidate"]).forbids_stale_for_shared());
    assert!(cc(&["proxy-revalidate"]).forbids_stale_for_shared());
    assert!(!cc(&["max-age=10, public"]).forbids_stale_for_shared());
}

#[test]
fn rfc9111_5_4_pragma_no_cache_only_without_cache_control() {
    assert!(pragma_no_cache(&headers(&[(&PRAGMA, "no-cache")])));
    assert!(pragma_no_cache(&headers(&[(&PRAGMA, "foo, No-Cache")])));
    assert!(!pragma_no_cache(&headers(&[(&PRAGMA, "no-cache"), (&CACHE_CONTROL, "max-age=5")])));
    assert!(!pragma_no_cache(&headers(&[(&PRAGMA, "no-store")])));
    assert!(!pragma_no_cache(&HeaderMap::new()));
}

#[test]
fn rfc9213_2_2_cdn_cache_control_overrides_cache_control() {
    let h = headers(&[(&CACHE_CONTROL, "no-store"), (&CDN_CACHE_CONTROL, "max-age=600")]);
    assert_eq!(CacheControl::effective_for_cdn(&h), CacheControl { max_age: Some(600), ..CacheControl::default() });
}

#[test]
fn rfc9213_2_2_without_cdn_field_cache_control_applies() {
    let h = headers(&[(&CACHE_CONTROL, "max-age=5, private")]);
    assert_eq!(CacheControl::effective_for_cdn(&h), CacheControl::from_headers(&h));
}

#[test]
fn rfc9213_2_1_invalid_or_empty_cdn_field_is_ignored() {
    for bad in ["Max-Age=600", "max-age=600,", "max-age=600 public", ""] {
        let h = headers(&[(&CACHE_CONTROL, "max-age=5"), (&CDN_CACHE_CONTROL, bad)]);
        assert_eq!(CacheControl::from_targeted_field(&h, &CDN_CACHE_CONTROL), None, "{bad}");
        assert_eq!(CacheControl::effective_for_cdn(&h).max_age, Some(5), "{bad}");
    }
}

#[test]
fn rfc9213_2_1_cdn_field_lines_combine_and_last_duplicate_wins() {
    let h = headers(&[(&CDN_CACHE_CONTROL, "max-age=10"), (&CDN_CACHE_CONTROL, "max-age=20, no-cache")]);
    let got = CacheControl::effective_for_cdn(&h);
    assert_eq!(got.max_age, Some(20));
    assert!(got.no_cache);
}

#[test]
fn rfc9213_2_1_cdn_field_value_types_map_to_directives() {
    let h = headers(&[(
        &CDN_CACHE_CONTROL,
        r#"max-age="60", s-maxage=-1, no-store=?0, private="set-cookie", stale-if-error=1.5, must-revalidate"#,
    )]);
    let got = CacheControl::effective_for_cdn(&h);
    // A String or negative value for a numeric directive is invalid: stale.
    assert_eq!((got.max_age, got.s_maxage), (Some(0), Some(0)));
    assert_eq!(got.stale_if_error, None);
    assert!(!got.no_store);
    assert!(got.private && got.must_revalidate);
}

proptest! {
    #[test]
    fn rfc9111_5_2_parsing_never_panics(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4)) {
        let mut h = HeaderMap::new();
        for line in lines {
            if let Ok(v) = HeaderValue::from_bytes(&line) {
                h.append(CACHE_CONTROL, v.clone());
                h.append(CDN_CACHE_CONTROL, v.clone());
                h.append(PRAGMA, v);
            }
        }
        let cc = CacheControl::from_headers(&h);
        let _ = CacheControl::effective_for_cdn(&h);
        let _ = pragma_no_cache(&h);
        for v in [cc.max_age, cc.s_maxage, cc.min_fresh, cc.stale_while_revalidate, cc.stale_if_error].into_iter().flatten() {
            prop_assert!(v <= 1 << 31);
        }
    }

    #[test]
    fn rfc9111_5_2_directive_soup_never_panics(parts in proptest::collection::vec(
        prop_oneof![
            Just("max-age".to_string()), Just("s-maxage".to_string()), Just("max-stale".to_string()),
            Just("=".to_string()), Just(",".to_string()), Just("\"".to_string()), Just("\\".to_string()),
            Just(" ".to_string()), "[0-9]{1,25}", "[a-z-]{1,10}",
        ],
        0..24,
    )) {
        let line = parts.concat();
        if let Ok(v) = HeaderValue::from_str(&line) {
            let mut h = HeaderMap::new();
            h.insert(CACHE_CONTROL, v.clone());
            h.insert(CDN_CACHE_CONTROL, v);
            let _ = CacheControl::from_headers(&h);
            let _ = CacheControl::effective_for_cdn(&h);
        }
    }
}

#[test]
fn rfc9213_2_2_cdn_cache_control_in_force_only_when_valid_and_non_empty() {
    assert!(cdn_cache_control_in_force(&headers(&[(&CDN_CACHE_CONTROL, "max-age=5")])));
    assert!(!cdn_cache_control_in_force(&headers(&[(&CDN_CACHE_CONTROL, "")])));
    assert!(!cdn_cache_control_in_force(&headers(&[(&CDN_CACHE_CONTROL, "Max-Age=5")])));
    assert!(!cdn_cache_control_in_force(&headers(&[(&CACHE_CONTROL, "max-age=5")])));
}
