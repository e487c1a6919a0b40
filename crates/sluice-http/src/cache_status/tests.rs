use super::*;
use proptest::prelude::*;

fn render(status: &CacheStatus) -> String {
    status.to_header_value("Sluice").to_str().unwrap().to_string()
}

#[test]
fn rfc9211_2_1_hit_with_ttl() {
    let s = CacheStatus { hit: true, ttl: Some(30), ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; hit; ttl=30");
}

#[test]
fn rfc9211_2_5_stale_hit_has_negative_ttl() {
    let s = CacheStatus { hit: true, ttl: Some(-412), ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; hit; ttl=-412");
}

#[test]
fn rfc9211_2_2_miss_forwarded_and_stored() {
    let s = CacheStatus { fwd: Some(Fwd::Miss), fwd_status: Some(200), stored: true, ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; fwd=miss; fwd-status=200; stored");
}

#[test]
fn rfc9211_2_2_every_fwd_token() {
    let all = [
        (Fwd::Bypass, "bypass"),
        (Fwd::Method, "method"),
        (Fwd::UriMiss, "uri-miss"),
        (Fwd::VaryMiss, "vary-miss"),
        (Fwd::Miss, "miss"),
        (Fwd::Request, "request"),
        (Fwd::Stale, "stale"),
        (Fwd::Partial, "partial"),
    ];
    for (fwd, token) in all {
        let s = CacheStatus { fwd: Some(fwd), ..CacheStatus::default() };
        assert_eq!(render(&s), format!("Sluice; fwd={token}"));
    }
}

#[test]
fn rfc9211_2_6_collapsed() {
    let s = CacheStatus { fwd: Some(Fwd::UriMiss), collapsed: true, ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; fwd=uri-miss; collapsed");
}

#[test]
fn rfc9211_2_8_detail_as_token_or_string() {
    let token = CacheStatus { fwd: Some(Fwd::Miss), detail: Some("no-store"), ..CacheStatus::default() };
    assert_eq!(render(&token), "Sluice; fwd=miss; detail=no-store");
    let string = CacheStatus { fwd: Some(Fwd::Miss), detail: Some("too big \"x\""), ..CacheStatus::default() };
    assert_eq!(render(&string), r#"Sluice; fwd=miss; detail="too big \"x\"""#);
    let digit = CacheStatus { hit: true, detail: Some("1st"), ..CacheStatus::default() };
    assert_eq!(render(&digit), r#"Sluice; hit; detail="1st""#);
}

#[test]
fn rfc9211_2_name_is_token_or_string() {
    let s = CacheStatus { hit: true, ..CacheStatus::default() };
    assert_eq!(s.to_header_value("cache-3.example.com"), "cache-3.example.com; hit");
    assert_eq!(s.to_header_value("Example CDN"), r#""Example CDN"; hit"#);
    assert_eq!(s.to_header_value(""), r#"""; hit"#);
    assert_eq!(s.to_header_value("bad\r\nname"), r#""badname"; hit"#);
}

#[test]
fn rfc9211_2_1_hit_and_fwd_are_exclusive() {
    let s = CacheStatus { hit: true, fwd: Some(Fwd::Stale), fwd_status: Some(304), ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; fwd=stale; fwd-status=304");
}

#[test]
fn rfc9211_2_bare_name_when_nothing_known() {
    assert_eq!(render(&CacheStatus::default()), "Sluice");
}

#[test]
fn rfc8941_3_3_1_ttl_clamped_to_sf_integer() {
    let s = CacheStatus { hit: true, ttl: Some(i64::MIN), ..CacheStatus::default() };
    assert_eq!(render(&s), "Sluice; hit; ttl=-999999999999999");
}

proptest! {
    #[test]
    fn rfc9211_2_rendering_never_panics(name in any::<String>(), ttl in any::<i64>(), status in any::<u16>(), hit in any::<bool>()) {
        let s = CacheStatus { hit, ttl: Some(ttl), fwd_status: Some(status), fwd: Some(Fwd::Miss), ..CacheStatus::default() };
        let v = s.to_header_value(&name);
        prop_assert!(v.to_str().is_ok());
    }
}

#[test]
fn the_field_name_is_cache_status() {
    assert_eq!(field_name(), "cache-status");
}
