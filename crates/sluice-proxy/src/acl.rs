//! Access control lists: client networks.

use ipnet::IpNet;
use std::net::IpAddr;

/// A list of networks; an address is allowed when any contains it.
#[derive(Debug, Clone, Default)]
pub struct Acl {
    nets: Vec<IpNet>,
}

impl Acl {
    pub fn new(nets: &[IpNet]) -> Self {
        Self { nets: nets.to_vec() }
    }

    /// True when `addr` (IPv4-mapped IPv6 addresses are read as IPv4) is in a listed network.
    pub fn allows(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        self.nets.iter().any(|n| n.contains(&addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default_refuses_other_clients() {
        let acl = Acl::new(&["127.0.0.0/8".parse().unwrap()]);
        assert!(acl.allows("127.0.0.5".parse().unwrap()));
        assert!(acl.allows("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!acl.allows("10.0.0.1".parse().unwrap()));
    }
}
