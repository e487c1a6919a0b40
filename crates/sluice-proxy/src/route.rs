//! Reverse-proxy routing: (Host, path prefix) to an origin, a pool of origins or a local
//! directory.

use crate::clock::SharedClock;
use crate::config::RouteConfig;
use crate::origin_pool::OriginPool;
use crate::source::FileSource;
use crate::upstream::{RouteTimeouts, Target};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::HeaderValue;
use sluice_http::query::QueryRules;
use std::sync::Arc;

/// A parsed origin base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub authority: Authority,
    /// Path that replaces the matched prefix (no trailing `/`; empty for none).
    pub base_path: String,
    /// Where its requests go (`Target::of` any URI under it), computed once.
    pub target: Target,
    /// The authority as a `Host` value, computed once.
    pub host: HeaderValue,
}

impl Origin {
    /// Parses `http://host[:port][/path]` or `https://...`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let uri: http::Uri = text.parse().map_err(|e| format!("origin `{text}`: {e}"))?;
        let scheme =
            uri.scheme().cloned().ok_or_else(|| format!("origin `{text}` needs a scheme (http:// or https://)"))?;
        if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
            return Err(format!("origin `{text}`: only http and https are supported"));
        }
        let authority = uri.authority().cloned().ok_or_else(|| format!("origin `{text}` needs a host"))?;
        if uri.query().is_some() {
            return Err(format!("origin `{text}` must not have a query"));
        }
        let base_path = uri.path().trim_end_matches('/').to_owned();
        let target = Target::of(&uri).ok_or_else(|| format!("origin `{text}` needs a host"))?;
        let host = HeaderValue::from_str(authority.as_str()).map_err(|e| format!("origin `{text}`: {e}"))?;
        Ok(Self { scheme, authority, base_path, target, host })
    }

    /// This origin as `route` reaches it: its TLS connections asking for and checking the
    /// route's `tls_name` instead of the origin's host, over HTTP/2 when the route says
    /// `http2`, and the route's own timeouts.
    pub fn for_route(mut self, route: &RouteConfig) -> Self {
        self.target.tls_name = route.tls_name.as_deref().map(Arc::from);
        self.target.http2 = route.http2;
        let timeouts = RouteTimeouts {
            connect: route.connect_timeout.map(|d| d.0),
            response: route.response_timeout.map(|d| d.0),
            read: route.read_timeout.map(|d| d.0),
        };
        self.target.timeouts = (timeouts != RouteTimeouts::default()).then(|| Arc::new(timeouts));
        self
    }

    /// Whether `other` names the same origin: the same scheme, host and port (whatever
    /// their spelling, `http://a` and `http://a:80` alike) and the same base path, whatever
    /// name TLS asks it for.
    pub fn same_place(&self, other: &Origin) -> bool {
        let (a, b) = (&self.target, &other.target);
        (a.https, &a.host, a.port) == (b.https, &b.host, b.port) && self.base_path == other.base_path
    }
}

/// What a route serves from.
#[derive(Debug, Clone)]
pub enum Backend {
    /// An HTTP origin.
    Origin(Origin),
    /// Several equivalent HTTP origins (`origins`).
    Pool(Arc<OriginPool>),
    /// A local directory (the file data source).
    Files(Arc<FileSource>),
}

/// One compiled route.
#[derive(Debug, Clone)]
pub struct Route {
    host: Option<String>,
    prefix: String,
    pub backend: Backend,
    pub preserve_host: bool,
    /// ESI settings when the route has `esi = true`.
    pub esi: Option<Arc<crate::esi::EsiRoute>>,
    /// How it caches: carried by each of its requests.
    pub caching: RouteCaching,
    /// Its `max_body_size`, when it sets one (`Some(0)`: no limit).
    pub max_body_size: Option<u64>,
    /// Its `request_headers` and `response_headers`, when it has any.
    pub headers: Option<Arc<crate::header_rules::RouteHeaders>>,
}

/// A route's caching settings, which its requests carry past routing (`Resolved`,
/// `Forward`) to where they apply. The default, for forward-proxy requests and routes
/// without such settings, changes nothing. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RouteCaching {
    /// How the queries of its requests are rewritten (`query_sort`, `query_drop`); `None`
    /// when they are left alone. The URLs an unsafe method invalidates go through them too.
    pub query: Option<Arc<QueryRules>>,
    /// The lifetime of its origins' responses that have no explicit one (`default_ttl`).
    pub default_ttl: Option<std::time::Duration>,
    /// Its `stale_if_server_error`, when it sets one (else `cache.stale_if_server_error`).
    pub stale_if_server_error: Option<bool>,
    /// Its `stale_while_revalidate`, when it sets one (else `cache.stale_while_revalidate`).
    pub stale_while_revalidate: Option<std::time::Duration>,
    /// `cache = false`: its requests pass, never looked up nor stored.
    pub bypass: bool,
}

/// All routes, matched most specific first (host routes before any-host routes, longer
/// prefixes before shorter).
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Route>,
}

impl Routes {
    /// Compiles the configured routes (opening the directories of file routes). Origins
    /// were validated with the config; pools keep their origins' health by `clock`.
    pub fn new(configs: &[RouteConfig], clock: &SharedClock) -> Result<Self, String> {
        let mut routes = configs
            .iter()
            .map(|c| {
                let backend = match (&c.origin, &c.files) {
                    (_, Some(files)) => Backend::Files(Arc::new(FileSource::open(files)?)),
                    (Some(origin), None) => Backend::Origin(Origin::parse(origin)?.for_route(c)),
                    (None, None) if !c.origins.is_empty() => {
                        Backend::Pool(Arc::new(OriginPool::new(c, Arc::clone(clock))?))
                    }
                    (None, None) => return Err(format!("route `{}` has neither origin nor files", c.label())),
                };
                Ok(Route {
                    host: c.host.as_ref().map(|h| h.to_ascii_lowercase()),
                    prefix: c.path_prefix.clone(),
                    backend,
                    preserve_host: c.preserve_host,
                    esi: c.esi.then(|| {
                        let hosts = c.esi_hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
                        Arc::new(crate::esi::EsiRoute { hosts })
                    }),
                    caching: RouteCaching {
                        query: Some(QueryRules::new(c.query_sort, &c.query_drop)?)
                            .filter(|q| !q.is_noop())
                            .map(Arc::new),
                        default_ttl: c.default_ttl.map(|ttl| ttl.0),
                        stale_if_server_error: c.stale_if_server_error,
                        stale_while_revalidate: c.stale_while_revalidate.map(|d| d.0),
                        bypass: !c.cache,
                    },
                    max_body_size: c.max_body_size.map(|size| size.0),
                    headers: crate::header_rules::RouteHeaders::of(&c.request_headers, &c.response_headers)
                        .map_err(|e| format!("route `{}`: {e}", c.label()))?
                        .map(Arc::new),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        routes.sort_by_key(|r| (r.host.is_none(), std::cmp::Reverse(r.prefix.len())));
        Ok(Self { routes })
    }

    /// Starts the change watchers of the file routes that ask for one; they drop changed
    /// files' responses from `store` until the routes are dropped.
    pub fn watch_files(&self, store: &Arc<crate::tiers::Tiers>) -> Result<(), String> {
        for route in &self.routes {
            if let Backend::Files(files) = &route.backend {
                files.watch(Arc::clone(store))?;
            }
        }
        Ok(())
    }

    /// Gives each pool the health and counters of the pool of the same route (host and
    /// prefix) in `previous`, the routes of the generation before a configuration reload
    /// ([`OriginPool::carry_over`]).
    pub fn carry_pool_state(&self, previous: &Routes) {
        for pool in self.pools() {
            if let Some(was) = previous.pools().find(|p| p.label == pool.label) {
                pool.carry_over(was);
            }
        }
    }

    /// The origin pools of the routes that have one.
    pub fn pools(&self) -> impl Iterator<Item = &Arc<OriginPool>> {
        self.routes.iter().filter_map(|r| match &r.backend {
            Backend::Pool(pool) => Some(pool),
            _ => None,
        })
    }

    /// True when no route is configured.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route for a request to `host` (without port) and `path`.
    pub fn find(&self, host: Option<&str>, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| {
            let host_ok = match (&r.host, host) {
                (None, _) => true,
                (Some(want), Some(h)) => want.eq_ignore_ascii_case(h),
                (Some(_), None) => false,
            };
            host_ok && path.starts_with(&r.prefix)
        })
    }
}

impl Route {
    /// The path of a request under this route with the matched prefix removed.
    pub fn tail<'a>(&self, path: &'a str) -> &'a str {
        path.get(self.prefix.len()..).unwrap_or("")
    }

    /// The origin URI for a request's path and query under `origin`, this route's origin,
    /// its query rewritten by the route's rules. Without a base path or a rewrite the
    /// request's own path and query are reused (shared, not copied and validated again).
    pub fn target(&self, origin: &Origin, path_and_query: &PathAndQuery) -> Result<http::Uri, http::Error> {
        let rewritten = match &self.caching.query {
            Some(rules) => rules.rewrite(path_and_query)?,
            None => None,
        };
        let path_and_query = rewritten.as_ref().unwrap_or(path_and_query);
        let path_and_query = if origin.base_path.is_empty() {
            path_and_query.clone()
        } else {
            let tail = self.tail(path_and_query.as_str()).trim_start_matches('/');
            PathAndQuery::try_from(format!("{}/{}", origin.base_path, tail))?
        };
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(origin.scheme.clone());
        parts.authority = Some(origin.authority.clone());
        parts.path_and_query = Some(path_and_query);
        Ok(http::Uri::from_parts(parts)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(host: Option<&str>, prefix: &str, origin: &str) -> RouteConfig {
        RouteConfig {
            host: host.map(Into::into),
            path_prefix: prefix.into(),
            origin: Some(origin.into()),
            ..RouteConfig::default()
        }
    }

    fn clock() -> SharedClock {
        Arc::new(crate::clock::ManualClock::default())
    }

    fn origin_of(route: &Route) -> &Origin {
        match &route.backend {
            Backend::Origin(origin) => origin,
            Backend::Pool(_) | Backend::Files(_) => panic!("not a route to one origin"),
        }
    }

    #[test]
    fn most_specific_route_wins() {
        let routes = Routes::new(
            &[
                route(None, "/", "http://any:80"),
                route(Some("Example.com"), "/", "http://ex:80"),
                route(Some("example.com"), "/static/", "http://static:80/assets"),
            ],
            &clock(),
        )
        .unwrap();
        let r = routes.find(Some("example.com"), "/static/a.png").unwrap();
        assert_eq!(
            r.target(origin_of(r), &PathAndQuery::from_static("/static/a.png?x=1")).unwrap().to_string(),
            "http://static:80/assets/a.png?x=1"
        );
        assert_eq!(origin_of(routes.find(Some("EXAMPLE.COM"), "/x").unwrap()).authority.as_str(), "ex:80");
        assert_eq!(origin_of(routes.find(Some("other"), "/x").unwrap()).authority.as_str(), "any:80");
    }

    #[test]
    fn origins_need_http_or_https() {
        assert!(Origin::parse("ftp://x").is_err());
        assert!(Origin::parse("localhost:80").is_err());
        assert!(Origin::parse("https://x:8443").is_ok());
    }

    #[test]
    fn an_origin_knows_its_target_and_host_as_its_uris_would() {
        for text in ["http://Static.Example:8080/assets", "https://[::1]", "http://x"] {
            let routes = Routes::new(&[route(None, "/", text)], &clock()).unwrap();
            let r = routes.find(None, "/a").unwrap();
            let origin = origin_of(r);
            let uri = r.target(origin, &PathAndQuery::from_static("/a?b")).unwrap();
            assert_eq!(Some(origin.target.clone()), Target::of(&uri), "{text}");
            assert_eq!(origin.host, uri.authority().unwrap().as_str(), "{text}");
        }
    }

    #[test]
    fn a_route_rewrites_the_query_before_its_base_path_is_applied() {
        let config = RouteConfig {
            query_sort: true,
            query_drop: vec!["utm_*".into()],
            ..route(None, "/static/", "http://static:80/assets")
        };
        let routes = Routes::new(&[config], &clock()).unwrap();
        let r = routes.find(None, "/static/a.png").unwrap();
        let target = |pq: &'static str| r.target(origin_of(r), &PathAndQuery::from_static(pq)).unwrap().to_string();
        assert_eq!(target("/static/a.png?b=1&utm_x=2&a=0"), "http://static:80/assets/a.png?a=0&b=1");
        assert_eq!(target("/static/a.png?utm_x=2"), "http://static:80/assets/a.png");
        assert_eq!(target("/static/a.png?a=0"), "http://static:80/assets/a.png?a=0");
        assert_eq!(target("/static/a.png"), "http://static:80/assets/a.png");
    }
}
