//! The destination ACL of the forward proxy (`access.deny_destinations`,
//! `access.allow_destinations`): which addresses forward requests and `CONNECT` tunnels may
//! connect to. It judges the addresses a host name resolves to (or a module pinned), right
//! before connecting to them, so a name that resolves to a denied address (`localhost`, a
//! rebinding DNS answer) is refused as the address itself is. Reverse routes' origins are
//! configured, not asked for by clients, and are not subject to it.

use crate::acl::Acl;
use crate::config::AccessConfig;
use crate::error::{Kind, ProxyError, Side};
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Denied networks, and exceptions to them.
#[derive(Debug, Clone)]
pub struct DestAcl {
    deny: Acl,
    allow: Acl,
}

impl DestAcl {
    /// The ACL `access` configures; `None` when it denies nothing.
    pub fn of(access: &AccessConfig) -> Option<Self> {
        (!access.deny_destinations.is_empty())
            .then(|| Self { deny: Acl::new(&access.deny_destinations), allow: Acl::new(&access.allow_destinations) })
    }

    /// True when a forward request or tunnel may connect to `addr` (IPv4-mapped IPv6
    /// addresses are judged as IPv4): not in a denied network, or in an allowed one.
    pub fn allows(&self, addr: IpAddr) -> bool {
        !self.deny.allows(addr) || self.allow.allows(addr)
    }

    /// `addrs` without the denied ones; an error ([`is_denied`]) when that leaves none and
    /// some were denied.
    pub fn filter(&self, host: &str, addrs: Vec<SocketAddr>) -> io::Result<Vec<SocketAddr>> {
        let total = addrs.len();
        let allowed: Vec<SocketAddr> = addrs.into_iter().filter(|a| self.allows(a.ip())).collect();
        if allowed.is_empty() && total > 0 {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, Denied(host.to_owned())));
        }
        Ok(allowed)
    }
}

/// The error [`DestAcl::filter`] returns: every address of the host is denied.
#[derive(Debug)]
struct Denied(String);

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to addresses the proxy may not connect to", self.0)
    }
}

impl std::error::Error for Denied {}

/// Whether `e` is [`DestAcl::filter`]'s refusal.
pub fn is_denied(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Denied>())
}

/// The error for a destination the ACL refuses: 403, logged `TCP_DENIED/403`.
pub fn refused(what: &str) -> ProxyError {
    ProxyError::new(
        Kind::Forbidden,
        Side::Client,
        format!("the proxy does not connect to {what}: its addresses are denied by access.deny_destinations"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(deny: &[&str], allow: &[&str]) -> DestAcl {
        let access = AccessConfig {
            deny_destinations: deny.iter().map(|n| n.parse().unwrap()).collect(),
            allow_destinations: allow.iter().map(|n| n.parse().unwrap()).collect(),
            ..AccessConfig::default()
        };
        DestAcl::of(&access).unwrap()
    }

    #[test]
    fn default_denies_loopback_link_local_and_unspecified() {
        let acl = DestAcl::of(&AccessConfig::default()).expect("denies by default");
        for denied in
            ["127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1", "169.254.169.254", "fe80::1", "0.0.0.0", "::"]
        {
            assert!(!acl.allows(denied.parse().unwrap()), "{denied}");
        }
        for allowed in ["192.0.2.7", "10.0.0.1", "2001:db8::1"] {
            assert!(acl.allows(allowed.parse().unwrap()), "{allowed}");
        }
    }

    #[test]
    fn exceptions_allow_within_denied_networks() {
        let acl = acl(&["127.0.0.0/8", "::1/128"], &["127.0.0.1/32"]);
        assert!(acl.allows("127.0.0.1".parse().unwrap()));
        assert!(!acl.allows("127.0.0.2".parse().unwrap()));
        let addrs: Vec<SocketAddr> = vec!["[::1]:80".parse().unwrap(), "127.0.0.1:80".parse().unwrap()];
        assert_eq!(acl.filter("localhost", addrs).unwrap(), vec!["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
        let err = acl.filter("localhost", vec!["[::1]:80".parse().unwrap()]).unwrap_err();
        assert!(is_denied(&err), "{err}");
        assert!(acl.filter("nowhere", Vec::new()).unwrap().is_empty(), "no address is not a denial");
    }

    #[test]
    fn nothing_denied_is_no_acl() {
        let access = AccessConfig { deny_destinations: Vec::new(), ..AccessConfig::default() };
        assert!(DestAcl::of(&access).is_none());
    }
}
