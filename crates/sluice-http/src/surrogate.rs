//! `Surrogate-Control` and `Surrogate-Capability` (W3C Edge Architecture Specification 1.0):
//! the fields through which an origin and its reverse proxies ("surrogates") talk about
//! caching and processing, past the `Cache-Control` meant for every cache.
//!
//! A surrogate announces itself on each request with `Surrogate-Capability:
//! name="Surrogate/1.0"`. The origin answers with `Surrogate-Control` directives, each
//! addressed to every surrogate or, with a `;name` suffix, to one:
//!
//! ```text
//! Surrogate-Control: max-age=3600+600, content="ESI/1.0";sluice
//! ```

use crate::parse::{is_tchar, list_members, parse_delta_seconds, split_directive, trim_ows};
use crate::tags::{CACHE_TAG, SURROGATE_KEY};
use crate::CacheControl;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The response field with the directives for surrogates.
pub const SURROGATE_CONTROL: HeaderName = HeaderName::from_static("surrogate-control");

/// The request field through which a surrogate announces itself to the origin.
pub const SURROGATE_CAPABILITY: HeaderName = HeaderName::from_static("surrogate-capability");

/// One directive of `Surrogate-Control` addressed to a surrogate: its lower-case name and its
/// raw value (OWS-trimmed, quotes kept; `None` without `=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive<'a> {
    pub name: String,
    pub value: Option<&'a [u8]>,
}

/// The `Surrogate-Control` directives of `headers` addressed to every surrogate or, with a
/// `;name` suffix, to `name` (compared without case); those addressed to other surrogates
/// are left out. Members are split on commas outside quoted strings, over every line.
pub fn directives_for<'a>(headers: &'a HeaderMap, name: &str) -> Vec<Directive<'a>> {
    list_members(headers, &SURROGATE_CONTROL)
        .into_iter()
        .filter_map(|member| {
            let (directive, target) = split_target(member);
            if target.is_some_and(|t| !t.eq_ignore_ascii_case(name.as_bytes())) {
                return None;
            }
            let (key, value) = split_directive(directive);
            Some(Directive { name: String::from_utf8_lossy(key).to_ascii_lowercase(), value })
        })
        .collect()
}

/// The caching directives `Surrogate-Control` gives surrogate `name`, as the `Cache-Control`
/// directives that replace the response's own `Cache-Control` and `Expires` for it; `None`
/// when it gives none (no field, only `content=` or unknown directives), and then the
/// response's other fields govern as usual.
///
/// - `max-age=N` is the freshness lifetime; `max-age=N+M` also lets a stale response be
///   served for M seconds when the origin fails (as `stale-if-error=M`). Values saturate at
///   2^31; an invalid value drops the directive; of several, the smallest holds.
/// - `no-store`: the response is not stored. `no-store-remote`, meant for surrogates far
///   from the origin, does not apply to a reverse proxy in front of it.
pub fn cache_control_for(headers: &HeaderMap, name: &str) -> Option<CacheControl> {
    if !headers.contains_key(SURROGATE_CONTROL) {
        return None;
    }
    let mut cc = CacheControl::default();
    let mut any = false;
    for directive in directives_for(headers, name) {
        match (directive.name.as_str(), directive.value) {
            ("max-age", Some(value)) => {
                let Some((fresh, extension)) = max_age(value) else { continue };
                cc.max_age = Some(cc.max_age.map_or(fresh, |m| m.min(fresh)));
                if let Some(extension) = extension {
                    cc.stale_if_error = Some(cc.stale_if_error.map_or(extension, |s| s.min(extension)));
                }
                any = true;
            }
            ("no-store", None) => {
                cc.no_store = true;
                any = true;
            }
            _ => {}
        }
    }
    any.then_some(cc)
}

/// The `Surrogate-Capability` value announcing surrogate `name`: `name="Surrogate/1.0"`, and
/// `ESI/1.0` too when it assembles ESI templates. `None` when `name` is not a token.
pub fn capability(name: &str, esi: bool) -> Option<HeaderValue> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return None;
    }
    let value = if esi { format!("{name}=\"Surrogate/1.0 ESI/1.0\"") } else { format!("{name}=\"Surrogate/1.0\"") };
    HeaderValue::from_str(&value).ok()
}

/// Removes the fields a reverse proxy in a CDN's place keeps to itself, before a response
/// leaves it for a client: the cache tags (`Surrogate-Key`, `Cache-Tag`; [`crate::tags`]),
/// and `Surrogate-Control` when `control` (the cache obeys it).
pub fn strip_for_client(headers: &mut HeaderMap, control: bool) {
    // Every reverse-proxied response comes through here, and few carry any of these: one
    // pass matching the names' text (a length switch, then a compare) finds out for less than
    // a lookup per name, each of which hashes the name, or a scan comparing every pair.
    let present = headers.keys().any(|name| match name.as_str() {
        "surrogate-key" | "cache-tag" => true,
        "surrogate-control" => control,
        _ => false,
    });
    if present {
        headers.remove(SURROGATE_KEY);
        headers.remove(CACHE_TAG);
        if control {
            headers.remove(SURROGATE_CONTROL);
        }
    }
}

/// Splits `directive;target`; the target is a token after the last `;` outside quotes.
fn split_target(member: &[u8]) -> (&[u8], Option<&[u8]>) {
    let quotes_closed = |s: &[u8]| s.iter().filter(|&&b| b == b'"').count() % 2 == 0;
    match member.iter().rposition(|&b| b == b';') {
        Some(i) if quotes_closed(&member[i..]) => (trim_ows(&member[..i]), Some(trim_ows(&member[i + 1..]))),
        _ => (member, None),
    }
}

/// `N` or `N+M` (delta-seconds each).
fn max_age(value: &[u8]) -> Option<(u64, Option<u64>)> {
    match value.iter().position(|&b| b == b'+') {
        Some(i) => Some((parse_delta_seconds(&value[..i])?, Some(parse_delta_seconds(&value[i + 1..])?))),
        None => Some((parse_delta_seconds(value)?, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for line in lines {
            h.append(SURROGATE_CONTROL, HeaderValue::from_static(line));
        }
        h
    }

    fn cc(lines: &[&'static str]) -> Option<CacheControl> {
        cache_control_for(&headers(lines), "sluice")
    }

    #[test]
    fn max_age_and_no_store_become_cache_directives() {
        let fresh = cc(&["max-age=3600"]).unwrap();
        assert_eq!((fresh.max_age, fresh.no_store, fresh.stale_if_error), (Some(3600), false, None));
        assert!(cc(&["no-store"]).unwrap().no_store);
        assert_eq!(cc(&["MaX-aGe=60"]).unwrap().max_age, Some(60));
        assert_eq!(cc(&["foobar, max-age=60"]).unwrap().max_age, Some(60));
    }

    #[test]
    fn max_age_extension_allows_stale_on_error() {
        let extended = cc(&["max-age=60+600"]).unwrap();
        assert_eq!((extended.max_age, extended.stale_if_error), (Some(60), Some(600)));
    }

    #[test]
    fn values_saturate_and_invalid_ones_drop_the_directive() {
        assert_eq!(cc(&["max-age=99999999999"]).unwrap().max_age, Some(1 << 31));
        assert_eq!(cc(&["max-age=1x"]), None);
        assert_eq!(cc(&["max-age=-1"]), None);
        assert_eq!(cc(&["max-age=60+"]), None);
        assert_eq!(cc(&["max-age=30", "max-age=60"]).unwrap().max_age, Some(30), "the smallest holds");
    }

    #[test]
    fn only_directives_addressed_to_this_surrogate_count() {
        assert_eq!(cc(&["max-age=60;SLUICE"]).unwrap().max_age, Some(60));
        assert_eq!(cc(&["max-age=60;other"]), None);
        assert_eq!(cc(&["max-age=60;other, max-age=5"]).unwrap().max_age, Some(5));
        assert!(!cc(&["no-store;other, max-age=5;sluice"]).unwrap().no_store);
    }

    #[test]
    fn content_alone_is_not_a_cache_directive() {
        assert_eq!(cc(&["content=\"ESI/1.0\""]), None);
        assert_eq!(cc(&[]), None);
        let both = headers(&["content=\"ESI/1.0, X/1\";sluice, max-age=5"]);
        let names: Vec<String> = directives_for(&both, "sluice").into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["content", "max-age"], "a comma inside quotes does not split");
    }

    #[test]
    fn fields_for_surrogates_are_kept_from_clients() {
        let mut h = headers(&["max-age=60"]);
        h.insert(SURROGATE_KEY, HeaderValue::from_static("news"));
        h.insert(CACHE_TAG, HeaderValue::from_static("sport"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        let mut uncontrolled = h.clone();
        strip_for_client(&mut h, true);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["x-kept"]);
        strip_for_client(&mut uncontrolled, false);
        assert_eq!(uncontrolled.keys().collect::<Vec<_>>(), ["surrogate-control", "x-kept"]);
    }

    #[test]
    fn capability_names_this_surrogate() {
        assert_eq!(capability("sluice", false).unwrap(), "sluice=\"Surrogate/1.0\"");
        assert_eq!(capability("edge-1", true).unwrap(), "edge-1=\"Surrogate/1.0 ESI/1.0\"");
        assert_eq!(capability("not a token", false), None);
    }
}
