//! Query normalisation of request URLs: parameters that do not change the response
//! (`utm_*` campaign tags, click ids) dropped, and the rest put in one order, so that URLs
//! that differ only in those ways share one cache entry (and one origin fetch). What a
//! reverse route's `query_sort` and `query_drop` settings do (docs/config.md); the
//! counterpart of Varnish's `std.querysort` with a regular-expression strip in VCL, or a
//! CDN's cache-key query settings.
//!
//! Parameters are compared by name as they appear in the URL (percent-encoding included,
//! case-sensitive): `utm_source` and `UTM_SOURCE` are different parameters, as they are to
//! most applications. Sorting is by name only and stable, so repeated parameters
//! (`a=1&a=2`), whose order an application may read as a list, keep their order.

use http::uri::{InvalidUri, PathAndQuery};
use http::Uri;

/// Which parameters of a query are dropped: a name, or a name prefix ending in `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Exact(exact) => name == exact,
            Pattern::Prefix(prefix) => name.starts_with(prefix.as_str()),
        }
    }
}

/// How a route rewrites the queries of its requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryRules {
    sort: bool,
    drop: Vec<Pattern>,
}

impl QueryRules {
    /// Rules that sort parameters by name (when `sort`) and drop those `drop` names (each a
    /// parameter name, or a prefix followed by `*`). An empty pattern, a `*` anywhere but at
    /// the end, or characters that cannot appear in a query (space, `#`, `&`, `=`) are
    /// refused with the reason.
    pub fn new(sort: bool, drop: &[String]) -> Result<Self, String> {
        let drop = drop
            .iter()
            .map(|pattern| {
                let (name, prefix) = match pattern.strip_suffix('*') {
                    Some(prefix) => (prefix, true),
                    None => (pattern.as_str(), false),
                };
                if name.is_empty() && !prefix {
                    return Err("an empty query_drop pattern".to_owned());
                }
                if name.chars().any(|c| matches!(c, '*' | '&' | '=' | '#' | ' ') || !c.is_ascii_graphic()) {
                    return Err(format!(
                        "query_drop pattern {pattern:?}: a parameter name, or a prefix followed by `*`"
                    ));
                }
                Ok(if prefix { Pattern::Prefix(name.to_owned()) } else { Pattern::Exact(name.to_owned()) })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { sort, drop })
    }

    /// True when the rules change nothing (no sorting, nothing dropped).
    pub fn is_noop(&self) -> bool {
        !self.sort && self.drop.is_empty()
    }

    /// `query` (without its `?`) rewritten by the rules, or `None` when it stays as it is.
    /// Empty parameters (`a&&b`, a trailing `&`) go as well when anything is rewritten; an
    /// empty result means the URL loses its `?`.
    pub fn apply(&self, query: &str) -> Option<String> {
        let mut params: Vec<&str> = query
            .split('&')
            .filter(|param| !param.is_empty())
            .filter(|param| {
                let name = param.split_once('=').map_or(*param, |(name, _)| name);
                !self.drop.iter().any(|pattern| pattern.matches(name))
            })
            .collect();
        if self.sort {
            params.sort_by_key(|param| param.split_once('=').map_or(*param, |(name, _)| name));
        }
        let rewritten = params.join("&");
        (rewritten != query).then_some(rewritten)
    }

    /// `path_and_query` with its query rewritten by the rules ([`Self::apply`]), or `None`
    /// when it stays as it is; an emptied query leaves the path alone, without its `?`.
    pub fn rewrite(&self, path_and_query: &PathAndQuery) -> Result<Option<PathAndQuery>, InvalidUri> {
        let Some(query) = path_and_query.query().and_then(|query| self.apply(query)) else {
            return Ok(None);
        };
        let path = path_and_query.path();
        let rewritten =
            if query.is_empty() { PathAndQuery::try_from(path) } else { format!("{path}?{query}").try_into() };
        rewritten.map(Some)
    }

    /// `uri` with its query rewritten by the rules, or `None` when it stays as it is (or the
    /// result would not be a URI).
    pub fn rewrite_uri(&self, uri: &Uri) -> Option<Uri> {
        let path_and_query = self.rewrite(uri.path_and_query()?).ok()??;
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = Some(path_and_query);
        Uri::from_parts(parts).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(sort: bool, drop: &[&str]) -> QueryRules {
        QueryRules::new(sort, &drop.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn tracking_parameters_are_dropped_by_name_or_prefix() {
        let r = rules(false, &["utm_*", "fbclid"]);
        assert_eq!(r.apply("id=7&utm_source=news&utm_medium=mail&fbclid=x").as_deref(), Some("id=7"));
        assert_eq!(r.apply("utm_source=a").as_deref(), Some(""), "nothing left: no query");
        assert_eq!(r.apply("id=7&fbclid2=x"), None, "fbclid is a name, not a prefix");
        assert_eq!(r.apply("UTM_SOURCE=a"), None, "names are case-sensitive");
        assert_eq!(r.apply("fbclid&id=1").as_deref(), Some("id=1"), "a parameter without a value");
    }

    #[test]
    fn sorting_is_by_name_and_keeps_repeated_parameters_in_order() {
        let r = rules(true, &[]);
        assert_eq!(r.apply("b=2&a=1&c=3").as_deref(), Some("a=1&b=2&c=3"));
        assert_eq!(r.apply("a=2&b=0&a=1").as_deref(), Some("a=2&a=1&b=0"));
        assert_eq!(r.apply("a=1&b=2"), None, "already in order");
        assert_eq!(r.apply("b&a=").as_deref(), Some("a=&b"));
        assert_eq!(r.apply("a=1&&b=2&").as_deref(), Some("a=1&b=2"), "empty parameters go");
    }

    #[test]
    fn both_at_once_and_no_rules_at_all() {
        let r = rules(true, &["utm_*"]);
        assert_eq!(r.apply("z=1&utm_campaign=x&a=%20").as_deref(), Some("a=%20&z=1"));
        assert!(rules(false, &[]).is_noop());
        assert!(!r.is_noop());
        assert_eq!(rules(false, &[]).apply("b&a"), None);
    }

    #[test]
    fn paths_and_uris_are_rewritten_by_their_query_only() {
        let r = rules(true, &["utm_*"]);
        let pq = |s: &'static str| PathAndQuery::from_static(s);
        assert_eq!(r.rewrite(&pq("/p?b=2&a=1")).unwrap(), Some(pq("/p?a=1&b=2")));
        assert_eq!(r.rewrite(&pq("/p?utm_source=x")).unwrap(), Some(pq("/p")), "an emptied query loses its `?`");
        assert_eq!(r.rewrite(&pq("/p?a=1&b=2")).unwrap(), None);
        assert_eq!(r.rewrite(&pq("/p")).unwrap(), None);
        let uri: Uri = "http://Example.com:8080/b%20c?z=1&utm_medium=m&a=2".parse().unwrap();
        assert_eq!(r.rewrite_uri(&uri).unwrap().to_string(), "http://Example.com:8080/b%20c?a=2&z=1");
        assert_eq!(r.rewrite_uri(&"/p?a&b".parse().unwrap()), None, "already in order");
        assert_eq!(r.rewrite_uri(&"/p?b&a".parse().unwrap()).unwrap().to_string(), "/p?a&b", "origin-form too");
    }

    #[test]
    fn patterns_that_cannot_name_a_parameter_are_refused() {
        for bad in ["", "a*b", "**", "a=b", "a&b", "a b", "a#", "é"] {
            assert!(QueryRules::new(false, &[bad.to_string()]).is_err(), "{bad:?}");
        }
        assert!(QueryRules::new(false, &["*".to_string()]).is_ok(), "`*` alone drops every parameter");
    }
}
