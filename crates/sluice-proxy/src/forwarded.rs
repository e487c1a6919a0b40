//! The client behind an HTTP load balancer (`access.forwarded_for_from`), as nginx's
//! `set_real_ip_from` with `real_ip_header X-Forwarded-For` and `real_ip_recursive on`.
//!
//! A balancer in front of Sluice connects on behalf of many clients, over connections it
//! reuses for one client after another, and names each request's client in
//! `X-Forwarded-For` (or RFC 7239 `Forwarded`, the `for` node of each element, with
//! `access.forwarded_for_header = "forwarded"`), the addresses of the proxies a request went
//! through, oldest first, each appended by the proxy that received it. For a request from a
//! listed peer, the client is the last address of that list that is not itself a listed
//! peer (so a chain of trusted proxies is walked back, and a client cannot pass itself off
//! as anyone by writing the header: whatever it wrote stands left of what the trusted
//! balancers appended). That client is what the request is checked against
//! (`access.allow`, `purge_allow`, the rate limits), logged with and shown to modules. The peer's own address is still the one this proxy appends to
//! `X-Forwarded-For` when it forwards the request, as each proxy does.
//!
//! A request from a listed peer without the header, or whose last entry does not parse,
//! stays the peer's; the walk back stops at an entry that does not parse (in `Forwarded`,
//! also `unknown`, an obfuscated node or an element without `for`), with the address read
//! before it. Entries may carry a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`), as some
//! balancers write them.

use crate::config::ForwardedForHeader;
use crate::service::ConnInfo;
use crate::service::X_FORWARDED_FOR;
use crate::state::State;
use http::header::{HeaderMap, FORWARDED};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// `conn` as seen by one request from a peer in `access.forwarded_for_from`: the client its
/// `X-Forwarded-For` names, with that client's access, or `conn` itself when it names none.
pub(crate) fn for_request(state: &State, conn: Arc<ConnInfo>, headers: &HeaderMap) -> Arc<ConnInfo> {
    let entries = entries(headers, state.config.access.forwarded_for_header);
    match named_client(&entries, |ip| state.forwarded_for_acl.allows(ip)) {
        Some(client) if client != conn.client.ip() => Arc::new(conn.seen_as(state, SocketAddr::new(client, 0))),
        _ => conn,
    }
}

/// The addresses `header` lists, oldest first; `None` for an entry that names no address.
fn entries(headers: &HeaderMap, header: ForwardedForHeader) -> Vec<Option<IpAddr>> {
    match header {
        ForwardedForHeader::XForwardedFor => headers
            .get_all(X_FORWARDED_FOR)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|entry| parse_entry(entry.trim()))
            .collect(),
        ForwardedForHeader::Forwarded => {
            sluice_http::forwarded::for_nodes(headers.get_all(FORWARDED).iter().filter_map(|v| v.to_str().ok()))
        }
    }
}

/// The client `entries` name (see the module documentation), `trusted` telling which
/// addresses are proxies to walk past; `None` without a usable entry.
fn named_client(entries: &[Option<IpAddr>], trusted: impl Fn(IpAddr) -> bool) -> Option<IpAddr> {
    let mut client = None;
    for entry in entries.iter().rev() {
        let Some(ip) = *entry else { break };
        client = Some(ip);
        if !trusted(ip) {
            break;
        }
    }
    client
}

/// An address, with or without a port.
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let ip = entry.parse::<IpAddr>().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|addr| addr.ip()))?;
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn client(lines: &[&str]) -> Option<String> {
        client_in(X_FORWARDED_FOR, ForwardedForHeader::XForwardedFor, lines)
    }

    fn client_in(name: http::HeaderName, header: ForwardedForHeader, lines: &[&str]) -> Option<String> {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(name.clone(), HeaderValue::from_str(line).unwrap());
        }
        let trusted = |ip: IpAddr| ip.to_string().starts_with("10.");
        named_client(&entries(&headers, header), trusted).map(|ip| ip.to_string())
    }

    #[test]
    fn the_last_untrusted_address_is_the_client() {
        assert_eq!(client(&["203.0.113.7"]).as_deref(), Some("203.0.113.7"));
        assert_eq!(client(&["198.51.100.1, 203.0.113.7, 10.0.0.2"]).as_deref(), Some("203.0.113.7"));
        assert_eq!(
            client(&["198.51.100.1", "203.0.113.7, 10.0.0.2", "10.0.0.3"]).as_deref(),
            Some("203.0.113.7"),
            "several lines are one list"
        );
        assert_eq!(client(&["10.0.0.9, 10.0.0.2"]).as_deref(), Some("10.0.0.9"), "all trusted: the first");
    }

    #[test]
    fn ports_and_mapped_addresses_are_read_and_garbage_stops_the_walk() {
        assert_eq!(client(&["203.0.113.7:4711"]).as_deref(), Some("203.0.113.7"));
        assert_eq!(client(&["[2001:db8::1]:4711"]).as_deref(), Some("2001:db8::1"));
        assert_eq!(client(&["::ffff:203.0.113.7"]).as_deref(), Some("203.0.113.7"));
        assert_eq!(client(&["203.0.113.7, unknown, 10.0.0.2"]).as_deref(), Some("10.0.0.2"), "stops at garbage");
        assert_eq!(client(&["unknown"]), None);
        assert_eq!(client(&[]), None);
    }

    #[test]
    fn rfc7239_forwarded_is_walked_the_same_way() {
        let forwarded = |lines: &[&str]| client_in(FORWARDED, ForwardedForHeader::Forwarded, lines);
        assert_eq!(
            forwarded(&["for=198.51.100.1, for=\"203.0.113.7:4711\";proto=https", "for=10.0.0.2;by=10.0.0.3"])
                .as_deref(),
            Some("203.0.113.7")
        );
        assert_eq!(forwarded(&["for=\"[2001:db8::1]\", for=10.0.0.2"]).as_deref(), Some("2001:db8::1"));
        assert_eq!(forwarded(&["for=203.0.113.7, for=_hidden, for=10.0.0.2"]).as_deref(), Some("10.0.0.2"));
        assert_eq!(forwarded(&["proto=https"]), None, "no for node");
        assert_eq!(client(&[]), None);
        let mut both = HeaderMap::new();
        both.insert(X_FORWARDED_FOR, HeaderValue::from_static("203.0.113.1"));
        both.insert(FORWARDED, HeaderValue::from_static("for=203.0.113.2"));
        assert_eq!(entries(&both, ForwardedForHeader::Forwarded), vec![Some("203.0.113.2".parse().unwrap())]);
        assert_eq!(entries(&both, ForwardedForHeader::XForwardedFor), vec![Some("203.0.113.1".parse().unwrap())]);
    }
}
