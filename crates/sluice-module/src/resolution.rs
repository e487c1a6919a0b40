//! What the `resolve` phase ([`crate::Txn::resolve`]) sees and may change: the addresses a
//! request to an origin connects to.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The origin a request is about to connect to, and the addresses to connect to.
///
/// No addresses (the default) means the system resolver's answer for [`Self::host`]. A module
/// that sets addresses pins the connection to them, tried in order (like `curl --resolve`):
/// a module's own DNS, a geographic choice of replica, a blocklist that answers locally
/// instead. Clones share the addresses, so a module that defers (an asynchronous lookup) keeps
/// a clone in its future and sets the answer there; the host reads it once the phase is over.
#[derive(Debug, Clone)]
pub struct Resolution {
    host: Arc<str>,
    port: u16,
    addrs: Arc<Mutex<Vec<SocketAddr>>>,
}

impl Resolution {
    /// The origin `host` (a name or an address literal, lower case) and `port`, not resolved
    /// yet.
    pub fn new(host: &str, port: u16) -> Self {
        Self { host: Arc::from(host), port, addrs: Arc::default() }
    }

    /// The origin's host, as the request names it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The origin's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connect to these addresses, in order, instead of resolving [`Self::host`]. An empty
    /// list goes back to the system resolver. A later module may change it again.
    pub fn set(&self, addrs: Vec<SocketAddr>) {
        *self.addrs.lock().unwrap_or_else(PoisonError::into_inner) = addrs;
    }

    /// The addresses set so far (empty: the system resolver decides).
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.addrs.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_addresses() {
        let resolution = Resolution::new("origin.example", 8080);
        assert!(resolution.addrs().is_empty());
        let kept = resolution.clone();
        kept.set(vec!["192.0.2.7:80".parse().unwrap()]);
        assert_eq!(resolution.addrs(), vec!["192.0.2.7:80".parse::<SocketAddr>().unwrap()]);
        assert_eq!((resolution.host(), resolution.port()), ("origin.example", 8080));
    }
}
