//! A route's header rules (`request_headers`, `response_headers` on a `[[route]]`): fields
//! removed, set and added on the requests it sends to its origins and on the responses it
//! gives clients, as nginx's `proxy_set_header`, `proxy_hide_header` and `add_header`, with
//! no module needed.
//!
//! Removals come first, then `set` (replacing every value of the field), then `add`
//! (appending one more). Response rules apply to every response of the route, hits and the
//! proxy's own errors included, before the modules' `client_resp_headers` phase (which sees
//! and may change the result). Request rules apply to the origin request after the proxy's
//! own fields (`Host`, `Via`, `X-Forwarded-For`), so a rule may replace them; the cache key
//! and `Vary` matching still use the client's request. Fields that frame or route a message
//! (`Content-Length` and the hop-by-hop fields of `sluice_http::hop`, `Transfer-Encoding`
//! among them) cannot be named.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One side's rules as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderRulesConfig {
    /// Fields removed (every value).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Fields set to one value, replacing any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Fields appended (a value more).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
}

impl HeaderRulesConfig {
    /// No rule configured.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty()
    }
}

/// One side's rules, parsed.
#[derive(Debug, Default)]
pub struct HeaderRules {
    remove: Vec<HeaderName>,
    set: Vec<(HeaderName, HeaderValue)>,
    add: Vec<(HeaderName, HeaderValue)>,
}

impl HeaderRules {
    /// Parses `config`; the error names the field at fault.
    pub fn new(config: &HeaderRulesConfig) -> Result<Self, String> {
        let name = |text: &str| -> Result<HeaderName, String> {
            let name = HeaderName::try_from(text).map_err(|_| format!("`{text}` is not a header field name"))?;
            // They frame or route the message, which the proxy does itself.
            if name == http::header::CONTENT_LENGTH || sluice_http::hop::is_always_hop_by_hop(&name) {
                return Err(format!("`{text}` frames or routes the message: the proxy sets it, no rule may"));
            }
            Ok(name)
        };
        let field = |(n, v): (&String, &String)| -> Result<(HeaderName, HeaderValue), String> {
            let value = HeaderValue::try_from(v.as_str()).map_err(|_| format!("the value of `{n}` is not valid"))?;
            Ok((name(n)?, value))
        };
        Ok(Self {
            remove: config.remove.iter().map(|n| name(n)).collect::<Result<_, _>>()?,
            set: config.set.iter().map(field).collect::<Result<_, _>>()?,
            add: config.add.iter().map(field).collect::<Result<_, _>>()?,
        })
    }

    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty()
    }

    /// Applies the rules to `headers`: removals, then `set`, then `add`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for name in &self.remove {
            headers.remove(name);
        }
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// A route's rules for both sides, shared by its requests.
#[derive(Debug, Default)]
pub struct RouteHeaders {
    /// On requests to its origins.
    pub request: HeaderRules,
    /// On responses to clients.
    pub response: HeaderRules,
}

impl RouteHeaders {
    /// The rules of a route, `None` when it has none.
    pub fn of(request: &HeaderRulesConfig, response: &HeaderRulesConfig) -> Result<Option<Self>, String> {
        let rules = Self {
            request: HeaderRules::new(request).map_err(|e| format!("request_headers: {e}"))?,
            response: HeaderRules::new(response).map_err(|e| format!("response_headers: {e}"))?,
        };
        Ok((!rules.request.is_empty() || !rules.response.is_empty()).then_some(rules))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(remove: &[&str], set: &[(&str, &str)], add: &[(&str, &str)]) -> HeaderRulesConfig {
        let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        HeaderRulesConfig { remove: remove.iter().map(|n| n.to_string()).collect(), set: map(set), add: map(add) }
    }

    #[test]
    fn removals_then_set_then_add() {
        let rules = HeaderRules::new(&config(
            &["Server", "X-Powered-By"],
            &[("Cache-Control", "no-transform"), ("Server", "edge")],
            &[("Link", "</a.css>; rel=preload")],
        ))
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("server", HeaderValue::from_static("apache"));
        headers.insert("x-powered-by", HeaderValue::from_static("php"));
        headers.append("cache-control", HeaderValue::from_static("max-age=60"));
        headers.append("cache-control", HeaderValue::from_static("public"));
        headers.insert("link", HeaderValue::from_static("</b.js>; rel=preload"));
        rules.apply(&mut headers);
        assert_eq!(headers.get("server").unwrap(), "edge", "removed, then set");
        assert!(headers.get("x-powered-by").is_none());
        assert_eq!(headers.get_all("cache-control").iter().collect::<Vec<_>>(), ["no-transform"]);
        assert_eq!(headers.get_all("link").iter().count(), 2);
    }

    #[test]
    fn framing_fields_and_malformed_names_or_values_are_refused() {
        for bad in ["Content-Length", "transfer-encoding", "Connection", "Upgrade"] {
            let err = HeaderRules::new(&config(&[bad], &[], &[])).unwrap_err();
            assert!(err.contains("frames or routes"), "{bad}: {err}");
        }
        assert!(HeaderRules::new(&config(&[], &[("bad name", "x")], &[])).unwrap_err().contains("not a header"));
        assert!(HeaderRules::new(&config(&[], &[], &[("x-a", "line\nbreak")])).unwrap_err().contains("not valid"));
        let none = RouteHeaders::of(&HeaderRulesConfig::default(), &HeaderRulesConfig::default()).unwrap();
        assert!(none.is_none(), "no rules: nothing to carry");
    }
}
