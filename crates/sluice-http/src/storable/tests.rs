use super::*;
use http::header::{HeaderName, HeaderValue, CDN_CACHE_CONTROL, VARY};

fn map(fields: &[(HeaderName, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in fields {
        h.append(name.clone(), HeaderValue::from_static(value));
    }
    h
}

fn check(
    method: Method,
    request: &[(HeaderName, &'static str)],
    status: u16,
    response: &[(HeaderName, &'static str)],
) -> Result<(), NotStorable> {
    let response = map(response);
    let cc = CacheControl::effective_for_cdn(&response);
    storable(&method, &map(request), StatusCode::from_u16(status).unwrap(), &response, &cc)
}

fn get(status: u16, response: &[(HeaderName, &'static str)]) -> Result<(), NotStorable> {
    check(Method::GET, &[], status, response)
}

#[test]
fn rfc9111_3_plain_200_is_storable_heuristically() {
    assert_eq!(get(200, &[]), Ok(()));
}

#[test]
fn rfc9111_3_only_get_is_stored() {
    for m in [Method::POST, Method::HEAD, Method::PUT, Method::OPTIONS] {
        assert_eq!(check(m, &[], 200, &[(CACHE_CONTROL, "max-age=60")]), Err(NotStorable::Method));
    }
}

#[test]
fn rfc9111_3_interim_partial_and_not_modified_are_not_stored() {
    for status in [100, 103, 206, 304] {
        assert_eq!(get(status, &[(CACHE_CONTROL, "max-age=60")]), Err(NotStorable::Status), "{status}");
    }
}

#[test]
fn rfc9111_5_2_1_5_request_no_store() {
    let got = check(Method::GET, &[(CACHE_CONTROL, "No-Store")], 200, &[(CACHE_CONTROL, "max-age=60")]);
    assert_eq!(got, Err(NotStorable::RequestNoStore));
}

#[test]
fn rfc9111_5_2_2_5_response_no_store() {
    assert_eq!(get(200, &[(CACHE_CONTROL, "max-age=60, no-store")]), Err(NotStorable::ResponseNoStore));
}

#[test]
fn rfc9111_5_2_2_3_must_understand_overrides_no_store_for_understood_statuses() {
    for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
        assert_eq!(get(status, &[(CACHE_CONTROL, "must-understand, no-store, max-age=60")]), Ok(()), "{status}");
    }
}

#[test]
fn rfc9111_5_2_2_3_must_understand_with_unknown_status_is_not_stored() {
    for status in [299, 302, 418, 500] {
        assert_eq!(
            get(status, &[(CACHE_CONTROL, "must-understand, no-store, max-age=60")]),
            Err(NotStorable::Status),
            "{status}"
        );
    }
}

#[test]
fn rfc9111_5_2_2_3_must_understand_does_not_override_request_no_store() {
    let got = check(Method::GET, &[(CACHE_CONTROL, "no-store")], 200, &[(CACHE_CONTROL, "must-understand, no-store")]);
    assert_eq!(got, Err(NotStorable::RequestNoStore));
}

#[test]
fn rfc9111_5_2_2_7_private_and_qualified_private_are_not_stored_by_shared_caches() {
    assert_eq!(get(200, &[(CACHE_CONTROL, "private, max-age=60")]), Err(NotStorable::Private));
    assert_eq!(get(200, &[(CACHE_CONTROL, r#"private="set-cookie", max-age=60"#)]), Err(NotStorable::Private));
}

#[test]
fn rfc9111_3_5_authorization_needs_explicit_permission() {
    let auth = [(AUTHORIZATION, "Bearer x")];
    assert_eq!(check(Method::GET, &auth, 200, &[(CACHE_CONTROL, "max-age=60")]), Err(NotStorable::Authorization));
    assert_eq!(check(Method::GET, &auth, 200, &[]), Err(NotStorable::Authorization));
    for allowing in ["public", "s-maxage=60", "must-revalidate, max-age=60"] {
        assert_eq!(check(Method::GET, &auth, 200, &[(CACHE_CONTROL, allowing)]), Ok(()), "{allowing}");
    }
    // proxy-revalidate alone does not allow it.
    assert_eq!(
        check(Method::GET, &auth, 200, &[(CACHE_CONTROL, "proxy-revalidate, max-age=60")]),
        Err(NotStorable::Authorization)
    );
}

#[test]
fn rfc9111_4_1_vary_star_is_not_stored() {
    assert_eq!(get(200, &[(VARY, "*")]), Err(NotStorable::VaryStar));
    assert_eq!(get(200, &[(VARY, "accept-encoding, *")]), Err(NotStorable::VaryStar));
    assert_eq!(get(200, &[(VARY, "accept-encoding")]), Ok(()));
}

#[test]
fn rfc9111_3_needs_some_freshness_information() {
    assert_eq!(get(302, &[]), Err(NotStorable::NoFreshnessInformation));
    assert_eq!(get(500, &[(CACHE_CONTROL, "no-cache")]), Err(NotStorable::NoFreshnessInformation));
    assert_eq!(get(302, &[(CACHE_CONTROL, "max-age=5")]), Ok(()));
    assert_eq!(get(302, &[(CACHE_CONTROL, "s-maxage=5")]), Ok(()));
    assert_eq!(get(302, &[(CACHE_CONTROL, "public")]), Ok(()));
    assert_eq!(get(500, &[(EXPIRES, "0")]), Ok(()));
}

#[test]
fn rfc9213_2_2_cdn_cache_control_directives_replace_cache_control() {
    assert_eq!(get(302, &[(CACHE_CONTROL, "no-store"), (CDN_CACHE_CONTROL, "max-age=5")]), Ok(()));
    assert_eq!(get(200, &[(CACHE_CONTROL, "max-age=5"), (CDN_CACHE_CONTROL, "private")]), Err(NotStorable::Private));
}

#[test]
fn rfc9211_2_7_tokens_are_valid_sf_tokens() {
    let all = [
        NotStorable::Method,
        NotStorable::Status,
        NotStorable::RequestNoStore,
        NotStorable::ResponseNoStore,
        NotStorable::Private,
        NotStorable::Authorization,
        NotStorable::VaryStar,
        NotStorable::NoFreshnessInformation,
    ];
    let tokens: Vec<_> = all.iter().map(|n| n.token()).collect();
    assert!(tokens.iter().all(|t| crate::sf::is_token(t) && t.bytes().all(|b| !b.is_ascii_uppercase())));
    let mut unique = tokens.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), tokens.len());
    assert_eq!(NotStorable::ResponseNoStore.token(), "no-store");
}
