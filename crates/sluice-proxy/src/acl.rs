//! Access control lists: client networks.

use ipnet::IpNet;
use serde::Deserialize;
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

/// Reads a configuration's list of networks: CIDR blocks (`"10.0.0.0/8"`), and single
/// addresses (`"192.0.2.7"`, `"::1"`) as blocks of one.
pub fn deserialize_nets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    use serde::de::Error;
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|text| match text.parse::<IpNet>() {
            Ok(net) => Ok(net),
            Err(_) => text.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
                D::Error::custom(format!(
                    "`{text}` is neither a network (\"10.0.0.0/8\") nor an address (\"192.0.2.7\")"
                ))
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_are_read_as_blocks_or_single_addresses() {
        #[derive(serde::Deserialize)]
        struct Nets {
            #[serde(deserialize_with = "deserialize_nets")]
            allow: Vec<IpNet>,
        }
        let nets: Nets = toml::from_str(r#"allow = ["10.0.0.0/8", "192.0.2.7", "::1"]"#).unwrap();
        let expected: Vec<IpNet> = ["10.0.0.0/8", "192.0.2.7/32", "::1/128"].map(|n| n.parse().unwrap()).to_vec();
        assert_eq!(nets.allow, expected);
        let err = toml::from_str::<Nets>(r#"allow = ["10.0.0/8"]"#).err().unwrap().to_string();
        assert!(err.contains("`10.0.0/8` is neither a network"), "{err}");
    }

    #[test]
    fn loopback_only_by_default_refuses_other_clients() {
        let acl = Acl::new(&["127.0.0.0/8".parse().unwrap()]);
        assert!(acl.allows("127.0.0.5".parse().unwrap()));
        assert!(acl.allows("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!acl.allows("10.0.0.1".parse().unwrap()));
    }
}
